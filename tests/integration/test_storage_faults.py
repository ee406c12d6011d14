"""Storage faults of the embedded files (issue 16, item 7): disk full, 0-byte files, damaged files.

- **Disk full** is reproduced with SQLite's own limit: every connection opened to a file is recorded
  (``sqlite3.connect`` wrapped), and :meth:`Disk.fill` sets ``PRAGMA max_page_count`` on each to its
  current page count, so any write that needs a new page fails with ``SQLITE_FULL`` ("database or disk
  is full"), exactly what a full disk gives. SQLite may roll the transaction back by itself then; the
  adapters used to ``ROLLBACK`` anyway and raise "cannot rollback - no transaction is active" instead
  of the real error. A second variant hits a real file-size limit (``RLIMIT_FSIZE``) in a subprocess.
- **0-byte files**: a store or queue file that exists but is empty (a crash, a failed copy) is refused
  at start with one line and a non-zero exit; a missing file is still a new store.
- **Damage**: ``memory-core doctor`` reports it and exits non-zero.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import START, turn_body

from memory_core.adapters.sqlite.files import is_disk_full
from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.domain.messages import HistoryEntry, MemoryEvent, Turn
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.validation import parse_model
from memory_core.errors import ConflictError, StorageFullError, TransientError
from memory_core.ports import FixedClock
from memory_core.runtime.worker import QueueWorker
from memory_core.service import MemoryService
from memory_core.tools.doctor import check_queue, check_store

pytestmark = pytest.mark.fault

ROOT = Path(__file__).resolve().parents[2]
SCOPE = Scope.of("u1", "a1")
FOODS = [
    "green tea",
    "coffee",
    "sushi",
    "ramen",
    "chocolate",
    "miso soup",
    "udon",
    "tempura",
    "matcha",
    "natto",
]
#: A turn that writes more than the free space left in a small store's pages (many facts and an episode).
LONG_TEXT = " ".join(
    f"I love {food}. I am allergic to {food} powder number {i}." for i, food in enumerate(FOODS)
)
NO_LIMIT = 4294967294


class Disk:
    """The "disk" of chosen SQLite files: full or not, for every connection opened to them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.connections: list[tuple[str, sqlite3.Connection]] = []
        real = sqlite3.connect

        def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = real(database, *args, **kwargs)
            self.connections.append((str(database), conn))
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    def _open(self, path: Path) -> list[sqlite3.Connection]:
        found = []
        for name, conn in self.connections:
            if name != str(path):
                continue
            try:
                conn.execute("SELECT 1")
            except sqlite3.ProgrammingError:  # closed
                continue
            found.append(conn)
        assert found, f"no open connection to {path}"
        return found

    def fill(self, path: Path) -> None:
        """No page may be added to ``path``: the next write that needs one fails as on a full disk."""
        for conn in self._open(path):
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            conn.execute(f"PRAGMA max_page_count = {pages}")

    def free(self, path: Path) -> None:
        """Space again."""
        for conn in self._open(path):
            conn.execute(f"PRAGMA max_page_count = {NO_LIMIT}")


@dataclass
class Pipeline:
    """The embedded pipeline on real files, as ``memory-core serve`` wires it."""

    service: MemoryService
    store: SQLiteMemoryStore
    history: SQLiteHistoryStore
    queue: SQLiteQueue

    def worker(self) -> QueueWorker:
        # Redelivery at once, so each run_once() is one delivery (the default waits 0.5 s, 1 s, ...).
        return QueueWorker(
            self.queue,
            self.service,
            name="w",
            backoff=lambda _: 0.0,
            retry_delay=lambda _: 0.0,
            renew_locks=False,
        )


@asynccontextmanager
async def pipeline(db: Path) -> AsyncIterator[Pipeline]:
    settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))
    store = SQLiteMemoryStore(db)
    history = SQLiteHistoryStore(db)
    queue = SQLiteQueue(default_queue_path(db))
    service = build_service(
        settings,
        clock=FixedClock(START),
        store=store,
        history=history,
        publisher=queue,
        recall_via_queue=True,
    )
    try:
        yield Pipeline(service, store, history, queue)
    finally:
        await service.close()


async def outcome(p: Pipeline, turn: Turn) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """What a turn left: the scope's memories (without vectors) and the turn's history entries."""
    memories = [r.model_dump(mode="json", exclude={"embedding"}) async for r in p.service.export("u1", "a1")]
    entries = await p.history.for_turn(SCOPE, turn.turn_id)
    return sorted(memories, key=lambda m: m["id"]), [(e.memory_id, e.event.value, e.reason) for e in entries]


# -- disk full ------------------------------------------------------------------------------------
def test_disk_full_during_ingest_is_reported_retried_and_applied_once_when_space_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    turn = parse_model(Turn, turn_body(1, LONG_TEXT))

    async def cleanly() -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
        async with pipeline(tmp_path / "control.db") as p:
            assert await p.queue.publish_turn(turn)
            assert await p.worker().run_once()
            return await outcome(p, turn)

    expected = asyncio.run(cleanly())
    assert len(expected[0]) > 3  # facts and the episode

    disk = Disk(monkeypatch)
    db = tmp_path / "m.db"

    async def through_a_full_disk() -> None:
        async with pipeline(db) as p:
            assert await p.queue.publish_turn(turn)
            worker = p.worker()
            disk.fill(db)  # the store and history connections
            for _ in range(12):  # more than max_deliveries: waiting for space never dead-letters it
                with pytest.raises(StorageFullError):  # run() backs off on it like on a queue error
                    await worker.run_once()
                [message] = p.queue.peek()  # still queued, released for the next delivery
                assert message.delivery_count == 0 and message.lock_token is None  # the delivery given back
                assert message.last_error is not None
                assert message.last_error.startswith(f"StorageFullError: the disk holding {db} is full")
            assert p.queue.stats().dead_letters == 0
            assert not await p.history.turn_processed(SCOPE, turn.turn_id)

            disk.free(db)
            assert await worker.run_once()
            assert not await worker.run_once()  # nothing left
            assert p.queue.stats().as_dict() == {"active": 0, "locked": 0, "dead_letters": 0, "sessions": 0}
            assert worker.stats.as_dict() == {
                "completed": 1,
                "dead_lettered": 0,
                "abandoned": 12,
                "lock_lost": 0,
            }
            assert await p.history.turn_processed(SCOPE, turn.turn_id)
            assert await outcome(p, turn) == expected  # exactly what one clean delivery leaves

    caplog.set_level("WARNING", logger="memory_core.runtime.worker")
    asyncio.run(through_a_full_disk())
    assert "StorageFullError: the disk holding" in caplog.text
    assert "cannot rollback" not in caplog.text


def test_a_full_queue_file_refuses_a_message_whole_and_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = Disk(monkeypatch)
    path = tmp_path / "m.db.queue"
    queue = SQLiteQueue(path)
    try:
        disk.fill(path)
        body = "x" * 50_000
        with pytest.raises(StorageFullError, match=f"the disk holding {path} is full") as raised:
            queue.send(body, message_id="m1", session_id="s1")
        assert isinstance(raised.value, TransientError)  # a worker retries; the API answers 503
        assert is_disk_full(raised.value.__cause__)
        assert queue.stats().active == 0
        disk.free(path)
        assert queue.send(body, message_id="m1", session_id="s1")  # its duplicate-detection row went too
        assert queue.stats().active == 1
    finally:
        queue.close_sync()


def test_the_store_and_history_say_disk_full_and_stay_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = Disk(monkeypatch)
    db = tmp_path / "m.db"
    records = [
        MemoryRecord(
            id=f"m{i}",
            user_id="u1",
            agent_id="a1",
            memory=f"fact {i} " + "word " * 500,
            created_at=START,
            updated_at=START,
        )
        for i in range(8)
    ]
    entries = [
        HistoryEntry(
            memory_id=f"m{i}",
            user_id="u1",
            agent_id="a1",
            event=MemoryEvent.ADD,
            reason="r" * 2000,
            turn_id="t1",
            at=START,
        )
        for i in range(8)
    ]

    async def run() -> None:
        store, history = SQLiteMemoryStore(db), SQLiteHistoryStore(db)
        try:
            disk.fill(db)
            with pytest.raises(StorageFullError, match="is full") as raised:
                await store.upsert(records)
            assert is_disk_full(raised.value.__cause__)  # the real error, not "cannot rollback"
            with pytest.raises(StorageFullError, match="is full"):
                await history.append(entries)
            with pytest.raises(StorageFullError, match="is full"):
                await history.record_step(SCOPE, "t1", 0, entries)
            assert await store.get(SCOPE, "m0") is None  # nothing half-written
            assert await history.for_turn(SCOPE, "t1") == []
            disk.free(db)
            await store.upsert(records)  # no transaction was left open on either connection
            assert await history.record_step(SCOPE, "t1", 0, entries)
            assert len(await history.for_turn(SCOPE, "t1")) == len(entries)
            assert (await store.get(SCOPE, "m7")) is not None
        finally:
            await store.close()
            await history.close()

    asyncio.run(run())


_FSIZE_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, resource, signal, sqlite3, sys
    from datetime import UTC, datetime
    from memory_core.adapters.sqlite.store import SQLiteMemoryStore
    from memory_core.domain.records import MemoryRecord

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing us
    db = sys.argv[1]
    NOW = datetime(2026, 5, 1, tzinfo=UTC)

    def record(i):
        return MemoryRecord(
            id=f"m{i}", user_id="u1", agent_id="a1", memory=f"fact {i} " + "word " * 300,
            created_at=NOW, updated_at=NOW,
        )

    async def main():
        store = SQLiteMemoryStore(db)
        await store.upsert([record(i) for i in range(10)])
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, hard))
        error = None
        try:
            # One transaction larger than SQLite's page cache: pages spill to the WAL mid-transaction,
            # so the write fails inside the transaction (and SQLite rolls it back itself).
            await store.upsert([record(i) for i in range(100, 3100)])
        except Exception as exc:
            error = {"type": type(exc).__name__, "message": str(exc)}
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        await store.upsert([record(100_000)])  # usable again: no transaction left open
        await store.close()
        conn = sqlite3.connect(db)
        count = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        print(json.dumps({"error": error, "count": count, "integrity": check}))

    asyncio.run(main())
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ") or sys.platform == "win32", reason="needs RLIMIT_FSIZE")
def test_a_file_size_limit_surfaces_the_write_error_and_keeps_the_store_whole(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE_SCRIPT, str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    error = result["error"]
    assert error is not None, "the limit was never reached"
    # SQLite reports a write past RLIMIT_FSIZE (EFBIG) as an I/O error, a write to a full disk (ENOSPC)
    # as SQLITE_FULL; either way the real error surfaces, never "cannot rollback".
    assert "cannot rollback" not in error["message"]
    assert error["type"] == "StorageFullError" or "disk I/O error" in error["message"]
    assert result["count"] == 10 + 1  # the failed batch is absent, whole; the next write landed
    assert result["integrity"] == "ok"


# -- 0-byte files ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("opener", "what"),
    [
        (lambda p: SQLiteMemoryStore(p), "store"),
        (lambda p: SQLiteHistoryStore(p), "store"),
        (lambda p: SQLiteQueue(p), "queue"),
    ],
    ids=["store", "history", "queue"],
)
def test_an_empty_file_is_refused_and_left_alone_but_a_missing_one_is_created(
    tmp_path: Path, opener: Any, what: str
) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(ConflictError) as raised:
        opener(empty)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{empty} is empty (0 bytes) but should be a memory-core {what}")
    assert "restore it from a backup, or delete it to start with an empty" in message
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]

    fresh = tmp_path / "new.db"
    opened = opener(fresh)
    try:
        assert fresh.stat().st_size > 0  # a new file is created and written at once
    finally:
        if isinstance(opened, SQLiteQueue):
            opened.close_sync()
        else:
            asyncio.run(opened.close())


@pytest.fixture
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


@pytest.mark.usefixtures("_hash_embedder")
@pytest.mark.parametrize(
    "command", [["list", "--user", "u1", "--agent", "a1"], ["serve", "--port", "0", "--no-scheduler"]]
)
def test_the_cli_and_serve_refuse_an_empty_store_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    empty = tmp_path / "memory.db"
    empty.write_bytes(b"")
    code = main(["--db", str(empty), *command], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"memory-core: error: {empty} is empty (0 bytes)")
    assert empty.stat().st_size == 0
    assert not Path(default_queue_path(empty)).exists()  # nothing was made beside it


@pytest.mark.usefixtures("_hash_embedder")
def test_serve_refuses_an_empty_queue_beside_a_good_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, records = tmp_path / "memory.db", tmp_path / "records.jsonl"
    records.write_text('{"user_id": "u1", "agent_id": "a1", "memory": "likes tea"}\n', encoding="utf-8")
    assert main(["--db", str(db), "import", str(records)], out=io.StringIO()) == 0  # a new store
    queue = Path(default_queue_path(db))
    queue.write_bytes(b"")
    code = main(["--db", str(db), "serve", "--port", "0", "--no-scheduler"], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"memory-core: error: {queue} is empty (0 bytes) but should be a memory-core queue")
    assert queue.stat().st_size == 0


# -- damage ---------------------------------------------------------------------------------------
def _store_with_memories(db: Path, count: int = 60) -> None:
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

    asyncio.run(fill())  # closed: the WAL is folded back into the file


def _smash_page(path: Path, page: int) -> None:
    """Overwrite one page (1-based) in the middle of an SQLite file with garbage, header untouched."""
    size = int(sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0])
    with path.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(bytes((i * 37 + 11) % 256 for i in range(size)))


@pytest.mark.usefixtures("_hash_embedder")
def test_doctor_reports_a_damaged_store_and_exits_non_zero(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _store_with_memories(db)
    pages = int(sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0])
    _smash_page(db, pages // 2)

    integrity = next(c for c in check_store(str(db)) if c.name == "store.integrity")
    assert integrity.status == "fail" and "restore it from a backup" in integrity.message

    out = io.StringIO()
    assert main(["--db", str(db), "--json", "doctor"], out=out) == 1
    report = json.loads(out.getvalue())
    assert report["status"] == "fail"
    assert {c["name"]: c["status"] for c in report["checks"]}["store.integrity"] == "fail"


def test_doctor_reports_a_file_that_is_no_database_and_a_damaged_queue(tmp_path: Path) -> None:
    garbage = tmp_path / "memory.db"
    garbage.write_bytes(bytes(range(256)) * 64)
    [first, integrity] = check_store(str(garbage))
    assert first.status == "ok" and integrity.status == "fail" and "not a database" in integrity.message

    queue_path = tmp_path / "other.db.queue"
    queue = SQLiteQueue(queue_path)
    for i in range(200):
        queue.send("x" * 500, message_id=f"m{i}", session_id=f"s{i % 7}")
    queue.close_sync()
    pages = int(sqlite3.connect(queue_path).execute("PRAGMA page_count").fetchone()[0])
    _smash_page(queue_path, pages - 1)
    checks = {c.name: c for c in check_queue(str(queue_path), queue="memory-turns")}
    assert checks["queue.integrity"].status == "fail"
