"""Blocking storage calls off the event loop: each SQLite adapter of ``memory-core serve`` on its own thread.

The embedded adapters (:class:`~memory_core.adapters.sqlite.store.SQLiteMemoryStore`, the history, the
queue) do their SQLite work synchronously inside ``async`` methods. On the runtime's one event loop
that would stall everything (HTTP requests, workers, health) for as long as a call takes, including
the busy timeout when another process holds the file's write lock. :class:`StorageThread` runs an
adapter's calls on one dedicated thread instead (searches and ingestion taking turns, so neither
crowds the other out), and the loop awaits the result.

:func:`offloaded` wraps an adapter so that every coroutine method runs on its thread (driven by a
private event loop there) and everything else (properties, synchronous helpers) is the adapter's own.
The caller keeps using the port it knows::

    store = offloaded(SQLiteMemoryStore(path), StorageThread("store"))
    request = SearchRequest(scope, query, vector, options)
    await store.search(request)   # runs on the "store" thread; the loop keeps serving
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from memory_core.runtime.sharing import is_background

__all__ = ["StorageThread", "offloaded"]

T = TypeVar("T")


class StorageThread:
    """One thread that runs storage calls one at a time; searches and ingestion take turns.

    Calls made inside :func:`~memory_core.runtime.sharing.background_work` (the queue workers'
    ingestion) and the others (searches, the API) wait in two lines; when both lines wait, the thread
    takes from each in turn, first in, first out within a line. A turn makes many storage calls and a
    search one, so strict first-in-first-out would make every call of a turn wait behind the
    searches that arrived meanwhile; taking turns keeps both moving, and either line has the whole
    thread while the other is empty.

    Args:
        name: The thread's name (shown in logs and thread dumps).

    Attributes:
        done: Calls run so far, per line (``"interactive"``, ``"background"``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lines: dict[bool, deque[_Call]] = {False: deque(), True: deque()}
        self._last_background = False
        self._ready = threading.Condition()
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self.done = {"interactive": 0, "background": 0}

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        """Queue the synchronous ``fn(*args, **kwargs)``; its future holds the outcome."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        call = _Call(future, contextvars.copy_context(), functools.partial(fn, *args, **kwargs))
        with self._ready:
            if self._closed:
                raise RuntimeError(f"the storage thread {self.name!r} is closed")
            self._lines[is_background()].append(call)
            self._ready.notify()
        return future

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run the synchronous ``fn(*args, **kwargs)`` on the thread and return (or raise) its outcome."""
        return await asyncio.wrap_future(self.submit(fn, *args, **kwargs))

    async def run(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, **kwargs: Any) -> T:
        """Run the coroutine function ``fn(*args, **kwargs)`` to completion on the thread's own loop."""
        return await self.call(self._drive, fn, args, kwargs)

    def _drive(self, fn: Callable[..., Coroutine[Any, Any, T]], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(fn(*args, **kwargs))

    def _next(self) -> _Call | None:
        with self._ready:
            while True:
                for background in (not self._last_background, self._last_background):
                    line = self._lines[background]
                    if line:
                        self._last_background = background
                        self.done["background" if background else "interactive"] += 1
                        return line.popleft()
                if self._closed:
                    return None
                self._ready.wait()

    def _serve(self) -> None:
        try:
            while (call := self._next()) is not None:
                if not call.future.set_running_or_notify_cancel():
                    continue
                try:
                    result = call.context.run(call.fn)
                except BaseException as exc:  # handed to the caller
                    call.future.set_exception(exc)
                else:
                    call.future.set_result(result)
        finally:
            if self._loop is not None:
                self._loop.close()

    def close(self) -> None:
        """Finish the calls already submitted, then stop the thread (idempotent)."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()


@dataclass(frozen=True, slots=True)
class _Call:
    future: concurrent.futures.Future[Any]
    context: contextvars.Context
    fn: Callable[[], Any]


class _Offloaded:
    """The proxy :func:`offloaded` returns (see there)."""

    def __init__(self, target: Any, thread: StorageThread) -> None:
        self._target = target
        self._thread = thread

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.iscoroutinefunction(value):
            method = cast(Callable[..., Coroutine[Any, Any, Any]], value)

            @functools.wraps(method)
            async def on_thread(*args: Any, **kwargs: Any) -> Any:
                return await self._thread.run(method, *args, **kwargs)

            return on_thread
        return value

    async def close(self) -> None:
        """Close the adapter on its thread, then stop the thread."""
        try:
            close: Callable[[], Awaitable[None]] | None = getattr(self._target, "close", None)
            if close is not None and inspect.iscoroutinefunction(close):
                await self._thread.run(close)
            elif close is not None:
                await self._thread.call(close)
        finally:
            await asyncio.to_thread(self._thread.close)

    def __repr__(self) -> str:
        return f"offloaded({self._target!r}, thread={self._thread.name!r})"


def offloaded(target: T, thread: StorageThread) -> T:
    """``target`` with every coroutine method run on ``thread`` (closing it closes the thread too).

    Only for adapters whose coroutine methods do their work synchronously (the SQLite ones): a method
    runs to completion on the thread's private loop, so it must not wait on the caller's loop.
    """
    return cast(T, _Offloaded(target, thread))
