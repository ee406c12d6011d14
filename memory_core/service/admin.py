"""Administration of memories: import, export, soft delete with history, purge."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import NotFoundError, ValidationError
from ..models import (
    HistoryEntry,
    MemoryEvent,
    MemoryRecord,
    MemoryStatus,
    Scope,
    parse_model,
    validate_scope_id,
)
from ..policy import HumanMemoryPolicy
from ..ports import Embedder, HistoryStore, MemoryStore

__all__ = [
    "IMPORT_BATCH",
    "ImportReport",
    "PurgeReport",
    "delete_memory",
    "export_records",
    "import_records",
    "prepare_record",
    "purge_user",
]

logger = logging.getLogger(__name__)

#: Records written (and embedded) per store call during an import.
IMPORT_BATCH = 256
#: Records read per store call during an export.
EXPORT_PAGE = 500


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import wrote: records, and how many embeddings it computed."""

    imported: int
    embedded: int


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What a purge removed physically."""

    user_id: str
    agent_id: str | None
    memories: int
    history: int


def prepare_record(data: Mapping[str, Any], policy: HumanMemoryPolicy, now: datetime) -> MemoryRecord:
    """Validate one record for import; fills timestamps and, if absent, retention and status."""
    raw = dict(data)
    raw.setdefault("created_at", raw.get("updated_at", now))
    raw.setdefault("updated_at", raw["created_at"])
    record = parse_model(MemoryRecord, raw)
    if "retention_score" not in data:
        assessment = policy.assess(record, now)
        status = record.status if "status" in data else assessment.status
        record = record.model_copy(update={"retention_score": assessment.retention_score, "status": status})
    return record


async def import_records(
    store: MemoryStore,
    embedder: Embedder,
    policy: HumanMemoryPolicy,
    now: datetime,
    rows: Iterable[Mapping[str, Any]],
) -> ImportReport:
    """Validate every row first (errors name the row), then write in batches, embedding as needed."""
    records: list[MemoryRecord] = []
    for number, row in enumerate(rows, start=1):
        try:
            records.append(prepare_record(row, policy, now))
        except ValidationError as exc:
            raise ValidationError(f"record {number}: {exc.field}", exc.message) from None
    embedded = 0
    for start in range(0, len(records), IMPORT_BATCH):
        batch = records[start : start + IMPORT_BATCH]
        missing = [i for i, r in enumerate(batch) if r.embedding is None]
        if missing:
            vectors = await embedder.embed_passages([batch[i].memory for i in missing])
            for i, vector in zip(missing, vectors, strict=True):
                batch[i] = batch[i].model_copy(update={"embedding": vector.tolist()})
            embedded += len(missing)
        await store.upsert(batch)
    return ImportReport(imported=len(records), embedded=embedded)


async def export_records(
    store: MemoryStore, user_id: str, agent_id: str | None = None
) -> AsyncIterator[MemoryRecord]:
    """Every record of a user (one agent, or all), every field, every status."""
    user_id = validate_scope_id(user_id, "user_id")
    agents = [validate_scope_id(agent_id, "agent_id")] if agent_id else await store.agents(user_id)
    for agent in agents:
        scope = Scope.of(user_id, agent)
        cursor: str | None = None
        while True:
            page = await store.scan(scope, after=cursor, limit=EXPORT_PAGE, with_embedding=True)
            for record in page.records:
                yield record
            if page.next_cursor is None:
                break
            cursor = page.next_cursor


async def delete_memory(
    store: MemoryStore,
    history: HistoryStore | None,
    scope: Scope,
    memory_id: str,
    *,
    reason: str,
    now: datetime,
) -> MemoryRecord:
    """Soft delete: the memory stays inspectable but is never returned by search again.

    The change is recorded in the memory's history (when a history is configured); deleting a
    deleted memory changes nothing.

    Raises:
        NotFoundError: No such memory in ``scope``.
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    before = await store.get(scope, memory_id)
    if before is None:
        raise NotFoundError(f"memory {memory_id!r} not found for this user and agent")
    if before.status == MemoryStatus.DELETED:
        return before.without_embedding()
    after = await store.mark_status(scope, memory_id, MemoryStatus.DELETED, reason=reason)
    if history is not None:
        await history.append(
            [HistoryEntry.of_change(MemoryEvent.DELETE, scope, memory_id, before, after, reason=reason, at=now)]
        )
    return after


async def purge_user(
    store: MemoryStore, history: HistoryStore | None, user_id: str, agent_id: str | None = None
) -> PurgeReport:
    """Physically remove a user's memories and their history (one agent's, or all)."""
    user_id = validate_scope_id(user_id, "user_id")
    if agent_id is not None:
        agent_id = validate_scope_id(agent_id, "agent_id")
    memories = await store.purge(user_id, agent_id)
    entries = await history.purge(user_id, agent_id) if history is not None else 0
    logger.info(
        "purged %s memories and %s history entries (agent filter: %s)", memories, entries, bool(agent_id)
    )
    return PurgeReport(user_id=user_id, agent_id=agent_id, memories=memories, history=entries)
