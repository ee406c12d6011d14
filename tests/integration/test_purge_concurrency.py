"""A purge while a turn of the user is being ingested: the answer counts what was removed, and no
file of the embedded store (the database, its write-ahead log, the queue file and its log) keeps a
byte of the purged user's text, not even in the free space of pages still in use.

The worker is held deterministically, either at the point where an ingestion checks whether its
scope was purged meanwhile (its writes are done; the purge records its tombstone while the turn waits
there, then the turn goes on), or at its first step (the purge runs to its end while the turn waits,
then the turn writes the rest after it). Everything runs on one event loop over the synchronous
SQLite adapters, so the order is the same on every run.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.bootstrap import build_service
from memory_core.config import Settings
from memory_core.domain.messages import HistoryEntry, MemoryEvent
from memory_core.domain.records import Scope
from memory_core.ports import FixedClock
from memory_core.runtime.worker import QueueWorker
from memory_core.service.admin import PurgeReport

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(days=3)
S1 = Scope.of("u1", "a1")
S2 = Scope.of("u2", "a1")
#: A word only the purged user ever says (and one only the other user says), to look for in the files.
WORDS = {"u1": "zorbly", "u2": "plinkett"}
PAD = "and what else was said about it, at some length, "
#: Earlier decisions of each user: history entries recorded as a turn's steps record them (their ids
#: are spread over the whole table, so the two users' entries share pages).
DECISIONS = 1000
#: Memories of each user already in the store.
MEMORIES = 300


def said(user: str, i: int) -> str:
    return f"I like {WORDS[user]} number {i} " + PAD * ((i * 7919 + len(user) * 31) % 30)


def turn(turn_id: str, user: str, text: str, at: datetime) -> dict[str, Any]:
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": turn_id,
        "user_id": user,
        "agent_id": "a1",
        "occurred_at": at.isoformat(),
        "messages": [{"role": "user", "text": text}],
    }


class HeldHistory(SQLiteHistoryStore):
    """The real SQLite history, holding the turn ``held`` at its check for a purge (its first
    tombstone read once its steps have been recorded) until a purge has recorded its tombstone; or,
    with ``at_first_step``, before its first step until ``purged`` is set."""

    held = ""
    at_first_step = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.at_check = asyncio.Event()
        self.tombstoned = asyncio.Event()
        self.purged = asyncio.Event()
        self._stepped = False

    async def record_step(self, scope: Scope, turn_id: str, step: int, entries: Sequence[HistoryEntry]) -> bool:
        if turn_id == self.held and self.at_first_step and not self.at_check.is_set():
            self.at_check.set()
            await asyncio.wait_for(self.purged.wait(), 30)
        self._stepped = self._stepped or turn_id == self.held
        return await super().record_step(scope, turn_id, step, entries)

    async def tombstone(self, scope: Scope) -> datetime | None:
        if self._stepped and scope == S1 and not self.at_check.is_set() and not self.at_first_step:
            self.at_check.set()
            await asyncio.wait_for(self.tombstoned.wait(), 30)
        return await super().tombstone(scope)

    async def record_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> datetime:
        kept = await super().record_tombstone(user_id, agent_id, at)
        self.tombstoned.set()
        for _ in range(20):  # the held turn goes on from its check as far as it can before the purge does
            await asyncio.sleep(0)
        return kept


@dataclass
class Purged:
    report: PurgeReport
    existed: dict[str, int]
    files: dict[str, bytes]
    left: dict[str, int]


def counts(db: Path, user: str) -> dict[str, int]:
    with closing(sqlite3.connect(db)) as conn:
        return {
            "memories": conn.execute("SELECT COUNT(*) FROM memories WHERE user_id = ?", (user,)).fetchone()[0],
            "history": conn.execute("SELECT COUNT(*) FROM history_entries WHERE user_id = ?", (user,)).fetchone()[0],
        }


async def populate(service: Any, history: SQLiteHistoryStore, queue: SQLiteQueue) -> None:
    """Both users' memories and earlier decisions interleaved, and a few turns of each ingested."""
    await service.import_records(
        {"id": f"{user}-{i:04d}", "user_id": user, "agent_id": "a1", "memory": said(user, i)}
        for i in range(MEMORIES)
        for user in WORDS
    )
    for i in range(DECISIONS):
        for user in WORDS:
            scope = Scope.of(user, "a1")
            entry = HistoryEntry(
                memory_id=f"{user}-{i:04d}", user_id=user, agent_id="a1", event=MemoryEvent.ADD,
                after={"memory": said(user, i)}, reason="a new fact", turn_id=f"old-{i}", at=EARLIER,
            )
            await history.record_step(scope, f"old-{i}", 0, [entry])
    for i in range(3):
        for user in WORDS:
            at = EARLIER + timedelta(hours=i)
            await service.publish_turn(turn(f"t{i}", user, f"My {WORDS[user]} is called Rex {i}.", at))
    await QueueWorker(queue, service, renew_locks=False).drain()


@asynccontextmanager
async def purged_mid_turn(tmp_path: Path, *, at_first_step: bool = False) -> AsyncIterator[Purged]:
    """Purge ``u1`` while the worker ingests a turn of ``u1``, held at its check for a purge (or at
    its first step: it then writes the rest after the purge)."""
    db = tmp_path / "memory.db"
    settings = Settings(store="sqlite", sqlite_path=str(db), embedder="hash")
    history = HeldHistory(db)
    queue = SQLiteQueue(default_queue_path(db))
    service = build_service(settings, clock=FixedClock(NOW), publisher=queue, recall_via_queue=True, history=history)
    try:
        await populate(service, history, queue)
        HeldHistory.held, HeldHistory.at_first_step = "held", at_first_step
        text = f"I like {WORDS['u1']} tea. My {WORDS['u1']} lives in Lisbon and I am allergic to {WORDS['u1']}."
        await service.publish_turn(turn("held", "u1", text, NOW - timedelta(minutes=5)))
        worker = asyncio.create_task(QueueWorker(queue, service, renew_locks=False).drain())
        await asyncio.wait_for(history.at_check.wait(), 30)
        existed = counts(db, "u1")  # the held turn's writes are done: this is what the purge must remove
        report = await service.purge("u1")
        history.purged.set()
        await asyncio.wait_for(worker, 30)
        files = {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir()) if p.name.startswith(db.name)}
        yield Purged(report, existed, files, counts(db, "u1"))
    finally:
        HeldHistory.held, HeldHistory.at_first_step = "", False
        await service.close()


def test_a_purge_during_a_turn_of_the_user_reports_what_it_removed(tmp_path: Path) -> None:
    async def body() -> None:
        async with purged_mid_turn(tmp_path) as purged:
            assert purged.existed["memories"] > MEMORIES and purged.existed["history"] > DECISIONS
            assert purged.report.memories == purged.existed["memories"]
            assert purged.report.history == purged.existed["history"]
            assert purged.report.queued == 1  # the held turn's message, in the worker's hands
            assert purged.left == {"memories": 0, "history": 0}

    asyncio.run(body())


def test_a_purge_during_a_turn_of_the_user_leaves_no_byte_of_their_text_in_any_file(tmp_path: Path) -> None:
    async def body() -> None:
        async with purged_mid_turn(tmp_path) as purged:
            files = purged.files
            assert {"memory.db", "memory.db-wal", "memory.db.queue", "memory.db.queue-wal"} <= set(files)
            found = {name: len(re.findall(WORDS["u1"].encode(), data, re.IGNORECASE)) for name, data in files.items()}
            assert found == dict.fromkeys(files, 0), f"the purged user's word is still in {found}"
            kept = re.findall(WORDS["u2"].encode(), files["memory.db"], re.IGNORECASE)
            assert len(kept) >= MEMORIES + DECISIONS  # the other user's text is all there (the scan sees text)
            assert purged.report.checkpointed

    asyncio.run(body())


def test_what_a_turn_writes_after_the_purge_it_removes_from_every_file(tmp_path: Path) -> None:
    async def body() -> None:
        async with purged_mid_turn(tmp_path, at_first_step=True) as purged:
            assert purged.report.memories == purged.existed["memories"]  # what the turn wrote later is not
            assert purged.left == {"memories": 0, "history": 0}
            found = {n: len(re.findall(WORDS["u1"].encode(), d, re.IGNORECASE)) for n, d in purged.files.items()}
            assert found == dict.fromkeys(purged.files, 0), f"the purged user's word is still in {found}"

    asyncio.run(body())
