"""Import and export of memory records: rows validated, deduplicated on content and written in batches;
every record and every recorded decision of a user read back.

An import into a store that gives memories their vectors later
(:class:`~memory_core.capabilities.VectorBackfill`: the embedded store) stores every record first, one
transaction per batch (durable, listed and found by keyword search at once), then computes the vectors
the records lack (:func:`~memory_core.service.backfill.fill_missing_vectors`), unless asked to leave them
for later. Into another store, each batch is embedded, then written. Either way each distinct text is
embedded once, :data:`~memory_core.service.backfill.EMBED_BATCH` passages per embedder call.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from memory_core.capabilities import BatchReader, VectorBackfill, supports
from memory_core.domain.messages import HistoryEntry
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.validation import parse_model, validate_scope_id
from memory_core.errors import ValidationError
from memory_core.ports import Embedder, HistoryStore, MemoryStore, ProgressCallback
from memory_core.service.backfill import embed_distinct, fill_missing_vectors

__all__ = [
    "DEDUPE_LOOKUP",
    "EXPORT_PAGE",
    "IMPORT_BATCH",
    "ImportReport",
    "content_memory_id",
    "export_history",
    "export_records",
    "import_records",
    "prepare_record",
]

#: Records written (and embedded) per store call during an import.
IMPORT_BATCH = 256
#: Records read per store call during an export.
EXPORT_PAGE = 500
#: Ids looked up per store call when an import skips what the store already holds (a store that
#: reads many at once, :class:`~memory_core.capabilities.BatchReader`).
DEDUPE_LOOKUP = 500


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did.

    Attributes:
        imported: Records written that were new to the store.
        embedded: Memories given a vector the import computed (records without one; with the vectors
            filled after storing, every memory of the store that had none).
        updated: Records written over an existing memory with the same id (its fields differed).
        skipped: Records not written: the store already held them unchanged, or they repeated an
            earlier record of the same import (only with ``dedupe``).
        texts_embedded: Texts the embedder was asked for (each distinct text once; not compared).
        vectors_missing: Memories of the store still without a vector after the import (those left
            for later with ``defer_vectors``; 0 for a store that embeds before writing; not compared).
    """

    imported: int
    embedded: int
    updated: int = 0
    skipped: int = 0
    texts_embedded: int = field(default=0, compare=False)
    vectors_missing: int = field(default=0, compare=False)


def prepare_record(data: Mapping[str, Any], policy: HumanMemoryPolicy, now: datetime) -> MemoryRecord:
    """Validate one record for import; fills timestamps (``valid_from``: when it was created, as every
    memory has it) and, if absent, retention and status."""
    raw = dict(data)
    raw.setdefault("created_at", raw.get("updated_at", now))
    raw.setdefault("updated_at", raw["created_at"])
    if raw.get("valid_from") is None and raw.get("valid_until") is None:
        raw["valid_from"] = raw["created_at"]
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

    A store that reads many memories at once (:class:`~memory_core.capabilities.BatchReader`) is asked per
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
    defer_vectors: bool = False,
) -> ImportReport:
    """Validate every row first (errors name the row), then write in batches, embedding as needed.

    Into a store that offers :class:`~memory_core.capabilities.VectorBackfill`, every record is stored
    first (without the vector it lacks), then the vectors are computed, unless ``defer_vectors``.

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
            many memories at once (:class:`~memory_core.capabilities.BatchReader`: both adapters) is asked
            for :data:`DEDUPE_LOOKUP` ids of a scope per call; another, once per row.
        progress: Told ``(records written, records to write)`` once the rows are validated and after
            every batch.
        defer_vectors: Leave the vectors the records lack for later
            (:func:`~memory_core.service.backfill.fill_missing_vectors`); the store keeps the records
            without them meanwhile (found by keyword search, not by vector). Only with a store that
            offers :class:`~memory_core.capabilities.VectorBackfill`; another embeds before writing.
    """
    records, given = _validated(rows, policy, now, dedupe=dedupe)
    updated = skipped = 0
    if dedupe:
        records, updated, skipped = await _deduplicated(store, records, given)
    counts = {"imported": len(records) - updated, "updated": updated, "skipped": skipped}
    if not supports(store, VectorBackfill):
        embedded, texts = await _write_batches(store, embedder, records, progress)
        return ImportReport(embedded=embedded, texts_embedded=texts, **counts)
    await _write_batches(store, None, records, progress)
    backfill = cast(VectorBackfill, store)
    if defer_vectors:
        return ImportReport(embedded=0, vectors_missing=await backfill.count_missing_vectors(), **counts)
    filled = await fill_missing_vectors(backfill, embedder)
    return ImportReport(
        embedded=filled.filled, texts_embedded=filled.embedded, vectors_missing=filled.missing, **counts
    )


def _validated(
    rows: Iterable[Mapping[str, Any]], policy: HumanMemoryPolicy, now: datetime, *, dedupe: bool
) -> tuple[list[MemoryRecord], list[Iterable[str]]]:
    """Every row as a record (with its content id when deduplicating a row without an id), and the
    fields each row gave.

    Raises:
        ValidationError: A row is not a valid record (names the row and the field).
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
    return records, given


async def _deduplicated(
    store: MemoryStore, records: Sequence[MemoryRecord], given: Sequence[Iterable[str]]
) -> tuple[list[MemoryRecord], int, int]:
    """The records to write, with how many of them update a stored memory and how many were skipped.

    Each row is first a repeat of an earlier row's id (skipped), or the first with its id; the stored
    memories are then read for the first ones (nothing is written meanwhile, so the order of the reads
    changes nothing) and each row decided in order.
    """
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
    updated = skipped = 0
    for position, record in enumerate(records):
        decision: _Decision = verdict.get(position, "skip")
        if decision == "skip":
            skipped += 1
            continue
        updated += decision == "update"
        wanted.append(record)
    return wanted, updated, skipped


async def _write_batches(
    store: MemoryStore,
    embedder: Embedder | None,
    records: Sequence[MemoryRecord],
    progress: ProgressCallback | None,
) -> tuple[int, int]:
    """Write ``records`` in batches of :data:`IMPORT_BATCH` (one store call each), first embedding
    those without an embedding when given an ``embedder`` (each distinct text of a batch once; a
    deleted memory is never searched, so it gets none, as the embedded store's vector fill gives it
    none); returns how many records were embedded and how many texts."""
    embedded = texts = 0
    if progress is not None:
        progress(0, len(records))
    for start in range(0, len(records), IMPORT_BATCH):
        batch = list(records[start : start + IMPORT_BATCH])
        missing = [i for i, r in enumerate(batch) if r.embedding is None and r.status is not MemoryStatus.DELETED]
        if missing and embedder is not None:
            vectors = await embed_distinct(embedder, [batch[i].memory for i in missing])
            for i in missing:
                batch[i] = batch[i].model_copy(update={"embedding": vectors[batch[i].memory]})
            embedded += len(missing)
            texts += len(vectors)
        await store.upsert(batch)
        if progress is not None:
            progress(start + len(batch), len(records))
    return embedded, texts


async def export_records(
    store: MemoryStore, user_id: str, agent_id: str | None = None, *, include_vectors: bool = False
) -> AsyncIterator[MemoryRecord]:
    """Every record of a user (one agent, or all), every field (the embedding only with
    ``include_vectors``), every status."""
    user_id = validate_scope_id(user_id, "user_id")
    agents = [validate_scope_id(agent_id, "agent_id")] if agent_id else await store.agents(user_id)
    for agent in agents:
        scope = Scope.of(user_id, agent)
        cursor: str | None = None
        while True:
            request = PageRequest(after=cursor, limit=EXPORT_PAGE, with_embedding=include_vectors)
            page = await store.scan(scope, request)
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
