"""Administration of memories: update and soft delete on request, with history, and the purge of a user
or scope that holds (:func:`purge_user`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from memory_core.capabilities import PurgeSettlement, ScopePurger, WalCheckpointer, supports
from memory_core.domain.messages import HistoryEntry, MemoryEvent
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.validation import (
    parse_model,
    validate_caller_metadata,
    validate_memory_id,
    validate_scope_id,
)
from memory_core.errors import ConflictError, ValidationError
from memory_core.ports import Embedder, HistoryStore, MemoryStore
from memory_core.service.inspection import memory_not_found

__all__ = [
    "PurgeReport",
    "delete_memory",
    "purge_user",
    "rewrite_files",
    "update_memory",
]

logger = logging.getLogger(__name__)


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
        NotFoundError: No such memory in ``scope`` (also when a purge of the scope removes it meanwhile:
            the write never brings a purged memory back).
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    before = await store.get(scope, memory_id)
    if before is None:
        raise memory_not_found(memory_id)
    if before.status == MemoryStatus.DELETED:
        return before.without_embedding()
    await _check_not_purged(history, scope, memory_id, now)
    # mark_status writes only a memory that still exists (NotFoundError otherwise).
    after = await store.mark_status(scope, memory_id, MemoryStatus.DELETED, reason=reason)
    if history is not None:
        await history.append(
            [HistoryEntry.of_change(MemoryEvent.DELETE, scope, memory_id, before, after, reason=reason, at=now)]
        )
    return after


#: The fields :func:`update_memory` writes (the rest of the memory is left as the store has it).
_UPDATED_FIELDS = ("memory", "updated_at", "metadata", "embedding", "retention_score", "status")


def _deleted(memory_id: str) -> ConflictError:
    return ConflictError(f"memory {memory_id!r} is deleted; add it again instead of updating it")


async def _check_not_purged(
    history: HistoryStore | None, scope: Scope, memory_id: str, since: datetime
) -> None:
    """Refuse a write about a memory whose scope (or user) was purged at or after ``since`` (when the
    change began): the purge removes the memory, and the change must not bring it back.

    Raises:
        NotFoundError: Such a purge.
    """
    if history is None:
        return
    tombstone = await history.tombstone(scope)
    if tombstone is not None and tombstone >= since:
        logger.info("memory %s: its scope was purged during the change; nothing written", memory_id)
        raise memory_not_found(memory_id)


async def update_memory(
    store: MemoryStore,
    embedder: Embedder,
    history: HistoryStore | None,
    policy: HumanMemoryPolicy,
    scope: Scope,
    memory_id: str,
    text: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    reason: str,
    now: datetime,
) -> MemoryRecord:
    """Replace a memory's text on request (re-embedded), recorded in its history as an ``UPDATE``.

    The memory is restated: its ``updated_at`` becomes ``now`` (its decay starts again) and its
    retention and status are derived again, so a corrected archived memory is active again. Its id,
    scope, kind, category, importance, provenance and other fields stay; ``metadata`` is merged into
    its metadata, and ``updated_on_request`` records when. A text (and metadata) it already has
    changes nothing and records nothing.

    Args:
        store: The memory store.
        embedder: Embeds the new text.
        history: The history (``None``: the change is not recorded).
        policy: The forgetting policy (retention and status of the restated memory).
        scope: Whose memory.
        memory_id: Which memory.
        text: The new text (the rules of a memory's text: 1-4000 characters, no control characters).
        metadata: Keys to set in the memory's metadata (``None``: none).
        reason: Why, for the history.
        now: The time of the change.

    Returns:
        The memory after the change, without its embedding.

    Raises:
        NotFoundError: No such memory in ``scope`` (also when a purge of the scope removes it while the
            new text is embedded: the write only changes a memory that still exists, so a purge is
            never undone).
        ConflictError: The memory is deleted (add it again instead).
        ValidationError: ``text`` or ``metadata`` breaks a rule (names it).
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    memory_id = validate_memory_id(memory_id, "memory_id")
    extra = {} if metadata is None else validate_caller_metadata(metadata)
    if not isinstance(text, str):
        raise ValidationError("text", "must be a string")
    before = _updatable(await store.get(scope, memory_id), memory_id)
    if text.strip() == before.memory and all(before.metadata.get(k) == v for k, v in extra.items()):
        return before.without_embedding()
    stamp = max(now, before.updated_at)
    after = policy.apply(await _restated(before, text, extra, stamp, embedder), stamp)
    # Embedding took time: a purge (here or in another process) or a deletion may have come meanwhile.
    _updatable(await store.get(scope, memory_id), memory_id)
    await _check_not_purged(history, scope, memory_id, now)
    # A merge writes only a memory that still exists (NotFoundError otherwise), never recreating one.
    await store.merge(scope, memory_id, {name: getattr(after, name) for name in _UPDATED_FIELDS})
    if history is not None:
        await history.append(
            [HistoryEntry.of_change(MemoryEvent.UPDATE, scope, memory_id, before, after, reason=reason, at=stamp)]
        )
    return after.without_embedding()


def _updatable(record: MemoryRecord | None, memory_id: str) -> MemoryRecord:
    """The stored memory an update changes.

    Raises:
        NotFoundError: There is none.
        ConflictError: It is deleted.
    """
    if record is None:
        raise memory_not_found(memory_id)
    if record.status is MemoryStatus.DELETED:
        raise _deleted(memory_id)
    return record


async def _restated(
    before: MemoryRecord, text: str, extra: Mapping[str, Any], stamp: datetime, embedder: Embedder
) -> MemoryRecord:
    """``before`` saying ``text`` at ``stamp``, ``extra`` merged into its metadata, with the embedding
    of its text (the stored one while the text is the same).

    Raises:
        ValidationError: ``text`` breaks a rule of a memory's text (names ``text``) or the metadata one.
    """
    try:
        after = parse_model(
            MemoryRecord,
            {
                **before.model_dump(),
                "memory": text,
                "updated_at": stamp,
                "metadata": {**before.metadata, **extra, "updated_on_request": stamp.isoformat()},
                "embedding": None,
            },
        )
    except ValidationError as exc:
        raise ValidationError("text" if exc.field == "memory" else exc.field, exc.message) from None
    if after.memory != before.memory or before.embedding is None:
        vector = (await embedder.embed_passages([after.memory]))[0]
        embedding = [float(x) for x in vector]
    else:
        embedding = before.embedding
    return after.model_copy(update={"embedding": embedding})


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
    5. every file of the adapters in ``files`` (:class:`~memory_core.capabilities.WalCheckpointer`) is
       rewritten once and its write-ahead log truncated, so deleted text leaves the disk, free space
       of pages included;
    6. the purge is settled in the history (:class:`~memory_core.capabilities.PurgeSettlement`): a turn of
       the scope that was being ingested meanwhile waits for this before removing what it wrote, so
       it never deletes (and takes from this purge's count) what the purge was about to delete.

    The counts are what the purge's own deletes removed (each adapter counts the rows its delete
    statement removed, in that statement's transaction).

    A purge stopped at any point (even by ``SIGKILL``) already drops replays once step 1 is durable;
    running it again completes it (the tombstone moves to the new time).

    Args:
        store: The memory store.
        history: The history (``None``: no tombstone and no history to remove).
        user_id: The user.
        agent_id: One agent (``None``: every agent of the user).
        now: The purge time (the tombstone).
        queue: A local queue that can remove the scope's messages itself.
        files: Adapters whose files are rewritten and checkpointed afterwards (those that are not
            file-backed are skipped).
    """
    user_id = validate_scope_id(user_id, "user_id")
    if agent_id is not None:
        agent_id = validate_scope_id(agent_id, "agent_id")
    purged_at = await history.record_tombstone(user_id, agent_id, now) if history is not None else None
    queued = await queue.purge_scope(user_id, agent_id) if queue is not None else 0
    memories = await store.purge(user_id, agent_id)
    entries = await history.purge(user_id, agent_id) if history is not None else 0
    checkpointed = await rewrite_files(files, rebuild=True)
    if history is not None and supports(history, PurgeSettlement):
        await cast(PurgeSettlement, history).settle_tombstone(user_id, agent_id, now)
        checkpointed = await rewrite_files(files, rebuild=False) and checkpointed  # the settlement's own log
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


async def rewrite_files(files: Sequence[object], *, rebuild: bool) -> bool:
    """Truncate the write-ahead log of every adapter of ``files`` that keeps one
    (:class:`~memory_core.capabilities.WalCheckpointer`; the others are skipped), first rewriting
    (``rebuild``) each file once (two adapters may share one), so deleted text leaves the disk;
    ``False`` if a file could not be rewritten or a reader kept part of a log."""
    checkpointed = True
    seen: set[int] = set()
    rewritten: set[str] = set()
    for resource in files:
        if id(resource) in seen or not supports(resource, WalCheckpointer):
            continue
        seen.add(id(resource))
        path = str(getattr(resource, "path", id(resource)))
        first = path not in rewritten
        rewritten.add(path)
        if not await cast(WalCheckpointer, resource).checkpoint_wal(rebuild=rebuild and first):
            checkpointed = False
            logger.warning(
                "after a purge, a reader kept part of the write-ahead log of the %s, or its file could "
                "not be rewritten; the deleted text leaves it at the next checkpoint or rewrite",
                type(resource).__name__,
            )
    return checkpointed
