"""Memory in this process: the embedded (or Azure-settings) service, its queue and an optional worker.

:class:`LocalMemoryClient` is the one way to open a local memory: the Python API, the agent
provider's ``local()`` and ``memory-core``'s own faces build it with :meth:`LocalMemoryClient.open`.
Turns go to the service's queue (the embedded durable queue), drained by a worker in this process
(``worker``) or by ``memory-core serve``, or are ingested inline when it has none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence, Set
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.bootstrap import build_local_queue, build_service, existing_local_queue, load_settings
from memory_core.client.base import MemoryBackend
from memory_core.client.results import AddResult, MemoryExport, add_result
from memory_core.domain.messages import HistoryEntry, Turn, session_id_for
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, SearchResult
from memory_core.errors import ValidationError
from memory_core.ports import ChatModel, Embedder, TurnPublisher
from memory_core.runtime.offload import StorageThread, offloaded
from memory_core.runtime.scheduler import ForgettingScheduler
from memory_core.runtime.worker import QueueWorker

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.adapters.sqlite.queue_messages import QueueMessage
    from memory_core.config import Settings
    from memory_core.service import ForgettingReport, MemoryService, PurgeReport
    from memory_core.service.entities import EntityForgetting, EntityMemories, EntitySummary

__all__ = ["OPEN_OPTIONS", "LocalMemoryClient"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The keyword arguments of :meth:`LocalMemoryClient.open` besides settings fields (what a caller
#: that opens a local memory on behalf of its own caller passes on).
OPEN_OPTIONS = (
    "sqlite_path",
    "embedder",
    "publisher",
    "queue",
    "worker",
    "close_timeout",
    "settings",
    "chat_model",
    "forgetting",
)

class LocalMemoryClient(MemoryBackend):
    """Memory in this process: the embedded store, queue and service, through a ``MemoryService``.

    With ``worker``, turns published to the embedded queue are ingested in this process, in the
    background, while the client is open: :meth:`wait_ready` waits (bounded) until the queued turns of
    a scope are ingested, so the next search sees them, and :meth:`close` waits (at most
    ``close_timeout``) for the turns this client queued. What is still queued then stays in the queue
    file, for the next client with a worker or for ``memory-core serve``.

    The queue's calls never run on the caller's event loop (as built by :meth:`open`): publishing
    (turns, recall updates) and the worker's receiving and settling take turns on one
    :class:`~memory_core.runtime.offload.StorageThread`, and :meth:`wait_ready` reads the queue on a
    connection of its own, off the loop. A queue file locked by another process (or a busy worker)
    therefore delays only those calls; the caller's timeouts (``asyncio.wait_for``) still hold and the
    agent's other work goes on.

    Args:
        service: The memory service to use.
        owns_service: Close the service with the client (set when the client built it).
        queue: The embedded queue the service publishes to, when a worker in this process should
            drain it (see ``worker``).
        worker: Run a queue worker in this process while the client is open (started on first use).
        close_timeout: Seconds :meth:`close` waits for the turns this client queued to be ingested by
            its worker.
        queue_thread: The thread the service's publisher runs ``queue``'s calls on (as :meth:`open`
            wires it); the worker runs its queue calls there too. ``None``: on the event loop.
        settings: The settings the service was built from (as :meth:`open` passes them): a purge
            then reaches the embedded queue beside the store too.
        forgetting: Keep the forgetting policy running while the client is open (on first use: a
            run at once when one is due or was never scheduled, then at ``MEMORY_FORGET_SCHEDULE``;
            needs ``settings``). :meth:`open` turns it on for the embedded store; with Azure AI
            Search the Functions timer runs it.
    """

    #: Seconds between two looks at the queue while waiting for turns to be ingested.
    POLL_SECONDS: float = 0.02
    #: Seconds a queue operation of :meth:`open`'s queue waits for another connection's write lock
    #: before it fails (and is retried: by the outbox for a turn, by the worker for its own calls).
    QUEUE_BUSY_SECONDS: float = 2.0
    #: Sessions whose given-up turns are remembered (the least recently waited for are forgotten).
    MAX_GIVEN_UP_SESSIONS: int = 1024

    def __init__(
        self,
        service: MemoryService,
        *,
        owns_service: bool = False,
        queue: SQLiteQueue | None = None,
        worker: bool = False,
        close_timeout: float = 10.0,
        queue_thread: StorageThread | None = None,
        settings: Settings | None = None,
        forgetting: bool = False,
    ) -> None:
        if close_timeout < 0:
            raise ValidationError("close_timeout", "must not be negative")
        self.service = service
        self.queue = queue
        self.queue_thread = queue_thread
        self.close_timeout = float(close_timeout)
        self.settings = settings
        if settings is not None and settings.store == "azure_search":
            self.mode, self.where = "azure", settings.azure_search_endpoint
        else:
            self.mode, self.where = "embedded", settings.sqlite_path if settings is not None else "(a service)"
        # Turns ingested here go one at a time, in order (what the queue's sessions guarantee
        # elsewhere): concurrent adds, hand edits and purges wait for one another.
        self._writing = asyncio.Lock()
        self._owns = owns_service
        self._want_worker = worker and queue is not None
        self._worker: QueueWorker | None = None
        self._worker_task: asyncio.Task[Any] | None = None
        self._stop: asyncio.Event | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self._want_forgetting = forgetting and settings is not None
        self._forgetting_task: asyncio.Task[None] | None = None
        self._forgetting_stop = asyncio.Event()
        self._written: set[Scope] = set()  # scopes this client queued turns for
        # Per session, the queued turns a wait already timed out on (pruned as they leave the queue).
        self._given_up: OrderedDict[str, set[str]] = OrderedDict()
        # Readiness is read on a connection of its own: the worker's calls (and their lock) never
        # hold it up. An in-memory queue has no second connection; its reads go where its calls go.
        self._monitor: SQLiteQueue | None = None
        if self._want_worker and queue is not None and queue.path != ":memory:":
            self._monitor = self._open_monitor(queue)

    @staticmethod
    def _open_monitor(queue: SQLiteQueue) -> SQLiteQueue | None:
        try:
            return SQLiteQueue(queue.path, queue=queue.queue, busy_timeout_seconds=queue.busy_timeout_seconds)
        except Exception as exc:  # readiness is then read through the queue itself
            logger.warning("could not open the queue %s for reading: %s: %s", queue.path, type(exc).__name__, exc)
            return None

    @classmethod
    def open(
        cls,
        *,
        sqlite_path: str | Path | None = None,
        embedder: Embedder | None = None,
        publisher: TurnPublisher | None = None,
        queue: bool | str | Path = False,
        worker: bool = False,
        close_timeout: float = 10.0,
        settings: Settings | None = None,
        chat_model: ChatModel | None = None,
        forgetting: bool | None = None,
        **overrides: Any,
    ) -> LocalMemoryClient:
        """Build an embedded memory service from settings (environment plus overrides) and own it.

        Args:
            sqlite_path: The embedded store file (default ``MEMORY_SQLITE_PATH``).
            embedder: An embedder instance to use instead of the one the settings name.
            publisher: Where turns go; ``None`` (and no ``queue``) ingests each turn inline.
            queue: Publish turns and recall updates to the embedded durable queue: ``True`` for
                the default file beside the store (the one ``memory-core serve`` drains), or a path.
            worker: Drain that queue in this process too (otherwise ``memory-core serve`` does).
            close_timeout: Seconds :meth:`close` waits for this client's queued turns (with ``worker``).
            settings: Ready :class:`~memory_core.config.Settings` (overrides are then ignored).
            chat_model: The LLM of extraction and consolidation, instead of the one the settings name
                (``MEMORY_LLM_PROVIDER``); it stays open when the client closes.
            forgetting: Run the forgetting policy in this process while the client is open (default:
                on for the embedded store, off for Azure AI Search, whose Functions timer runs it).
            **overrides: Other settings fields (``embedder="hash"``, ``llm_provider="compatible"``,
                ``llm_base_url=...``, ``llm_model=...``, ``half_life_days=30``...).
        """

        if settings is None:
            settings = load_settings(
                sqlite_path=str(sqlite_path) if sqlite_path is not None else None, **overrides
            )

        sqlite_queue = None
        thread = None
        if queue and publisher is None:
            sqlite_queue = build_local_queue(settings, path=None if queue is True else str(queue))
            try:
                sqlite_queue.busy_timeout_seconds = cls.QUEUE_BUSY_SECONDS
                thread = StorageThread("memory-queue")
            except BaseException:
                sqlite_queue.close_sync()
                raise
            # Every queue call of the service (turns, recall updates) runs on the queue's thread,
            # never on the agent's event loop; closing the service closes the queue and the thread.
            publisher = offloaded(sqlite_queue, thread)
        try:
            service = build_service(
                settings,
                embedder=embedder,
                publisher=publisher,
                recall_via_queue=sqlite_queue is not None,
                chat_model=chat_model,
            )
            return cls(
                service,
                owns_service=True,
                queue=sqlite_queue,
                worker=worker,
                close_timeout=close_timeout,
                queue_thread=thread,
                settings=settings,
                forgetting=settings.store != "azure_search" if forgetting is None else forgetting,
            )
        except BaseException:
            if sqlite_queue is not None:
                sqlite_queue.close_sync()
            if thread is not None:
                thread.close()
            raise

    def _ensure_background(self) -> None:
        """Start what runs while the client is open and is not running yet: the worker, forgetting."""
        self._ensure_worker()
        self._ensure_forgetting()

    def _ensure_forgetting(self) -> None:
        if not self._want_forgetting or self._forgetting_task is not None or self.settings is None:
            return
        scheduler = ForgettingScheduler(
            self.service,
            self.settings.forget_schedule,
            now=self.service.now,
            past_due_seconds=math.inf,  # a run due while no process had the store open is the rule here
            due_when_unscheduled=True,
        )
        self._forgetting_task = asyncio.ensure_future(self._keep_forgetting(scheduler))

    async def _keep_forgetting(self, scheduler: ForgettingScheduler) -> None:
        try:
            due = await scheduler.next_due()
            logger.debug("forgetting in this process; next run due %s", due.isoformat())
            await scheduler.run(self._forgetting_stop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # forgetting never fails the caller; the next open tries again
            logger.warning("forgetting stopped in this process: %s: %s", type(exc).__name__, exc)

    def _ensure_worker(self) -> None:
        if not self._want_worker or self._worker_task is not None or self.queue is None:
            return

        self._stop = asyncio.Event()
        self._worker = QueueWorker(self.queue, self.service, name="provider-worker", thread=self.queue_thread)
        self._worker_task = asyncio.ensure_future(self._worker.run(self._stop))

    def _ensure_warm(self) -> asyncio.Task[None]:
        if self._warm_task is None:
            self._warm_task = asyncio.ensure_future(self._warm_up())
        return self._warm_task

    async def _warm_up(self) -> None:
        try:
            await self.service.warm_up()
        except Exception as exc:  # the first search loads it then, or says what is wrong
            logger.warning("loading the embedding model failed: %s: %s", type(exc).__name__, exc)

    @property
    def worker_running(self) -> bool:
        """Whether this client's in-process worker is draining the queue now."""
        return self._worker_task is not None and not self._worker_task.done()

    async def start(self) -> None:
        """Start the in-process worker (with ``worker``) and forgetting (with ``forgetting``), and begin
        loading the embedding model."""
        self._ensure_background()
        self._ensure_warm()

    async def wait_ready(self, scope: Scope, *, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, for the embedding model to load and, while this client's
        worker runs, for the turns of ``scope`` waiting in the queue to be ingested (whoever queued
        them, this process or an earlier one).

        Only new turns and turns being processed are waited for (not one waiting to be retried after
        a failure, nor any turn of a session whose first message waits for its retry: none of them can
        be taken before), and each turn at most once: one a wait timed out on is not waited for again.
        The queue is read off the event loop, so a locked queue file delays nothing but this wait.

        Returns:
            ``False`` when the wait timed out.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        self._ensure_background()
        try:
            await asyncio.wait_for(asyncio.shield(self._ensure_warm()), timeout=max(0.0, timeout))
        except TimeoutError:
            return False
        if not self.worker_running:
            return True
        return await self._wait_ingested({scope}, deadline)

    async def _queue_call(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run a synchronous call of the queue on its thread (or here, without one)."""
        if self.queue_thread is None:
            return fn(*args)
        return await self.queue_thread.call(fn, *args)

    async def _waiting(self, scopes: Set[Scope]) -> tuple[dict[str, list[QueueMessage]], float]:
        """The waiting messages (every subject, oldest first) of each scope's session, and the queue's
        time they were read at; read off the event loop."""
        sessions = {session_id_for(scope) for scope in scopes}

        def read(queue: SQLiteQueue) -> tuple[dict[str, list[QueueMessage]], float]:
            found = {session: queue.waiting_in_session(session) for session in sessions}
            return found, time.time()  # the queue's clock

        if self._monitor is not None:  # its own connection and lock: never behind the worker's calls
            return await asyncio.to_thread(read, self._monitor)
        assert self.queue is not None  # only called with a queue
        return await self._queue_call(read, self.queue)

    async def _unsettled(self, scopes: Set[Scope], *, closing: bool = False) -> dict[str, str]:
        """The queued turns of ``scopes`` a wait may follow, by message id (to their session id): new
        or being processed now, in a session whose first message can be taken now (not one waiting
        for a retry), and, unless ``closing``, not one an earlier wait gave up on."""
        found, now = await self._waiting(scopes)
        waiting: dict[str, str] = {}
        for session, messages in found.items():
            present = {message.message_id for message in messages}
            given_up = self._given_up.get(session)
            if given_up is not None:  # forget the turns that left the queue
                given_up &= present
                if not given_up:
                    del self._given_up[session]
            if not messages:
                continue
            head = messages[0]
            head_in_hand = head.locked_until is not None and head.locked_until > now
            if not head_in_hand and head.visible_at > now:
                continue  # the session waits for a retry: none of its turns can be taken before
            skip: Set[str] = frozenset() if closing or given_up is None else given_up
            for message in messages:
                if message.subject != "turn" or message.message_id in skip:
                    continue
                in_hand = message.locked_until is not None and message.locked_until > now
                if message.delivery_count == 0 or in_hand:
                    waiting[message.message_id] = session
        return waiting

    def _give_up(self, waiting: Mapping[str, str]) -> None:
        """Remember turns a wait timed out on, so no later wait waits for them again (bounded)."""
        for message_id, session in waiting.items():
            self._given_up.setdefault(session, set()).add(message_id)
            self._given_up.move_to_end(session)
        while len(self._given_up) > self.MAX_GIVEN_UP_SESSIONS:
            self._given_up.popitem(last=False)

    async def _wait_ingested(self, scopes: set[Scope], deadline: float, *, closing: bool = False) -> bool:
        """Wait until the turns of ``scopes`` queued now are ingested, the worker stops, or ``deadline``
        (``closing``: also the turns an earlier wait gave up on)."""
        loop = asyncio.get_running_loop()
        waiting = await self._unsettled(scopes, closing=closing)
        if waiting and self._worker is not None:
            self._worker.wake()
        while waiting:
            if loop.time() >= deadline or not self.worker_running:
                if not closing:  # (close says what is left itself)
                    self._give_up(waiting)
                    logger.info(
                        "%s queued turn(s) are not ingested yet; searching without them (they are "
                        "ingested in the background)",
                        len(waiting),
                    )
                return False
            await asyncio.sleep(self.POLL_SECONDS)
            still = await self._unsettled(scopes, closing=closing)
            # Turns queued after the wait began are not awaited.
            waiting = {message_id: session for message_id, session in waiting.items() if message_id in still}
        return True

    async def drain(self) -> int:
        """Ingest every message waiting in the embedded queue now; returns how many were handled."""
        if self.queue is None:
            return 0

        worker = QueueWorker(self.queue, self.service, name="drain", renew_locks=False, thread=self.queue_thread)
        handled: int = await worker.drain()
        return handled

    def now(self) -> datetime:
        """The service's clock (the time its searches compute retention at)."""
        return self.service.now()

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        self._ensure_background()
        return await self.service.search(scope, query, options, recall=recall)

    async def publish_turn(self, turn: Turn) -> None:
        self._ensure_background()
        if self.queue is not None:
            self._written.add(turn.scope)  # (also for a send that outlives its caller's timeout)
        await self.service.publish_turn(turn)
        if self._worker is not None:
            self._worker.wake()  # ingest it now, not at the worker's next poll

    async def record_recall(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        await self.service.record_recall(scope, list(memory_ids))

    async def add(self, turn: Turn, *, infer: bool = True) -> AddResult:
        """Extract and consolidate ``turn`` now, whatever the client's publisher (``infer=False``: its
        messages as given); the decisions."""
        self._ensure_forgetting()
        async with self._writing:
            return add_result(await self.service.ingest(turn, infer=infer))

    async def get(self, scope: Scope, memory_id: str) -> MemoryRecord:
        return await self.service.get(scope, memory_id)

    async def page(
        self, scope: Scope, status: MemoryStatus | None, cursor: str | None, limit: int, *,
        include_superseded: bool = False, filters: Mapping[str, Any] | None = None,
    ) -> tuple[list[MemoryRecord], str | None]:
        statuses = [status] if status is not None else [MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]
        page = await self.service.list(
            scope, statuses=statuses, cursor=cursor, limit=limit, include_superseded=include_superseded,
            filters=filters,
        )
        return page.records, page.next_cursor

    async def update(
        self, scope: Scope, memory_id: str, text: str, metadata: Mapping[str, Any] | None
    ) -> MemoryRecord:
        async with self._writing:
            return await self.service.update(scope, memory_id, text, metadata=metadata)

    async def delete(self, scope: Scope, memory_id: str) -> MemoryRecord:
        async with self._writing:
            return await self.service.delete(scope, memory_id)

    async def purge(self, user_id: str, agent_id: str | None) -> PurgeReport:
        """Remove a user's memories for good; the embedded queue beside the store (which a client with
        ``queue`` or ``memory-core serve`` publishes to) loses the user's turns too."""
        async with self._writing:
            if self.queue is not None or self.settings is None:  # (the service's publisher is the queue)
                return await self.service.purge(user_id, agent_id)
            queue = existing_local_queue(self.settings)
            try:
                return await self.service.purge(user_id, agent_id, queue=queue)
            finally:
                if queue is not None:
                    await queue.close()

    async def reset(self) -> list[PurgeReport]:
        """Purge every user of the store (memories, history, queued turns; see :meth:`purge`), user by
        user; the store file stays, empty.

        Raises:
            UnsupportedError: The store cannot list its users (Azure AI Search: purge user by user).
        """
        reports: list[PurgeReport] = []
        after: str | None = None
        while True:
            users, after = await self.service.users(after=after, limit=100)
            for user in users:
                reports.append(await self.purge(user.id, None))
            if after is None or not users:
                return reports

    async def history(self, scope: Scope, memory_id: str) -> list[HistoryEntry]:
        await self.service.get(scope, memory_id)  # NotFoundError for an unknown memory, as over HTTP
        return await self.service.history_of(scope, memory_id)

    async def export(self, user_id: str, agent_id: str | None, *, include_vectors: bool = False) -> MemoryExport:
        memories = [r async for r in self.service.export(user_id, agent_id, include_vectors=include_vectors)]
        history = await self.service.export_history(user_id, agent_id)
        return MemoryExport(user_id, agent_id, tuple(memories), tuple(history))

    async def forget(self, dry_run: bool, limit: int | None) -> ForgettingReport:
        return await self.service.apply_forgetting(dry_run=dry_run, limit=limit)

    async def entities(self, scope: Scope) -> list[EntitySummary]:
        return await self.service.entities(scope)

    async def entity(self, scope: Scope, entity_id: str) -> EntityMemories:
        return await self.service.entity(scope, entity_id)

    async def forget_entity(self, scope: Scope, entity_id: str) -> EntityForgetting:
        async with self._writing:
            return await self.service.forget_entity(scope, entity_id)

    async def close(self) -> None:
        """Wait (at most ``close_timeout``) for the worker to ingest the turns this client queued, stop
        it, and close the service if the client owns it. Turns not ingested by then stay queued."""
        try:
            if self._worker_task is not None and self._stop is not None:
                await self._stop_worker(self._worker_task, self._stop)
        finally:
            self._worker_task = None
            await self._stop_forgetting()
            if self._warm_task is not None and not self._warm_task.done():
                self._warm_task.cancel()
                await asyncio.gather(self._warm_task, return_exceptions=True)
            try:
                if self._owns:
                    await self.service.close()  # (closes the queue and its thread)
            finally:
                if self._monitor is not None:
                    self._monitor.close_sync()
                    self._monitor = None

    async def _stop_forgetting(self) -> None:
        """Stop forgetting after the page in hand (a run stopped half-way resumes at the next open)."""
        task, self._forgetting_task = self._forgetting_task, None
        if task is None:
            return
        self._forgetting_stop.set()
        _, running = await asyncio.wait({task}, timeout=max(1.0, self.close_timeout))
        if running:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _stop_worker(self, task: asyncio.Task[Any], stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.close_timeout
        if self._written and not task.done():
            try:
                await self._wait_ingested(self._written, deadline, closing=True)
            except Exception as exc:  # the queue is unreadable: what is queued stays queued
                logger.warning("could not follow the queued turns on close: %s: %s", type(exc).__name__, exc)
        stop.set()  # the worker finishes the message in hand
        _, running = await asyncio.wait({task}, timeout=max(1.0, deadline - loop.time()))
        if running:
            task.cancel()  # the message in hand is released: delivered again at the next start
        await asyncio.gather(task, return_exceptions=True)
        left = 0
        with contextlib.suppress(Exception):  # only for the log line
            found, _ = await asyncio.wait_for(self._waiting(self._written), timeout=1.0)
            left = sum(1 for messages in found.values() for message in messages if message.subject == "turn")
        if left:
            logger.warning(
                "%s turn(s) are still queued in %s; they are ingested at the next start of a provider "
                "with a worker, or by `memory-core serve`",
                left,
                self.queue.path if self.queue is not None else "the queue",
            )

