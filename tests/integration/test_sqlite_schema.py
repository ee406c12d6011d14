"""The embedded store's file format: columns derived from the model, versioned in-place migrations."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.schema import APPLICATION_ID, COLUMNS, RECORD_COLUMNS, SCHEMA_VERSION
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.errors import ConflictError
from memory_core.ports import FixedClock

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def v1_copy(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    shutil.copyfile(FIXTURES / "store-v1.db", path)
    return path


async def export(path: Path) -> dict[str, Any]:
    store, history = SQLiteMemoryStore(path), SQLiteHistoryStore(path)
    try:
        data: dict[str, list[Any]] = {"memories": [], "history": []}
        for user in ("u1", "u2"):
            for agent in await store.agents(user):
                scope = Scope.of(user, agent)
                page = await store.scan(scope, PageRequest(limit=1000, with_embedding=True))
                data["memories"] += [r.to_json_dict() for r in page.records]
                data["history"] += [e.model_dump(mode="json") for e in await history.for_scope(scope)]
        return json.loads(json.dumps(data, sort_keys=True))
    finally:
        await store.close()
        await history.close()


def pragma(path: Path, name: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def schema_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])


def test_the_columns_are_the_model_fields() -> None:
    assert [c.name for c in RECORD_COLUMNS] == list(MemoryRecord.model_fields)
    assert ("pk", *MemoryRecord.model_fields, "terms", "seq") == COLUMNS


def test_a_new_store_has_a_column_per_field_and_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    run(SQLiteMemoryStore(path).close())
    with sqlite3.connect(path) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(memories)").fetchall()]
    assert columns == list(COLUMNS)
    assert schema_version(path) == SCHEMA_VERSION
    assert pragma(path, "application_id") == APPLICATION_ID


def upgraded(memory: dict[str, Any]) -> dict[str, Any]:
    """A v1 record as the current version reads it: a fact, its source turns moved into provenance."""
    turns = [memory["metadata"].get(k) for k in ("turn_id", "updated_by_turn")]
    provenance = [
        {"turn_id": t, "message": 0, "start": 0, "end": 0, "speaker": None} for t in dict.fromkeys(turns) if t
    ]
    validity = {"valid_from": None, "valid_until": None, "superseded_by": None, "event_at": None, "event_until": None}
    return {**memory, "kind": "fact", "provenance": provenance, **validity}


def test_a_file_written_by_the_previous_version_is_upgraded_in_place(tmp_path: Path) -> None:
    path = v1_copy(tmp_path)
    assert schema_version(path) == 1 and pragma(path, "application_id") == 0
    expected = json.loads((FIXTURES / "store-v1.expected.json").read_text(encoding="utf-8"))
    assert any(m["metadata"].get("turn_id") for m in expected["memories"])
    expected["memories"] = [upgraded(m) for m in expected["memories"]]
    assert run(export(path)) == expected  # every field and every history entry reads back equal
    assert schema_version(path) == SCHEMA_VERSION and pragma(path, "application_id") == APPLICATION_ID
    assert run(export(path)) == expected  # opening an upgraded file again changes nothing

    async def use() -> None:
        service = build_service(
            load_settings(environ={}, sqlite_path=str(path), embedder="hash"),
            embedder=HashingEmbedder(32),
            clock=FixedClock(MemoryRecord.model_validate(expected["memories"][0]).updated_at),
        )
        try:
            scope = Scope.of("u1", "travel")
            options = MemorySearchOptions(mode=SearchMode.HYBRID, ranking_profile=RankingProfile.NONE)
            result = await service.search(scope, "窓側の席", options, recall=False)
            assert result.hits and result.hits[0].record.id == "v1-mem-0"
            report = await service.apply_forgetting(dry_run=True)
            assert report.scanned == 7  # the deleted one is not scanned
            assert (await service.get(Scope.of("u2", "travel"), "v1-mem-4")).status == MemoryStatus.DELETED
        finally:
            await service.close()

    run(use())


def test_a_version_4_file_gains_the_event_time_columns(tmp_path: Path) -> None:
    path = v1_copy(tmp_path)
    before = run(export(path))  # upgraded to the current version, then taken back to version 4
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE memories DROP COLUMN event_at")
        conn.execute("ALTER TABLE memories DROP COLUMN event_until")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert "event_at" not in [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(memories)")]
    assert run(export(path)) == before  # every memory reads back, stating no event time
    assert schema_version(path) == SCHEMA_VERSION == 6
    with sqlite3.connect(path) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(memories)").fetchall()]
    assert {"event_at", "event_until"} <= set(columns)

    async def dated() -> MemoryRecord | None:
        store = SQLiteMemoryStore(path)
        try:
            record = next(iter((await store.scan(Scope.of("u1", "travel"), PageRequest())).records))
            start = datetime(2026, 3, 14, tzinfo=UTC)
            await store.merge(record.scope, record.id, {"event_at": start, "event_until": start + timedelta(days=1)})
            return await store.get(record.scope, record.id)
        finally:
            await store.close()

    got = run(dated())
    assert got is not None and got.event_at == datetime(2026, 3, 14, tzinfo=UTC)


def test_a_file_of_a_newer_version_is_refused_untouched(tmp_path: Path) -> None:
    path = v1_copy(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    before = path.read_bytes()
    with pytest.raises(ConflictError, match="newer memory-core"):
        SQLiteMemoryStore(path)
    assert path.read_bytes() == before


def test_another_programs_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    before = path.read_bytes()
    with pytest.raises(ConflictError, match="not a memory-core store"):
        SQLiteMemoryStore(path)
    assert path.read_bytes() == before
    marked = tmp_path / "marked.db"
    with sqlite3.connect(marked) as conn:
        conn.execute("PRAGMA application_id = 1234")
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(ConflictError, match="application id"):
        SQLiteMemoryStore(marked)


def test_a_column_missing_from_the_file_is_added_with_the_fields_default(tmp_path: Path) -> None:
    """What happens to every store file when a field is added to ``MemoryRecord``."""
    path = v1_copy(tmp_path)
    run(SQLiteMemoryStore(path).close())
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE memories DROP COLUMN confidence")
    store = SQLiteMemoryStore(path)
    try:
        record = run(store.get(Scope.of("u1", "travel"), "v1-mem-0"))
        assert record is not None and record.confidence == MemoryRecord.model_fields["confidence"].default
    finally:
        run(store.close())


def test_a_version_5_file_gains_the_entity_index_of_its_memories(tmp_path: Path) -> None:
    path = tmp_path / "store.db"

    async def write() -> None:
        store = SQLiteMemoryStore(path)
        try:
            at = datetime(2026, 3, 1, tzinfo=UTC)
            record = MemoryRecord.model_validate(
                {"user_id": "u1", "agent_id": "a1", "memory": "My sister Ana lives in Oslo.", "id": "m-ana",
                 "created_at": at, "updated_at": at}
            )
            await store.upsert([record])
        finally:
            await store.close()

    run(write())
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE entity_mentions")
        conn.execute("DROP TABLE entities")
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")

    async def read() -> list[tuple[str | None, str | None]]:
        store = SQLiteMemoryStore(path)
        try:
            return [(e.name, e.relation) for e in await store.entities(Scope.of("u1", "a1"))]
        finally:
            await store.close()

    assert sorted(run(read()), key=str) == [("Ana", "sister"), ("Oslo", None)]
    assert schema_version(path) == SCHEMA_VERSION
