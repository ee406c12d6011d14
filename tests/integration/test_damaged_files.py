"""Damage inside the pages of a store or queue file (issue 29, items 15 and 18).

A page of the ``memories`` table of a real store file is overwritten (found with SQLite's ``dbstat``
table). Opening the store runs ``PRAGMA quick_check`` within ``MEMORY_SQLITE_CHECK_SECONDS``; a damaged
file is then opened for reading only:

- ``memory-core serve`` answers ``/health`` with 503 ``unhealthy`` (``details.files.store`` is
  ``damaged``; no file name: health may be anonymous), runs no worker (a posted turn waits in the
  queue, never delivered, never dead-lettered), and refuses writes with 503;
- the CLI's writing commands exit 2 with one line saying how to recover, and a read that meets the
  damaged page exits 2 the same way; the file's bytes are unchanged after every refused write.

A damaged queue file turns health to 200 ``degraded`` (``details.files.queue``), whether the check at
open found it or a statement did later.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
from pathlib import Path

import pytest
from runtime_helpers import START, RunningRuntime, turn_body

from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.integrity import FileState, check_integrity
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.cli.main import main
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.errors import DamagedFileError

pytestmark = pytest.mark.fault

SCOPE = Scope.of("u1", "a1")


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


def store_with_memories(db: Path, count: int = 60) -> None:
    async def fill() -> None:
        async with SQLiteMemoryStore(db) as store:
            await store.upsert(
                [
                    MemoryRecord(
                        id=f"m{i}",
                        user_id="u1",
                        agent_id="a1",
                        memory=f"fact {i} " + "word " * 200,
                        created_at=START,
                        updated_at=START,
                    )
                    for i in range(count)
                ]
            )

    asyncio.run(fill())  # closed: the write-ahead log is folded back into the file
    asyncio.run(SQLiteHistoryStore(db).close())  # its history tables beside them, as serve and the CLI make


def flip_a_page_of(path: Path, table: str) -> int:
    """Overwrite (bitwise NOT) one leaf page of ``table``; returns its number."""
    conn = sqlite3.connect(path)
    try:
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = [
            int(r[0])
            for r in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (table,)
            ).fetchall()
        ]
    finally:
        conn.close()
    assert pages, f"no leaf page of {table}"
    page = pages[len(pages) // 2]
    with path.open("r+b") as f:
        f.seek((page - 1) * size)
        data = f.read(size)
        f.seek((page - 1) * size)
        f.write(bytes(b ^ 0xFF for b in data))
    return page


def logged_writes(path: Path) -> int:
    """Bytes in the write-ahead log or rollback journal beside ``path`` (what a write leaves there)."""
    return sum(
        Path(f"{path}{side}").stat().st_size for side in ("-wal", "-journal") if Path(f"{path}{side}").exists()
    )


def damaged_store(tmp_path: Path) -> Path:
    db = tmp_path / "memory.db"
    store_with_memories(db)
    flip_a_page_of(db, "memories")
    assert check_integrity(str(db), 30).damaged
    return db


# -- the check at open ----------------------------------------------------------------------------
def test_a_damaged_store_opens_for_reading_only_and_refuses_every_write(tmp_path: Path) -> None:
    db = damaged_store(tmp_path)
    before = db.read_bytes()
    store_state = FileState()
    store = SQLiteMemoryStore(db, file_state=store_state)
    history = SQLiteHistoryStore(db, file_state=store_state)  # the store's finding: not checked again
    try:
        assert store.integrity.damaged and "quick_check found" in store.integrity.found
        assert history.integrity is store_state.integrity
        record = MemoryRecord(id="new", user_id="u9", agent_id="a9", memory="likes tea", created_at=START, updated_at=START)
        with pytest.raises(DamagedFileError) as raised:
            asyncio.run(store.upsert([record]))
        message = str(raised.value)
        assert str(db) in message and "memory-core doctor" in message and "\n" not in message
        with pytest.raises(DamagedFileError):
            asyncio.run(store.purge("u1"))
        with pytest.raises(DamagedFileError):
            asyncio.run(history.record_tombstone(SCOPE.user_id, None, START))
    finally:
        asyncio.run(store.close())
        asyncio.run(history.close())
    assert db.read_bytes() == before


def test_the_check_gives_up_after_its_budget_and_says_so(tmp_path: Path) -> None:
    big = tmp_path / "big.db"
    conn = sqlite3.connect(big)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b BLOB)")
    conn.execute("CREATE INDEX t_a ON t (a)")
    conn.executemany("INSERT INTO t (a, b) VALUES (?, ?)", ((f"{i:08d}" * 8, os.urandom(1500)) for i in range(40_000)))
    conn.commit()
    conn.close()
    assert check_integrity(str(big), 60).state == "ok"
    late = check_integrity(str(big), 0.002)  # quick_check of ~70 MB takes far longer than 2 ms
    assert late.state == "unchecked" and "not checked in time" in late.found
    off = check_integrity(str(big), 0)
    assert off.state == "unchecked" and "MEMORY_SQLITE_CHECK_SECONDS" in off.found


# -- the command line -----------------------------------------------------------------------------
def turns_file(folder: Path) -> Path:
    turns = folder / "turns.jsonl"
    turns.write_text(json.dumps(turn_body(1, "I like green tea.")) + "\n", encoding="utf-8")
    return turns


@pytest.mark.parametrize(
    "command",
    [
        ["ingest", "TURNS"],
        ["purge", "--user", "u1", "--yes"],
        ["import", "RECORDS"],
        ["forget", "--apply"],
        ["list", "--user", "u1", "--agent", "a1"],
    ],
    ids=["ingest", "purge", "import", "forget", "list"],
)
def test_the_cli_refuses_a_damaged_store_with_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    db = damaged_store(tmp_path)
    records = tmp_path / "records.jsonl"
    records.write_text('{"user_id": "u1", "agent_id": "a1", "memory": "likes tea"}\n', encoding="utf-8")
    arguments = [{"TURNS": str(turns_file(tmp_path)), "RECORDS": str(records)}.get(a, a) for a in command]
    before = db.read_bytes()
    capsys.readouterr()
    code = main(["--db", str(db), *arguments], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "is damaged" in err and "memory-core doctor" in err and "restore it from a backup" in err, err
    assert db.read_bytes() == before and logged_writes(db) == 0


TOKEN = "a-token-of-the-administrator"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -- serve ----------------------------------------------------------------------------------------
def test_serve_on_a_damaged_store_is_unhealthy_takes_no_turn_and_refuses_writes(tmp_path: Path) -> None:
    db = damaged_store(tmp_path)
    before = db.read_bytes()
    runtime = RunningRuntime(db, token=TOKEN).start(workers=False)
    try:
        client = runtime.client
        anonymous = client.get("/api/health")
        assert anonymous.status == 503 and anonymous.body["status"] == "unhealthy"
        assert anonymous.body["details"] == {"ingestion": "stopped"}
        assert str(tmp_path) not in anonymous.raw.decode()  # no path, no problem text for anyone
        health = client.get("/api/health", headers=AUTH)
        assert health.status == 503 and health.body["status"] == "unhealthy"
        details = health.body["details"]
        assert details["files"]["store"] == "damaged" and details["ingestion"] == "stopped"
        assert "store file is damaged" in details["problem"] and "memory-core doctor" in details["problem"]
        assert details["damaged_files"] == [str(db)]  # the administrator is told which file
        assert runtime.runtime.workers == []

        accepted = client.post("/api/turns", turn_body(1, "I like green tea."), headers=AUTH)
        assert accepted.status == 202 and accepted.body["status"] == "queued"
        assert runtime.runtime.queue is not None
        stats = runtime.runtime.queue.stats()
        assert stats.active == 1 and stats.dead_letters == 0  # it waits for the store to be restored

        refused = client.delete("/api/users/u1?confirm=true", headers=AUTH)  # a purge: refused before anything is removed
        assert refused.status == 503 and refused.body["error"]["code"] == "unavailable"
        assert "is damaged" in refused.body["error"]["message"]
        assert runtime.runtime.queue.stats().active == 1  # the queued turn was not purged either
    finally:
        runtime.stop()
    assert db.read_bytes() == before


def damaged_queue(db: Path) -> Path:
    queue = SQLiteQueue(default_queue_path(db))
    for i in range(200):
        queue.send("x" * 500, message_id=f"m{i}", session_id=f"s{i % 7}")
    queue.close_sync()
    path = Path(queue.path)
    flip_a_page_of(path, "queue_messages")
    return path


def test_serve_with_a_damaged_queue_file_is_degraded(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    store_with_memories(db, count=3)
    damaged_queue(db)
    runtime = RunningRuntime(db, workers=0, token=TOKEN).start()
    try:
        anonymous = runtime.client.get("/api/health")
        assert anonymous.status == 200 and anonymous.body["status"] == "degraded", anonymous.body
        assert str(tmp_path) not in anonymous.raw.decode() and "damaged" not in anonymous.raw.decode()
        health = runtime.client.get("/api/health", headers=AUTH)
        assert health.status == 200 and health.body["status"] == "degraded", health.body
        details = health.body["details"]
        assert details["files"] == {"store": "ok", "queue": "damaged"}
        assert "queue file is damaged" in details["degraded"]
        assert details["damaged_files"] == [str(db) + ".queue"]
    finally:
        runtime.stop()


def test_a_queue_found_damaged_by_a_statement_later_turns_health_degraded(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    store_with_memories(db, count=3)
    damaged_queue(db)
    runtime = RunningRuntime(db, workers=0, environ={"MEMORY_SQLITE_CHECK_SECONDS": "0"}).start()
    try:
        queue = runtime.runtime.queue
        assert queue is not None and queue.integrity.state == "unchecked"  # not checked at open
        with pytest.raises(sqlite3.DatabaseError):
            queue.peek(limit=1000)  # reads every message, the damaged page too
        assert queue.integrity.damaged and "malformed" in queue.integrity.found
        health = runtime.client.get("/api/health")
        assert health.status == 200 and health.body["status"] == "degraded"
        assert health.body["details"]["files"]["queue"] == "damaged"
    finally:
        runtime.stop()
