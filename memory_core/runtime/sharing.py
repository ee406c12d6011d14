"""Searches and ingestion share the machine fairly (``memory-core serve``).

The expensive shared resource of the embedded runtime is the embedding model: every search embeds
its query, every turn embeds what it keeps, and the model embeds one call at a time. Left to
whoever asks first, twenty searchers keep it busy and the queue workers wait behind them for as
long as the searches last. :class:`FairEmbedder` puts a :class:`FairGate` in front of the model:
one call at a time, and when both searches (interactive work) and ingestion (background work, marked
with :func:`background_work` by the queue workers) are waiting, they take turns. Neither can starve
the other; either may use the whole model while the other is idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence

import numpy as np

from memory_core.adapters.models.query_cache import QueryCachingEmbedder
from memory_core.ports import Embedder, EmbedderWrapper

__all__ = ["FairEmbedder", "FairGate", "background_work", "is_background"]

_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("memory_core_background_work", default=False)


@contextlib.contextmanager
def background_work() -> Iterator[None]:
    """Mark the work done inside (and in the tasks and threads it starts) as background work."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def is_background() -> bool:
    """Whether the current work was marked with :func:`background_work`."""
    return _BACKGROUND.get()


class FairGate:
    """One holder at a time; interactive and background waiters take turns when both wait.

    Within a class, first come, first served. A waiter that is cancelled gives its place up (or,
    if the gate had already been handed to it, hands it on).

    Attributes:
        granted: Slots granted so far, per class (``"interactive"``, ``"background"``).
    """

    def __init__(self) -> None:
        self._busy = False
        self._last_background = False
        self._waiting: dict[bool, deque[asyncio.Future[None]]] = {False: deque(), True: deque()}
        self.granted = {"interactive": 0, "background": 0}

    def waiting(self) -> dict[str, int]:
        """How many wait, per class."""
        return {"interactive": len(self._waiting[False]), "background": len(self._waiting[True])}

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold the gate for the duration of the ``async with`` block."""
        background = is_background()
        if self._busy or self._waiting[False] or self._waiting[True]:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting[background].append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._hand_on()  # it was ours already: pass it to the next waiter
                else:
                    with contextlib.suppress(ValueError):
                        self._waiting[background].remove(waiter)
                raise
        else:
            self._busy = True
        self._last_background = background
        self.granted["background" if background else "interactive"] += 1
        try:
            yield
        finally:
            self._hand_on()

    def _hand_on(self) -> None:
        """Give the gate to the next waiter, the other class first; free it when nobody waits."""
        for background in (not self._last_background, self._last_background):
            queue = self._waiting[background]
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    self._last_background = background
                    waiter.set_result(None)
                    return
        self._busy = False


class FairEmbedder(EmbedderWrapper):
    """An embedder whose calls pass a :class:`FairGate` (see the module docstring).

    Args:
        inner: The embedder (it belongs to the caller).
        gate: The gate (default: a new one).
    """

    def __init__(self, inner: Embedder, gate: FairGate | None = None) -> None:
        super().__init__(inner)
        self.gate = gate or FairGate()

    async def embed_query(self, text: str) -> np.ndarray:
        cache = self.inner if isinstance(self.inner, QueryCachingEmbedder) else None
        if cache is not None and (found := cache.cached(text)) is not None:
            return found  # a repeat needs no turn at the model
        async with self.gate.slot():
            return await self.inner.embed_query(text)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        async with self.gate.slot():
            return await self.inner.embed_passages(texts)
