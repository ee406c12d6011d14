"""Administration of memories: import, export, soft delete with history, purge.

A purge holds (:func:`purge_user`): it first records a tombstone (the purge time, per user or scope)
in the history, so anything dated at or before it that is still on its way (a queued turn, a
redelivery, an outbox replay, an old file fed to ``memory-core ingest``) is dropped on arrival; then
it removes the scope's messages from a local queue, the memories and the history, and checkpoints the
SQLite files so the deleted text leaves the disk.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

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
from ..ports import Embedder, HistoryStore, MemoryStore, ScopePurger, WalCheckpointer, supports

__all__ = [
    "IMPORT_BATCH",
    "ImportReport",
    "PurgeReport",
    "delete_memory",
    "export_history",
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
    """What a purge removed physically, and the tombstone it left.

    Attributes:
        user_id: The user.
        agent_id: The agent (``None``: every agent of the user).
        memories: Memories removed from the store.
        history: History entries removed.
        queued: Messages of the scope removed from the local queue (waiting, in hand or dead-lettered);
            0 where the queue cannot remove them (Service Bus: the tombstone drops them on delivery).
        purged_at: The tombstone: turns and recall updates dated at or before it are dropped from
            now on (``None`` without a history, where nothing can be dropped).
        checkpointed: Whether every SQLite file's write-ahead log was truncated (``True`` where
            there is none).
    """

    user_id: str
    agent_id: str | None
    memories: int
    history: int
    queued: int = 0
    purged_at: datetime | None = None
    checkpointed: bool = True


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


async def export_history(
    store: MemoryStore, history: HistoryStore | None, user_id: str, agent_id: str | None = None
) -> list[HistoryEntry]:
    """Every recorded decision of a user's scopes (one agent's, or all), oldest first per scope
    (empty without a history)."""
    if history is None:
        return []
    user_id = validate_scope_id(user_id, "user_id")
    agents = [validate_scope_id(agent_id, "agent_id")] if agent_id else await store.agents(user_id)
    entries: list[HistoryEntry] = []
    for agent in agents:
        entries.extend(await history.for_scope(Scope.of(user_id, agent)))
    return entries


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
    store: MemoryStore,
    history: HistoryStore | None,
    user_id: str,
    agent_id: str | None = None,
    *,
    now: datetime,
    queue: ScopePurger | None = None,
    files: Sequence[object] = (),
) -> PurgeReport:
    """Physically remove a user's memories and their history (one agent's, or all), for good.

    In this order, each step idempotent:

    1. the tombstone (``now``) is recorded in the history (ids and a time only); from here on a turn
       or recall update of the scope dated at or before ``now`` is dropped wherever it comes from;
    2. the scope's messages are removed from ``queue`` (the embedded queue: waiting, in hand and
       dead-lettered);
    3. the memories are removed from the store, then 4. the history (the tombstone stays);
    5. every adapter in ``files`` that keeps a write-ahead log truncates it
       (:class:`~memory_core.ports.WalCheckpointer`), so deleted text leaves the disk.

    A purge stopped at any point (even by ``SIGKILL``) already drops replays once step 1 is durable;
    running it again completes it (the tombstone moves to the new time).

    Args:
        store: The memory store.
        history: The history (``None``: no tombstone and no history to remove).
        user_id: The user.
        agent_id: One agent (``None``: every agent of the user).
        now: The purge time (the tombstone).
        queue: A local queue that can remove the scope's messages itself.
        files: Adapters to checkpoint afterwards (those that are not file-backed are skipped).
    """
    user_id = validate_scope_id(user_id, "user_id")
    if agent_id is not None:
        agent_id = validate_scope_id(agent_id, "agent_id")
    purged_at = await history.record_tombstone(user_id, agent_id, now) if history is not None else None
    queued = await queue.purge_scope(user_id, agent_id) if queue is not None else 0
    memories = await store.purge(user_id, agent_id)
    entries = await history.purge(user_id, agent_id) if history is not None else 0
    checkpointed = True
    seen: set[int] = set()
    for resource in files:
        if id(resource) in seen or not supports(resource, WalCheckpointer):
            continue
        seen.add(id(resource))
        if not await cast(WalCheckpointer, resource).checkpoint_wal():
            checkpointed = False
            logger.warning(
                "after a purge, a reader kept part of the write-ahead log of the %s; the deleted text "
                "leaves it at the next checkpoint",
                type(resource).__name__,
            )
    logger.info(
        "purged %s memories, %s history entries and %s queued messages (agent filter: %s)",
        memories,
        entries,
        queued,
        bool(agent_id),
    )
    return PurgeReport(
        user_id=user_id,
        agent_id=agent_id,
        memories=memories,
        history=entries,
        queued=queued,
        purged_at=purged_at,
        checkpointed=checkpointed,
    )
