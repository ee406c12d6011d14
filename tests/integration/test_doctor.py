"""``memory-core doctor`` over real store and queue files: what it finds, its exit status, ``--json``,
and that it never writes or creates a file it checks."""

from __future__ import annotations

import asyncio
import copy
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import START

from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.adapters.sqlite.schema import SCHEMA_VERSION
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.domain.messages import Turn, TurnMessage
from memory_core.domain.records import Scope
from memory_core.ports import FixedClock
from memory_core.tools import doctor
from memory_core.tools.doctor import DoctorReport, diagnose


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


def settings(db: Path, **env: str) -> Any:
    return load_settings({"MEMORY_EMBEDDER": "hash", **env}, sqlite_path=str(db))


def make_store(db: Path) -> None:
    """A store with memories of two scopes (through the real ingest path) and one deleted memory."""

    async def build() -> None:
        async with build_service(settings(db), clock=FixedClock(START)) as service:
            for index, (user, text) in enumerate(
                [("u1", "I love green tea."), ("u2", "I am allergic to peanuts.")]
            ):
                turn = Turn(
                    turn_id=f"t{index}",
                    user_id=user,
                    agent_id="a1",
                    occurred_at=START,
                    messages=[TurnMessage(role="user", text=text)],
                )
                await service.ingest(turn)
            page = await service.list(Scope.of("u1", "a1"))
            await service.delete(Scope.of("u1", "a1"), page.records[0].id)

    asyncio.run(build())


def run(db: Path, **kwargs: Any) -> DoctorReport:
    return asyncio.run(diagnose(settings(db), **kwargs))


def statuses(report: DoctorReport) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], out=out)
    return code, out.getvalue()


def test_a_healthy_store_passes_every_check_and_says_what_it_holds(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    report = run(db)
    assert not report.failed
    found = statuses(report)
    for name in (
        "store.file",
        "store.integrity",
        "store.format",
        "store.analyzer",
        "store.embedder",
        "store.memories",
        "store.history",
        "store.wal",
        "queue.file",
    ):
        assert found[name] == "ok", report.check(name)
    assert "disk" in found  # ok or warn, by the machine's free space
    memories = report.check("store.memories").facts
    assert memories["scopes"] == 2 and memories["by_status"]["deleted"] == 1
    assert memories["memories"] == sum(memories["by_status"].values()) >= 3
    assert report.check("store.integrity").facts["pragma"] == "integrity_check"
    assert report.check("store.format").facts == {
        "schema_version": SCHEMA_VERSION,
        "code_schema_version": SCHEMA_VERSION,
    }
    embedder = report.check("store.embedder").facts
    assert embedder["recorded"] == embedder["configured"] and embedder["configured"].startswith("hash")
    assert embedder["vector_dimensions"] == {str(embedder["configured_dimensions"]): memories["memories"]}
    history = report.check("store.history").facts
    assert history["entries"] >= 3 and history["turns"] == 2 and history["turns_unfinished"] == 0
    assert "does not exist: nothing is queued" in report.check("queue.file").message


def test_doctor_writes_nothing_and_never_creates_a_missing_store(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    before = db.read_bytes()
    run(db, full=True)
    assert db.read_bytes() == before
    assert not Path(default_queue_path(db)).exists()

    missing = tmp_path / "sub" / "missing.db"
    code, output = cli(missing, "doctor")
    assert code == 3  # not found: the report says what is missing
    assert output.splitlines()[0].startswith(
        f"fail  store.file  {missing} does not exist (doctor never creates a store)"
    )
    assert not missing.parent.exists()


def test_the_queue_counts_waiting_locked_and_dead_letters_and_dead_letters_warn(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    queue = SQLiteQueue(default_queue_path(db), max_deliveries=1)
    try:
        for i in range(4):
            queue.send(f"body {i}", message_id=f"m{i}", session_id=f"s{i % 2}")
        first = queue.receive()
        assert first is not None
        queue.dead_letter(first, reason="Poison", description="test")
        assert queue.receive() is not None  # locked now
    finally:
        queue.close_sync()
    report = run(db)
    check = report.check("queue.messages")
    assert check.status == "warn" and "memory-core queue dead-letters" in check.message
    facts = check.facts
    assert (facts["active"], facts["locked"], facts["dead_letters"], facts["sessions"]) == (3, 1, 1, 2)
    assert facts["oldest_age_seconds"] is not None and facts["oldest_age_seconds"] >= 0
    assert statuses(report)["queue.integrity"] == statuses(report)["queue.format"] == "ok"
    assert not report.failed  # a warning does not fail the run

    code, output = cli(db, "doctor")
    assert code == 0 and "warn  queue.messages" in output
    assert (
        output.splitlines()[-1] == f"doctor: warn ({len(report.checks)} checks, 1 warning(s), 0 failure(s))"
    )


def test_an_empty_store_and_an_empty_queue_fail(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    Path(default_queue_path(db)).write_bytes(b"")
    report = run(db)
    assert (
        statuses(report)["queue.file"] == "fail"
        and "is empty (0 bytes)" in report.check("queue.file").message
    )
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    report = run(empty)
    assert report.failed and report.checks[0].name == "store.file"
    assert "restore it from a backup, or delete it to start with an empty store" in report.checks[0].message


def test_a_newer_schema_fails_an_older_one_warns_and_a_stale_analyzer_warns(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    report = run(db)
    assert statuses(report)["store.format"] == "fail"
    assert "newer memory-core" in report.check("store.format").message
    assert "store.memories" not in statuses(report)  # a newer format's tables are not read

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),))
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'analyzer'")
    report = run(db)
    assert not report.failed
    assert statuses(report)["store.format"] == statuses(report)["store.analyzer"] == "warn"
    assert f"upgrades it to {SCHEMA_VERSION} in place" in report.check("store.format").message
    assert "re-indexes" in report.check("store.analyzer").message


def test_another_embedder_or_mixed_vector_sizes_fail(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = 'some-other-model' WHERE key = 'embedder'")
    check = run(db).check("store.embedder")
    assert (
        check.status == "fail"
        and "'some-other-model'" in check.message
        and "serve and the CLI refuse it" in check.message
    )

    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'embedding_dimensions'").fetchone()
        dims = int(row[0])
        conn.execute("UPDATE meta SET value = ? WHERE key = 'embedder'", (f"hash-{dims}",))
        conn.execute(
            "UPDATE memories SET embedding = ? WHERE pk = (SELECT MIN(pk) FROM memories)",
            (bytes(4 * (dims // 2)),),
        )
    check = run(db).check("store.embedder")
    assert check.status == "fail" and "vectors of several sizes" in check.message


def test_large_files_get_quick_check_unless_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    monkeypatch.setattr(doctor, "QUICK_CHECK_ABOVE_BYTES", 0)
    check = run(db).check("store.integrity")
    assert check.facts["pragma"] == "quick_check" and "--full" in check.message
    assert run(db, full=True).check("store.integrity").facts["pragma"] == "integrity_check"


def test_json_output_and_exit_status(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    code, output = cli(db, "--json", "doctor", "--full")
    assert code == 0
    report = json.loads(output)
    assert report["status"] in {"ok", "warn"} and report["store"] == str(db)
    assert report["queue"] == default_queue_path(db)
    assert all(set(c) == {"name", "status", "message", "facts"} for c in report["checks"])
    assert {c["name"]: c for c in report["checks"]}["store.integrity"]["facts"]["pragma"] == "integrity_check"


def test_the_azure_store_is_not_checked(tmp_path: Path) -> None:
    azure = copy.copy(settings(tmp_path / "memory.db"))
    object.__setattr__(azure, "store", "azure_search")  # the Azure settings are not needed to skip
    report = asyncio.run(diagnose(azure))
    assert [c.name for c in report.checks] == ["store"] and report.status == "warn"


def test_records_are_counted_by_kind(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    kinds = run(db).check("store.memories").facts["by_kind"]
    assert set(kinds) <= {"fact", "episode"} and sum(kinds.values()) >= 3


def test_a_file_another_process_keeps_locked_is_a_warning_not_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "memory.db"
    make_store(db)
    monkeypatch.setattr(doctor, "BUSY_TIMEOUT_SECONDS", 0.05)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("UPDATE meta SET value = value")
        report = run(db)
    finally:
        holder.close()
    check = report.check("store.integrity")
    assert check.status == "warn" and "locked" in check.message and "try again" in check.message
    assert not report.failed
