"""The one object every entry point holds, built by :mod:`memory_core.bootstrap` from the ports it needs:
each method is a thin call to a use case of this package (entry points never reach into its ports)."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from memory_core.capabilities import QueuedItem, ScopePurger, VectorBackfill, supports
from memory_core.domain.filters import parse_filters
from memory_core.domain.messages import HistoryEntry, RecallUpdate, Turn
from memory_core.domain.paging import PageRequest
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import Listing, MemorySearchOptions, SearchResult
from memory_core.domain.validation import validate_scope_id
from memory_core.errors import ConfigurationError, PermanentError
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
    SortedPage,
    StatusCounts,
    TurnPublisher,
)
from memory_core.service import admin, backfill, export_pages, forgetting, import_export, inspection, messages
from memory_core.service import entities as entity_cases
from memory_core.service import search as search_use_case
from memory_core.service.admin import PurgeReport
from memory_core.service.consolidation.consolidator import MemoryConsolidator
from memory_core.service.episodes import EpisodePolicy
from memory_core.service.export_pages import ExportPage
from memory_core.service.extraction.verbatim import VerbatimExtractor
from memory_core.service.forgetting import FORGET_PAGE_SIZE, ForgettingReport, ForgettingRun, RetentionCurve
from memory_core.service.import_export import ImportReport
from memory_core.service.ingest import ingest_turn
from memory_core.service.messages import ProcessOutcome, TurnStatus, valid_turn
from memory_core.service.preparation import CandidateExtractor, PreparedTurn, prepare_ahead
from memory_core.service.results import IngestResult

__all__ = ["MemoryService"]

logger = logging.getLogger(__name__)

_List = list  # ``list`` is also a method name of the service


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
        self, scope: Scope, query: str, options: MemorySearchOptions | Mapping[str, Any] | None = None, *,
        recall: bool = True,
    ) -> SearchResult:
        """Ranked memories for ``query``; the returned memories count as recalled unless ``recall`` is off.

        An empty query is a keyword match-all (every memory the filters allow).
        """
        result = await search_use_case.search(self._store, self._embedder, scope, query, options, now=self.now())
        records = self._as_of_now([h.record for h in result.hits])
        hits = [h.model_copy(update={"record": r}) for h, r in zip(result.hits, records, strict=True)]
        result = result.model_copy(update={"hits": hits})
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
        if await search_use_case.recall_purged(history, update):
            return None
        return await search_use_case.apply_recall(self._store, history, self._policy, update, self.now())

    # -- ingestion ---------------------------------------------------------------------------------
    async def ingest(
        self, turn: Turn | Mapping[str, Any], *, prepared: PreparedTurn | None = None, infer: bool = True
    ) -> IngestResult:
        """Extract, consolidate and apply one turn now (idempotent per ``turn_id``).

        Args:
            turn: The turn (a :class:`Turn` or its JSON dict).
            prepared: Its extraction and vectors worked out ahead (:meth:`prepare`), if any.
            infer: Extract what is worth keeping (``False``: keep each user and assistant message
                as given, one memory each, without episodes:
                :class:`~memory_core.service.extraction.verbatim.VerbatimExtractor`).

        Raises:
            ValidationError: The turn is malformed, or dated in the future.
        """
        checked = valid_turn(turn, self.now())
        if infer:
            return await self._ingest(checked, prepared)
        if self._consolidator is None:
            raise ConfigurationError("this service was built without a consolidator")
        return await ingest_turn(
            checked, store=self._store, history=self._need_history(), extractor=VerbatimExtractor(),
            consolidator=self._consolidator, embedder=self._embedder, clock=self._clock, episodes=None,
        )

    async def _ingest(self, turn: Turn, prepared: PreparedTurn | None = None) -> IngestResult:
        if self._extractor is None or self._consolidator is None:
            raise ConfigurationError("this service was built without an extractor and a consolidator")
        return await ingest_turn(
            turn, store=self._store, history=self._need_history(), extractor=self._extractor,
            consolidator=self._consolidator, embedder=self._embedder, clock=self._clock, episodes=self._episodes,
            prepared=prepared,
        )

    async def prepare(self, turns: Sequence[Turn]) -> list[PreparedTurn | None]:
        """Extract several validated turns and embed all their candidates in one call, ahead of
        ingesting them in order (best effort, never raises; nothing is prepared for a chat model's
        extraction: :func:`~memory_core.service.preparation.prepare_ahead`).

        Returns:
            One entry per turn: what to pass to :meth:`ingest` (or :meth:`process_message`) as
            ``prepared``, or ``None`` for a turn that is ingested the usual way.
        """
        return await prepare_ahead(
            turns, history=self._history, extractor=self._extractor, embedder=self._embedder, episodes=self._episodes
        )

    async def prepare_messages(self, bodies: Sequence[bytes | str | Mapping[str, Any]]) -> list[PreparedTurn | None]:
        """:meth:`prepare` for queue message bodies: the turns among them (a body that does not decode,
        a recall update or a turn dated in the future gets ``None``; processing it says why)."""
        turns = messages.valid_turns(bodies, self._clock)
        ready = [t for t in turns if t is not None]
        prepared = iter(await self.prepare(ready))
        return [next(prepared) if t is not None else None for t in turns]

    async def publish_turn(self, turn: Turn | Mapping[str, Any]) -> TurnStatus:
        """Queue a turn for ingestion, or ingest it now when there is no queue; ``queued``, ``ingested``,
        ``duplicate`` or ``purged`` (see :func:`~memory_core.service.messages.publish_turn`).

        Raises:
            ValidationError: The turn is malformed, or dated in the future.
        """
        return await messages.publish_turn(
            valid_turn(turn, self.now()), publisher=self._publisher, history=self._history, ingest=self._ingest
        )

    async def process_message(
        self, body: bytes | str | Mapping[str, Any], *, prepared: PreparedTurn | None = None
    ) -> ProcessOutcome:
        """Handle one queue message, a turn (``prepared`` ahead by :meth:`prepare_messages`, if at all) or a
        recall update; raises what :func:`~memory_core.service.messages.process_message` says."""
        return await messages.process_message(
            body, ingest=functools.partial(self.ingest, prepared=prepared), apply_recall=self._apply_recall
        )

    async def set_aside(
        self, *, message_id: str, reason: str, description: str, body: bytes, session_id: str | None = None,
        delivery_count: int | None = None, enqueued_time: datetime | None = None,
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
                message_id=message_id, reason=reason, description=description, body=body, at=self.now(),
                session_id=session_id, delivery_count=delivery_count, enqueued_time=enqueued_time,
            )
        )
        return True

    # -- inspection ---------------------------------------------------------------------------------
    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        """One memory of any status (with its embedding), its retention as of now; :class:`NotFoundError`
        when ``scope`` has none."""
        return self._policy.as_of(await inspection.get_memory(self._store, scope, memory_id), self.now())

    def _as_of_now(self, records: Iterable[MemoryRecord]) -> _List[MemoryRecord]:
        """``records`` as read now: each with its retention now (:meth:`HumanMemoryPolicy.as_of`)."""
        now = self.now()
        return [self._policy.as_of(record, now) for record in records]

    async def history_of(self, scope: Scope, memory_id: str) -> _List[HistoryEntry]:
        """Every recorded change to one memory, oldest first (empty without a history)."""
        if self._history is None:
            return []
        return await self._history.for_memory(Scope.of(scope.user_id, scope.agent_id), memory_id)

    async def list(
        self, scope: Scope, *, statuses: Sequence[MemoryStatus] | None = None, cursor: str | None = None,
        limit: int = 100, include_superseded: bool = False, filters: Mapping[str, Any] | None = None,
    ) -> Page:
        """One page of a scope's memories, by id, each with its retention as of now: the current ones, or
        with ``include_superseded`` also those superseded by something said later (what held before);
        with ``filters`` (a search's conditions on fields and metadata), only those they keep.

        Raises:
            ValidationError: A bad scope or filter (the field is named, ``filters.<path>``).
        """
        scope = Scope.of(scope.user_id, scope.agent_id)
        node = None if filters is None else parse_filters(filters)
        request = PageRequest(
            statuses=statuses, after=cursor, limit=limit, current_at=self._current_at(include_superseded), filters=node
        )
        page = await self._store.scan(scope, request)
        return replace(page, records=self._as_of_now(page.records))

    def _current_at(self, include_superseded: bool) -> datetime | None:
        """The time a listing reads "current" at: now, or ``None`` (current or not) with ``include_superseded``."""
        return None if include_superseded else self.now()

    async def agents(self, user_id: str) -> _List[str]:
        """The agents that hold memories of ``user_id``."""
        return await self._store.agents(validate_scope_id(user_id, "user_id"))

    async def browse(self, scope: Scope, listing: Listing, *, include_superseded: bool = False) -> SortedPage:
        """One page of a scope's memories, filtered and sorted (the inspector's table), with the count;
        each with its retention as of now (a sort by retention follows the scores stored at the last
        forgetting run). The current ones, or with ``include_superseded`` also the superseded."""
        listing = replace(listing, current_at=self._current_at(include_superseded))
        page = await self._store.browse(Scope.of(scope.user_id, scope.agent_id), listing)
        return replace(page, records=self._as_of_now(page.records))

    async def users(self, *, after: str | None = None, limit: int = 100) -> tuple[_List[StatusCounts], str | None]:
        """Users holding memories, by id after ``after``, with counts by status; and the next cursor
        (:class:`UnsupportedError` for a store that cannot list them, as Azure AI Search)."""
        return await inspection.list_users(self._store, after=after, limit=limit)

    async def agent_counts(self, user_id: str) -> _List[StatusCounts]:
        """The agents of ``user_id`` with their counts by status."""
        return await self._store.count_agents(validate_scope_id(user_id, "user_id"))

    # -- entities -------------------------------------------------------------------------------------
    async def entities(self, scope: Scope) -> _List[entity_cases.EntitySummary]:
        """The people, pets, places and organisations ``scope``'s memories name, each with its number of
        memories (:class:`UnsupportedError` for a store without an entity index)."""
        return await entity_cases.list_entities(self._store, scope)

    async def entity(self, scope: Scope, entity_id: str) -> entity_cases.EntityMemories:
        """One entity and its memories, newest first, their retention as of now; :class:`NotFoundError`
        when ``scope`` has none of that id."""
        found = await entity_cases.entity_with_memories(self._store, scope, entity_id)
        return replace(found, memories=self._as_of_now(found.memories))

    async def forget_entity(self, scope: Scope, entity_id: str) -> entity_cases.EntityForgetting:
        """Soft-delete every memory of one entity (each recorded in its history), and with them the
        entity (see :func:`memory_core.service.entities.forget_entity`)."""
        return await entity_cases.forget_entity(self._store, self._history, scope, entity_id, now=self.now())

    async def export_entity(
        self, scope: Scope, entity_id: str, *, include_vectors: bool = False
    ) -> entity_cases.EntityExport:
        """One entity's memories as an export writes them, and their decisions (see
        :func:`memory_core.service.entities.export_entity`)."""
        return await entity_cases.export_entity(
            self._store, self._history, scope, entity_id, include_vectors=include_vectors
        )

    async def resolve_entity_id(self, scope: Scope, text: str) -> str:
        """The id of the entity of ``scope`` that ``text`` names: its id, or the start of exactly one."""
        return await entity_cases.resolve_entity_id(self._store, scope, text)

    # -- administration -----------------------------------------------------------------------------
    async def delete(
        self, scope: Scope, memory_id: str, *, reason: str = "deleted on request"
    ) -> MemoryRecord:
        """Soft delete, recorded in the memory's history; never returned by search again."""
        return await admin.delete_memory(
            self._store, self._history, scope, memory_id, reason=reason, now=self.now()
        )

    async def update(
        self, scope: Scope, memory_id: str, text: str, *, metadata: Mapping[str, Any] | None = None,
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
            self._store, self._embedder, self._history, self._policy, scope, memory_id, text, metadata=metadata,
            reason=reason, now=self.now(),
        )

    async def import_records(
        self,
        rows: Iterable[Mapping[str, Any]],
        *,
        dedupe: bool = False,
        progress: ProgressCallback | None = None,
        defer_vectors: bool = False,
    ) -> ImportReport:
        """Validate every row first (errors name the row), then write in batches, embedding as needed.

        ``dedupe`` makes the import idempotent on content; ``progress`` is told ``(written, to write)``
        after every batch; ``defer_vectors`` leaves the vectors the records lack to
        :meth:`fill_vectors` on a store that fills them later (see
        :func:`memory_core.service.import_export.import_records`).
        """
        return await import_export.import_records(
            self._store, self._embedder, self._policy, self.now(), rows, dedupe=dedupe, progress=progress,
            defer_vectors=defer_vectors,
        )

    async def fill_vectors(
        self, *, progress: ProgressCallback | None = None, stop: Callable[[], bool] | None = None
    ) -> backfill.FillReport:
        """Compute the vectors of every memory stored without one (an import that left them for later,
        or one interrupted while computing them); ``progress`` is told ``(done, missing at the start)``,
        and ``stop``, asked before every page, ends the fill early when it says so.
        A store that embeds before writing has none missing (see
        :func:`memory_core.service.backfill.fill_missing_vectors`)."""
        if not supports(self._store, VectorBackfill):
            return backfill.FillReport(filled=0, embedded=0, missing=0)
        return await backfill.fill_missing_vectors(
            cast(VectorBackfill, self._store), self._embedder, progress=progress, stop=stop
        )

    async def missing_vectors(self) -> int:
        """How many memories are stored without a vector (0 for a store that embeds before writing)."""
        if not supports(self._store, VectorBackfill):
            return 0
        return await cast(VectorBackfill, self._store).count_missing_vectors()

    async def resolve_id(self, scope: Scope, text: str) -> str:
        """The id of the memory of ``scope`` that ``text`` names: its id, or the start of exactly one id
        (see :func:`memory_core.service.inspection.resolve_memory_id`)."""
        return await inspection.resolve_memory_id(self._store, scope, text)

    def export(
        self, user_id: str, agent_id: str | None = None, *, include_vectors: bool = False
    ) -> AsyncIterator[MemoryRecord]:
        """Every record of a user (one agent, or all), every field (provenance included; the embedding
        only with ``include_vectors``), every status."""
        return import_export.export_records(self._store, user_id, agent_id, include_vectors=include_vectors)

    async def export_page(
        self,
        user_id: str,
        agent_id: str | None = None,
        *,
        cursor: str | None = None,
        limit: int = import_export.EXPORT_PAGE,
        include_vectors: bool = False,
    ) -> ExportPage:
        """One page of a user's export: memories, then decision history, agent by agent; the page's
        ``next_cursor`` resumes (see :func:`memory_core.service.export_pages.export_page`)."""
        return await export_pages.export_page(
            self._store, self._history, user_id, agent_id, cursor=cursor, limit=limit,
            include_vectors=include_vectors,
        )

    async def export_history(self, user_id: str, agent_id: str | None = None) -> _List[HistoryEntry]:
        """Every recorded decision of a user's scopes (one agent's, or all; empty without a history)."""
        return await import_export.export_history(self._store, self._history, user_id, agent_id)

    async def queued_messages(self, user_id: str, agent_id: str | None = None) -> _List[QueuedItem]:
        """A user's messages still on the local queue, by ids and time (empty where the queue cannot
        list them, as Service Bus)."""
        return await inspection.queued_messages(self._publisher, user_id, agent_id)

    async def purge(
        self, user_id: str, agent_id: str | None = None, *, queue: ScopePurger | None = None
    ) -> PurgeReport:
        """Physically remove a user's memories and history (one agent's, or all), so that it holds.

        The purge time is recorded first as the scope's tombstone: turns and recall updates dated at or
        before it are dropped from then on, wherever they come from. A local queue that can
        (:class:`~memory_core.capabilities.ScopePurger`) loses the scope's messages: ``queue`` (the embedded
        queue of a service built without it as its publisher), else the publisher; the SQLite files are
        rewritten and checkpointed so the deleted text leaves the disk, and the purge is settled (a
        turn caught by it waits for that). See :func:`memory_core.service.admin.purge_user`.
        """
        if queue is None and supports(self._publisher, ScopePurger):
            queue = cast(ScopePurger, self._publisher)
        files = [self._store, self._history, self._publisher, queue]
        return await admin.purge_user(
            self._store, self._history, user_id, agent_id, now=self.now(), queue=queue, files=files
        )

    # -- forgetting ---------------------------------------------------------------------------------
    async def apply_forgetting(
        self, *, dry_run: bool = True, limit: int | None = None, cursor: str | None = None,
        page_size: int = FORGET_PAGE_SIZE, progress: ProgressCallback | None = None,
    ) -> ForgettingReport:
        """Bring retention and status up to date (a dry run by default), writing only what changed.

        ``progress`` is told ``(memories scanned, limit)`` after every page.
        """
        report = await forgetting.apply_forgetting(
            self._store, self._policy, self.now(), dry_run=dry_run, limit=limit, cursor=cursor,
            tolerance=self._forget_tolerance, page_size=page_size, progress=progress,
        )
        logger.info("forgetting (dry_run=%s): %s", dry_run, report.summary())
        return report

    async def preview_forgetting(
        self, scope: Scope, *, limit: int = 10_000, cursor: str | None = None
    ) -> ForgettingReport:
        """What forgetting would do to one scope now (nothing is written); lists rescores too."""
        scope = Scope.of(scope.user_id, scope.agent_id)
        return await forgetting.preview_forgetting(
            self._store, self._policy, self.now(), scope, limit=limit, cursor=cursor, tolerance=self._forget_tolerance
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
            self.apply_forgetting, self._checkpoints, page_size=page_size, should_stop=should_stop or (lambda: False)
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
