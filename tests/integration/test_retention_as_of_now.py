"""Retention as of now: search ranks and filters by the retention at the query's time, reads show it,
and a memory opened in an application process keeps forgetting running without a separate job."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import AsyncMemory
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.client.local import LocalMemoryClient
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, RankingProfile, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.errors import ConfigurationError
from memory_core.ports import FixedClock

SCOPE = Scope.of("ren", "travel")
POLICY = HumanMemoryPolicy()
DUE_KEY = "forgetting.next_due"


def record(memory: str, *, id: str, days_ago: float, stored: float, now: datetime, importance: float = 0.5) -> MemoryRecord:
    """A memory last stated ``days_ago`` whose stored retention (``stored``) says whatever it says."""
    at = now - timedelta(days=days_ago)
    return MemoryRecord.model_validate(
        {
            "id": id,
            "user_id": SCOPE.user_id,
            "agent_id": SCOPE.agent_id,
            "memory": memory,
            "importance": importance,
            "retention_score": stored,
            "created_at": at,
            "updated_at": at,
            "embedding": HashingEmbedder().embed_sync(memory).tolist(),
        }
    )


def stale_pair(now: datetime) -> list[MemoryRecord]:
    # The old one's stored score is from when it was new; the fresh one's from a bad import.
    return [
        record("window seat on the train", id="old", days_ago=300, stored=0.95, now=now),
        record("window seat on the plane", id="fresh", days_ago=1, stored=0.05, now=now),
    ]


def test_the_embedded_search_ranks_and_filters_by_the_retention_now(tmp_path: Path) -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)

    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "store.db", clock=FixedClock(now))
        try:
            await store.upsert(stale_pair(now))
            options = MemorySearchOptions(mode=SearchMode.KEYWORD, ranking_profile=RankingProfile.IMPORTANT)
            result = await store.search(SearchRequest(SCOPE, "window seat", None, options))
            assert [h.record.id for h in result.hits] == ["fresh", "old"]
            boosts = {h.record.id: h.breakdown.functions["retention_score"] for h in result.hits}
            stored = {r.id: r for r in stale_pair(now)}
            for memory_id, boost in boosts.items():  # linear, boost 1.5: 1 + 0.5 * the retention now
                assert abs(boost - (1 + 0.5 * POLICY.retention(stored[memory_id], now))) < 1e-9
            kept = await store.search(
                SearchRequest(SCOPE, "window seat", None, options.model_copy(update={"min_retention_score": 0.5}))
            )
            assert [h.record.id for h in kept.hits] == ["fresh"]
            # What is stored is unchanged: only a forgetting run writes retention.
            assert (await store.get(SCOPE, "old")).retention_score == 0.95  # type: ignore[union-attr]
        finally:
            await store.close()

    asyncio.run(scenario())


def seed(db: Path, records: list[MemoryRecord]) -> None:
    async def write() -> None:
        store = SQLiteMemoryStore(db)
        try:
            await store.upsert(records)
        finally:
            await store.close()

    asyncio.run(write())


async def wait_for_status(client: LocalMemoryClient, memory_id: str, status: MemoryStatus) -> bool:
    for _ in range(200):
        if (await client.service.get(SCOPE, memory_id)).status == status:
            return True
        await asyncio.sleep(0.05)
    return False


def test_an_opened_memory_reads_retention_as_of_now_and_keeps_forgetting_running(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    now = datetime.now(UTC)
    seed(db, stale_pair(now))

    async def scenario() -> None:
        # Without forgetting: reads show the retention now, the stored score stays as it was.
        quiet = LocalMemoryClient.open(sqlite_path=db, embedder=HashingEmbedder(), forgetting=False)
        try:
            await quiet.search(SCOPE, "window seat", MemorySearchOptions(mode=SearchMode.KEYWORD), recall=False)
            shown = await quiet.get(SCOPE, "old")
            assert shown.status == MemoryStatus.ACTIVE and shown.retention_score < 0.05
            listed = {r.id: r.retention_score for r in (await quiet.service.list(SCOPE)).records}
            assert listed["old"] == shown.retention_score or abs(listed["old"] - shown.retention_score) < 1e-6
            exported = {r.id: r for r in (await quiet.export(SCOPE.user_id, SCOPE.agent_id)).memories}
            assert exported["old"].retention_score == 0.95  # the export is what is stored
            await asyncio.sleep(0.3)
            assert (await quiet.get(SCOPE, "old")).status == MemoryStatus.ACTIVE
            assert await quiet.service.get_checkpoint(DUE_KEY) is None
        finally:
            await quiet.close()

        # Opened as the Python API and the provider open it: a store never scheduled is due at once.
        memory = LocalMemoryClient.open(sqlite_path=db, embedder=HashingEmbedder())
        try:
            await memory.search(SCOPE, "window seat", MemorySearchOptions(mode=SearchMode.KEYWORD), recall=False)
            assert await wait_for_status(memory, "old", MemoryStatus.ARCHIVED)
            assert (await memory.get(SCOPE, "fresh")).status == MemoryStatus.ACTIVE
            for _ in range(100):  # the next run is booked at the schedule's next time (03:30 UTC)
                due = await memory.service.get_checkpoint(DUE_KEY)
                if due is not None and datetime.fromisoformat(due) > now:
                    break
                await asyncio.sleep(0.05)
            assert due is not None and datetime.fromisoformat(due) > now
            assert datetime.fromisoformat(due) - now <= timedelta(days=1, seconds=1)
        finally:
            await memory.close()

    asyncio.run(scenario())

    # A run is not due: opening does not run one. Once its time has passed (no process was open), it does.
    seed(db, [record("aisle seat on the bus", id="faded", days_ago=400, stored=0.9, now=now)])

    async def reopen(due: datetime | None) -> MemoryStatus:
        memory = LocalMemoryClient.open(sqlite_path=db, embedder=HashingEmbedder())
        try:
            if due is not None:
                await memory.service.set_checkpoint(DUE_KEY, due.isoformat())
            await memory.search(SCOPE, "seat", MemorySearchOptions(mode=SearchMode.KEYWORD), recall=False)
            if due is not None and due < now:
                await wait_for_status(memory, "faded", MemoryStatus.ARCHIVED)
            else:
                await asyncio.sleep(0.3)
            return (await memory.get(SCOPE, "faded")).status
        finally:
            await memory.close()

    assert asyncio.run(reopen(None)) == MemoryStatus.ACTIVE
    assert asyncio.run(reopen(now - timedelta(hours=2))) == MemoryStatus.ARCHIVED


def test_forgetting_is_a_local_option() -> None:
    with pytest.raises(ConfigurationError, match="forgetting does not go with url="):
        AsyncMemory(url="http://127.0.0.1:9", forgetting=False)
