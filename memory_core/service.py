"""Use cases over the ports: search (with recall), import/export, inspection, forgetting, purge.

The service knows no SDK and no adapter: it is given a store, an embedder, a policy and a clock.
Ingestion of conversation turns lives in :mod:`memory_core.ingestion`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import NotFoundError, ValidationError
from .models import (
    MemoryRecord,
    MemorySearchOptions,
    MemoryStatus,
    Scope,
    SearchMode,
    SearchResult,
    parse_model,
    validate_scope_id,
)
from .policy import HumanMemoryPolicy
from .ports import Clock, Embedder, ForgettingReport, MemoryStore, Page

__all__ = ["ImportReport", "MemoryService", "RecallSink"]

_List = list

logger = logging.getLogger(__name__)

#: Where recall updates go: straight to the store (embedded) or onto the ordered queue (serverless).
RecallSink = Callable[[Scope, Sequence[str]], Awaitable[None]]

_IMPORT_BATCH = 256


@dataclass(frozen=True, slots=True)
class ImportReport:
    imported: int
    embedded: int


class MemoryService:
    """The memory use cases, independent of where memories are stored.

    Args:
        store: The memory store.
        embedder: Embeds queries and stored text.
        policy: Forgetting policy (retention, archiving, recall reinforcement).
        clock: Source of "now".
        recall_sink: Where recall updates go; by default they are applied to ``store`` directly.
        forget_tolerance: Forgetting rewrites an unchanged-status memory only past this drift.
    """

    def __init__(
        self,
        *,
        store: MemoryStore,
        embedder: Embedder,
        policy: HumanMemoryPolicy,
        clock: Clock,
        recall_sink: RecallSink | None = None,
        forget_tolerance: float = 0.01,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.clock = clock
        self._recall_sink = recall_sink
        self.forget_tolerance = forget_tolerance

    # -- search ---------------------------------------------------------------------------------
    async def search(
        self,
        scope: Scope,
        query: str,
        options: MemorySearchOptions | Mapping[str, Any] | None = None,
        *,
        recall: bool = True,
    ) -> SearchResult:
        """Ranked memories for ``query``; the returned memories count as recalled unless ``recall`` is off.

        An empty query is a keyword match-all (every memory the filters allow).
        """
        scope = Scope.of(scope.user_id, scope.agent_id)
        opts = parse_model(MemorySearchOptions, options or {})
        if not isinstance(query, str):
            raise ValidationError("query", "must be a string")
        if len(query) > 4000:
            raise ValidationError("query", f"is {len(query)} characters; the maximum is 4000")
        vector = None
        if not query.strip():
            opts = opts.model_copy(update={"mode": SearchMode.KEYWORD})
        elif opts.mode != SearchMode.KEYWORD:
            vector = (await self.embedder.embed_query(query)).tolist()
        result = await self.store.search(scope, query, vector, opts)
        if recall and result.hits:
            await self.record_recall(scope, [hit.record.id for hit in result.hits])
        return result

    def set_recall_sink(self, sink: RecallSink | None) -> None:
        """Route recall updates elsewhere (the ordered queue path), or back to the store (``None``)."""
        self._recall_sink = sink

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Reinforce memories that were returned to an agent."""
        if self._recall_sink is not None:
            await self._recall_sink(scope, memory_ids)
        else:
            await self.store.recall(scope, memory_ids, self.policy)

    # -- inspection -----------------------------------------------------------------------------
    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        record = await self.store.get(Scope.of(scope.user_id, scope.agent_id), memory_id)
        if record is None:
            raise NotFoundError(f"memory {memory_id!r} not found for this user and agent")
        return record

    async def list(
        self,
        scope: Scope,
        *,
        statuses: Sequence[MemoryStatus] | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page:
        return await self.store.scan(
            Scope.of(scope.user_id, scope.agent_id), statuses=statuses, after=cursor, limit=limit
        )

    async def delete(
        self, scope: Scope, memory_id: str, *, reason: str = "deleted on request"
    ) -> MemoryRecord:
        """Soft delete: the memory stays inspectable but is never returned by search again."""
        return await self.store.mark_status(
            Scope.of(scope.user_id, scope.agent_id), memory_id, MemoryStatus.DELETED, reason=reason
        )

    # -- import / export ------------------------------------------------------------------------
    def prepare_record(self, data: Mapping[str, Any]) -> MemoryRecord:
        """Validate one record for import; fills timestamps and, if absent, retention and status."""
        now = self.clock.now()
        raw = dict(data)
        raw.setdefault("created_at", raw.get("updated_at", now))
        raw.setdefault("updated_at", raw["created_at"])
        record = parse_model(MemoryRecord, raw)
        if "retention_score" not in data:
            assessment = self.policy.assess(record, now)
            status = record.status if "status" in data else assessment.status
            record = record.model_copy(
                update={"retention_score": assessment.retention_score, "status": status}
            )
        return record

    async def import_records(self, rows: Iterable[Mapping[str, Any]]) -> ImportReport:
        """Validate every row first (errors name the row), then write in batches, embedding as needed."""
        records: list[MemoryRecord] = []
        for number, row in enumerate(rows, start=1):
            try:
                records.append(self.prepare_record(row))
            except ValidationError as exc:
                raise ValidationError(f"record {number}: {exc.field}", exc.message) from None
        embedded = 0
        for start in range(0, len(records), _IMPORT_BATCH):
            batch = records[start : start + _IMPORT_BATCH]
            missing = [i for i, r in enumerate(batch) if r.embedding is None]
            if missing:
                vectors = await self.embedder.embed_passages([_embedding_text(batch[i]) for i in missing])
                for i, vector in zip(missing, vectors, strict=True):
                    batch[i] = batch[i].model_copy(update={"embedding": vector.tolist()})
                embedded += len(missing)
            await self.store.upsert(batch)
        return ImportReport(imported=len(records), embedded=embedded)

    async def agents(self, user_id: str) -> _List[str]:
        return await self.store.agents(validate_scope_id(user_id, "user_id"))

    async def export(self, user_id: str, agent_id: str | None = None) -> AsyncIterator[MemoryRecord]:
        """Every record of a user (one agent, or all), every field, every status."""
        agents = [validate_scope_id(agent_id, "agent_id")] if agent_id else await self.agents(user_id)
        for agent in agents:
            scope = Scope.of(user_id, agent)
            cursor: str | None = None
            while True:
                page = await self.store.scan(scope, after=cursor, limit=500, with_embedding=True)
                for record in page.records:
                    yield record
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Physically remove a user's memories (one agent's, or all)."""
        removed = await self.store.purge(user_id, agent_id)
        logger.info("purged %s memories (agent filter: %s)", removed, "yes" if agent_id else "no")
        return removed

    # -- forgetting -----------------------------------------------------------------------------
    async def apply_forgetting(
        self, *, dry_run: bool = True, limit: int | None = None, cursor: str | None = None
    ) -> ForgettingReport:
        report = await self.store.apply_forgetting(
            self.policy, dry_run=dry_run, limit=limit, cursor=cursor, tolerance=self.forget_tolerance
        )
        logger.info(
            "forgetting (dry_run=%s): scanned %s, archived %s, expired %s, reactivated %s, rescored %s, "
            "unchanged %s, written %s",
            dry_run,
            report.scanned,
            report.archived,
            report.expired,
            report.reactivated,
            report.rescored,
            report.unchanged,
            report.written,
        )
        return report

    async def close(self) -> None:
        await self.store.close()


def _embedding_text(record: MemoryRecord) -> str:
    return record.memory
