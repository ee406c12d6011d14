"""How an agent, the Python API and MCP reach memory: two small interfaces, two implementations.

:class:`MemoryClient` is what an agent's context provider needs (search, publish a turn);
:class:`MemoryBackend` adds what the Python API does with a user's memories (add a turn now, read,
correct, delete, purge, export, forget). :class:`~memory_core.client.local.LocalMemoryClient` serves
both in this process, :class:`~memory_core.client.remote.RemoteMemoryClient` over the HTTP API.

Both raise :class:`~memory_core.errors.TransientError` for failures worth retrying (timeouts, refused
connections, throttling, 5xx) and :class:`~memory_core.errors.PermanentError` for the rest, so the
caller can tell a turn worth keeping in the outbox from one that will never be accepted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory_core.client.results import AddResult, MemoryExport
from memory_core.domain.messages import HistoryEntry, Turn
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, SearchResult
from memory_core.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.service import ForgettingReport, PurgeReport
    from memory_core.service.entities import EntityForgetting, EntityMemories, EntitySummary

__all__ = ["MemoryBackend", "MemoryClient"]


class MemoryClient(ABC):
    """What :class:`~memory_core.integrations.agent_framework.MemoryCoreContextProvider` needs from memory."""

    @abstractmethod
    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        """Ranked memories of ``scope`` for ``query``; returned memories count as recalled if ``recall``.

        Args:
            scope: Whose memories to search.
            query: The search text (at most 4000 characters).
            options: Mode, ranking profile, top and filters.
            recall: Reinforce the returned memories (access count, last access, retention).

        Returns:
            The hits, best first, with their scores and score breakdowns.
        """

    @abstractmethod
    async def publish_turn(self, turn: Turn) -> None:
        """Hand one turn to ingestion (idempotent per ``turn_id``)."""

    def now(self) -> datetime:
        """The time memories are read at (whether a plan has passed): the wall clock, in UTC."""
        return datetime.now(UTC)

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Count memories as recalled outside a search (not every client can; the default does nothing)."""
        return None

    async def start(self) -> None:
        """Begin the client's background work, if it has any (nothing by default)."""
        return None

    async def wait_ready(self, scope: Scope, *, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until a search of ``scope`` sees the turns already handed
        to ingestion that this client can follow (the default follows none).

        Returns:
            ``False`` when the wait timed out (the search then runs without those turns).
        """
        return True

    async def close(self) -> None:
        """Release what the client opened (nothing by default)."""
        return None


class MemoryBackend(MemoryClient):
    """Everything :class:`~memory_core.entrypoints.python_api.async_memory.AsyncMemory` does with memories.

    Ids reach these methods validated; records come back as the store keeps them (the caller drops
    embeddings where it shows records).
    """

    #: ``embedded``, ``azure`` or ``remote``: where the memories are, for messages and ``repr``.
    mode: str
    #: The store file, the search endpoint or the API's root.
    where: str

    @abstractmethod
    async def add(self, turn: Turn, *, infer: bool = True) -> AddResult:
        """Ingest ``turn`` now where the store is (decisions returned), or queue it on a server;
        ``infer=False`` keeps each user and assistant message as given, one memory each."""

    @abstractmethod
    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        """One memory, whatever its status.

        Raises:
            NotFoundError: No such memory in ``scope``.
        """

    @abstractmethod
    async def page(
        self, scope: Scope, status: MemoryStatus | None, cursor: str | None, limit: int, *,
        include_superseded: bool = False, filters: Mapping[str, Any] | None = None,
    ) -> tuple[list[MemoryRecord], str | None]:
        """One page of ``scope``'s memories by id (``status`` ``None``: active and archived; the current
        ones, or with ``include_superseded`` also those superseded by something said later; with
        ``filters``, a search's conditions on fields and metadata, only those they keep) and the
        cursor of the next page (``None`` after the last)."""

    @abstractmethod
    async def update(
        self, scope: Scope, memory_id: str, text: str, metadata: Mapping[str, Any] | None
    ) -> MemoryRecord:
        """Correct a memory's text by hand (recorded in its history as an ``UPDATE``)."""

    @abstractmethod
    async def delete(self, scope: Scope, memory_id: str) -> MemoryRecord:
        """Soft-delete one memory (recorded in its history); deleting it again changes nothing."""

    @abstractmethod
    async def purge(self, user_id: str, agent_id: str | None) -> PurgeReport:
        """Remove a user's memories (one agent's, or all), their history and queued turns, for good."""

    @abstractmethod
    async def history(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        """Every recorded change to one memory, oldest first.

        Raises:
            NotFoundError: No such memory in ``scope``.
        """

    @abstractmethod
    async def export(self, user_id: str, agent_id: str | None, *, include_vectors: bool = False) -> MemoryExport:
        """Every memory (every field; the embedding only with ``include_vectors``) and every recorded
        decision of a user (one agent's, or all), read page by page where the store is remote."""

    @abstractmethod
    async def entities(self, scope: Scope) -> list[EntitySummary]:
        """The entities ``scope``'s memories name, each with its number of memories.

        Raises:
            UnsupportedError: The store keeps no entity index.
        """

    @abstractmethod
    async def entity(self, scope: Scope, entity_id: str) -> EntityMemories:
        """One entity and its memories, newest first.

        Raises:
            NotFoundError: No such entity in ``scope``.
        """

    @abstractmethod
    async def forget_entity(self, scope: Scope, entity_id: str) -> EntityForgetting:
        """Soft-delete every memory of one entity (each recorded in its history), and with them the entity.

        Raises:
            NotFoundError: No such entity in ``scope``.
        """

    async def reset(self) -> list[PurgeReport]:
        """Remove every memory of the store, for good (a local store only).

        Raises:
            ConfigurationError: The store is not local (the default).
        """
        raise ConfigurationError(
            f"reset() empties a local store; this memory is {self.mode} ({self.where}): remove a user's "
            "memories with delete_all(user_id=...)"
        )

    @abstractmethod
    async def forget(self, dry_run: bool, limit: int | None) -> ForgettingReport:
        """Apply the forgetting policy to the whole store (a dry run only reports), reading at most
        ``limit`` memories (``None``: all)."""
