"""``memory-core serve``: the HTTP API, queue workers and the forgetting scheduler in one process.

Wiring: the embedded store and history (``MEMORY_SQLITE_PATH``), the durable SQLite queue beside it
(``<store file>.queue``), and a memory service that publishes turns *and* recall updates to that
queue, so every write of a scope goes through one ordered path, exactly as in Azure.

Stopping: the first SIGINT/SIGTERM stops accepting requests, lets each worker finish the message in
hand (up to ``grace_seconds``), then releases whatever is still in flight (abandon: delivered again
at the next start); a second signal releases at once. Killing the process (SIGKILL, power loss)
loses nothing either: in-flight messages stay locked until their lock expires and are then
delivered again; ingestion is idempotent, so the store ends up as if each message was processed
once.

Supervision: a queue error does not stop a worker (it backs off and retries, see
:mod:`memory_core.runtime.worker`); a worker or scheduler task that dies anyway (a bug) is logged and
restarted after a back-off that doubles with each crash in a row (``retry_initial_seconds`` up to
``retry_max_seconds``), so a crash loop cannot spin. ``GET /api/health`` shows each worker's state,
restarts and counts, and the queue's depth, oldest message age and dead letters; it answers 503
(``"status": "unhealthy"``) when messages wait and no worker drains them: every worker stopped or
backing off for at least ``stalled_after_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memory_core.adapters.sqlite.files import make_folder, refuse_empty_file
from memory_core.adapters.sqlite.integrity import FileState, Integrity
from memory_core.adapters.sqlite.schema import check_file
from memory_core.bootstrap import (
    build_authenticator,
    build_local_queue,
    build_service,
    configure_telemetry,
    local_queue_path,
)
from memory_core.config import Settings
from memory_core.domain.access import Authenticator
from memory_core.entrypoints.embedded.server import MAX_CONNECTIONS, READ_TIMEOUT_SECONDS, ApiServer
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.errors import ConfigurationError
from memory_core.runtime.backoff import exponential_backoff
from memory_core.runtime.lanes import DEFAULT_BATCH
from memory_core.runtime.offload import StorageThread, offloaded
from memory_core.runtime.recalls import CoalescingPublisher
from memory_core.runtime.scheduler import ForgettingScheduler
from memory_core.runtime.supervision import supervise
from memory_core.runtime.vectors import VectorFiller
from memory_core.runtime.worker import QueueWorker
from memory_core.service import MemoryService

if TYPE_CHECKING:  # pragma: no cover
    from memory_core.adapters.sqlite.queue import SQLiteQueue

__all__ = ["EmbeddedRuntime", "RuntimeOptions", "serve", "serve_async"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """How ``serve`` runs.

    Attributes:
        host: Interface the HTTP API binds (loopback by default).
        port: Port of the HTTP API (0 picks a free one; the chosen one is printed).
        workers: Queue workers: turns of as many scopes in flight at once, their passages embedded
            in one call (:mod:`memory_core.runtime.batching`).
        batch: Messages of one session a worker takes at once: their turns are prepared together
            (extracted, their passages embedded in one call), then processed and settled one by one.
        queue_path: The queue file (default ``<store file>.queue``).
        lock_seconds: Peek-lock duration: a message held longer by a dead worker is delivered again.
        max_deliveries: Deliveries before a message is dead-lettered.
        scheduler: Run the nightly forgetting job (``MEMORY_FORGET_SCHEDULE``).
        forget_page_size: Memories per forgetting page.
        grace_seconds: How long a stop waits for in-flight messages before releasing them.
        idle_seconds: Queue polling interval when idle.
        http: Serve the HTTP API (off: workers and scheduler only).
        token: The bearer token the API requires (``None``: ``MEMORY_API_TOKEN``; empty there too:
            none, and only a loopback ``host`` is allowed).
        retry_initial_seconds: First back-off of a worker after a queue error, and before restarting
            a task that died; it doubles with each failure in a row.
        retry_max_seconds: The longest such back-off.
        stalled_after_seconds: ``GET /health`` answers 503 when messages wait and every worker has been
            stopped or backing off at least this long.
        request_concurrency: HTTP requests served at once (others wait their turn; health never
            does), so the queue workers keep their share of the event loop under a crowd of
            searches (``None``: no limit).
        max_connections: HTTP connections served at once (each holds a thread); more are answered
            503 with ``Retry-After`` and closed.
        read_timeout: Seconds an HTTP client may take to send a whole request, or to start one on an
            idle connection (408 and closed after).
        recall_window_seconds: How long a scope's recall updates are gathered into one before they
            are queued (:mod:`memory_core.runtime.recalls`; 0: each is queued at once).
        vector_fill_seconds: How often the store is looked at for memories stored without a vector
            (an import's), whose vectors are then computed (:mod:`memory_core.runtime.vectors`; 0: never).
    """

    host: str = "127.0.0.1"
    port: int = 7071
    workers: int = 4
    batch: int = DEFAULT_BATCH
    queue_path: str | None = None
    lock_seconds: float = 60.0
    max_deliveries: int = 10
    scheduler: bool = True
    forget_page_size: int = 1000
    grace_seconds: float = 30.0
    idle_seconds: float = 0.2
    http: bool = True
    token: str | None = None
    retry_initial_seconds: float = 0.2
    retry_max_seconds: float = 30.0
    stalled_after_seconds: float = 60.0
    request_concurrency: int | None = 2
    max_connections: int = MAX_CONNECTIONS
    read_timeout: float = READ_TIMEOUT_SECONDS
    recall_window_seconds: float = 2.0
    vector_fill_seconds: float = 30.0


class EmbeddedRuntime:
    """The embedded runtime: build with settings and options, then ``await run(stop)``.

    Args:
        settings: memory-core settings (store file, embedder, policy, schedule).
        options: Host, port, workers and queue behaviour.
        out: Where the "listening on" line is printed (``None``: only logged).
        clock: Monotonic seconds for the workers' state durations (tests inject theirs).

    Attributes:
        worker_class: The worker type :meth:`build_worker` makes (a subclass may change it).
    """

    worker_class: type[QueueWorker] = QueueWorker

    def __init__(
        self,
        settings: Settings,
        options: RuntimeOptions | None = None,
        *,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.options = options or RuntimeOptions()
        opts = self.options
        if opts.workers < 0:
            raise ValueError("workers must not be negative")
        if opts.batch < 1:
            raise ValueError("batch must be at least 1")
        if not 0 < opts.retry_initial_seconds <= opts.retry_max_seconds:
            raise ValueError("retry_initial_seconds must be positive and at most retry_max_seconds")
        if opts.stalled_after_seconds <= 0:
            raise ValueError("stalled_after_seconds must be positive")
        self.out = out
        self.clock = clock
        self.queue: SQLiteQueue | None = None
        #: A second connection to the queue file, for health only (never waits behind the workers).
        self.monitor: SQLiteQueue | None = None
        #: The thread every queue operation of this process runs on (publishing, receiving, settling).
        self.queue_thread: StorageThread | None = None
        self.server: ApiServer | None = None
        self.workers: list[QueueWorker] = []
        self.service: MemoryService | None = None
        #: Computes the vectors an import left for later (``None``: not in this runtime).
        self.vector_filler: VectorFiller | None = None
        #: The integrity of the store's file, as the store found it at open (and since).
        self.store_file = FileState()

    @property
    def queue_path(self) -> str:
        return self.options.queue_path or local_queue_path(self.settings)

    def build_queue(self) -> SQLiteQueue:
        """Open the queue the runtime drains and publishes to."""
        opts = self.options
        return build_local_queue(
            self.settings,
            path=self.queue_path,
            lock_seconds=opts.lock_seconds,
            max_deliveries=opts.max_deliveries,
        )

    def build_worker(self, queue: SQLiteQueue, service: MemoryService, name: str) -> QueueWorker:
        """One queue worker (a :attr:`worker_class`) with the runtime's polling and back-off."""
        opts = self.options
        return self.worker_class(
            queue,
            service,
            name=name,
            idle_seconds=opts.idle_seconds,
            retry_delay=self._backoff,
            clock=self.clock,
            thread=self.queue_thread,
            batch=opts.batch,
        )

    def _supervise(
        self,
        name: str,
        run: Callable[[asyncio.Event], Awaitable[None]],
        stop: asyncio.Event,
        *,
        worker: QueueWorker | None = None,
    ) -> Coroutine[Any, Any, None]:
        """``run`` kept alive until ``stop`` (:func:`~memory_core.runtime.supervision.supervise`)."""
        healthy_after = self.options.retry_max_seconds
        return supervise(name, run, stop, backoff=self._backoff, healthy_after=healthy_after, worker=worker)

    def _backoff(self, attempt: int) -> float:
        return exponential_backoff(
            attempt, initial=self.options.retry_initial_seconds, maximum=self.options.retry_max_seconds
        )

    # -- health ---------------------------------------------------------------------------------
    def health_details(self) -> dict[str, Any]:
        """What ``GET /health`` shows: ingestion verdict, the queue and every worker.

        ``ingestion`` is ``ok``, ``stopped`` (messages wait and no worker drains them; ``problem`` says
        why) or ``off`` (no workers in this process).
        """
        queue_facts, waiting = self._queue_health()
        workers = [w.health() for w in self.workers]
        files = self._file_states()
        details: dict[str, Any] = {
            "ingestion": "ok", "queue": queue_facts, "workers": workers, "files": files
        }
        if self.vector_filler is not None:
            details["vectors"] = self.vector_filler.health()
        threshold = self.options.stalled_after_seconds
        stalled = bool(self.workers) and all(w.is_stalled(threshold) for w in self.workers)
        if self.options.workers == 0:
            details["ingestion"] = "off"
        elif files.get("store") == "damaged":
            details["ingestion"] = "stopped"
            details["problem"] = _DAMAGED_STORE
        elif stalled and (waiting is None or waiting > 0):
            details["ingestion"] = "stopped"
            details["problem"] = self._stalled_problem(waiting, threshold)
        if files.get("queue") == "damaged":
            details["degraded"] = _DAMAGED_QUEUE
        damaged = [path for name, path in (("store", self.settings.sqlite_path), ("queue", self.queue_path))
                   if files.get(name) == "damaged"]
        if damaged:  # an administrator's fact only (PUBLIC_HEALTH_FACTS): the files to doctor or restore
            details["damaged_files"] = damaged
        return details

    def _file_states(self) -> dict[str, str]:
        """The integrity of the store's and the queue's files: ``ok``, ``damaged`` or ``unchecked``
        (what the check at open found; ``damaged`` also once a statement failed so)."""
        states: dict[str, str] = {}
        store = self._store_integrity()
        if store is not None:
            states["store"] = store.state
        queues = [q.integrity for q in (self.queue, self.monitor) if q is not None]
        if queues:
            states["queue"] = next((i.state for i in queues if i.damaged), queues[0].state)
        return states

    def _store_integrity(self) -> Integrity | None:
        return self.store_file.integrity if self.store_file.checked else None

    def _queue_health(self) -> tuple[dict[str, Any], int | None]:
        """The queue's facts for health, and how many messages wait (``None``: unknown)."""
        queue = self.monitor or self.queue
        if queue is None:
            return {"error": "the queue is not open"}, None
        try:
            stats = queue.stats()
            oldest = queue.oldest_age_seconds()
        except Exception as exc:  # health must answer; an unreadable queue is itself the news
            return {"error": f"{type(exc).__name__}: {exc}"}, None
        facts = {**stats.as_dict(), "oldest_age_seconds": None if oldest is None else round(oldest, 3)}
        return facts, stats.active

    def _stalled_problem(self, waiting: int | None, threshold: float) -> str:
        what = "messages may be waiting" if waiting is None else f"{waiting} message(s) wait"
        return (
            f"{what} and no worker is draining the queue (each is stopped or has been backing off "
            f"for at least {threshold:g}s; last error: "
            f"{next((w.last_error for w in self.workers if w.last_error), 'none')})"
        )

    @staticmethod
    def healthy(details: Mapping[str, Any]) -> bool:
        """Whether :meth:`health_details` describe a working runtime (ingestion not stopped, the store
        file not damaged); a damaged queue file only degrades it (``degraded``)."""
        return details.get("ingestion") != "stopped" and details.get("files", {}).get("store") != "damaged"

    async def run(self, stop: asyncio.Event, *, force: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set; ``force`` (if set later) releases in-flight work at once."""
        opts = self.options
        if self.settings.sqlite_path != ":memory:":
            make_folder(self.settings.sqlite_path)  # (its owner's only, when new)
            if self.settings.store != "azure_search":
                _refuse_unusable_store(self.settings.sqlite_path)  # before the queue file is made beside it
        queue = self.build_queue()
        self.queue = queue
        self.queue_thread = StorageThread("memory-queue")
        if self.queue_path != ":memory:":
            try:
                self.monitor = self.build_queue()
            except Exception:
                queue.close_sync()
                raise
        configure_telemetry(self.settings)
        # Storage calls run on their own threads and searches and ingestion take turns at the
        # embedder, so neither a slow call nor a crowd of searches stalls the rest.
        service = build_service(
            self.settings,
            publisher=CoalescingPublisher(
                offloaded(queue, self.queue_thread), window_seconds=opts.recall_window_seconds
            ),
            recall_via_queue=True,
            share_fairly=True,
            file_state=self.store_file,
        )
        self.service = service
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []
        worker_stop = asyncio.Event()
        workers = opts.workers
        self._say_file_states()
        if self._file_states().get("store") == "damaged":
            workers = 0  # turns wait in the queue until the store file is restored
        try:
            # The workers exist before the API answers, so health never sees a runtime without them.
            self.workers = [self.build_worker(queue, service, f"worker-{i + 1}") for i in range(workers)]
            if opts.http:
                token = opts.token or self.settings.api_token
                api = MemoryApi(
                    service, health_details=self.health_details, healthy=self.healthy,
                    authenticator=entra_authenticator(self.settings, token),
                    heavy_operations=self.settings.heavy_operations,
                )
                self.server = ApiServer(
                    api,
                    loop,
                    host=opts.host,
                    port=opts.port,
                    token=token or None,
                    concurrency=opts.request_concurrency,
                    max_connections=opts.max_connections,
                    read_timeout=opts.read_timeout,
                )
                self.server.start()
                self._say(
                    f"memory-core serve: listening on {self.server.url} (store {self.settings.sqlite_path})"
                )
                self._say(f"memory-core serve: the memory inspector is at {self.server.inspector_url}")
            tasks = [
                asyncio.create_task(
                    self._supervise(w.name, w.run, worker_stop, worker=w), name=f"{w.name} supervisor"
                )
                for w in self.workers
            ]
            tasks += await self._background(service, worker_stop, writable=workers > 0)
            self._say(f"memory-core serve: {workers} worker(s) on {self.queue_path}")
            await stop.wait()
            self._say("memory-core serve: stopping")
        finally:
            if self.server is not None:
                await asyncio.to_thread(self.server.stop)
            worker_stop.set()
            await self._finish(tasks, force)
            await service.close()  # closes the queue (the publisher) and its thread
            if self.monitor is not None:
                self.monitor.close_sync()
            self._say("memory-core serve: stopped")

    async def _background(
        self, service: MemoryService, stop: asyncio.Event, *, writable: bool
    ) -> list[asyncio.Task[None]]:
        """The supervised tasks beside the workers: the forgetting schedule, and the fill of the vectors
        an import left for later (not on a store opened for reading only)."""
        opts = self.options
        tasks: list[asyncio.Task[None]] = []
        if opts.scheduler:
            scheduler = ForgettingScheduler(service, self.settings.forget_schedule, page_size=opts.forget_page_size)
            tasks.append(
                asyncio.create_task(self._supervise("scheduler", scheduler.run, stop), name="scheduler supervisor")
            )
            logger.info(
                "forgetting scheduled at %r (UTC); next run %s", self.settings.forget_schedule, await scheduler.next_due()
            )
        if writable and opts.vector_fill_seconds > 0:
            self.vector_filler = VectorFiller(service, interval=opts.vector_fill_seconds)
            tasks.append(
                asyncio.create_task(
                    self._supervise("vectors", self.vector_filler.run, stop), name="vectors supervisor"
                )
            )
        return tasks

    async def _finish(self, tasks: list[asyncio.Task[None]], force: asyncio.Event | None) -> None:
        if not tasks:
            return
        waiters: set[asyncio.Future[Any]] = {
            asyncio.ensure_future(asyncio.gather(*tasks, return_exceptions=True))
        }
        if force is not None:
            waiters.add(asyncio.ensure_future(force.wait()))
        _done, pending = await asyncio.wait(
            waiters, timeout=self.options.grace_seconds, return_when=asyncio.FIRST_COMPLETED
        )
        for waiter in pending:
            waiter.cancel()
        unfinished = [t for t in tasks if not t.done()]
        if unfinished:
            logger.warning("releasing %s task(s) still in flight", len(unfinished))
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)

    def _say_file_states(self) -> None:
        """Say what the checks at open found when it is not ``ok`` (damage, or not checked in time)."""
        store = self._store_integrity()
        queue = self.queue.integrity if self.queue is not None else None
        for what, path, integrity in (
            ("store", self.settings.sqlite_path, store),
            ("queue", self.queue_path, queue),
        ):
            if integrity is None or integrity.state == "ok" or integrity.found in _NOT_CHECKED_ON_PURPOSE:
                continue
            if integrity.damaged:
                consequence = (
                    "it is opened for reading only and no worker takes turns (they wait in the queue)"
                    if what == "store"
                    else "health says degraded"
                )
                logger.error(
                    "the %s file %s is damaged (%s): %s; run `memory-core doctor`, then restore it "
                    "(docs/operations.md, \"A damaged file\")", what, path, integrity.found, consequence,
                )
            else:
                logger.warning("the %s file %s: %s", what, path, integrity.found)

    def _say(self, line: str) -> None:
        logger.info("%s", line)
        if self.out is not None:
            self.out.write(line + "\n")
            self.out.flush()


#: Why a file was not checked that needs no warning (checks off, nothing on disk).
_NOT_CHECKED_ON_PURPOSE = frozenset({"not checked (no file)", "not checked (MEMORY_SQLITE_CHECK_SECONDS is 0)"})
#: ``problem`` of health when the store file is damaged (no file name: health may be anonymous).
_DAMAGED_STORE = (
    "the store file is damaged: writes are refused and turns wait in the queue; run `memory-core doctor`, "
    "then restore it from a backup or an export"
)
#: ``degraded`` of health when the queue file is damaged.
_DAMAGED_QUEUE = (
    "the queue file is damaged: turns and recall updates may not be queued; run `memory-core doctor`, "
    "then move it aside or restore it"
)


def _refuse_unusable_store(path: str) -> None:
    """Refuse an empty, damaged or foreign store file before anything is created beside it."""
    refuse_empty_file(path, "store")
    if not Path(path).is_file():
        return  # a new store
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        check_file(conn, path)
    finally:
        conn.close()


async def serve_async(
    settings: Settings,
    options: RuntimeOptions | None = None,
    *,
    out: TextIO | None = None,
    install_signals: bool = True,
    ready: Callable[[EmbeddedRuntime], None] | None = None,
) -> int:
    """Run the embedded runtime in the running loop until SIGINT/SIGTERM; returns the exit status.

    ``ready`` (if given) is handed the runtime before it starts.
    """
    runtime = EmbeddedRuntime(settings, options, out=out if out is not None else sys.stdout)
    stop, force = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            logger.warning("second signal %s: releasing in-flight work now", signum)
            force.set()
        else:
            logger.info("signal %s: finishing in-flight work, then stopping", signum)
            stop.set()

    installed: list[signal.Signals] = []
    if install_signals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, on_signal, signum)
                installed.append(signum)
    if ready is not None:
        ready(runtime)  # before it starts, so the caller can watch it come up (``serve --json``)
    try:
        await runtime.run(stop, force=force)
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    return 0


def serve(settings: Settings, options: RuntimeOptions | None = None, *, out: TextIO | None = None) -> int:
    """Run the embedded runtime until SIGINT/SIGTERM (in a new event loop); returns the exit status."""
    return asyncio.run(serve_async(settings, options, out=out))


def entra_authenticator(settings: Settings, token: str | None) -> Authenticator | None:
    """The Microsoft Entra ID validator ``serve`` checks every request with when ``MEMORY_AUTH_TENANT_ID``
    and ``MEMORY_AUTH_AUDIENCE`` are set (the Function App's, the same rules), or ``None``.

    Raises:
        ConfigurationError: Both those settings and a shared token (``MEMORY_API_TOKEN``, ``--token``)
            are set: which one a caller needs would be a guess.
    """
    authenticator = build_authenticator(settings)
    if authenticator is not None and token:
        raise ConfigurationError(
            "MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE (Microsoft Entra ID tokens) and a shared token "
            "(MEMORY_API_TOKEN or --token) are both set: set one of them"
        )
    return authenticator
