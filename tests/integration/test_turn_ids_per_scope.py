"""A turn id is unique within its scope: another user's turn that reuses it is still queued and
ingested, and the same scope repeating it is told ``duplicate`` (regression: a turn id used by anyone
in the last ten minutes made another user's turn disappear)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.client.local import LocalMemoryClient
from memory_core.domain.records import MemoryStatus, Scope


def body(user: str, text: str) -> dict[str, Any]:
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": "turn-0001",
        "user_id": user,
        "agent_id": "travel",
        "occurred_at": "2026-11-01T09:00:00Z",
        "messages": [{"role": "user", "text": text}],
    }


def test_the_same_turn_id_in_two_scopes_is_two_turns(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = LocalMemoryClient.open(
            sqlite_path=tmp_path / "m.db", embedder=HashingEmbedder(), queue=True, episodes=False
        )
        service = client.service
        try:
            assert await service.publish_turn(body("alice", "I am allergic to peanuts.")) == "queued"
            assert await service.publish_turn(body("bob", "I like green tea.")) == "queued"
            assert await service.publish_turn(body("alice", "I am allergic to peanuts.")) == "duplicate"
            assert await client.drain() == 2
            # after ingestion, a repeat is still a duplicate (the scope's journal knows the turn)
            assert await service.publish_turn(body("bob", "I like green tea.")) == "duplicate"
            for user, text in (("alice", "I am allergic to peanuts"), ("bob", "I like green tea")):
                page = await service.list(Scope.of(user, "travel"), statuses=[MemoryStatus.ACTIVE])
                assert [r.memory for r in page.records] == [text]
        finally:
            await client.close()

    asyncio.run(scenario())


def test_without_a_queue_a_repeated_turn_is_reported_as_a_duplicate(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = LocalMemoryClient.open(
            sqlite_path=tmp_path / "m.db", embedder=HashingEmbedder(), episodes=False
        )
        try:
            assert await client.service.publish_turn(body("alice", "I like green tea.")) == "ingested"
            assert await client.service.publish_turn(body("alice", "I like green tea.")) == "duplicate"
            assert await client.service.publish_turn(body("bob", "I like green tea.")) == "ingested"
        finally:
            await client.close()

    asyncio.run(scenario())
