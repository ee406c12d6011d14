"""Ports: the small interfaces the use cases depend on. Adapters implement them.

Fakes in the tests subclass these classes rather than mocking them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

import numpy as np
from pydantic import BaseModel

from memory_core.domain.messages import HistoryEntry, MemoryCandidate, RecallUpdate, Turn
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import Listing, SearchResult
from memory_core.domain.search_request import SearchRequest
from memory_core.errors import ValidationError

__all__ = [
    "MAX_BROWSE_LIMIT",
    "MAX_BROWSE_OFFSET",
    "ChatModel",
    "CheckpointStore",
    "Clock",
    "Closeable",
    "DeadLetter",
    "DeadLetterStore",
    "Embedder",
    "EmbedderWrapper",
    "FixedClock",
    "HistoryStore",
    "MemoryRef",
    "MemoryStore",
    "Page",
    "ProgressCallback",
    "RetentionPage",
    "RetentionWrite",
    "SortedPage",
    "StatusCounts",
    "SystemClock",
    "TurnJournal",
    "TurnPublisher",
    "TurnStart",
    "check_browse_window",
]


@runtime_checkable
class Clock(Protocol):
    """Where "now" comes from."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that stands still until moved (tests, replays, benchmarks)."""

    def __init__(self, at: datetime) -> None:
        self._at = at if at.tzinfo else at.replace(tzinfo=UTC)

    def now(self) -> datetime:
        return self._at

    def set(self, at: datetime) -> None:
        self._at = at if at.tzinfo else at.replace(tzinfo=UTC)

    def advance(self, **delta: float) -> None:
        from datetime import timedelta

        self._at = self._at + timedelta(**delta)


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors. Queries and passages may be embedded differently."""

    @property
    def name(self) -> str:
        """Stable identifier of the model (stored with the index so vectors never mix)."""
        ...

    @property
    def dimensions(self) -> int: ...

    async def embed_query(self, text: str) -> np.ndarray:
        """One ``(dimensions,)`` float32 unit vector for a search query."""
        ...

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """A ``(len(texts), dimensions)`` float32 array of unit vectors for stored text."""
        ...

    async def close(self) -> None:
        """Release the model's clients (nothing for a local model)."""
        ...


class EmbedderWrapper:
    """An embedder around another one: the same name, dimensions and vectors, for subclasses that
    add to what a call does (time it, cache it). The wrapped embedder belongs to the caller:
    :meth:`close` leaves it open."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def embed_query(self, text: str) -> np.ndarray:
        return await self.inner.embed_query(text)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed_passages(texts)

    async def warm_up(self) -> None:
        """Load the model now, when the wrapped embedder can (the local one; a remote one has nothing
        to load)."""
        warm_up = getattr(self.inner, "warm_up", None)
        if callable(warm_up):
            await warm_up()

    async def close(self) -> None:
        """Nothing: the wrapped embedder belongs to the caller."""


class Closeable(Protocol):
    """A resource the composition root created and the service closes with itself."""

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a keyset-paged scan; ``next_cursor`` is ``None`` on the last page."""

    records: list[MemoryRecord]
    next_cursor: str | None


#: Most records one :meth:`MemoryStore.browse` call returns.
MAX_BROWSE_LIMIT = 1000
#: Largest ``offset`` of :meth:`MemoryStore.browse` (Azure AI Search's ``$skip`` limit).
MAX_BROWSE_OFFSET = 100_000


def check_browse_window(offset: int, limit: int) -> None:
    """Refuse an ``offset`` or ``limit`` of :meth:`MemoryStore.browse` out of range (names the field).

    Raises:
        ValidationError: ``offset`` not in 0..:data:`MAX_BROWSE_OFFSET`, or ``limit`` not in
            1..:data:`MAX_BROWSE_LIMIT`.
    """
    for name, value, low, high in (
        ("offset", offset, 0, MAX_BROWSE_OFFSET),
        ("limit", limit, 1, MAX_BROWSE_LIMIT),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValidationError(name, f"must be an integer between {low} and {high}")


@dataclass(frozen=True, slots=True)
class SortedPage:
    """One page of a filtered, sorted listing (:meth:`MemoryStore.browse`), and how many match in all."""

    records: list[MemoryRecord]
    total: int


@dataclass(frozen=True, slots=True)
class StatusCounts:
    """How many memories one user, or one agent of a user, holds by status.

    Attributes:
        id: The user id (:meth:`UserDirectory.count_users`) or agent id (:meth:`MemoryStore.count_agents`).
        active: Memories that are ``active``.
        archived: Memories that are ``archived``.
        deleted: Memories that are ``deleted`` (soft-deleted, not yet purged).
    """

    id: str
    active: int = 0
    archived: int = 0
    deleted: int = 0

    @property
    def total(self) -> int:
        return self.active + self.archived + self.deleted

    def add(self, status: MemoryStatus | str, count: int) -> StatusCounts:
        """These counts with ``count`` more of ``status``."""
        name = MemoryStatus(status).value
        return replace(self, **{name: getattr(self, name) + int(count)})


@dataclass(frozen=True, slots=True)
class RetentionPage:
    """The retention inputs of one keyset page of memories that are not deleted, as columns.

    What the forgetting job reads (:meth:`MemoryStore.scan_retention`): never texts, embeddings or
    even ids, so a page of 20,000 costs little more than its numbers. Times are epoch seconds (NaN when
    missing); ``keys`` are the store's own row keys, handed back to :meth:`MemoryStore.write_retention`
    and :meth:`MemoryStore.memory_refs`.

    Attributes:
        keys: The store's key of each row (a row number in SQLite, the memory id in Azure).
        active: ``True`` where the stored status is ``active`` (else ``archived``).
        retention: Stored ``retention_score``.
        importance: ``importance``.
        access_count: ``access_count``.
        updated_at: ``updated_at`` (epoch seconds).
        last_accessed_at: ``last_accessed_at`` (epoch seconds, NaN if never recalled).
        expires_at: ``expires_at`` (epoch seconds, NaN if it never expires).
        next_cursor: Resume after this page; ``None`` when the scan is complete.
    """

    keys: Sequence[Any]
    active: np.ndarray
    retention: np.ndarray
    importance: np.ndarray
    access_count: np.ndarray
    updated_at: np.ndarray
    last_accessed_at: np.ndarray
    expires_at: np.ndarray
    next_cursor: str | None

    def __len__(self) -> int:
        return len(self.keys)


class MemoryRef(NamedTuple):
    """Which memory a row of a :class:`RetentionPage` is."""

    id: str
    user_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class RetentionWrite:
    """New retention and status for some rows of a :class:`RetentionPage`.

    Attributes:
        page: The page the rows come from.
        rows: Positions into the page of the rows to write.
        active: New status of each written row (``True``: active, ``False``: archived).
        retention: New ``retention_score`` of each written row.
    """

    page: RetentionPage
    rows: np.ndarray
    active: np.ndarray
    retention: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


class TurnPublisher(Protocol):
    """Sends turns and recall updates onto the ordered, per-scope queue path.

    Implementations set the message id from the scope and ``turn_id`` / ``recall_id``
    (:func:`memory_core.domain.records.message_id_for`, duplicate detection per scope) and the session id from
    the scope (:func:`memory_core.domain.records.session_id_for`).
    """

    async def publish_turn(self, turn: Turn) -> bool | None:
        """Send ``turn``; ``False`` if the queue dropped it as a duplicate, ``None`` if it cannot tell."""
        ...

    async def publish_recall(self, update: RecallUpdate) -> None: ...

    async def close(self) -> None: ...


class MemoryStore(Protocol):
    """Where memories live. Every operation is scoped; nothing reads across scopes.

    Writes are all-or-nothing per call. Search never returns ``deleted`` memories and returns
    ``archived`` ones only when ``options.include_archived`` is set; expired memories are never
    returned.
    """

    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace whole records."""
        ...

    async def merge(self, scope: Scope, memory_id: str, changes: Mapping[str, Any]) -> MemoryRecord:
        """Partially update one record; raises ``NotFoundError`` outside the scope."""
        ...

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord | None:
        """One record of any status, or ``None``."""
        ...

    async def search(self, request: SearchRequest) -> SearchResult:
        """Ranked memories of the request's scope for its query and vector, under its options."""
        ...

    async def scan(self, scope: Scope, request: PageRequest) -> Page:
        """Records of ``scope`` ordered by id, as ``request`` asks: from just after its cursor."""
        ...

    async def agents(self, user_id: str) -> list[str]:
        """The agent ids that hold memories of ``user_id`` (for export and purge of a user)."""
        ...

    async def browse(self, scope: Scope, listing: Listing) -> SortedPage:
        """Records of ``scope`` as ``listing`` asks: matching its filters, sorted by its order then id,
        skipping its offset, at most its limit; with the number that match in all.

        Raises:
            ValidationError: A bad category, ``offset`` (0 to 100,000) or ``limit`` (1 to 1,000).
        """
        ...

    async def count_agents(self, user_id: str) -> list[StatusCounts]:
        """The agents holding memories of ``user_id``, by id, each with its counts by status."""
        ...

    async def mark_status(
        self, scope: Scope, memory_id: str, status: MemoryStatus, *, reason: str
    ) -> MemoryRecord:
        """Change a record's status (soft delete, archive, restore) with a recorded reason."""
        ...

    async def recall(self, scope: Scope, memory_ids: Sequence[str], policy: HumanMemoryPolicy) -> list[MemoryRecord]:
        """Mark records as returned to an agent: touch, count, re-score, re-derive status."""
        ...

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Physically remove a user's memories (one agent's, or all); returns how many."""
        ...

    async def scan_retention(self, *, after: str | None = None, limit: int) -> RetentionPage:
        """Retention inputs of up to ``limit`` memories that are not deleted, across every scope, in
        keyset order after the cursor ``after``. A store may return fewer rows than asked (its page
        limit) and still a cursor; ``next_cursor`` is ``None`` only when nothing follows.

        Raises:
            ValidationError: ``after`` is not a cursor this store issued (names the field ``cursor``).
        """
        ...

    async def memory_refs(self, keys: Sequence[Any]) -> list[MemoryRef | None]:
        """Id and scope of rows of a :class:`RetentionPage`, in the order of ``keys`` (``None`` for a
        row purged since the scan)."""
        ...

    async def write_retention(self, write: RetentionWrite) -> int:
        """Store new retention and status for rows of a page (never touching a deleted memory);
        returns how many were written."""
        ...

    async def close(self) -> None: ...


SchemaT = TypeVar("SchemaT", bound=BaseModel)


@runtime_checkable
class ChatModel(Protocol):
    """A chat model that answers with JSON validated against a pydantic schema (structured output).

    Implementations retry transport failures themselves (bounded, honouring ``retry-after``) and then
    raise :class:`~memory_core.errors.TransientError` (timeouts, throttling, 5xx). An answer that is not
    valid JSON or breaks ``schema`` raises :class:`~memory_core.errors.ValidationError`; other refusals
    (bad request, content filter, missing permission) raise :class:`~memory_core.errors.PermanentError`.
    Deciding whether to ask again after an invalid answer is the caller's business.
    """

    @property
    def name(self) -> str:
        """The model (or deployment) name, recorded with what it produced."""
        return "chat-model"

    async def complete_json(
        self, *, system: str, user: str, schema: type[SchemaT], temperature: float | None = None
    ) -> SchemaT:
        """Ask once (plus transport retries) and return the answer validated into ``schema``."""
        ...

    async def close(self) -> None:
        """Release the model's client."""
        ...


@dataclass(frozen=True, slots=True)
class TurnJournal:
    """What the history remembers about one turn's ingestion (the redelivery bookmark).

    The first attempt records the extracted candidates; a redelivered turn consolidates those same
    candidates (an LLM may extract differently the second time) and skips the steps already recorded.

    Attributes:
        user_id: Owner of the turn.
        agent_id: Agent of the turn.
        turn_id: The turn's stable id.
        candidates: The candidates the first attempt extracted, in order.
        extraction_path: How they were extracted (``rules``, ``llm``, ``rules-fallback``...).
        fallback_reason: Why extraction fell back to rules, if it did.
        started_at: When the first attempt began.
        completed_steps: Indexes of the candidates whose decisions are recorded.
        processed_at: When the turn was completed; ``None`` while it is not.
    """

    user_id: str
    agent_id: str
    turn_id: str
    candidates: tuple[MemoryCandidate, ...]
    extraction_path: str
    fallback_reason: str | None
    started_at: datetime
    completed_steps: frozenset[int] = frozenset()
    processed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What a turn's first attempt records in its journal (:meth:`HistoryStore.begin_turn`).

    Attributes:
        scope: The turn's scope.
        turn_id: The turn's stable id.
        candidates: The candidates extracted, in order.
        extraction_path: How they were extracted (``rules``, ``llm``, ``rules-fallback``...).
        fallback_reason: Why extraction fell back to rules, if it did.
        at: When the attempt began.
    """

    scope: Scope
    turn_id: str
    _: KW_ONLY
    candidates: tuple[MemoryCandidate, ...]
    extraction_path: str
    fallback_reason: str | None
    at: datetime


class HistoryStore(Protocol):
    """The decision history of every memory, and which turns have been ingested.

    Entries are kept forever (until the user is purged) and never rewritten. Writes are idempotent:
    recording the same turn step twice stores it once, so a redelivered turn converges to the state
    one delivery produced.
    """

    async def append(self, entries: Sequence[HistoryEntry]) -> None:
        """Append entries that belong to no turn step (for example a delete made through the API)."""
        ...

    async def begin_turn(self, start: TurnStart) -> TurnJournal:
        """Record a turn's start unless an earlier attempt did; return the recorded journal."""
        ...

    async def journal(self, scope: Scope, turn_id: str) -> TurnJournal | None:
        """The journal of one turn, or ``None`` when no attempt has begun."""
        ...

    async def record_step(
        self, scope: Scope, turn_id: str, step: int, entries: Sequence[HistoryEntry]
    ) -> bool:
        """Atomically store the entries of candidate ``step``; ``False`` if that step was stored before."""
        ...

    async def for_memory(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        """Every entry about one memory, oldest first."""
        ...

    async def rewrite_entries(
        self, scope: Scope, memory_ids: Sequence[str], rewrite: Callable[[HistoryEntry], HistoryEntry]
    ) -> int:
        """Replace the recorded changes of these memories by ``rewrite(entry)`` (what a forget request
        withholds from them); returns how many entries changed."""
        ...

    async def rewrite_candidates(
        self, scope: Scope, turn_ids: Sequence[str], rewrite: Callable[[MemoryCandidate], MemoryCandidate]
    ) -> int:
        """Replace the candidates recorded in these turns' journals by ``rewrite(candidate)`` (what a
        forget request withholds from them); returns how many journals changed."""
        ...

    async def for_turn(self, scope: Scope, turn_id: str) -> list[HistoryEntry]:
        """Every entry a turn produced, in decision order."""
        ...

    async def for_scope(self, scope: Scope) -> list[HistoryEntry]:
        """Every entry of a scope, oldest first (export)."""
        ...

    async def turn_processed(self, scope: Scope, turn_id: str) -> bool:
        """True once :meth:`mark_turn_processed` has been called for the turn."""
        ...

    async def mark_turn_processed(self, scope: Scope, turn_id: str, at: datetime) -> None:
        """Mark a turn done (after its writes are durable); marking twice keeps the first time."""
        ...

    async def purge(self, user_id: str, agent_id: str | None = None) -> int:
        """Physically remove a user's history and turn journals; returns how many entries.

        Tombstones (:meth:`record_tombstone`) are kept: they are what stops a replay of the purged turns.
        """
        ...

    async def record_tombstone(self, user_id: str, agent_id: str | None, at: datetime) -> datetime:
        """Durably record that a user (``agent_id`` ``None``: every agent of the user) or one scope was
        purged at ``at``, before anything is deleted.

        A tombstone holds ids and a time only. Recording an earlier time than the one kept changes
        nothing (a tombstone only moves forward).

        Returns:
            The time now kept for that user or scope.
        """
        ...

    async def tombstone(self, scope: Scope) -> datetime | None:
        """When ``scope`` was last purged (the later of its own tombstone and its user's), or ``None``.

        Turns and recall updates dated at or before that time are dropped, not ingested.
        """
        ...

    async def close(self) -> None: ...


class CheckpointStore(Protocol):
    """Named bookmarks that survive restarts (the forgetting job's cursor and next due time)."""

    async def get_checkpoint(self, name: str) -> str | None:
        """The saved value, or ``None``."""
        ...

    async def set_checkpoint(self, name: str, value: str | None) -> None:
        """Save a value; ``None`` removes it."""
        ...


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A queue message that can never be processed, kept with the reason it was set aside.

    Attributes:
        message_id: The message id (turn or recall id).
        reason: Short reason (the error's class name).
        description: What was wrong.
        body: The raw message body.
        session_id: The queue session (scope) it came from.
        delivery_count: Deliveries so far.
        enqueued_time: When it was enqueued.
        at: When it was set aside.
    """

    message_id: str
    reason: str
    description: str
    body: bytes
    at: datetime
    session_id: str | None = None
    delivery_count: int | None = None
    enqueued_time: datetime | None = None


class DeadLetterStore(Protocol):
    """Where a host that cannot dead-letter a message itself sets it aside (the Functions app)."""

    async def record_dead_letter(self, letter: DeadLetter) -> None:
        """Keep ``letter`` (recording the same message id twice keeps one)."""
        ...


#: What a long service call reports through: ``(done, total)`` (``total`` ``None`` when unknown).
#: :meth:`Bar.update` is one.
ProgressCallback = Callable[[int, int | None], None]
