"""Administration of memories: import, export, update and soft delete with history, purge.

A purge holds (:func:`purge_user`): it first records a tombstone (the purge time, per user or scope)
in the history, so anything dated at or before it that is still on its way (a queued turn, a
redelivery, an outbox replay, an old file fed to ``memory-core ingest``) is dropped on arrival; then
it removes the scope's messages from a local queue, the memories and the history, and checkpoints the
SQLite files so the deleted text leaves the disk.
"""

from __future__ import annotations

import hashlib
import logging
import unicodedata
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from memory_core.domain.messages import HistoryEntry, MemoryEvent
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.validation import (
    parse_model,
    validate_caller_metadata,
    validate_memory_id,
    validate_scope_id,
)
from memory_core.errors import ConflictError, NotFoundError, ValidationError
from memory_core.ports import (
    BatchReader,
    Embedder,
    HistoryStore,
    MemoryStore,
    ProgressCallback,
    ScopePurger,
    WalCheckpointer,
    supports,
)

__all__ = [
    "IMPORT_BATCH",
    "ImportReport",
    "PurgeReport",
    "content_memory_id",
    "delete_memory",
    "export_history",
    "export_records",
    "import_records",
    "prepare_record",
    "purge_user",
    "resolve_memory_id",
    "update_memory",
]

logger = logging.getLogger(__name__)

#: Records written (and embedded) per store call during an import.
IMPORT_BATCH = 256
#: Records read per store call during an export.
EXPORT_PAGE = 500
#: Ids looked up per store call when an import skips what the store already holds (a store that
#: reads many at once, :class:`~memory_core.ports.BatchReader`).
DEDUPE_LOOKUP = 500
#: Memories an ambiguous id prefix names in its error, at most.
PREFIX_CANDIDATES = 10


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did.

    Attributes:
        imported: Records written that were new to the store.
        embedded: Embeddings computed (records without one).
        updated: Records written over an existing memory with the same id (its fields differed).
        skipped: Records not written: the store already held them unchanged, or they repeated an
            earlier record of the same import (only with ``dedupe``).
    """

    imported: int
    embedded: int
    updated: int = 0
    skipped: int = 0


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


def content_memory_id(record: MemoryRecord) -> str:
    """A memory id derived from what a record says: its scope, kind and text (Unicode NFKC,
    case-folded, whitespace collapsed). Two records that say the same thing in the same scope get the
    same id, so an import without ids can be repeated without storing duplicates.

    Returns:
        32 hex digits (the length of a generated id).
    """
    text = " ".join(unicodedata.normalize("NFKC", record.memory).casefold().split())
    key = "\x1f".join((record.user_id, record.agent_id, record.kind.value, text))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _unchanged(existing: MemoryRecord, record: MemoryRecord, given: Iterable[str]) -> bool:
    """Whether ``existing`` already has every field a row gave (``given``) as ``record`` has it."""
    fields = {f for f in given if f in MemoryRecord.model_fields and f != "embedding"}
    if existing.model_dump(include=fields) != record.model_dump(include=fields):
        return False
    return "embedding" not in given or record.embedding is None or existing.embedding == record.embedding


_Decision = Literal["import", "update", "skip"]


def _decision(stored: MemoryRecord | None, record: MemoryRecord, keys: Iterable[str]) -> _Decision:
    """What a deduplicating import does with a row given the memory stored under its id: ``skip``
    (held already: the row has no id, or every field it gives is unchanged), ``update`` or ``import``."""
    if stored is None:
        return "import"
    if "id" not in keys or _unchanged(stored, record, keys):
        return "skip"
    return "update"


async def _stored_decisions(
    store: MemoryStore, records: Sequence[MemoryRecord], given: Sequence[Iterable[str]]
) -> list[_Decision]:
    """:func:`_decision` for each of ``records`` (distinct ids per scope), against the store.

    A store that reads many memories at once (:class:`~memory_core.ports.BatchReader`) is asked per
    scope for up to :data:`DEDUPE_LOOKUP` ids at a time, and only a decision is kept of each memory
    read; another store is asked once per record.
    """
    decisions: list[_Decision] = ["import"] * len(records)
    if not supports(store, BatchReader):
        for position, (record, keys) in enumerate(zip(records, given, strict=True)):
            stored = await store.get(Scope.of(record.user_id, record.agent_id), record.id)
            decisions[position] = _decision(stored, record, keys)
        return decisions
    reader = cast(BatchReader, store)
    by_scope: dict[tuple[str, str], list[int]] = {}
    for position, record in enumerate(records):
        by_scope.setdefault((record.user_id, record.agent_id), []).append(position)
    for (user_id, agent_id), positions in by_scope.items():
        scope = Scope.of(user_id, agent_id)
        for start in range(0, len(positions), DEDUPE_LOOKUP):
            chunk = positions[start : start + DEDUPE_LOOKUP]
            held = await reader.get_many(scope, [records[i].id for i in chunk])
            for i in chunk:
                decisions[i] = _decision(held.get(records[i].id), records[i], given[i])
    return decisions


async def import_records(
    store: MemoryStore,
    embedder: Embedder,
    policy: HumanMemoryPolicy,
    now: datetime,
    rows: Iterable[Mapping[str, Any]],
    *,
    dedupe: bool = False,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Validate every row first (errors name the row), then write in batches, embedding as needed.

    Args:
        store: Where the records go.
        embedder: Embeds the records that come without an embedding.
        policy: Derives retention and status when a row has none.
        now: The time of the import (a row's missing timestamps).
        rows: The records, as mappings of :class:`MemoryRecord` fields.
        dedupe: Make the import idempotent: a row without an ``id`` gets :func:`content_memory_id`
            (not a random one), and a row whose memory the store already holds with every field the
            row gives is skipped, as is a row repeating an earlier row's id. Without it every row is
            written (``upsert``: a row with an existing id replaces that memory). A store that reads
            many memories at once (:class:`~memory_core.ports.BatchReader`: both adapters) is asked
            for :data:`DEDUPE_LOOKUP` ids of a scope per call; another, once per row.
        progress: Told ``(records written, records to write)`` once the rows are validated and after
            every batch.
    """
    records: list[MemoryRecord] = []
    given: list[Iterable[str]] = []
    for number, row in enumerate(rows, start=1):
        try:
            record = prepare_record(row, policy, now)
        except ValidationError as exc:
            raise ValidationError(f"record {number}: {exc.field}", exc.message) from None
        if dedupe and "id" not in row:
            record = record.model_copy(update={"id": content_memory_id(record)})
        records.append(record)
        given.append(row.keys())
    updated = skipped = 0
    if dedupe:
        # Each row is first a repeat of an earlier row's id (skipped), or the first with its id; the
        # stored memories are then read for the first ones (nothing is written meanwhile, so the order
        # of the reads changes nothing) and each row decided in order.
        seen: set[tuple[str, str, str]] = set()
        first: list[int] = []
        for position, record in enumerate(records):
            key = (record.user_id, record.agent_id, record.id)
            if key not in seen:
                seen.add(key)
                first.append(position)
        decisions = await _stored_decisions(store, [records[i] for i in first], [given[i] for i in first])
        verdict = dict(zip(first, decisions, strict=True))
        wanted: list[MemoryRecord] = []
        for position, record in enumerate(records):
            decision: _Decision = verdict.get(position, "skip")
            if decision == "skip":
                skipped += 1
                continue
            updated += decision == "update"
            wanted.append(record)
        records = wanted
    embedded = 0
    if progress is not None:
        progress(0, len(records))
    for start in range(0, len(records), IMPORT_BATCH):
        batch = records[start : start + IMPORT_BATCH]
        missing = [i for i, r in enumerate(batch) if r.embedding is None]
        if missing:
            vectors = await embedder.embed_passages([batch[i].memory for i in missing])
            for i, vector in zip(missing, vectors, strict=True):
                batch[i] = batch[i].model_copy(update={"embedding": vector.tolist()})
            embedded += len(missing)
        await store.upsert(batch)
        if progress is not None:
            progress(start + len(batch), len(records))
    return ImportReport(imported=len(records) - updated, embedded=embedded, updated=updated, skipped=skipped)


async def resolve_memory_id(store: MemoryStore, scope: Scope, text: str) -> str:
    """The id of the memory of ``scope`` that ``text`` names: its whole id, or the start of exactly
    one id (as the command line prints them shortened).

    Raises:
        ValidationError: ``text`` is not an id, or starts the ids of several memories (names up to
            :data:`PREFIX_CANDIDATES` of them).
        NotFoundError: No memory of ``scope`` has that id or one starting with it.
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    text = validate_memory_id(text, "id")
    if await store.get(scope, text) is not None:
        return text
    # Ids are listed in order, so the ids starting with ``text`` come right after it.
    page = await store.scan(scope, after=text, limit=PREFIX_CANDIDATES + 1)
    matches = [r.id for r in page.records if r.id.startswith(text)]
    if not matches:
        raise NotFoundError(
            f"no memory has the id {text!r} or an id starting with it (user {scope.user_id!r}, "
            f"agent {scope.agent_id!r})"
        )
    if len(matches) > 1:
        shown = ", ".join(matches[:PREFIX_CANDIDATES])
        more = " and more" if len(matches) > PREFIX_CANDIDATES else ""
        raise ValidationError(
            "id", f"{text!r} starts the ids of several memories ({shown}{more}); give more of the id"
        )
    return matches[0]


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
        NotFoundError: No such memory in ``scope`` (also when a purge of the scope removes it meanwhile:
            the write never brings a purged memory back).
    """
    scope = Scope.of(scope.user_id, scope.agent_id)
    before = await store.get(scope, memory_id)
    if before is None:
        raise _not_found(memory_id)
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


def _not_found(memory_id: str) -> NotFoundError:
    return NotFoundError(f"memory {memory_id!r} not found for this user and agent")


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
        raise _not_found(memory_id)


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
    before = await store.get(scope, memory_id)
    if before is None:
        raise _not_found(memory_id)
    if before.status is MemoryStatus.DELETED:
        raise _deleted(memory_id)
    if text.strip() == before.memory and all(before.metadata.get(k) == v for k, v in extra.items()):
        return before.without_embedding()
    stamp = max(now, before.updated_at)
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
    after = policy.apply(after.model_copy(update={"embedding": embedding}), stamp)
    # Embedding took time: a purge (here or in another process) or a deletion may have come meanwhile.
    current = await store.get(scope, memory_id)
    if current is None:
        raise _not_found(memory_id)
    if current.status is MemoryStatus.DELETED:
        raise _deleted(memory_id)
    await _check_not_purged(history, scope, memory_id, now)
    # A merge writes only a memory that still exists (NotFoundError otherwise), never recreating one.
    await store.merge(scope, memory_id, {name: getattr(after, name) for name in _UPDATED_FIELDS})
    if history is not None:
        await history.append(
            [HistoryEntry.of_change(MemoryEvent.UPDATE, scope, memory_id, before, after, reason=reason, at=stamp)]
        )
    return after.without_embedding()


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
