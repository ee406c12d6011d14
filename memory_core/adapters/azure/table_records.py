"""The history store's records as Azure Table entities and back: entries, the counter, turn journals,
step markers, tombstones, checkpoints and dead letters.

A history entry, turn journal or checkpoint that does not fit an entity is refused with a
:class:`~memory_core.errors.ValidationError` (a permanent error) naming the field, so the turn is set
aside with that reason and nothing is half-written or silently cut. A dead letter is never refused:
its body is cut to fit and marked (:func:`dead_letter_entity`), and a cut body is never replayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import UpdateMode

from memory_core.adapters.azure.table_client import Op
from memory_core.adapters.azure.table_entities import (
    MAX_TRANSACTION_BYTES,
    MAX_TRANSACTION_OPS,
    OP_OVERHEAD,
    check_entity,
    fits,
    get_text,
    put_text,
    request_bytes,
    transaction_bytes,
)
from memory_core.adapters.azure.table_keys import (
    CHECKPOINT_PARTITION,
    COUNTER,
    DEAD_LETTER_PARTITION,
    TOMBSTONE_PARTITION,
    entry_key,
    journal_key,
    safe_key,
    step_key,
    step_of,
)
from memory_core.adapters.history_codec import (
    NO_CANDIDATES,
    NO_EXTRACTION,
    candidates_json,
    entry_fields,
    entry_from_fields,
    iso_time,
    journal_from_fields,
)
from memory_core.domain.messages import HistoryEntry
from memory_core.domain.records import Scope
from memory_core.errors import ValidationError
from memory_core.ports import DeadLetter, TurnJournal, TurnStart

__all__ = [
    "MAX_DEAD_LETTER_BODY",
    "RecordedDeadLetter",
    "append_ops",
    "checkpoint_entity",
    "counter_op",
    "dead_letter_entity",
    "empty_journal_entity",
    "entry_batches",
    "entry_entity",
    "entry_from_entity",
    "journal_entity",
    "journal_from_entity",
    "names_scope",
    "recorded_dead_letter",
    "step_ops",
    "tombstone_entity",
]

#: Largest poison message body considered for a dead letter (a Service Bus Standard message is at
#: most 256 KiB); what does not fit the entity budget is cut (see :func:`dead_letter_entity`).
MAX_DEAD_LETTER_BODY = 256 * 1024


# -- entries and the counter ---------------------------------------------------------------------
def entry_entity(
    pk: str, seq: int, entry: HistoryEntry, turn_id: str | None, step: int | None, position: int
) -> dict[str, Any]:
    """The entity of the ``seq``-th entry of a scope (``turn_id`` and ``step``: the turn step it records).

    Raises:
        ValidationError: A scope id is not one, or the entry does not fit an entity.
    """
    fields = entry_fields(entry)
    before, after, at = fields.pop("before"), fields.pop("after"), fields.pop("at")
    entity: dict[str, Any] = {
        "PartitionKey": pk,
        "RowKey": entry_key(seq),
        "seq": seq,
        **fields,
        "position": position,
        "at": at,
    }
    if turn_id is not None:
        entity["turn_id"] = turn_id
    if step is not None:
        entity["step"] = step
    put_text(entity, "before", before)
    put_text(entity, "after", after)
    check_entity(entity, f"history entry of memory {entry.memory_id!r}")
    return entity


def entry_from_entity(entity: Any) -> HistoryEntry:
    """The entry an :func:`entry_entity` holds."""
    return entry_from_fields(
        {**entity, "before": get_text(entity, "before"), "after": get_text(entity, "after")}
    )


def _counter_entity(pk: str, seq: int = 0) -> dict[str, Any]:
    return {"PartitionKey": pk, "RowKey": COUNTER, "seq": seq}


def counter_op(pk: str, counter: Any | None, seq: int) -> Op:
    """The operation that moves a scope's counter (as read: ``counter``) to ``seq``: created when there
    was none, else replaced if its ETag is unchanged."""
    entity = _counter_entity(pk, seq)
    if counter is None:
        return ("create", entity)
    return (
        "update",
        entity,
        {
            "mode": UpdateMode.REPLACE,
            "etag": counter.metadata["etag"],
            "match_condition": MatchConditions.IfNotModified,
        },
    )


def entry_batches(pk: str, entries: list[HistoryEntry]) -> Iterable[list[HistoryEntry]]:
    """Entries in transactions of at most 99 (the counter is the 100th) within the payload limit."""
    batch: list[HistoryEntry] = []
    room = MAX_TRANSACTION_BYTES - transaction_bytes([_counter_entity(pk)])
    size = 0
    for entry in entries:
        entity = entry_entity(pk, 0, entry, entry.turn_id, None, 0)
        entity_size = request_bytes(entity) + OP_OVERHEAD
        if batch and (len(batch) >= MAX_TRANSACTION_OPS - 1 or size + entity_size > room):
            yield batch
            batch, size = [], 0
        batch.append(entry)
        size += entity_size
    if batch:
        yield batch


def append_ops(pk: str, entries: Sequence[HistoryEntry], first: int) -> list[Op]:
    """The entries of one :func:`entry_batches` batch (numbered from ``first``), outside any turn step."""
    return [
        ("create", entry_entity(pk, first + position, entry, entry.turn_id, None, position))
        for position, entry in enumerate(entries)
    ]


def step_ops(pk: str, turn_id: str, step: int, entries: Sequence[HistoryEntry], first: int) -> list[Op]:
    """The step marker and the entries of one turn step (numbered from ``first``), as one transaction.

    Raises:
        ValidationError: The transaction (counter included) would exceed :data:`MAX_TRANSACTION_BYTES`:
            one step is one transaction and cannot be split.
    """
    marker = {"PartitionKey": pk, "RowKey": step_key(turn_id, step), "turn_id": turn_id, "step": step}
    ops: list[Op] = [("create", marker)]
    ops.extend(
        ("create", entry_entity(pk, first + position, entry, turn_id, step, position))
        for position, entry in enumerate(entries)
    )
    payload = transaction_bytes([_counter_entity(pk), *(op[1] for op in ops)])
    if payload > MAX_TRANSACTION_BYTES:
        raise ValidationError(
            "entries",
            f"step {step} of turn {turn_id!r} makes a transaction of {payload:,} bytes; "
            f"one holds at most {MAX_TRANSACTION_BYTES:,}",
        )
    return ops


# -- turn journals, tombstones, checkpoints ------------------------------------------------------
def journal_entity(pk: str, start: TurnStart) -> dict[str, Any]:
    """The journal a turn's first attempt records.

    Raises:
        ValidationError: The journal does not fit an entity.
    """
    entity: dict[str, Any] = {
        "PartitionKey": pk,
        "RowKey": journal_key(start.turn_id),
        "extraction_path": start.extraction_path,
        "started_at": iso_time(start.at),
    }
    if start.fallback_reason is not None:
        entity["fallback_reason"] = start.fallback_reason
    put_text(entity, "candidates", candidates_json(start.candidates))
    check_entity(entity, f"journal of turn {start.turn_id!r}")
    return entity


def empty_journal_entity(pk: str, turn_id: str, stamp: str) -> dict[str, Any]:
    """The journal of a turn marked processed (at ``stamp``) that never began."""
    entity: dict[str, Any] = {
        "PartitionKey": pk,
        "RowKey": journal_key(turn_id),
        "extraction_path": NO_EXTRACTION,
        "started_at": stamp,
        "processed_at": stamp,
    }
    put_text(entity, "candidates", NO_CANDIDATES)
    return entity


def journal_from_entity(scope: Scope, turn_id: str, entity: Any, step_rows: Iterable[Any]) -> TurnJournal:
    """The journal an entity holds, with the steps its markers (``step_rows``) record."""
    fields = {**entity, "candidates": get_text(entity, "candidates") or NO_CANDIDATES}
    return journal_from_fields(scope, turn_id, fields, (step_of(row["RowKey"]) for row in step_rows))


def tombstone_entity(
    rk: str, user_id: str, agent_id: str | None, at: datetime, *, settled: bool = False
) -> dict[str, Any]:
    """The first tombstone of a user (``agent_id`` ``None``) or a scope: its purge under way
    (``settled_at`` empty), or over (``settled``)."""
    return {
        "PartitionKey": TOMBSTONE_PARTITION,
        "RowKey": rk,
        "user_id": user_id,
        "agent_id": agent_id or "",
        "purged_at": iso_time(at),
        "settled_at": iso_time(at) if settled else "",
    }


def checkpoint_entity(name: str, value: str) -> dict[str, Any]:
    """A saved position.

    Raises:
        ValidationError: The value does not fit an entity.
    """
    entity: dict[str, Any] = {"PartitionKey": CHECKPOINT_PARTITION, "RowKey": safe_key(name)}
    put_text(entity, "value", value)
    check_entity(entity, f"checkpoint {name!r}")
    return entity


# -- dead letters --------------------------------------------------------------------------------
class RecordedDeadLetter(dict[str, Any]):
    """A poison message as recorded: ``message_id``, ``session_id``, ``reason``, ``description``,
    ``delivery_count``, ``enqueued_time``, ``recorded_at``, ``body`` (text, possibly cut),
    ``body_bytes`` (the message's length), ``body_complete`` (``body`` is the whole message, as
    UTF-8) and ``etag`` (of the record, for
    :meth:`~memory_core.adapters.azure.table_history.AzureTableHistoryStore.delete_dead_letter`)."""


def dead_letter_entity(letter: DeadLetter) -> tuple[dict[str, Any], int | None]:
    """The record of a poison message, and the characters its body was cut to (``None``: not cut to fit).

    The body is kept as text. A body that is not valid UTF-8 is kept with replacement characters
    (``body_utf8`` false); one longer than :data:`MAX_DEAD_LETTER_BODY` bytes, or whose text does not
    fit the entity budget (:func:`~memory_core.adapters.azure.table_entities.fits`), is cut at a
    character boundary and marked ``body_truncated``, its full length kept in ``body_bytes``.
    """
    raw = letter.body
    text = raw[:MAX_DEAD_LETTER_BODY].decode("utf-8", errors="replace")
    utf8 = text.encode("utf-8") == raw[:MAX_DEAD_LETTER_BODY]
    entity = _dead_letter_entity(letter, utf8, text, len(raw) > MAX_DEAD_LETTER_BODY)
    if fits(entity):
        return entity, None
    low, high = 0, len(text)  # the longest prefix that fits (escapes make JSON up to 6x the text)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(_dead_letter_entity(letter, utf8, text[:middle], True)):
            low = middle
        else:
            high = middle - 1
    return _dead_letter_entity(letter, utf8, text[:low], True), low


def _dead_letter_entity(letter: DeadLetter, utf8: bool, body: str, truncated: bool) -> dict[str, Any]:
    entity: dict[str, Any] = {
        "PartitionKey": DEAD_LETTER_PARTITION,
        "RowKey": safe_key(letter.message_id),
        "message_id": letter.message_id,
        "session_id": letter.session_id or "",
        "reason": letter.reason,
        "description": letter.description[:8000],
        "delivery_count": letter.delivery_count if letter.delivery_count is not None else -1,
        "enqueued_time": iso_time(letter.enqueued_time) if letter.enqueued_time else "",
        "recorded_at": iso_time(letter.at),
        "body_bytes": len(letter.body),
        "body_utf8": utf8,
        "body_truncated": truncated,
    }
    put_text(entity, "body", body)
    return entity


def recorded_dead_letter(row: Any) -> RecordedDeadLetter:
    """The poison message a :func:`dead_letter_entity` holds, whole or not (``body_complete``)."""
    body = get_text(row, "body")
    length = int(row.get("body_bytes", -1))
    if "body_truncated" in row:
        complete = not row["body_truncated"] and bool(row.get("body_utf8"))
    else:  # recorded before the flags: whole when the text is as long as the message was
        complete = body is not None and "\ufffd" not in body and len(body.encode("utf-8")) == length
    return RecordedDeadLetter(
        message_id=row["message_id"],
        session_id=row.get("session_id") or None,
        reason=row["reason"],
        description=row["description"],
        delivery_count=row.get("delivery_count"),
        enqueued_time=row.get("enqueued_time") or None,
        recorded_at=row["recorded_at"],
        body=body,
        body_bytes=length,
        body_complete=complete,
        etag=getattr(row, "metadata", {}).get("etag"),
    )


def names_scope(entity: Any, user_id: str, agent_id: str | None) -> bool:
    """Whether the body of a recorded poison message is a JSON object naming ``user_id`` (and
    ``agent_id``)."""
    try:
        data = json.loads(get_text(entity, "body") or "")
    except ValueError:
        return False
    return (
        isinstance(data, dict)
        and data.get("user_id") == user_id
        and (agent_id is None or data.get("agent_id") == agent_id)
    )
