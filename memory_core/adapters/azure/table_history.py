"""The decision history and turn journal in Azure Table Storage (the serverless :class:`HistoryStore`),
with the Functions host's dead letters, checkpoints and purge tombstones.

One table (``memoryhistory`` by default, created by the Bicep; created on first use when missing, for
Azurite), laid out as :mod:`memory_core.adapters.azure.table_keys` says.
:meth:`AzureTableHistoryStore.record_step` writes the step marker, its entries and the advanced counter
in one entity-group transaction (same partition): a redelivered step fails on the existing marker and
stores nothing; two writers racing for the counter fail on its ETag and the loser tries again. Every
entity and transaction is held to the service's limits (:mod:`memory_core.adapters.azure.table_entities`).

Throttling, 5xx and timeouts are retried with back-off (:mod:`memory_core.adapters.azure.retry`)
and then raise :class:`~memory_core.errors.TransientError`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from azure.core import MatchConditions

from memory_core.adapters.azure.retry import RetrySettings, Sleep
from memory_core.adapters.azure.table_client import WRITE_ATTEMPTS, Op, RetryingTable, open_table_client
from memory_core.adapters.azure.table_entities import MAX_TRANSACTION_OPS, get_text, put_text
from memory_core.adapters.azure.table_keys import (
    ALL_AGENTS,
    CHECKPOINT_PARTITION,
    COUNTER,
    DEAD_LETTER_PARTITION,
    ENTRIES,
    TOMBSTONE_PARTITION,
    journal_key,
    partition_key,
    safe_key,
    scope_of_partition,
    step_key,
    steps_of,
    tombstone_key,
    user_partitions,
)
from memory_core.adapters.azure.table_records import (
    RecordedDeadLetter,
    append_ops,
    checkpoint_entity,
    counter_op,
    dead_letter_entity,
    empty_journal_entity,
    entry_batches,
    entry_entity,
    entry_from_entity,
    journal_entity,
    journal_from_entity,
    names_scope,
    recorded_dead_letter,
    step_ops,
    tombstone_entity,
)
from memory_core.adapters.history_codec import NO_CANDIDATES, iso_time, rewritten_candidates
from memory_core.domain.messages import HistoryEntry, MemoryCandidate, session_id_for
from memory_core.domain.records import Scope
from memory_core.domain.validation import ensure_utc, validate_scope_id
from memory_core.errors import (
    ConflictError,
    NotFoundError,
    PermanentError,
    ValidationError,
)
from memory_core.ports import DeadLetter, TurnJournal, TurnStart

__all__ = ["DEFAULT_TABLE", "AzureTableHistoryStore"]

logger = logging.getLogger(__name__)

#: Table name the Bicep creates.
DEFAULT_TABLE = "memoryhistory"


class AzureTableHistoryStore(RetryingTable):
    """History entries and turn journals in Azure Table Storage.

    Args:
        client: An ``azure.data.tables.aio.TableClient`` on the history table (built with
            ``retry_total=0``: this store retries itself).
        retry: Attempts and back-off for throttling, 5xx and timeouts.
        sleep: Awaitable sleep (tests inject a recorder).
        owned: Resources to close with the store (the client and credential it created).
    """

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
        client, owned = open_table_client(endpoint, table_name, credential, transport, client_id)
        return cls(client, retry=retry, sleep=sleep, owned=owned)

    async def _write_with_counter(
        self,
        operation: str,
        pk: str,
        build: Callable[[int], list[Op]],
        count: int,
        guard: Callable[[], Awaitable[bool]] | None = None,
    ) -> bool:
        """Allocate ``count`` sequence numbers and write ``build(first_seq)`` in one transaction.

        The counter's ETag makes concurrent writers of one scope take turns. ``guard`` (checked
        before each try) returns ``False`` when the write has been made already; so does a conflict
        on an entity ``build`` creates (a racing duplicate).
        """
        for _ in range(WRITE_ATTEMPTS):
            if guard is not None and not await guard():
                return False
            counter = await self._get(pk, COUNTER)
            first = (int(counter["seq"]) if counter is not None else 0) + 1
            try:
                await self._transact(operation, [counter_op(pk, counter, first + count - 1), *build(first)])
                return True
            except ConflictError:
                logger.debug("%s: the scope's counter or a marker changed; trying again", operation)
                continue
        raise PermanentError(
            f"{operation}: the history of {pk} kept changing under {WRITE_ATTEMPTS} attempts"
        )

    # -- entries and turn journals (the port) ---------------------------------------------------
    async def append(self, entries: Sequence[HistoryEntry]) -> None:
        """Append entries that belong to no turn step (grouped by scope, in transactions of ≤ 99)."""
        by_scope: dict[str, list[HistoryEntry]] = {}
        for entry in entries:
            scope = Scope.of(entry.user_id, entry.agent_id)
            by_scope.setdefault(partition_key(scope), []).append(entry)
        for pk, items in by_scope.items():
            for batch in entry_batches(pk, items):
                await self._write_with_counter(
                    "append history", pk, partial(append_ops, pk, batch), len(batch)
                )

    async def begin_turn(self, start: TurnStart) -> TurnJournal:
        """Record the turn's start unless an earlier attempt did; return what is recorded."""
        entity = journal_entity(partition_key(start.scope), start)
        await self._ensure_table()
        with contextlib.suppress(ConflictError):  # an earlier attempt recorded its candidates: those win
            await self._call("begin turn", lambda: self._client.create_entity(entity))
        journal = await self.journal(start.scope, start.turn_id)
        if journal is None:  # pragma: no cover - purged in between
            raise NotFoundError(f"the journal of turn {start.turn_id!r} vanished while it was being begun")
        return journal

    async def journal(self, scope: Scope, turn_id: str) -> TurnJournal | None:
        pk = partition_key(scope)
        entity = await self._get(pk, journal_key(turn_id))
        if entity is None:
            return None
        query, params = self._range(pk, *steps_of(turn_id))
        steps = await self._query("read turn steps", query, ["RowKey"], **params)
        return journal_from_entity(scope, turn_id, entity, steps)

    async def record_step(
        self, scope: Scope, turn_id: str, step: int, entries: Sequence[HistoryEntry]
    ) -> bool:
        """Store the entries of one candidate and mark the step done, in one transaction."""
        if len(entries) > MAX_TRANSACTION_OPS - 2:
            raise ValidationError("entries", f"a step records at most {MAX_TRANSACTION_OPS - 2} entries")
        pk = partition_key(scope)
        marker = step_key(turn_id, step)

        async def fresh() -> bool:
            return await self._get(pk, marker) is None

        build = partial(step_ops, pk, turn_id, step, entries)
        return await self._write_with_counter("record step", pk, build, len(entries), guard=fresh)

    async def for_memory(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        query, params = self._range(partition_key(scope), *ENTRIES, " and memory_id eq @memory")
        rows = await self._query("read memory history", query, memory=memory_id, **params)
        return [entry_from_entity(r) for r in sorted(rows, key=lambda r: int(r["seq"]))]

    async def rewrite_entries(
        self, scope: Scope, memory_ids: Sequence[str], rewrite: Callable[[HistoryEntry], HistoryEntry]
    ) -> int:
        pk, changed = partition_key(scope), 0
        for memory_id in memory_ids:
            query, params = self._range(pk, *ENTRIES, " and memory_id eq @memory")
            for row in await self._query("read memory history", query, memory=memory_id, **params):
                entry = entry_from_entity(row)
                forgotten = rewrite(entry)
                if forgotten == entry:
                    continue
                step = row.get("step")
                entity = entry_entity(
                    pk, int(row["seq"]), forgotten, row.get("turn_id"), None if step is None else int(step),
                    int(row.get("position", 0)),
                )
                await self._upsert("withhold forgotten history text", entity)
                changed += 1
        return changed

    async def rewrite_candidates(
        self, scope: Scope, turn_ids: Sequence[str], rewrite: Callable[[MemoryCandidate], MemoryCandidate]
    ) -> int:
        pk, changed = partition_key(scope), 0
        for turn_id in dict.fromkeys(turn_ids):
            entity = await self._get(pk, journal_key(turn_id))
            if entity is None:
                continue
            text = rewritten_candidates(get_text(entity, "candidates") or NO_CANDIDATES, rewrite)
            if text is None:
                continue
            fresh = {k: v for k, v in dict(entity).items() if not k.startswith("candidates_")}
            put_text(fresh, "candidates", text)
            await self._upsert("withhold forgotten journal text", fresh)
            changed += 1
        return changed

    async def for_turn(self, scope: Scope, turn_id: str) -> list[HistoryEntry]:
        query, params = self._range(partition_key(scope), *ENTRIES, " and turn_id eq @turn")
        rows = await self._query("read turn history", query, turn=turn_id, **params)
        rows.sort(key=lambda r: (int(r.get("step", -1)), int(r.get("position", 0)), int(r["seq"])))
        return [entry_from_entity(r) for r in rows]

    async def for_scope(self, scope: Scope) -> list[HistoryEntry]:
        """Every entry of a scope, oldest first (export)."""
        query, params = self._range(partition_key(scope), *ENTRIES)
        rows = await self._query("read scope history", query, **params)
        return [entry_from_entity(r) for r in sorted(rows, key=lambda r: int(r["seq"]))]

    async def turn_processed(self, scope: Scope, turn_id: str) -> bool:
        entity = await self._get(partition_key(scope), journal_key(turn_id))
        return entity is not None and bool(entity.get("processed_at"))

    async def mark_turn_processed(self, scope: Scope, turn_id: str, at: datetime) -> None:
        """Mark a turn done; a turn that never began gets an empty journal; the first time stays."""
        stamp = iso_time(at)
        await self._create_or_merge(
            "mark turn processed",
            empty_journal_entity(partition_key(scope), turn_id, stamp),
            lambda entity: None if entity.get("processed_at") else {"processed_at": stamp},
            f"marking turn {turn_id!r} processed kept conflicting",
        )

    # -- purge and tombstones -------------------------------------------------------------------
    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Remove a user's (or one agent's) history partitions (entries, step markers, journals, counter)
        and set-aside messages; returns the entries removed. Tombstones stay."""
        validate_scope_id(user_id, "user_id")
        rows = await self._history_rows(user_id, agent_id)
        removed = sum(1 for r in rows if str(r["RowKey"]).startswith(ENTRIES[0]))
        by_partition: dict[str, list[str]] = {}
        for row in rows:
            by_partition.setdefault(row["PartitionKey"], []).append(row["RowKey"])
        for pk, keys in by_partition.items():
            await self._delete_rows(pk, keys)
        await self._purge_dead_letters(user_id, agent_id, {scope_of_partition(pk)[1] for pk in by_partition})
        return removed

    async def _history_rows(self, user_id: str, agent_id: str | None) -> list[Any]:
        """The keys of every row of one scope's partition, or of all the user's partitions."""
        select = ["PartitionKey", "RowKey"]
        if agent_id is not None:
            pk = partition_key(Scope.of(user_id, agent_id))
            return await self._query("list history to purge", "PartitionKey eq @pk", select, pk=pk)
        low, high = user_partitions(user_id)
        query = "PartitionKey ge @lo and PartitionKey lt @hi"
        return await self._query("list history to purge", query, select, lo=low, hi=high)

    async def _delete_rows(self, pk: str, keys: list[str]) -> None:
        """Delete rows of one partition in transactions; one by one where something vanished meanwhile."""
        for start in range(0, len(keys), MAX_TRANSACTION_OPS):
            chunk = keys[start : start + MAX_TRANSACTION_OPS]
            try:
                await self._transact(
                    "purge history", [("delete", {"PartitionKey": pk, "RowKey": k}) for k in chunk]
                )
            except NotFoundError:
                for key in chunk:
                    await self._delete_quietly(pk, key)

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
            pk=DEAD_LETTER_PARTITION,
        )
        for row in rows:
            if await self._of_purged_scope(row, user_id, agent_id, sessions):
                await self._delete_quietly(DEAD_LETTER_PARTITION, row["RowKey"])

    async def _of_purged_scope(
        self, row: Any, user_id: str, agent_id: str | None, sessions: set[str]
    ) -> bool:
        session = str(row.get("session_id") or "")
        if session in sessions or (agent_id is None and session.startswith(f"{user_id}|")):
            return True
        if session and not session.startswith("h:"):
            return False  # the readable session of another scope
        entity = await self._get(DEAD_LETTER_PARTITION, row["RowKey"])
        return entity is not None and names_scope(entity, user_id, agent_id)

    async def record_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> datetime:
        """Record that a user (``agent_id`` ``None``) or a scope was purged at ``at`` (only moves
        forward; ETag-checked, so two purges racing keep the later time)."""
        validate_scope_id(user_id, "user_id")
        agent = ALL_AGENTS if agent_id is None else validate_scope_id(agent_id, "agent_id")
        rk, at = tombstone_key(user_id, agent), ensure_utc(at)

        def forward(entity: Any) -> dict[str, Any] | None:
            if datetime.fromisoformat(entity["purged_at"]) >= at:
                return None
            # A tombstone written before purges were settled: the purge it records is over.
            return {"purged_at": iso_time(at), "settled_at": entity.get("settled_at", entity["purged_at"])}

        kept = await self._create_or_merge(
            "record tombstone",
            tombstone_entity(rk, user_id, agent_id, at),
            forward,
            f"recording the purge of {rk!r} kept conflicting",
        )
        return at if kept is None else max(datetime.fromisoformat(kept["purged_at"]), at)

    async def settle_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> None:
        """Record that the purge of a user (``agent_id`` ``None``) or scope at ``at`` is over (only
        moves forward; ETag-checked)."""
        validate_scope_id(user_id, "user_id")
        agent = ALL_AGENTS if agent_id is None else validate_scope_id(agent_id, "agent_id")
        rk, at = tombstone_key(user_id, agent), ensure_utc(at)

        def forward(entity: Any) -> dict[str, Any] | None:
            settled = entity.get("settled_at")
            return None if settled and datetime.fromisoformat(settled) >= at else {"settled_at": iso_time(at)}

        await self._create_or_merge(
            "settle tombstone",
            tombstone_entity(rk, user_id, agent_id, at, settled=True),
            forward,
            f"settling the purge of {rk!r} kept conflicting",
        )

    async def purge_settled(self, scope: Scope) -> bool:
        """Whether every purge covering ``scope`` (its own tombstone and its user's) is over (a
        tombstone without ``settled_at``, written before purges were settled, is)."""
        query, params = self._range(TOMBSTONE_PARTITION, *user_partitions(scope.user_id))
        rows = await self._query("read tombstones", query, ["RowKey", "purged_at", "settled_at"], **params)
        wanted = {tombstone_key(scope.user_id, ALL_AGENTS), tombstone_key(scope.user_id, scope.agent_id)}
        return all(
            r.get("settled_at") is None
            or (bool(r["settled_at"]) and datetime.fromisoformat(r["settled_at"]) >= datetime.fromisoformat(r["purged_at"]))
            for r in rows
            if r["RowKey"] in wanted
        )

    async def tombstone(self, scope: Scope) -> datetime | None:
        """When ``scope`` was last purged (its own tombstone or its user's, the later), or ``None``:
        one query over the user's tombstones."""
        query, params = self._range(TOMBSTONE_PARTITION, *user_partitions(scope.user_id))
        rows = await self._query("read tombstones", query, ["RowKey", "purged_at"], **params)
        wanted = {tombstone_key(scope.user_id, ALL_AGENTS), tombstone_key(scope.user_id, scope.agent_id)}
        return max(
            (datetime.fromisoformat(r["purged_at"]) for r in rows if r["RowKey"] in wanted), default=None
        )

    # -- dead letters and checkpoints (Functions host) ------------------------------------------
    async def record_dead_letter(self, letter: DeadLetter) -> None:
        """Keep a poison message with the reason it was set aside (recording it twice keeps one).

        Recording never fails for size: a poison message is kept with its reason whatever it holds; a
        body that is not UTF-8 or does not fit is kept cut and marked
        (:func:`~memory_core.adapters.azure.table_records.dead_letter_entity`). Either way the record is
        no longer the message: :meth:`dead_letters` reports it with ``body_complete`` false and it is
        never replayed (``memory-core deadletters``).
        """
        entity, cut_to = dead_letter_entity(letter)
        if cut_to is not None:
            logger.warning(
                "dead letter %s: its body (%s bytes) is cut to %s characters to fit a table entity",
                letter.message_id,
                len(letter.body),
                cut_to,
            )
        await self._upsert("record dead letter", entity)

    async def dead_letters(self) -> list[RecordedDeadLetter]:
        """Every recorded poison message, by message id."""
        rows = await self._query("list dead letters", "PartitionKey eq @pk", pk=DEAD_LETTER_PARTITION)
        return [recorded_dead_letter(r) for r in rows]

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
                    DEAD_LETTER_PARTITION, safe_key(message_id), etag=etag, match_condition=condition
                ),
            )
        except NotFoundError:
            return True
        except ConflictError:
            return False
        return True

    async def get_checkpoint(self, name: str) -> str | None:
        """A saved position (for example the nightly forgetting cursor), or ``None``."""
        entity = await self._get(CHECKPOINT_PARTITION, safe_key(name))
        return None if entity is None else get_text(entity, "value")

    async def set_checkpoint(self, name: str, value: str | None) -> None:
        """Save a position; ``None`` removes it."""
        if value is None:
            await self._ensure_table()
            await self._delete_quietly(CHECKPOINT_PARTITION, safe_key(name))
            return
        await self._upsert("save checkpoint", checkpoint_entity(name, value))
