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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..api import MemoryApi
from ..config import Settings
from ..service import MemoryService
from .scheduler import ForgettingScheduler
from .server import ApiServer
from .worker import QueueWorker

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters.sqlite_queue import SQLiteQueue

__all__ = ["EmbeddedRuntime", "RuntimeOptions", "serve", "serve_async"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """How ``serve`` runs.

    Attributes:
        host: Interface the HTTP API binds (loopback by default).
        port: Port of the HTTP API (0 picks a free one; the chosen one is printed).
        workers: Queue workers.
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
    """

    host: str = "127.0.0.1"
    port: int = 7071
    workers: int = 2
    queue_path: str | None = None
    lock_seconds: float = 60.0
    max_deliveries: int = 10
    scheduler: bool = True
    forget_page_size: int = 1000
    grace_seconds: float = 30.0
    idle_seconds: float = 0.2
    http: bool = True
    token: str | None = None


class EmbeddedRuntime:
    """The embedded runtime: build with settings and options, then ``await run(stop)``.

    Args:
        settings: memory-core settings (store file, embedder, policy, schedule).
        options: Host, port, workers and queue behaviour.
        out: Where the "listening on" line is printed (``None``: only logged).
    """

    def __init__(
        self, settings: Settings, options: RuntimeOptions | None = None, *, out: TextIO | None = None
    ) -> None:
        self.settings = settings
        self.options = options or RuntimeOptions()
        if self.options.workers < 0:
            raise ValueError("workers must not be negative")
        self.out = out
        self.queue: SQLiteQueue | None = None
        self.server: ApiServer | None = None
        self.workers: list[QueueWorker] = []
        self.service: MemoryService | None = None

    @property
    def queue_path(self) -> str:
        from ..bootstrap import local_queue_path

        return self.options.queue_path or local_queue_path(self.settings)

    async def run(self, stop: asyncio.Event, *, force: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set; ``force`` (if set later) releases in-flight work at once."""
        from ..bootstrap import build_local_queue, build_service, configure_telemetry

        opts = self.options
        if self.settings.sqlite_path != ":memory:":
            Path(self.settings.sqlite_path).parent.mkdir(parents=True, exist_ok=True)
        queue = build_local_queue(
            self.settings, path=self.queue_path, lock_seconds=opts.lock_seconds, max_deliveries=opts.max_deliveries
        )
        self.queue = queue
        configure_telemetry(self.settings)
        service = build_service(self.settings, publisher=queue, recall_via_queue=True)
        self.service = service
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []
        worker_stop = asyncio.Event()
        try:
            if opts.http:
                api = MemoryApi(service, health_details=lambda: {"queue": queue.stats().as_dict()})
                token = opts.token or self.settings.api_token
                self.server = ApiServer(api, loop, host=opts.host, port=opts.port, token=token or None)
                self.server.start()
                self._say(
                    f"memory-core serve: listening on {self.server.url} (store {self.settings.sqlite_path})"
                )
            self.workers = [
                QueueWorker(queue, service, name=f"worker-{i + 1}", idle_seconds=opts.idle_seconds)
                for i in range(opts.workers)
            ]
            tasks = [asyncio.create_task(w.run(worker_stop), name=w.name) for w in self.workers]
            if opts.scheduler:
                scheduler = ForgettingScheduler(
                    service, self.settings.forget_schedule, page_size=opts.forget_page_size
                )
                tasks.append(asyncio.create_task(scheduler.run(worker_stop), name="scheduler"))
                logger.info(
                    "forgetting scheduled at %r (UTC); next run %s",
                    self.settings.forget_schedule,
                    await scheduler.next_due(),
                )
            self._say(f"memory-core serve: {opts.workers} worker(s) on {self.queue_path}")
            await stop.wait()
            self._say("memory-core serve: stopping")
        finally:
            if self.server is not None:
                await asyncio.to_thread(self.server.stop)
            worker_stop.set()
            await self._finish(tasks, force)
            await service.close()
            self._say("memory-core serve: stopped")

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

    def _say(self, line: str) -> None:
        logger.info("%s", line)
        if self.out is not None:
            self.out.write(line + "\n")
            self.out.flush()


async def serve_async(
    settings: Settings,
    options: RuntimeOptions | None = None,
    *,
    out: TextIO | None = None,
    install_signals: bool = True,
    ready: Callable[[EmbeddedRuntime], None] | None = None,
) -> int:
    """Run the embedded runtime in the running loop until SIGINT/SIGTERM; returns the exit status."""
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
        loop.call_soon(ready, runtime)
    try:
        await runtime.run(stop, force=force)
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    return 0


def serve(settings: Settings, options: RuntimeOptions | None = None, *, out: TextIO | None = None) -> int:
    """Run the embedded runtime until SIGINT/SIGTERM (in a new event loop); returns the exit status."""
    return asyncio.run(serve_async(settings, options, out=out))
