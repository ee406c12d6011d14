"""The decision history and turn journal in Azure Table Storage (the serverless :class:`HistoryStore`).

One table (``memoryhistory`` by default, created by the Bicep; created on first use when missing,
for Azurite). Every scope is one partition (``PartitionKey = "{user_id}|{agent_id}"``; ``|`` is not a
scope-id character, so partitions never collide and a user's partitions form one key range). Row
keys keep order and make replays idempotent:

=====================================  ==============================================================
``c``                                  the scope's entry counter (``seq``), updated with its ETag
``e|{seq:016d}``                       one history entry; ``seq`` orders entries oldest first
``s|{turn_id}|{step:06d}``             "candidate ``step`` of the turn is recorded"
``j|{turn_id}``                        the turn journal: candidates, extraction path, processed time
=====================================  ==============================================================

:meth:`AzureTableHistoryStore.record_step` writes the step marker, its entries and the advanced
counter in one entity-group transaction (same partition): a redelivered step fails on the existing
marker and stores nothing; two writers racing for the counter fail on its ETag and the loser tries
again. Long JSON (candidates, before/after records) is split over several string properties (a
property holds at most 64 KiB).

Size budget. The service counts an entity at 2 bytes a UTF-16 code unit (an emoji is two units)
plus per-property overhead (:func:`entity_bytes`), at most 1 MiB; a transaction's payload is at most
4 MiB. Every entity is checked before it is written (:func:`check_entity`; its JSON is held to 1 MiB
too, which Azurite enforces), and so is every transaction. A history entry, turn journal or checkpoint
that does not fit is refused with a :class:`~memory_core.errors.ValidationError` (a permanent error)
naming the field, so the turn is set aside with that reason and nothing is half-written or silently
cut. A dead letter is never refused: its body is cut to fit and marked (:meth:`record_dead_letter`),
and a cut body is never replayed.

Two more partitions serve the Functions host: ``~deadletter`` (poison queue messages with the reason
they were set aside; see ``function_app.py``) and ``~checkpoint`` (where the nightly forgetting job
resumes). A third, ``~tombstone``, keeps when a user (row key ``{user_id}|*``) or a scope (``{user_id}|{agent_id}``)
was purged: ids and a time, no text, recorded before the purge deletes anything and never purged
itself, so a turn or recall update dated at or before it is dropped however late it is delivered. All
three start with ``~``, which no scope id can.

Throttling, 5xx and timeouts are retried with back-off (:mod:`memory_core.adapters.azure.retry`)
and then raise :class:`~memory_core.errors.TransientError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.data.tables import UpdateMode
from azure.data.tables.aio import TableClient

from memory_core.adapters.azure.retry import RetrySettings, Sleep, call_with_retries
from memory_core.domain.messages import HistoryEntry, MemoryCandidate, MemoryEvent, session_id_for
from memory_core.domain.records import Scope
from memory_core.domain.validation import ensure_utc, validate_scope_id
from memory_core.errors import (
    ConfigurationError,
    ConflictError,
    NotFoundError,
    PermanentError,
    ValidationError,
)
from memory_core.ports import DeadLetter, TurnJournal

__all__ = [
    "DEFAULT_TABLE",
    "AzureTableHistoryStore",
    "DeadLetter",
    "partition_key",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Table name the Bicep creates.
DEFAULT_TABLE = "memoryhistory"
#: Operations of one entity-group transaction (the service's limit is 100).
MAX_TRANSACTION_OPS = 100
#: The payload of one entity-group transaction (the service's limit, and Azurite's).
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
#: One entity as the service measures it (:func:`entity_bytes`: 2 bytes a UTF-16 code unit).
MAX_ENTITY_BYTES = 1024 * 1024
#: What this store lets an entity take of :data:`MAX_ENTITY_BYTES` (1 KiB spare).
ENTITY_BUDGET = MAX_ENTITY_BYTES - 1024
#: The JSON of one entity as sent (:func:`request_bytes`). Azurite refuses an insert or update whose
#: body exceeds 1 MiB, and the SDK escapes every non-ASCII character (``\uXXXX``: 6 bytes, 12 outside
#: the BMP), so this second bound keeps the store working there too.
REQUEST_BUDGET = MAX_ENTITY_BYTES - 8 * 1024
#: Characters per string property chunk. A property holds 64 KiB = 32,768 UTF-16 code units; 16,000
#: characters are at most 32,000 units even when every one lies outside the BMP (two units each).
CHUNK_CHARS = 16_000
#: Largest poison message body considered for a dead letter (a Service Bus Standard message is at
#: most 256 KiB); what does not fit the entity budget is cut (see :meth:`record_dead_letter`).
MAX_DEAD_LETTER_BODY = 256 * 1024
#: Allowance per operation of a transaction for its MIME part headers and request line.
_OP_OVERHEAD = 2 * 1024
#: The ``Timestamp`` property the service adds to every entity (8 + 2 * 9 + 8 bytes).
_TIMESTAMP_BYTES = 34

_COUNTER = "c"
_DEAD_LETTER_PARTITION = "~deadletter"
_CHECKPOINT_PARTITION = "~checkpoint"
_TOMBSTONE_PARTITION = "~tombstone"
#: The agent part of a tombstone's row key that covers every agent of the user (not a scope-id character).
_ALL_AGENTS = "*"
_SAFE_KEY = re.compile(r"[A-Za-z0-9_.:@\-]{1,200}")
_WRITE_ATTEMPTS = 20


def partition_key(scope: Scope) -> str:
    """The partition of a scope's history."""
    return f"{scope.user_id}|{scope.agent_id}"


def _entry_key(seq: int) -> str:
    return f"e|{seq:016d}"


def _step_key(turn_id: str, step: int) -> str:
    return f"s|{turn_id}|{step:06d}"


def _journal_key(turn_id: str) -> str:
    return f"j|{turn_id}"


def _counter_entity(pk: str) -> dict[str, Any]:
    """The scope's counter as a transaction writes it (for sizing)."""
    return {"PartitionKey": pk, "RowKey": _COUNTER, "seq": 0}


def _safe_key(value: str) -> str:
    """A row key for an arbitrary id (ids with characters tables refuse are hashed)."""
    if _SAFE_KEY.fullmatch(value):
        return value
    return "h:" + hashlib.sha256(value.encode("utf-8")).hexdigest()


def _put_text(entity: dict[str, Any], name: str, text: str | None) -> None:
    """Store ``text`` as ``name_0``, ``name_1``... with the chunk count in ``name_n`` (-1: ``None``).

    Each chunk fits a string property (:data:`CHUNK_CHARS`); whether the whole entity fits is
    :func:`check_entity`'s question, asked once the entity is complete.
    """
    if text is None:
        entity[f"{name}_n"] = -1
        return
    chunks = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    entity[f"{name}_n"] = len(chunks)
    for i, chunk in enumerate(chunks):
        entity[f"{name}_{i}"] = chunk


def _utf16_units(text: str) -> int:
    """UTF-16 code units of ``text`` (a character outside the BMP, an emoji say, takes two)."""
    return len(text.encode("utf-16-le")) // 2


def _value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return 4 + 2 * _utf16_units(value)
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float | datetime):
        return 8  # Int64, Double, DateTime (an Int32 takes 4: counted as 8)
    if isinstance(value, bytes | bytearray):
        return 4 + len(value)
    if value is None:
        return 0
    return 4 + 2 * _utf16_units(str(value))


def entity_bytes(entity: dict[str, Any]) -> int:
    """The size of ``entity`` as the Table service counts it against its 1 MiB limit.

    4 bytes, plus 2 bytes a UTF-16 code unit of ``PartitionKey`` and ``RowKey``, plus for every other
    property 8 bytes, 2 bytes a code unit of its name and its value (a string: 4 bytes and 2 a code
    unit; a number or date: 8; a bool: 1), plus the ``Timestamp`` the service adds.
    """
    size = 4 + _TIMESTAMP_BYTES
    for name, value in entity.items():
        if name in ("PartitionKey", "RowKey"):
            size += 2 * _utf16_units(str(value))
        else:
            size += 8 + 2 * _utf16_units(name) + _value_bytes(value)
    return size


def request_bytes(entity: dict[str, Any]) -> int:
    """The JSON body the SDK sends for ``entity`` (``json.dumps``: non-ASCII escaped), with room for
    the ``@odata.type`` annotations of its non-string values."""
    annotations = sum(40 + len(name) for name, value in entity.items() if not isinstance(value, str))
    return len(json.dumps(entity, default=str)) + annotations


def _text_fields(entity: dict[str, Any]) -> dict[str, int]:
    """UTF-16 code units of every text stored with :func:`_put_text` (by field name) or as a plain string."""
    sizes: dict[str, int] = {}
    chunked = {name[:-2] for name in entity if name.endswith("_n")}
    for name, value in entity.items():
        if not isinstance(value, str) or name in ("PartitionKey", "RowKey"):
            continue
        base, _, index = name.rpartition("_")
        field = base if base in chunked and index.isdigit() else name
        sizes[field] = sizes.get(field, 0) + _utf16_units(value)
    return sizes


def fits(entity: dict[str, Any]) -> bool:
    """Whether ``entity`` is within :data:`ENTITY_BUDGET` and :data:`REQUEST_BUDGET`."""
    return entity_bytes(entity) <= ENTITY_BUDGET and request_bytes(entity) <= REQUEST_BUDGET


def check_entity(entity: dict[str, Any], what: str) -> None:
    """Refuse an entity over the budget, naming its largest text field.

    Raises:
        ValidationError: (a :class:`PermanentError`) the entity is larger than an entity may be.
    """
    if fits(entity):
        return
    sizes = _text_fields(entity)
    field = max(sizes, key=lambda name: sizes[name]) if sizes else "entity"
    raise ValidationError(
        field,
        f"is {sizes.get(field, 0):,} UTF-16 code units, which makes the {what} "
        f"{entity_bytes(entity):,} bytes as Azure Table storage counts them (2 bytes a code unit) and {request_bytes(entity):,} bytes of JSON; "
        f"an entity holds at most {MAX_ENTITY_BYTES:,} bytes",
    )


def _transaction_bytes(entities: Iterable[dict[str, Any]]) -> int:
    """The payload of a transaction writing ``entities`` (each JSON body and its part's headers)."""
    return sum(request_bytes(e) + _OP_OVERHEAD for e in entities) + _OP_OVERHEAD


def _get_text(entity: Any, name: str) -> str | None:
    count = int(entity.get(f"{name}_n", -1))
    if count < 0:
        return None
    return "".join(str(entity.get(f"{name}_{i}", "")) for i in range(count))


def _dump(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _load(text: str | None) -> dict[str, Any] | None:
    return None if text is None else json.loads(text)


def _time(value: datetime) -> str:
    return ensure_utc(value).isoformat()


class RecordedDeadLetter(dict[str, Any]):
    """A poison message as recorded: ``message_id``, ``session_id``, ``reason``, ``description``,
    ``delivery_count``, ``enqueued_time``, ``recorded_at``, ``body`` (text, possibly cut),
    ``body_bytes`` (the message's length), ``body_complete`` (``body`` is the whole message, as
    UTF-8) and ``etag`` (of the record, for :meth:`AzureTableHistoryStore.delete_dead_letter`)."""


class AzureTableHistoryStore:
    """History entries and turn journals in Azure Table Storage.

    Args:
        client: An ``azure.data.tables.aio.TableClient`` on the history table (built with
            ``retry_total=0``: this store retries itself).
        retry: Attempts and back-off for throttling, 5xx and timeouts.
        sleep: Awaitable sleep (tests inject a recorder).
        owned: Resources to close with the store (the client and credential it created).
    """

    def __init__(
        self,
        client: TableClient,
        *,
        retry: RetrySettings | None = None,
        sleep: Sleep | None = None,
        owned: Sequence[Any] = (),
    ) -> None:
        self._client = client
        self._retry = retry or RetrySettings()
        self._sleep = sleep
        self._owned = list(owned)
        self._table_ready = False

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        endpoint: str,
        *,
        table_name: str = DEFAULT_TABLE,
        credential: Any | None = None,
        transport: Any | None = None,
        retry: RetrySettings | None = None,
        sleep: Sleep | None = None,
        client_id: str | None = None,
    ) -> AzureTableHistoryStore:
        """A store on ``endpoint`` (``https://ACCOUNT.table.core.windows.net``) or a connection string.

        ``endpoint`` may also be ``UseDevelopmentStorage=true`` (Azurite) or another connection
        string. With an https endpoint and no ``credential`` an async ``DefaultAzureCredential`` is
        created (``client_id``: a user-assigned managed identity) and closed with the store.
        """
        if not endpoint:
            raise ConfigurationError("MEMORY_HISTORY_TABLE_ENDPOINT is not set")
        kwargs: dict[str, Any] = {"retry_total": 0}
        if transport is not None:
            kwargs["transport"] = transport
        owned: list[Any] = []
        if "=" in endpoint and not endpoint.lower().startswith("http"):
            # The SDK maps ``UseDevelopmentStorage=true`` to Azurite's published development account.
            conn = endpoint.strip().rstrip(";")
            client = TableClient.from_connection_string(conn, table_name, **kwargs)
        else:
            if not endpoint.lower().startswith(("https://", "http://")):
                raise ConfigurationError(
                    f"MEMORY_HISTORY_TABLE_ENDPOINT={endpoint!r} is neither a table endpoint URL nor a connection string"
                )
            if credential is None:
                from azure.identity.aio import DefaultAzureCredential

                credential = DefaultAzureCredential(managed_identity_client_id=client_id or None)
                owned.append(credential)
            client = TableClient(endpoint, table_name, credential=credential, **kwargs)
        owned.insert(0, client)
        return cls(client, retry=retry, sleep=sleep, owned=owned)

    # -- plumbing -------------------------------------------------------------------------------
    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        if self._sleep is None:
            return await call_with_retries(operation, call, self._retry)
        return await call_with_retries(operation, call, self._retry, self._sleep)

    async def _ensure_table(self) -> None:
        if self._table_ready:
            return
        try:
            await self._call("create history table", self._client.create_table)
        except ConflictError:
            pass  # it exists (the Bicep creates it)
        except PermanentError as exc:
            # Without the right to create tables the table must already exist; the next call says so.
            logger.debug("creating the history table was refused: %s", exc)
        self._table_ready = True

    async def _get(self, pk: str, rk: str) -> Any | None:
        await self._ensure_table()
        try:
            return await self._call("read history", lambda: self._client.get_entity(pk, rk))
        except NotFoundError:
            return None

    async def _query(
        self, operation: str, query: str, select: list[str] | None = None, **params: Any
    ) -> list[Any]:
        await self._ensure_table()

        async def run() -> list[Any]:
            pager = self._client.query_entities(query, parameters=params, select=select)
            return [entity async for entity in pager]

        return await self._call(operation, run)

    async def _transact(self, operation: str, ops: list[tuple[Any, ...]]) -> None:
        await self._ensure_table()
        await self._call(operation, lambda: self._client.submit_transaction(ops))

    def _range(self, pk: str, low: str, high: str, extra: str = "") -> tuple[str, dict[str, Any]]:
        query = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi" + extra
        return query, {"pk": pk, "lo": low, "hi": high}

    # -- entries --------------------------------------------------------------------------------
    @staticmethod
    def _entry_entity(
        pk: str, seq: int, entry: HistoryEntry, turn_id: str | None, step: int | None, position: int
    ) -> dict[str, Any]:
        entity: dict[str, Any] = {
            "PartitionKey": pk,
            "RowKey": _entry_key(seq),
            "seq": seq,
            "memory_id": entry.memory_id,
            "user_id": validate_scope_id(entry.user_id, "user_id"),
            "agent_id": validate_scope_id(entry.agent_id, "agent_id"),
            "event": MemoryEvent(entry.event).value,
            "reason": entry.reason,
            "position": position,
            "at": _time(entry.at),
        }
        if turn_id is not None:
            entity["turn_id"] = turn_id
        if step is not None:
            entity["step"] = step
        _put_text(entity, "before", _dump(entry.before))
        _put_text(entity, "after", _dump(entry.after))
        check_entity(entity, f"history entry of memory {entry.memory_id!r}")
        return entity

    @staticmethod
    def _entry(entity: Any) -> HistoryEntry:
        return HistoryEntry(
            memory_id=entity["memory_id"],
            user_id=entity["user_id"],
            agent_id=entity["agent_id"],
            event=MemoryEvent(entity["event"]),
            before=_load(_get_text(entity, "before")),
            after=_load(_get_text(entity, "after")),
            reason=entity["reason"],
            turn_id=entity.get("turn_id"),
            at=datetime.fromisoformat(entity["at"]),
        )

    async def _write_with_counter(
        self,
        operation: str,
        pk: str,
        build: Callable[[int], list[tuple[Any, ...]]],
        count: int,
        guard: Callable[[], Awaitable[bool]] | None = None,
    ) -> bool:
        """Allocate ``count`` sequence numbers and write ``build(first_seq)`` in one transaction.

        The counter's ETag makes concurrent writers of one scope take turns. ``guard`` (checked
        before each try) returns ``False`` when the write has been made already; so does a conflict
        on an entity ``build`` creates (a racing duplicate).
        """
        for _ in range(_WRITE_ATTEMPTS):
            if guard is not None and not await guard():
                return False
            counter = await self._get(pk, _COUNTER)
            first = (int(counter["seq"]) if counter is not None else 0) + 1
            counter_entity = {"PartitionKey": pk, "RowKey": _COUNTER, "seq": first + count - 1}
            if counter is None:
                counter_op: tuple[Any, ...] = ("create", counter_entity)
            else:
                counter_op = (
                    "update",
                    counter_entity,
                    {
                        "mode": UpdateMode.REPLACE,
                        "etag": counter.metadata["etag"],
                        "match_condition": MatchConditions.IfNotModified,
                    },
                )
            try:
                await self._transact(operation, [counter_op, *build(first)])
                return True
            except ConflictError:
                logger.debug("%s: the scope's counter or a marker changed; trying again", operation)
                continue
        raise PermanentError(
            f"{operation}: the history of {pk} kept changing under {_WRITE_ATTEMPTS} attempts"
        )

    # -- the port -------------------------------------------------------------------------------
    async def append(self, entries: Sequence[HistoryEntry]) -> None:
        """Append entries that belong to no turn step (grouped by scope, in transactions of ≤ 99)."""
        by_scope: dict[str, list[HistoryEntry]] = {}
        for entry in entries:
            scope = Scope.of(entry.user_id, entry.agent_id)
            by_scope.setdefault(partition_key(scope), []).append(entry)
        for pk, items in by_scope.items():
            for batch in self._batches(pk, items):

                def build(
                    first: int, pk: str = pk, batch: list[HistoryEntry] = batch
                ) -> list[tuple[Any, ...]]:
                    return [
                        ("create", self._entry_entity(pk, first + i, e, e.turn_id, None, i))
                        for i, e in enumerate(batch)
                    ]

                await self._write_with_counter("append history", pk, build, len(batch))

    def _batches(self, pk: str, items: list[HistoryEntry]) -> Iterable[list[HistoryEntry]]:
        """Entries in transactions of at most 99 (the counter is the 100th) within the payload limit."""
        batch: list[HistoryEntry] = []
        room = MAX_TRANSACTION_BYTES - _transaction_bytes([_counter_entity(pk)])
        size = 0
        for entry in items:
            entity = self._entry_entity(pk, 0, entry, entry.turn_id, None, 0)
            entity_size = request_bytes(entity) + _OP_OVERHEAD
            if batch and (len(batch) >= MAX_TRANSACTION_OPS - 1 or size + entity_size > room):
                yield batch
                batch, size = [], 0
            batch.append(entry)
            size += entity_size
        if batch:
            yield batch

    async def begin_turn(
        self,
        scope: Scope,
        turn_id: str,
        *,
        candidates: Sequence[MemoryCandidate],
        extraction_path: str,
        fallback_reason: str | None,
        at: datetime,
    ) -> TurnJournal:
        """Record the turn's candidates unless an earlier attempt did; return what is recorded."""
        pk = partition_key(scope)
        entity: dict[str, Any] = {
            "PartitionKey": pk,
            "RowKey": _journal_key(turn_id),
            "extraction_path": extraction_path,
            "started_at": _time(at),
        }
        if fallback_reason is not None:
            entity["fallback_reason"] = fallback_reason
        _put_text(
            entity,
            "candidates",
            json.dumps([c.model_dump(mode="json") for c in candidates], ensure_ascii=False),
        )
        check_entity(entity, f"journal of turn {turn_id!r}")
        await self._ensure_table()
        with contextlib.suppress(ConflictError):  # an earlier attempt recorded its candidates: those win
            await self._call("begin turn", lambda: self._client.create_entity(entity))
        journal = await self.journal(scope, turn_id)
        if journal is None:  # pragma: no cover - purged in between
            raise NotFoundError(f"the journal of turn {turn_id!r} vanished while it was being begun")
        return journal

    async def journal(self, scope: Scope, turn_id: str) -> TurnJournal | None:
        pk = partition_key(scope)
        entity = await self._get(pk, _journal_key(turn_id))
        if entity is None:
            return None
        query, params = self._range(pk, f"s|{turn_id}|", f"s|{turn_id}}}")
        steps = await self._query("read turn steps", query, ["RowKey"], **params)
        processed = entity.get("processed_at")
        return TurnJournal(
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            turn_id=turn_id,
            candidates=tuple(
                MemoryCandidate.model_validate(c) for c in json.loads(_get_text(entity, "candidates") or "[]")
            ),
            extraction_path=entity["extraction_path"],
            fallback_reason=entity.get("fallback_reason"),
            started_at=datetime.fromisoformat(entity["started_at"]),
            completed_steps=frozenset(int(s["RowKey"].rsplit("|", 1)[1]) for s in steps),
            processed_at=None if not processed else datetime.fromisoformat(processed),
        )

    async def record_step(
        self, scope: Scope, turn_id: str, step: int, entries: Sequence[HistoryEntry]
    ) -> bool:
        """Store the entries of one candidate and mark the step done, in one transaction."""
        if len(entries) > MAX_TRANSACTION_OPS - 2:
            raise ValidationError("entries", f"a step records at most {MAX_TRANSACTION_OPS - 2} entries")
        pk = partition_key(scope)
        marker = _step_key(turn_id, step)

        async def fresh() -> bool:
            return await self._get(pk, marker) is None

        def build(first: int) -> list[tuple[Any, ...]]:
            ops: list[tuple[Any, ...]] = [
                ("create", {"PartitionKey": pk, "RowKey": marker, "turn_id": turn_id, "step": step})
            ]
            ops.extend(
                ("create", self._entry_entity(pk, first + position, entry, turn_id, step, position))
                for position, entry in enumerate(entries)
            )
            payload = _transaction_bytes([_counter_entity(pk), *(op[1] for op in ops)])
            if payload > MAX_TRANSACTION_BYTES:  # one step is one transaction: it cannot be split
                raise ValidationError(
                    "entries",
                    f"step {step} of turn {turn_id!r} makes a transaction of {payload:,} bytes; "
                    f"one holds at most {MAX_TRANSACTION_BYTES:,}",
                )
            return ops

        return await self._write_with_counter("record step", pk, build, len(entries), guard=fresh)

    async def for_memory(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        query, params = self._range(partition_key(scope), "e|", "e}", " and memory_id eq @memory")
        rows = await self._query("read memory history", query, memory=memory_id, **params)
        return [self._entry(r) for r in sorted(rows, key=lambda r: int(r["seq"]))]

    async def for_turn(self, scope: Scope, turn_id: str) -> list[HistoryEntry]:
        query, params = self._range(partition_key(scope), "e|", "e}", " and turn_id eq @turn")
        rows = await self._query("read turn history", query, turn=turn_id, **params)
        rows.sort(key=lambda r: (int(r.get("step", -1)), int(r.get("position", 0)), int(r["seq"])))
        return [self._entry(r) for r in rows]

    async def for_scope(self, scope: Scope) -> list[HistoryEntry]:
        """Every entry of a scope, oldest first (export)."""
        query, params = self._range(partition_key(scope), "e|", "e}")
        rows = await self._query("read scope history", query, **params)
        return [self._entry(r) for r in sorted(rows, key=lambda r: int(r["seq"]))]

    async def turn_processed(self, scope: Scope, turn_id: str) -> bool:
        entity = await self._get(partition_key(scope), _journal_key(turn_id))
        return entity is not None and bool(entity.get("processed_at"))

    async def mark_turn_processed(self, scope: Scope, turn_id: str, at: datetime) -> None:
        """Mark a turn done; a turn that never began gets an empty journal; the first time stays."""
        pk, rk, stamp = partition_key(scope), _journal_key(turn_id), _time(at)
        for _ in range(_WRITE_ATTEMPTS):
            entity = await self._get(pk, rk)
            try:
                if entity is None:
                    new: dict[str, Any] = {
                        "PartitionKey": pk,
                        "RowKey": rk,
                        "extraction_path": "none",
                        "started_at": stamp,
                        "processed_at": stamp,
                    }
                    _put_text(new, "candidates", "[]")
                    await self._call("mark turn processed", lambda new=new: self._client.create_entity(new))  # type: ignore[misc]
                    return
                if entity.get("processed_at"):
                    return
                change = {"PartitionKey": pk, "RowKey": rk, "processed_at": stamp}
                etag = entity.metadata["etag"]
                await self._call(
                    "mark turn processed",
                    lambda change=change, etag=etag: self._client.update_entity(  # type: ignore[misc]
                        change,
                        mode=UpdateMode.MERGE,
                        etag=etag,
                        match_condition=MatchConditions.IfNotModified,
                    ),
                )
                return
            except ConflictError:
                continue  # someone else created or marked it: read again
        raise PermanentError(f"marking turn {turn_id!r} processed kept conflicting")

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Remove a user's (or one agent's) history partitions (entries, step markers, journals, counter)
        and set-aside messages; returns the entries removed. Tombstones stay."""
        validate_scope_id(user_id, "user_id")
        if agent_id is not None:
            pk = partition_key(Scope.of(user_id, agent_id))
            rows = await self._query(
                "list history to purge", "PartitionKey eq @pk", ["PartitionKey", "RowKey"], pk=pk
            )
        else:
            rows = await self._query(
                "list history to purge",
                "PartitionKey ge @lo and PartitionKey lt @hi",
                ["PartitionKey", "RowKey"],
                lo=f"{user_id}|",
                hi=f"{user_id}}}",
            )
        removed = sum(1 for r in rows if str(r["RowKey"]).startswith("e|"))
        by_partition: dict[str, list[str]] = {}
        for row in rows:
            by_partition.setdefault(row["PartitionKey"], []).append(row["RowKey"])
        for pk, keys in by_partition.items():
            for start in range(0, len(keys), MAX_TRANSACTION_OPS):
                chunk = keys[start : start + MAX_TRANSACTION_OPS]
                ops: list[tuple[Any, ...]] = [("delete", {"PartitionKey": pk, "RowKey": k}) for k in chunk]
                try:
                    await self._transact("purge history", ops)
                except NotFoundError:  # something vanished meanwhile: delete one by one
                    for key in chunk:
                        await self._delete_quietly(pk, key)
        await self._purge_dead_letters(user_id, agent_id, {pk.split("|", 1)[1] for pk in by_partition})
        return removed

    async def _purge_dead_letters(self, user_id: str, agent_id: str | None, agents: set[str]) -> None:
        """Remove set-aside messages of the purged scopes: found by their queue session id, or, for a
        hashed session (long ids) or none, by the user (and agent) their JSON body names."""
        if agent_id is not None:
            agents = {agent_id}
        sessions = {session_id_for(Scope.of(user_id, agent)) for agent in agents}
        rows = await self._query(
            "list dead letters to purge",
            "PartitionKey eq @pk",
            ["PartitionKey", "RowKey", "session_id"],
            pk=_DEAD_LETTER_PARTITION,
        )
        for row in rows:
            session = str(row.get("session_id") or "")
            ours = session in sessions or (agent_id is None and session.startswith(f"{user_id}|"))
            if not ours and (not session or session.startswith("h:")):
                ours = await self._dead_letter_names(row["RowKey"], user_id, agent_id)
            if ours:
                await self._delete_quietly(_DEAD_LETTER_PARTITION, row["RowKey"])

    async def _dead_letter_names(self, rk: str, user_id: str, agent_id: str | None) -> bool:
        """Whether the body of a set-aside message is a JSON object naming ``user_id`` (and ``agent_id``)."""
        entity = await self._get(_DEAD_LETTER_PARTITION, rk)
        if entity is None:
            return False
        try:
            data = json.loads(_get_text(entity, "body") or "")
        except ValueError:
            return False
        return (
            isinstance(data, dict)
            and data.get("user_id") == user_id
            and (agent_id is None or data.get("agent_id") == agent_id)
        )

    # -- tombstones (a purge that holds) ---------------------------------------------------------
    async def record_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> datetime:
        """Record that a user (``agent_id`` ``None``) or a scope was purged at ``at`` (only moves
        forward; ETag-checked, so two purges racing keep the later time)."""
        validate_scope_id(user_id, "user_id")
        agent = _ALL_AGENTS if agent_id is None else validate_scope_id(agent_id, "agent_id")
        rk, at = f"{user_id}|{agent}", ensure_utc(at)
        for _ in range(_WRITE_ATTEMPTS):
            entity = await self._get(_TOMBSTONE_PARTITION, rk)
            try:
                if entity is None:
                    new = {
                        "PartitionKey": _TOMBSTONE_PARTITION,
                        "RowKey": rk,
                        "user_id": user_id,
                        "agent_id": agent_id or "",
                        "purged_at": _time(at),
                    }
                    await self._call("record tombstone", lambda new=new: self._client.create_entity(new))  # type: ignore[misc]
                    return at
                kept = datetime.fromisoformat(entity["purged_at"])
                if kept >= at:
                    return kept
                change = {"PartitionKey": _TOMBSTONE_PARTITION, "RowKey": rk, "purged_at": _time(at)}
                etag = entity.metadata["etag"]
                await self._call(
                    "record tombstone",
                    lambda change=change, etag=etag: self._client.update_entity(  # type: ignore[misc]
                        change,
                        mode=UpdateMode.MERGE,
                        etag=etag,
                        match_condition=MatchConditions.IfNotModified,
                    ),
                )
                return at
            except ConflictError:
                continue  # another purge wrote it meanwhile: read again
        raise PermanentError(f"recording the purge of {rk!r} kept conflicting")

    async def tombstone(self, scope: Scope) -> datetime | None:
        """When ``scope`` was last purged (its own tombstone or its user's, the later), or ``None``:
        one query over the user's tombstones."""
        query, params = self._range(_TOMBSTONE_PARTITION, f"{scope.user_id}|", f"{scope.user_id}}}")
        rows = await self._query("read tombstones", query, ["RowKey", "purged_at"], **params)
        wanted = {f"{scope.user_id}|{_ALL_AGENTS}", f"{scope.user_id}|{scope.agent_id}"}
        return max(
            (datetime.fromisoformat(r["purged_at"]) for r in rows if r["RowKey"] in wanted), default=None
        )

    async def _delete_quietly(self, pk: str, rk: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self._call("purge history", lambda: self._client.delete_entity(pk, rk))

    # -- dead letters and checkpoints (Functions host) ------------------------------------------
    async def record_dead_letter(self, letter: DeadLetter) -> None:
        """Keep a poison message with the reason it was set aside (recording it twice keeps one).

        Recording never fails for size: a poison message is kept with its reason whatever it holds.
        The body is kept as text. A body that is not valid UTF-8 is kept with replacement characters
        (``body_utf8`` false); one longer than :data:`MAX_DEAD_LETTER_BODY` bytes, or whose text does
        not fit the entity budget (:func:`fits`), is cut at a character boundary and marked
        ``body_truncated``, its full length kept in ``body_bytes``. Either way the record is no longer
        the message: :meth:`dead_letters` reports it with ``body_complete`` false and it is never
        replayed (``memory-core deadletters``).
        """
        raw = letter.body
        text = raw[:MAX_DEAD_LETTER_BODY].decode("utf-8", errors="replace")
        utf8 = text.encode("utf-8") == raw[:MAX_DEAD_LETTER_BODY]

        def build(body: str, truncated: bool) -> dict[str, Any]:
            entity: dict[str, Any] = {
                "PartitionKey": _DEAD_LETTER_PARTITION,
                "RowKey": _safe_key(letter.message_id),
                "message_id": letter.message_id,
                "session_id": letter.session_id or "",
                "reason": letter.reason,
                "description": letter.description[:8000],
                "delivery_count": letter.delivery_count if letter.delivery_count is not None else -1,
                "enqueued_time": _time(letter.enqueued_time) if letter.enqueued_time else "",
                "recorded_at": _time(letter.at),
                "body_bytes": len(raw),
                "body_utf8": utf8,
                "body_truncated": truncated,
            }
            _put_text(entity, "body", body)
            return entity

        entity = build(text, len(raw) > MAX_DEAD_LETTER_BODY)
        if not fits(entity):  # the longest prefix that fits (escapes make JSON up to 6x the text)
            low, high = 0, len(text)
            while low < high:
                middle = (low + high + 1) // 2
                if fits(build(text[:middle], True)):
                    low = middle
                else:
                    high = middle - 1
            entity = build(text[:low], True)
            logger.warning(
                "dead letter %s: its body (%s bytes) is cut to %s characters to fit a table entity",
                letter.message_id,
                len(raw),
                low,
            )
        await self._ensure_table()
        await self._call(
            "record dead letter", lambda: self._client.upsert_entity(entity, mode=UpdateMode.REPLACE)
        )

    async def dead_letters(self) -> list[RecordedDeadLetter]:
        """Every recorded poison message, by message id."""
        rows = await self._query("list dead letters", "PartitionKey eq @pk", pk=_DEAD_LETTER_PARTITION)
        return [self._dead_letter(r) for r in rows]

    @staticmethod
    def _dead_letter(row: Any) -> RecordedDeadLetter:
        body = _get_text(row, "body")
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

    async def delete_dead_letter(self, message_id: str, *, etag: str | None = None) -> bool:
        """Remove the record of a set-aside message (once it has been sent again).

        Args:
            message_id: The message id it was recorded under.
            etag: The record's ETag as read (:meth:`dead_letters`): the record is removed only if it
                has not changed since, so a newer record of the same message (set aside again after a
                replay) is kept.

        Returns:
            ``True`` when the record is gone (removed now, or there was none); ``False`` when it
            changed since ``etag`` and was kept.
        """
        await self._ensure_table()
        condition = MatchConditions.IfNotModified if etag else MatchConditions.Unconditionally
        try:
            await self._call(
                "delete dead letter",
                lambda: self._client.delete_entity(
                    _DEAD_LETTER_PARTITION, _safe_key(message_id), etag=etag, match_condition=condition
                ),
            )
        except NotFoundError:
            return True
        except ConflictError:
            return False
        return True

    async def get_checkpoint(self, name: str) -> str | None:
        """A saved position (for example the nightly forgetting cursor), or ``None``."""
        entity = await self._get(_CHECKPOINT_PARTITION, _safe_key(name))
        return None if entity is None else _get_text(entity, "value")

    async def set_checkpoint(self, name: str, value: str | None) -> None:
        """Save a position; ``None`` removes it."""
        rk = _safe_key(name)
        if value is None:
            await self._ensure_table()
            await self._delete_quietly(_CHECKPOINT_PARTITION, rk)
            return
        entity: dict[str, Any] = {"PartitionKey": _CHECKPOINT_PARTITION, "RowKey": rk}
        _put_text(entity, "value", value)
        check_entity(entity, f"checkpoint {name!r}")
        await self._ensure_table()
        await self._call(
            "save checkpoint", lambda: self._client.upsert_entity(entity, mode=UpdateMode.REPLACE)
        )

    async def close(self) -> None:
        """Close the client and credential the store created."""
        owned, self._owned = self._owned, []
        for resource in owned:
            try:
                await resource.close()
            except Exception as exc:  # close the rest regardless
                logger.warning("closing %s failed: %s", type(resource).__name__, exc)

    async def __aenter__(self) -> AzureTableHistoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
