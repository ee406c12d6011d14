"""The Python API, synchronous: :class:`Memory`, :class:`AsyncMemory`'s methods run to their end.

::

    from memory_core import Memory

    m = Memory()                                               # .memory-core/memory.db, no keys
    m.add("I'm vegetarian.", user_id="alice")                  # the decisions: ADD "I'm vegetarian"
    m.search("what does alice eat?", user_id="alice").hits     # ranked memories

Each method of :class:`Memory` is the :class:`AsyncMemory` method of the same name (same arguments,
same documentation), run on the memory's own event loop (:class:`LoopThread`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memory_core.entrypoints.python_api.async_memory import AsyncMemory
from memory_core.entrypoints.python_api.loop_thread import LoopThread
from memory_core.errors import PermanentError

__all__ = ["Memory"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class _Blocking(Generic[P, R]):
    """A method of :class:`AsyncMemory` as a method of :class:`Memory`: called, it runs to its end on
    the memory's loop; it keeps the coroutine method's name, signature and documentation."""

    def __init__(self, method: Callable[Concatenate[AsyncMemory, P], Coroutine[Any, Any, R]]) -> None:
        self._method = method
        self._signature = inspect.signature(method)
        self._bound_signature = self._signature.replace(parameters=list(self._signature.parameters.values())[1:])
        self._unbound = self._function()

    def __set_name__(self, owner: type[Memory], name: str) -> None:
        self._unbound.__module__ = owner.__module__
        self._unbound.__qualname__ = f"{owner.__qualname__}.{name}"

    def _function(self) -> Callable[Concatenate[Memory, P], R]:
        method = self._method

        @functools.wraps(method)
        def blocking(memory: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return memory._run(method(memory._memory, *args, **kwargs))

        blocking.__signature__ = self._signature  # type: ignore[attr-defined]
        return blocking

    @overload
    def __get__(self, memory: None, owner: type[Memory]) -> Callable[Concatenate[Memory, P], R]: ...

    @overload
    def __get__(self, memory: Memory, owner: type[Memory]) -> Callable[P, R]: ...

    def __get__(
        self, memory: Memory | None, owner: type[Memory]
    ) -> Callable[Concatenate[Memory, P], R] | Callable[P, R]:
        if memory is None:
            return self._unbound
        bound = functools.update_wrapper(functools.partial(self._unbound, memory), self._unbound)
        bound.__signature__ = self._bound_signature  # type: ignore[attr-defined]
        return bound


def _build(path: str | os.PathLike[str] | None, options: dict[str, Any]) -> Coroutine[Any, Any, AsyncMemory]:
    """Build the :class:`AsyncMemory` (on the loop's thread, so every client belongs to it)."""

    async def build() -> AsyncMemory:
        return AsyncMemory(path, **options)

    return build()


def _shut(runner: LoopThread, memory: AsyncMemory | None) -> None:
    """Close ``memory`` on its loop and stop the loop (also when a :class:`Memory` is collected or the
    interpreter exits without :meth:`Memory.close`); calls in flight on other threads are settled
    first (:meth:`LoopThread.close`)."""
    try:
        runner.close(None if memory is None else memory.close())
    except Exception:
        logger.warning("closing the memory failed", exc_info=True)


class Memory:
    """Long-term memory for one application: :class:`AsyncMemory`'s API, synchronous.

    It keeps one event loop on a background thread for its lifetime, so it works in scripts and in
    notebooks (where a loop already runs). Use it as a context manager, or :meth:`close` it (a memory
    that is not closed is closed when it is collected or at exit)::

        with Memory() as m:
            m.add("I'm vegetarian.", user_id="alice")
            print(m.search("what does alice eat?", user_id="alice").hits[0].record.memory)

    Every argument is :class:`AsyncMemory`'s (``url``, ``api_token``, ``function_key``, ``credential``,
    ``api_scope``, ``timeout`` and settings); a ``credential`` must be an async one
    (``azure.identity.aio``).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, **options: Any) -> None:
        runner = LoopThread()
        try:
            self._memory = runner.run(_build(path, options))
        except BaseException:
            runner.close()
            raise
        self._runner = runner
        self._finalizer = weakref.finalize(self, _shut, runner, self._memory)

    def __repr__(self) -> str:
        return repr(self._memory).replace("AsyncMemory(", "Memory(", 1)

    @property
    def remote(self) -> bool:
        """Whether memories are behind a remote HTTP API (``url=``), so :meth:`add` only queues."""
        return self._memory.remote

    def _run(self, awaitable: Awaitable[T]) -> T:
        if not self._finalizer.alive:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise PermanentError("this Memory is closed")
        return self._runner.run(awaitable)

    add = _Blocking(AsyncMemory.add)
    search = _Blocking(AsyncMemory.search)
    get = _Blocking(AsyncMemory.get)
    get_all = _Blocking(AsyncMemory.get_all)
    update = _Blocking(AsyncMemory.update)
    delete = _Blocking(AsyncMemory.delete)
    delete_all = _Blocking(AsyncMemory.delete_all)
    history = _Blocking(AsyncMemory.history)
    export = _Blocking(AsyncMemory.export)
    forget = _Blocking(AsyncMemory.forget)
    reset = _Blocking(AsyncMemory.reset)
    entities = _Blocking(AsyncMemory.entities)
    entity = _Blocking(AsyncMemory.entity)
    forget_entity = _Blocking(AsyncMemory.forget_entity)

    def close(self) -> None:
        """Close the memory and stop its event loop (again: nothing).

        New calls are refused at once. Calls still running on other threads may finish first (for up
        to 5 seconds); those still running then are cancelled and raise
        :class:`~memory_core.errors.PermanentError` ("closed before the call finished").
        """
        self._finalizer()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
