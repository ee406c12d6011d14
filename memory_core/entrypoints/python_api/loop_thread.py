"""One event loop on a daemon thread: how the synchronous :class:`Memory` runs :class:`AsyncMemory`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar, cast

from memory_core.errors import PermanentError

__all__ = ["CLOSE_GRACE", "LoopThread"]

T = TypeVar("T")

#: Seconds :meth:`Memory.close` lets calls still running on other threads finish before it cancels
#: them (they then raise :class:`~memory_core.errors.PermanentError`).
CLOSE_GRACE = 5.0


class LoopThread:
    """One event loop on a daemon thread, for the lifetime of a :class:`Memory`.

    Other threads run calls on it (:meth:`run`). :meth:`close` refuses new calls, lets the calls in
    flight finish (for up to :data:`CLOSE_GRACE` seconds), cancels the ones still running, runs a last
    coroutine (closing the memory) and stops the loop; whatever is left is cancelled before the loop
    closes. Every caller gets its result or an error; none waits forever.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._closing = False
        self._calls: set[concurrent.futures.Future[Any]] = set()  # callers waiting, on any thread
        self._tasks: set[asyncio.Task[Any]] = set()  # their tasks (touched on the loop's thread only)
        self._thread = threading.Thread(target=self._main, name="memory-core", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                self._cancel_left()
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()
                with self._lock:
                    left = list(self._calls)
                for future in left:  # a call that never ran to its end: its caller is told
                    future.cancel()

    def _cancel_left(self) -> None:
        """Cancel every task still on the (stopped) loop and run the loop until they have unwound."""
        tasks = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks, timeout=CLOSE_GRACE))

    async def _call(self, awaitable: Awaitable[T]) -> T:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            return await awaitable
        finally:
            self._tasks.discard(cast("asyncio.Task[Any]", task))

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the loop and wait for its result (from any other thread).

        Raises:
            PermanentError: Called on the loop's own thread, after :meth:`close`, or the memory was
                closed before the call finished.
        """
        refusal = None
        future: concurrent.futures.Future[T] | None = None
        if threading.current_thread() is self._thread:
            refusal = "a Memory cannot be called from its own event loop; use AsyncMemory there"
        else:
            with self._lock:  # no call starts once close has begun, so close sees every call
                if self._closing or self.loop.is_closed():
                    refusal = "this Memory is closed"
                else:
                    future = asyncio.run_coroutine_threadsafe(self._call(awaitable), self.loop)
                    self._calls.add(future)
        if future is None:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: no "never awaited" warning
            raise PermanentError(refusal or "this Memory is closed")
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._closing:
                raise PermanentError("this Memory was closed before the call finished") from None
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            with self._lock:
                self._calls.discard(future)

    async def _close(self, closer: Coroutine[Any, Any, Any] | None) -> None:
        """On the loop: let the calls in flight finish (bounded), cancel the rest, run ``closer``, stop."""
        try:
            running = {task for task in self._tasks if not task.done()}
            if running:
                _, running = await asyncio.wait(running, timeout=CLOSE_GRACE)
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running, timeout=CLOSE_GRACE)
            if closer is not None:
                await closer
        finally:
            self.loop.stop()

    def close(self, closer: Coroutine[Any, Any, Any] | None = None) -> None:
        """Refuse new calls, settle the calls in flight, run ``closer`` on the loop and stop it (again:
        nothing). On the loop's own thread (a memory collected there) it is scheduled, not awaited."""
        with self._lock:
            again = self._closing
            self._closing = True
        if again or not self._thread.is_alive() or not self.loop.is_running():
            if closer is not None:
                closer.close()
            if not again and self._thread.is_alive():
                self.loop.call_soon_threadsafe(self.loop.stop)
            return
        if threading.current_thread() is self._thread:  # collected on its own loop: it ends by itself
            self.loop.create_task(self._close(closer))
            return
        done = asyncio.run_coroutine_threadsafe(self._close(closer), self.loop)
        try:
            done.result()
        finally:
            self._thread.join()
