"""The ingest use case the scenario tests run: rule extraction, rule consolidation, SQLite (each part
replaceable, so the tests can crash a store or script a chat model)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.adapters.sqlite.history import SQLiteHistoryStore
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.messages import Turn
from memory_core.domain.paging import PageRequest
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.ports import Embedder, FixedClock
from memory_core.service.consolidation.consolidator import MemoryConsolidator
from memory_core.service.episodes import EpisodePolicy
from memory_core.service.extraction.extractor import MemoryExtractor
from memory_core.service.ingest import ingest_turn
from memory_core.service.preparation import PreparedTurn
from memory_core.service.results import IngestResult

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
SCOPE = Scope.of("user-1", "travel-agent")


def make_turn(index: int, turn: str | list[tuple[str, str]], scope: Scope = SCOPE, prefix: str = "t") -> Turn:
    messages = [("user", turn)] if isinstance(turn, str) else turn
    return Turn(
        turn_id=f"{prefix}{index}",
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        occurred_at=START + timedelta(hours=index),
        messages=[{"role": role, "text": text} for role, text in messages],
    )


@dataclass
class Pipeline:
    store: SQLiteMemoryStore
    history: SQLiteHistoryStore
    clock: FixedClock
    embedder: Embedder
    extractor: MemoryExtractor
    consolidator: MemoryConsolidator

    @classmethod
    def open(cls, path: Path, embedder: Embedder, store_cls: type[SQLiteMemoryStore] = SQLiteMemoryStore) -> Pipeline:
        clock = FixedClock(START)
        return cls(
            store=store_cls(path, clock=clock),
            history=SQLiteHistoryStore(path),
            clock=clock,
            embedder=embedder,
            extractor=MemoryExtractor(clock=clock),
            consolidator=MemoryConsolidator(),
        )

    async def ingest(
        self, turn: Turn, *, episodes: EpisodePolicy | None = None, prepared: PreparedTurn | None = None
    ) -> IngestResult:
        self.clock.set(turn.occurred_at)
        return await ingest_turn(
            turn,
            store=self.store,
            history=self.history,
            extractor=self.extractor,
            consolidator=self.consolidator,
            embedder=self.embedder,
            clock=self.clock,
            episodes=episodes,
            prepared=prepared,
        )

    async def active(self, scope: Scope = SCOPE) -> list[str]:
        # Current after the whole conversation: what no later statement superseded.
        after = START + timedelta(days=3650)
        page = await self.store.scan(scope, PageRequest(statuses=[MemoryStatus.ACTIVE], limit=1000, current_at=after))
        return sorted(r.memory for r in page.records)

    async def export(self, scope: Scope = SCOPE, turn_ids: list[str] | None = None) -> dict[str, Any]:
        """Every record (all statuses, with embeddings), every history entry and every turn journal."""
        records: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await self.store.scan(scope, PageRequest(after=cursor, limit=500, with_embedding=True))
            records.extend(r.to_json_dict() for r in page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
        history = [e.model_dump(mode="json") for e in await self.history.for_scope(scope)]
        journals = []
        for turn_id in turn_ids or []:
            journal = await self.history.journal(scope, turn_id)
            journals.append(None if journal is None else repr(journal))
        return {"records": records, "history": history, "journals": journals}

    async def close(self) -> None:
        await self.store.close()
        await self.history.close()
