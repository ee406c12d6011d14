"""The one object every entry point holds: :class:`MemoryService`.

It is built once, by :mod:`memory_core.bootstrap`, from the ports it needs; the Functions app, the
HTTP contract, the embedded runtime, the CLI and the agent integrations call its methods and never
reach into its store, history or clock. Each method is a thin call to a use case in this package
(:mod:`.search`, :mod:`.ingest`, :mod:`.forgetting`, :mod:`.admin`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, cast

import pydantic

from memory_core.domain.messages import HistoryEntry, RecallUpdate, Turn
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryKind, MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, SearchResult
from memory_core.domain.validation import parse_model, validate_scope_id
from memory_core.errors import (
    ConfigurationError,
    NotFoundError,
    PermanentError,
    UnsupportedError,
    ValidationError,
)
from memory_core.ports import (
    CheckpointStore,
    Clock,
    Closeable,
    DeadLetter,
    DeadLetterStore,
    Embedder,
    HistoryStore,
    MemoryStore,
    Page,
    ProgressCallback,
    QueuedItem,
    QueuedLister,
    ScopePurger,
    SortedPage,
    StatusCounts,
    TurnPublisher,
    UserDirectory,
    supports,
)
from memory_core.service import admin, forgetting
from memory_core.service import search as search_use_case
from memory_core.service.admin import ImportReport, PurgeReport
from memory_core.service.consolidation.consolidator import MemoryConsolidator
from memory_core.service.forgetting import FORGET_PAGE_SIZE, ForgettingReport, ForgettingRun, RetentionCurve
from memory_core.service.ingest import (
    CandidateExtractor,
    EpisodePolicy,
    IngestResult,
    PreparedTurn,
    ProcessOutcome,
    decode_message,
    ingest_turn,
    prepare_turns,
    purged_before,
)

__all__ = ["MAX_CLOCK_SKEW_SECONDS", "MemoryService", "TurnStatus"]

logger = logging.getLogger(__name__)

_List = list  # ``list`` is also a method name of the service

#: How far in the future (by this service's clock) a turn may be dated: a little clock skew.
MAX_CLOCK_SKEW_SECONDS = 300.0

#: What happened to a posted turn: sent to the ordered queue, ingested at once (no queue), a repeat,
#: or dropped because it is dated at or before its scope's last purge.
TurnStatus = Literal["queued", "ingested", "duplicate", "purged"]


class MemoryService:
    """The memory use cases, independent of where memories are stored and how callers reach them.

    Keyword Args:
        store: The memory store.
        embedder: Embeds queries and stored text.
        policy: Forgetting policy (retention, archiving, recall reinforcement).
        clock: Source of "now".
        history: Decision history and turn journal (``None``: operations that need it raise
            :class:`~memory_core.errors.ConfigurationError`).
        extractor: Finds memory candidates in a turn.
        consolidator: Decides ADD / UPDATE / DELETE / NONE for each candidate.
        publisher: The ordered per-scope queue turns go to (``None``: turns are ingested at once).
        recall_via_queue: Send recall updates through ``publisher`` instead of applying them at once.
        checkpoints: Where the scheduled forgetting run keeps its cursor (``None``: nowhere).
        dead_letters: Where a host that cannot dead-letter a message sets it aside (``None``: none).
        forget_tolerance: Forgetting rewrites an unchanged-status memory only past this drift.
        episodes: Keep each user message as an episode too (``None``: facts only).
        owned: Extra resources closed with the service (clients the composition root created).
    """

    def __init__(
        self,
        *,
        store: MemoryStore,
        embedder: Embedder,
        policy: HumanMemoryPolicy,
        clock: Clock,
        history: HistoryStore | None = None,
        extractor: CandidateExtractor | None = None,
        consolidator: MemoryConsolidator | None = None,
        publisher: TurnPublisher | None = None,
        recall_via_queue: bool = False,
        checkpoints: CheckpointStore | None = None,
        dead_letters: DeadLetterStore | None = None,
        forget_tolerance: float = 0.01,
        episodes: EpisodePolicy | None = None,
        owned: Sequence[Closeable] = (),
    ) -> None:
        if recall_via_queue and publisher is None:
            raise ConfigurationError("recall updates can only go through the queue when there is a publisher")
        self._store = store
        self._embedder = embedder
        self._policy = policy
        self._clock = clock
        self._history = history
        self._extractor = extractor
        self._consolidator = consolidator
        self._publisher = publisher
        self._recall_via_queue = recall_via_queue
        self._checkpoints = checkpoints
        self._dead_letters = dead_letters
        self._forget_tolerance = forget_tolerance
        self._episodes = episodes
        self._owned = list(owned)

    # -- what callers may know --------------------------------------------------------------------
    @property
    def embedder_name(self) -> str:
        """The embedder's name (recorded with stored vectors)."""
        return self._embedder.name

    @property
    def queued(self) -> bool:
        """Whether turns go to a queue (``True``) or are ingested at once."""
        return self._publisher is not None

    async def warm_up(self) -> None:
        """Load an in-process embedding model now (it loads on first use), so the first search does not
        wait for it; nothing for an embedder without a ``warm_up`` (a remote one)."""
        warm_up = getattr(self._embedder, "warm_up", None)
        if callable(warm_up):
            await warm_up()

    def now(self) -> datetime:
        """The service's "now" (the clock it was built with)."""
        return self._clock.now()

    def _need_history(self) -> HistoryStore:
        if self._history is None:
            raise ConfigurationError(
                "this operation needs the decision history (MEMORY_HISTORY_TABLE_ENDPOINT with MEMORY_STORE=azure_search)"
            )
        return self._history

    # -- search and recall ------------------------------------------------------------------------
    async def search(
        self,
        scope: Scope,
        query: str,
        options: MemorySearchOptions | Mapping[str, Any] | None = None,
        *,
        recall: bool = True,
    ) -> SearchResult:
        """Ranked memories for ``query``; the returned memories count as recalled unless ``recall`` is off.

        An empty query is a keyword match-all (every memory the filters allow).
        """
        result = await search_use_case.search(self._store, self._embedder, scope, query, options)
        if recall and result.hits:
            await self.record_recall(scope, [hit.record.id for hit in result.hits])
        return result

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Reinforce memories that were returned to an agent (on the ordered queue path when configured)."""
        if not memory_ids:
            return
        scope = Scope.of(scope.user_id, scope.agent_id)
        if self._recall_via_queue and self._publisher is not None:
            await self._publisher.publish_recall(search_use_case.recall_update(scope, memory_ids, self.now()))
        else:
            await self._store.recall(scope, memory_ids, self._policy)

    async def apply_recall(self, update: RecallUpdate) -> int:
        """Reinforce the memories of one recall update once; returns how many were touched (0 for a
        repeat, or for an update dated at or before its scope's last purge)."""
        return await self._apply_recall(update) or 0

    async def _apply_recall(self, update: RecallUpdate) -> int | None:
        """:meth:`apply_recall`, with ``None`` for an update the scope's purge drops."""
        history = self._need_history()
        tombstone = await history.tombstone(update.scope)
        if purged_before(update.at, tombstone):
            logger.info(
                "recall update %s made at %s, not after its scope's purge at %s: dropped",
                update.recall_id,
                update.at.isoformat(),
                tombstone.isoformat() if tombstone else None,
            )
            return None
        return await search_use_case.apply_recall(self._store, history, self._policy, update, self.now())

    # -- ingestion ---------------------------------------------------------------------------------
    def _valid_turn(self, turn: Turn | Mapping[str, Any]) -> Turn:
        """The turn, validated. One from the future (beyond a small clock skew) is refused: its time
        would become the memories' ``updated_at`` and stop their decay for good."""
        turn = parse_model(Turn, dict(turn) if isinstance(turn, Mapping) else turn)
        ahead = (turn.occurred_at - self.now()).total_seconds()
        if ahead > MAX_CLOCK_SKEW_SECONDS:
            raise ValidationError(
                "occurred_at",
                f"{turn.occurred_at.isoformat()} is {ahead:.0f} s in the future; at most "
                f"{MAX_CLOCK_SKEW_SECONDS:.0f} s of clock skew is accepted",
            )
        return turn

    async def ingest(self, turn: Turn | Mapping[str, Any], *, prepared: PreparedTurn | None = None) -> IngestResult:
        """Extract, consolidate and apply one turn now (idempotent per ``turn_id``).

        Args:
            turn: The turn (a :class:`Turn` or its JSON dict).
            prepared: Its extraction and vectors worked out ahead (:meth:`prepare`), if any.

        Raises:
            ValidationError: The turn is malformed, or dated in the future.
        """
        return await self._ingest(self._valid_turn(turn), prepared)

    async def _ingest(self, turn: Turn, prepared: PreparedTurn | None = None) -> IngestResult:
        if self._extractor is None or self._consolidator is None:
            raise ConfigurationError("this service was built without an extractor and a consolidator")
        return await ingest_turn(
            turn,
            store=self._store,
            history=self._need_history(),
            extractor=self._extractor,
            consolidator=self._consolidator,
            embedder=self._embedder,
            clock=self._clock,
            episodes=self._episodes,
            prepared=prepared,
        )

    async def prepare(self, turns: Sequence[Turn]) -> list[PreparedTurn | None]:
        """Extract several turns and embed all their candidates in one call, ahead of ingesting them
        one at a time (:func:`~memory_core.service.ingest.prepare_turns`; best effort, never raises).

        With a chat model extracting, nothing is prepared ahead: each extraction is a model call that a
        failure or a stop before its turn would waste (and repeat on every redelivery), its answer may
        depend on when it is asked, and the embedding it would batch is small beside it.

        Args:
            turns: Validated turns, in the order they will be ingested.

        Returns:
            One entry per turn: what to pass to :meth:`ingest` (or :meth:`process_message`) as
            ``prepared``, or ``None`` for a turn that is ingested the usual way.
        """
        if (
            self._extractor is None
            or self._history is None
            or not turns
            or getattr(self._extractor, "uses_llm", False)  # see above
        ):
            return [None] * len(turns)
        return await prepare_turns(
            turns, history=self._history, extractor=self._extractor, embedder=self._embedder, episodes=self._episodes
        )

    async def prepare_messages(self, bodies: Sequence[bytes | str | Mapping[str, Any]]) -> list[PreparedTurn | None]:
        """:meth:`prepare` for queue message bodies: the turns among them (a body that does not decode,
        a recall update or a turn dated in the future gets ``None``; processing it says why)."""
        turns: list[Turn | None] = []
        for body in bodies:
            try:
                message = decode_message(body)
                turns.append(self._valid_turn(message) if isinstance(message, Turn) else None)
            except Exception:  # processing the message says what is wrong with it
                turns.append(None)
        ready = [t for t in turns if t is not None]
        prepared = iter(await self.prepare(ready))
        return [next(prepared) if t is not None else None for t in turns]

    async def publish_turn(self, turn: Turn | Mapping[str, Any]) -> TurnStatus:
        """Queue a turn for ingestion, or ingest it now when there is no queue.

        Returns:
            ``queued``; ``ingested`` (no queue); ``duplicate``: the scope already ingested this turn id,
            or the queue dropped it as a repeat within its duplicate detection window (the embedded
            queue says so; Service Bus drops a repeat silently, so there a turn still waiting on the
            queue is answered ``queued`` and the repeat is dropped all the same); or ``purged``: the
            turn is dated at or before the last purge of its scope (or user) and is dropped, not
            queued. Turn ids are unique per scope: another user's turn with the same id is a
            different turn.
        """
        parsed = self._valid_turn(turn)
        if self._publisher is None:
            result = await self._ingest(parsed)  # recognises a turn it already ingested, or purged
            if result.status == "duplicate":
                return "duplicate"
            return "purged" if result.status == "purged" else "ingested"
        if self._history is not None:
            tombstone = await self._history.tombstone(parsed.scope)
            if purged_before(parsed.occurred_at, tombstone):  # never queued: purged text stays off the disk
                logger.info("turn %s is dated at or before its scope's purge: dropped", parsed.turn_id)
                return "purged"
            if await self._history.turn_processed(parsed.scope, parsed.turn_id):
                return "duplicate"
        sent = await self._publisher.publish_turn(parsed)
        return "duplicate" if sent is False else "queued"

    async def process_message(
        self, body: bytes | str | Mapping[str, Any], *, prepared: PreparedTurn | None = None
    ) -> ProcessOutcome:
        """Handle one queue message (a turn or a recall update).

        Args:
            body: The message body.
            prepared: The turn's extraction and vectors worked out ahead (:meth:`prepare_messages`).

        Raises:
            PermanentError: The message can never be processed (dead-letter it at once): it does not
                decode, or what it says cannot make a valid memory (a model refused it).
            TransientError: A dependency is unavailable (let the queue redeliver it).
        """
        try:
            return await self._process_message(body, prepared)
        except pydantic.ValidationError as exc:  # the same message fails the same way on every delivery
            raise PermanentError(f"the message cannot make a valid record: {exc.errors()[0]['msg']}") from exc

    async def _process_message(
        self, body: bytes | str | Mapping[str, Any], prepared: PreparedTurn | None = None
    ) -> ProcessOutcome:
        message = decode_message(body)
        if isinstance(message, Turn):
            result = await self.ingest(message, prepared=prepared)
            logger.info(
                "turn %s: %s via %s, %s decision(s)",
                message.turn_id,
                result.status,
                result.extraction_path,
                len(result.steps),
            )
            return ProcessOutcome("turn", message.turn_id, result.status, ingest=result)
        touched = await self._apply_recall(message)
        if touched is None:
            return ProcessOutcome("recall", message.recall_id, "purged")
        return ProcessOutcome(
            "recall", message.recall_id, "applied" if touched else "duplicate", recalled=touched
        )

    async def set_aside(
        self,
        *,
        message_id: str,
        reason: str,
        description: str,
        body: bytes,
        session_id: str | None = None,
        delivery_count: int | None = None,
        enqueued_time: datetime | None = None,
    ) -> bool:
        """Keep a message that can never be processed, with its reason.

        Returns:
            ``False`` when this deployment has no dead-letter store (the caller leaves the message to
            its queue), ``True`` once it is kept.
        """
        if self._dead_letters is None:
            return False
        await self._dead_letters.record_dead_letter(
            DeadLetter(
                message_id=message_id,
                reason=reason,
                description=description,
                body=body,
                at=self.now(),
                session_id=session_id,
                delivery_count=delivery_count,
                enqueued_time=enqueued_time,
            )
        )
        return True

    # -- inspection ---------------------------------------------------------------------------------
    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        """One memory of any status (with its embedding).

        Raises:
            NotFoundError: No such memory in ``scope``.
        """
        record = await self._store.get(Scope.of(scope.user_id, scope.agent_id), memory_id)
        if record is None:
            raise NotFoundError(f"memory {memory_id!r} not found for this user and agent")
        return record

    async def history_of(self, scope: Scope, memory_id: str) -> _List[HistoryEntry]:
        """Every recorded change to one memory, oldest first (empty without a history)."""
        if self._history is None:
            return []
        return await self._history.for_memory(Scope.of(scope.user_id, scope.agent_id), memory_id)

    async def list(
        self,
        scope: Scope,
        *,
        statuses: Sequence[MemoryStatus] | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> Page:
        """One page of a scope's memories, by id."""
        return await self._store.scan(
            Scope.of(scope.user_id, scope.agent_id), statuses=statuses, after=cursor, limit=limit
        )

    async def agents(self, user_id: str) -> _List[str]:
        """The agents that hold memories of ``user_id``."""
        return await self._store.agents(validate_scope_id(user_id, "user_id"))

    async def browse(
        self,
        scope: Scope,
        *,
        statuses: Sequence[MemoryStatus] | None = None,
        category: str | None = None,
        kind: MemoryKind | None = None,
        order_by: OrderBy | None = None,
        offset: int = 0,
        limit: int = 100,
    ) -> SortedPage:
        """One page of a scope's memories, filtered and sorted (the inspector's table), with the count."""
        return await self._store.browse(
            Scope.of(scope.user_id, scope.agent_id),
            statuses=statuses,
            category=category,
            kind=kind,
            order_by=order_by,
            offset=offset,
            limit=limit,
        )

    async def users(self, *, after: str | None = None, limit: int = 100) -> tuple[_List[StatusCounts], str | None]:
        """Users holding memories, by id after ``after``, with counts by status; and the next cursor.

        Raises:
            UnsupportedError: The store cannot list its users (Azure AI Search).
        """
        if not supports(self._store, UserDirectory):
            raise UnsupportedError(
                "this store cannot list its users (the Azure AI Search index does not facet user_id); "
                "open a user by id instead"
            )
        directory = cast(UserDirectory, self._store)
        found = await directory.count_users(after=after, limit=limit + 1)
        return found[:limit], found[limit - 1].id if len(found) > limit else None

    async def agent_counts(self, user_id: str) -> _List[StatusCounts]:
        """The agents of ``user_id`` with their counts by status."""
        return await self._store.count_agents(validate_scope_id(user_id, "user_id"))

    # -- administration -----------------------------------------------------------------------------
    async def delete(
        self, scope: Scope, memory_id: str, *, reason: str = "deleted on request"
    ) -> MemoryRecord:
        """Soft delete, recorded in the memory's history; never returned by search again."""
        return await admin.delete_memory(
            self._store, self._history, scope, memory_id, reason=reason, now=self.now()
        )

    async def update(
        self,
        scope: Scope,
        memory_id: str,
        text: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        reason: str = "updated on request",
    ) -> MemoryRecord:
        """Replace a memory's text (re-embedded; ``metadata`` merged), recorded in its history as an
        ``UPDATE``; the memory is restated now. See :func:`memory_core.service.admin.update_memory`.

        Raises:
            NotFoundError: No such memory in ``scope``.
            ConflictError: The memory is deleted.
            ValidationError: ``text`` or ``metadata`` breaks a rule (names it).
        """
        return await admin.update_memory(
            self._store,
            self._embedder,
            self._history,
            self._policy,
            scope,
            memory_id,
            text,
            metadata=metadata,
            reason=reason,
            now=self.now(),
        )

    def prepare_record(self, data: Mapping[str, Any]) -> MemoryRecord:
        """Validate one record for import (fills timestamps and, if absent, retention and status)."""
        return admin.prepare_record(data, self._policy, self.now())

    async def import_records(
        self, rows: Iterable[Mapping[str, Any]], *, dedupe: bool = False, progress: ProgressCallback | None = None
    ) -> ImportReport:
        """Validate every row first (errors name the row), then write in batches, embedding as needed.

        ``dedupe`` makes the import idempotent on content; ``progress`` is told ``(written, to write)``
        after every batch (see :func:`memory_core.service.admin.import_records`).
        """
        return await admin.import_records(
            self._store, self._embedder, self._policy, self.now(), rows, dedupe=dedupe, progress=progress
        )

    async def resolve_id(self, scope: Scope, text: str) -> str:
        """The id of the memory of ``scope`` that ``text`` names: its id, or the start of exactly one id.

        Raises:
            ValidationError: ``text`` starts several ids (the error names them).
            NotFoundError: No memory of ``scope`` has that id or one starting with it.
        """
        return await admin.resolve_memory_id(self._store, scope, text)

    def export(self, user_id: str, agent_id: str | None = None) -> AsyncIterator[MemoryRecord]:
        """Every record of a user (one agent, or all), every field (provenance included), every status."""
        return admin.export_records(self._store, user_id, agent_id)

    async def export_history(self, user_id: str, agent_id: str | None = None) -> _List[HistoryEntry]:
        """Every recorded decision of a user's scopes (one agent's, or all; empty without a history)."""
        return await admin.export_history(self._store, self._history, user_id, agent_id)

    async def queued_messages(self, user_id: str, agent_id: str | None = None) -> _List[QueuedItem]:
        """A user's messages still on the local queue, by ids and time (empty where the queue cannot
        list them, as Service Bus)."""
        if not supports(self._publisher, QueuedLister):
            return []
        user_id = validate_scope_id(user_id, "user_id")
        if agent_id is not None:
            agent_id = validate_scope_id(agent_id, "agent_id")
        return await cast(QueuedLister, self._publisher).queued_for(user_id, agent_id)

    async def purge(
        self, user_id: str, agent_id: str | None = None, *, queue: ScopePurger | None = None
    ) -> PurgeReport:
        """Physically remove a user's memories and history (one agent's, or all), so that it holds.

        The purge time is recorded first as the scope's tombstone: turns and recall updates dated at or
        before it are dropped from then on, wherever they come from. A local queue that can
        (:class:`~memory_core.ports.ScopePurger`) loses the scope's messages: ``queue`` (the embedded
        queue of a service built without it as its publisher), else the publisher; the SQLite files are
        checkpointed so the deleted text leaves the disk. See :func:`memory_core.service.admin.purge_user`.
        """
        if queue is None and supports(self._publisher, ScopePurger):
            queue = cast(ScopePurger, self._publisher)
        return await admin.purge_user(
            self._store,
            self._history,
            user_id,
            agent_id,
            now=self.now(),
            queue=queue,
            files=[self._store, self._history, self._publisher, queue],
        )

    # -- forgetting ---------------------------------------------------------------------------------
    async def apply_forgetting(
        self,
        *,
        dry_run: bool = True,
        limit: int | None = None,
        cursor: str | None = None,
        page_size: int = FORGET_PAGE_SIZE,
        progress: ProgressCallback | None = None,
    ) -> ForgettingReport:
        """Bring retention and status up to date (a dry run by default), writing only what changed.

        ``progress`` is told ``(memories scanned, limit)`` after every page.
        """
        report = await forgetting.apply_forgetting(
            self._store,
            self._policy,
            self.now(),
            dry_run=dry_run,
            limit=limit,
            cursor=cursor,
            tolerance=self._forget_tolerance,
            page_size=page_size,
            progress=progress,
        )
        logger.info("forgetting (dry_run=%s): %s", dry_run, report.summary())
        return report

    async def preview_forgetting(
        self, scope: Scope, *, limit: int = 10_000, cursor: str | None = None
    ) -> ForgettingReport:
        """What forgetting would do to one scope now (nothing is written); lists rescores too."""
        return await forgetting.preview_forgetting(
            self._store,
            self._policy,
            self.now(),
            Scope.of(scope.user_id, scope.agent_id),
            limit=limit,
            cursor=cursor,
            tolerance=self._forget_tolerance,
        )

    async def retention_curves(self, scope: Scope, memory_ids: Sequence[str], *, days: int) -> _List[RetentionCurve]:
        """How each memory fades over the next ``days`` days under the policy, from now.

        Raises:
            NotFoundError: A memory is not in ``scope``.
        """
        records = [await self.get(scope, memory_id) for memory_id in memory_ids]
        return forgetting.retention_curves(records, self._policy, self.now(), days=days)

    @property
    def policy(self) -> HumanMemoryPolicy:
        """The forgetting policy (its parameters are shown with retention curves)."""
        return self._policy

    async def run_forgetting(
        self, *, page_size: int = 1000, should_stop: Callable[[], bool] | None = None
    ) -> ForgettingRun:
        """The scheduled run: pages from the saved cursor until done or ``should_stop()`` says so."""
        return await forgetting.run_forgetting(
            self.apply_forgetting,
            self._checkpoints,
            page_size=page_size,
            should_stop=should_stop or (lambda: False),
        )

    async def get_checkpoint(self, name: str) -> str | None:
        """A saved bookmark (``None`` without a checkpoint store)."""
        return None if self._checkpoints is None else await self._checkpoints.get_checkpoint(name)

    async def set_checkpoint(self, name: str, value: str | None) -> None:
        """Save a bookmark (nothing without a checkpoint store)."""
        if self._checkpoints is not None:
            await self._checkpoints.set_checkpoint(name, value)

    # -- lifetime -----------------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the store, history, publisher and whatever the composition root handed over."""
        errors: list[BaseException] = []
        closers: list[Closeable | None] = [self._store, self._history, self._publisher, *self._owned]
        seen: set[int] = set()
        for resource in closers:
            if resource is None or id(resource) in seen:
                continue
            seen.add(id(resource))
            try:
                await resource.close()
            except Exception as exc:  # close everything even if one fails
                errors.append(exc)
        if errors:
            raise PermanentError(f"closing the memory service failed: {errors[0]}") from errors[0]

    async def __aenter__(self) -> MemoryService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
