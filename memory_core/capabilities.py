"""Capability ports: what some adapters offer beyond their port (a queue that purges a scope itself, a
history that pages or settles a purge, a store that lists its users or reads many memories at once),
and :func:`supports`, which tells whether one does. A use case asks before it relies on one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from memory_core.domain.entities import Entity
from memory_core.domain.messages import HistoryEntry
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.language.entities import Mention
from memory_core.ports import StatusCounts

__all__ = [
    "BatchReader",
    "EntityIndex",
    "HistoryPager",
    "MissingVector",
    "PurgeSettlement",
    "QueuedItem",
    "QueuedLister",
    "ScopePurger",
    "UserDirectory",
    "VectorBackfill",
    "WalCheckpointer",
    "supports",
]


@dataclass(frozen=True, slots=True)
class QueuedItem:
    """A message of a user still on a local queue (waiting, in hand or dead-lettered), by ids only.

    Attributes:
        message_id: The queue's message id.
        kind: ``turn``, ``recall`` or what the producer said.
        agent_id: The agent of the scope, when the body names one.
        item_id: The ``turn_id`` or ``recall_id``, when the body names one.
        occurred_at: The turn's ``occurred_at`` (a recall update's ``at``), when readable.
        dead_lettered: ``True`` for a dead letter.
    """

    message_id: str
    kind: str
    agent_id: str | None
    item_id: str | None
    occurred_at: datetime | None
    dead_lettered: bool = False


@runtime_checkable
class ScopePurger(Protocol):
    """A queue that can remove every message of a user or scope itself (the embedded queue; Service
    Bus cannot, and relies on the tombstone instead)."""

    async def purge_scope(self, user_id: str, agent_id: str | None = None) -> int:
        """Remove the waiting, locked and dead-lettered messages of one scope (``agent_id`` ``None``:
        of every scope of the user) in one transaction; returns how many."""
        ...


@runtime_checkable
class PurgeSettlement(Protocol):
    """A history that records when a purge is over (both history stores), so that a turn in flight
    during a purge waits for it before removing what it wrote (it would otherwise delete, and so
    take from the purge's count, what the purge was about to delete)."""

    async def settle_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> None:
        """Record that the purge of a user (``agent_id`` ``None``) or scope at ``at`` is over: its
        rows are deleted and its files rewritten (only moves forward)."""
        ...

    async def purge_settled(self, scope: Scope) -> bool:
        """Whether every purge covering ``scope`` (its own tombstone and its user's) is over: false
        from :meth:`~memory_core.ports.HistoryStore.record_tombstone` until :meth:`settle_tombstone` of that time or later.
        A tombstone recorded before settlement was kept counts as settled."""
        ...


@runtime_checkable
class QueuedLister(Protocol):
    """A queue that can list a user's messages it still holds (export)."""

    async def queued_for(self, user_id: str, agent_id: str | None = None) -> list[QueuedItem]:
        """The messages of one scope (``agent_id`` ``None``: every scope of the user), oldest first."""
        ...


@runtime_checkable
class HistoryPager(Protocol):
    """A history that reads one slice of a scope's entries (the embedded one: one query), where
    :meth:`~memory_core.ports.HistoryStore.for_scope` reads them all. A paged export reads with it."""

    async def scope_page(self, scope: Scope, offset: int, limit: int) -> list[HistoryEntry]:
        """At most ``limit`` entries of ``scope`` after the first ``offset``, oldest first (the order of
        :meth:`~memory_core.ports.HistoryStore.for_scope`: entries are only appended, so an offset stays where it was)."""
        ...


@runtime_checkable
class UserDirectory(Protocol):
    """A store that can list its users (the embedded store; the Azure AI Search index cannot: its
    ``user_id`` field is filterable but not facetable)."""

    async def count_users(self, *, after: str | None = None, limit: int = 100) -> list[StatusCounts]:
        """Users holding memories, by id, from just after ``after``, at most ``limit``, each with its
        counts by status (every agent's memories added up)."""
        ...


@runtime_checkable
class WalCheckpointer(Protocol):
    """A file-backed adapter that can move its write-ahead log into its file and truncate the log, so
    deleted text leaves the disk (the SQLite adapters, which also zero deleted content)."""

    async def checkpoint_wal(self, *, rebuild: bool = False) -> bool:
        """Checkpoint and truncate the write-ahead log, first rewriting the file with ``rebuild`` (so
        no free space of a page keeps a copy of a deleted row); ``False`` if a reader kept part of the
        log or the file could not be rewritten."""
        ...


@runtime_checkable
class BatchReader(Protocol):
    """A store that can read many memories of one scope in one round trip (both adapters: one SQLite
    query per 900 ids, one Azure AI Search request per 1,000), where :meth:`~memory_core.ports.MemoryStore.get` costs one
    call per memory (an HTTP request on Azure). An import that skips what the store already holds
    reads with it."""

    async def get_many(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The records of ``scope`` among ``memory_ids``, any status, by id (in the order asked), as
        :meth:`~memory_core.ports.MemoryStore.get` returns them (with their embeddings). An id that no memory of ``scope`` has (missing, or of
        another scope) is simply absent; a repeated id is read once. Any number of ids: the adapter
        splits them into requests it can send.

        Raises:
            ValidationError: An id is not a memory id (before anything is read).
        """
        ...


@dataclass(frozen=True, slots=True)
class MissingVector:
    """A memory stored without an embedding (an import that computes vectors after storing).

    Attributes:
        key: The store's row key (what :meth:`VectorBackfill.missing_vectors` pages after).
        scope: The memory's user and agent.
        memory_id: Its id.
        text: Its text, as stored (what the vector is computed from).
    """

    key: int
    scope: Scope
    memory_id: str
    text: str


@runtime_checkable
class VectorBackfill(Protocol):
    """A store that finds the memories it holds without an embedding and gives them one later (the
    embedded store), so an import can store its records at once and compute their vectors afterwards."""

    async def count_missing_vectors(self) -> int:
        """How many memories have no embedding (any status: a deleted one may be restored), across every
        scope."""
        ...

    async def missing_vectors(self, *, after: int | None = None, limit: int) -> list[MissingVector]:
        """Up to ``limit`` memories without an embedding (any status), by row key, from just after
        ``after``, across every scope."""
        ...

    async def fill_vectors(self, vectors: Sequence[tuple[MissingVector, Sequence[float]]]) -> int:
        """Give each memory its vector, all in one transaction, where the memory still has no embedding
        and still says the text the vector was computed from (a memory changed since is left alone);
        returns how many were written. Nothing else of a memory changes (not ``updated_at``).

        Raises:
            ConflictError: A vector has another size than the store's.
            ValidationError: A vector is zero or not finite.
        """
        ...


@runtime_checkable
class EntityIndex(Protocol):
    """A store that keeps the entities its memories name (:mod:`memory_core.domain.entities`) and which
    memories name each (the embedded store: tables written with the memory; the Azure store: fields
    on the memory documents)."""

    async def entities(self, scope: Scope) -> list[Entity]:
        """The entities of ``scope`` (who and what its memories name)."""
        ...

    async def entity_memories(self, scope: Scope, asked: Sequence[Mention]) -> dict[str, list[str]]:
        """The ids of the memories (any status but deleted) of each entity of ``scope`` that the
        mentions ``asked`` may mean (a search's or a forget request's), by entity id; nothing is created."""
        ...

    async def memories_of(self, scope: Scope, entity_ids: Sequence[str]) -> dict[str, list[str]]:
        """The ids of the memories (any status but deleted) of each of ``entity_ids`` that ``scope``
        has, by entity id (an id that is no entity of ``scope`` is simply absent)."""
        ...


def supports(resource: object, capability: type) -> bool:
    """Whether ``resource`` offers ``capability``, a runtime-checkable capability port (:class:`ScopePurger`,
    :class:`QueuedLister`, :class:`UserDirectory`, :class:`WalCheckpointer`, :class:`BatchReader`,
    :class:`HistoryPager`, :class:`PurgeSettlement`, :class:`VectorBackfill`).

    ``isinstance``, and also true for a wrapper that forwards attribute access (``__getattr__``) to an
    adapter that offers it, as ``memory-core serve`` wraps its SQLite adapters: since Python 3.12
    ``isinstance`` looks a protocol's members up statically and no longer sees forwarded ones.
    """
    if isinstance(resource, capability):
        return True
    members = [name for name, value in vars(capability).items() if not name.startswith("_") and callable(value)]
    return bool(members) and all(callable(getattr(resource, name, None)) for name in members)
