"""``memory-core serve`` computes the vectors an import left for later, while it serves.

Records imported with ``--defer-vectors`` (or by an import stopped part way) are found by keyword at
once; a running ``serve`` on the same store gives them their vectors at start and after every interval,
so vector search finds them without a second command, and health tells an administrator how many wait.
A stop ends the fill at the next page, and what was filled stays filled.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path
from typing import Any

from contract.store_contract import EMBEDDER, NOW
from runtime_helpers import running
from test_import_vectors_later import POLICY, SCOPE, CountingEmbedder, rows

from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.cli.main import main
from memory_core.service.backfill import fill_missing_vectors
from memory_core.service.import_export import import_records


def _import(db: Path, records: list[dict[str, Any]]) -> None:
    path = db.parent / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = io.StringIO()
    assert main(["--db", str(db), "import", str(path), "--defer-vectors"], out=out) == 0, out.getvalue()


def _missing(db: Path) -> int:
    async def count() -> int:
        async with SQLiteMemoryStore(db) as store:
            return await store.count_missing_vectors()

    return asyncio.run(count())


def _wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise TimeoutError("the condition did not hold in time")


def _vector_hits(client: Any, query: str) -> list[str]:
    body = {"user_id": SCOPE.user_id, "agent_id": SCOPE.agent_id, "query": query, "mode": "vector", "top": 3}
    reply = client.post("/api/memories/search", body)
    assert reply.status == 200, reply.body
    return [hit["memory"]["memory"] for hit in reply.body["hits"]]


def test_serve_fills_at_start_what_an_import_left_and_health_shows_it(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    db = tmp_path / "m.db"
    _import(db, rows(300))  # more than one page of the fill
    assert _missing(db) == 300
    with running(db, vector_fill_seconds=60.0) as rt:
        _wait_for(lambda: rt.runtime.vector_filler is not None and rt.runtime.vector_filler.missing == 0)
        health = rt.client.get("/api/health").body["details"]
        assert health["vectors"] == {"missing": 0, "filled": 300}
        assert _vector_hits(rt.client, "likes place number 7")[0] == "likes place number 7"
    assert _missing(db) == 0


def test_an_import_made_while_serve_runs_gets_its_vectors_at_the_next_look(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    db = tmp_path / "m.db"
    with running(db, vector_fill_seconds=0.1) as rt:
        _wait_for(lambda: rt.runtime.vector_filler is not None and rt.runtime.vector_filler.missing == 0)
        assert _vector_hits(rt.client, "likes place number 3") == []
        _import(db, rows(5))  # another process writes the store meanwhile
        _wait_for(lambda: rt.runtime.vector_filler is not None and rt.runtime.vector_filler.filled == 5)
        assert _vector_hits(rt.client, "likes place number 3")[0] == "likes place number 3"
        assert rt.runtime.vector_filler.missing == 0


def test_no_fill_when_switched_off(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    db = tmp_path / "m.db"
    _import(db, rows(3))
    with running(db, vector_fill_seconds=0.0) as rt:
        assert rt.runtime.vector_filler is None
        assert "vectors" not in rt.client.get("/api/health").body["details"]
        assert _vector_hits(rt.client, "likes place number 1") == []
    assert _missing(db) == 3


def test_a_stopped_fill_keeps_the_pages_it_wrote_and_leaves_the_rest(tmp_path: Path) -> None:
    async def main_() -> None:
        async with SQLiteMemoryStore(tmp_path / "m.db") as store:
            await import_records(store, CountingEmbedder(), POLICY, NOW, rows(600), dedupe=True, defer_vectors=True)
            asked: list[int] = []

            def stop() -> bool:  # stop before the third page
                asked.append(1)
                return len(asked) > 2

            report = await fill_missing_vectors(store, EMBEDDER, stop=stop)
            assert (report.filled, report.missing) == (512, 88)
            rest = await fill_missing_vectors(store, EMBEDDER)
            assert (rest.filled, rest.missing) == (88, 0)

    asyncio.run(main_())


def test_the_interval_must_be_a_number_of_seconds(capsys: Any) -> None:
    for bad, said in (("-1", "-1 is not more than 0 seconds"), ("soon", "'soon' is not a number of seconds")):
        assert main(["serve", "--vector-fill", bad], out=io.StringIO()) == 2
        assert said in capsys.readouterr().err
