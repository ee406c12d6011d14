"""Work on items of several lanes at once, each lane in order, results in the input's order.

``memory-core ingest --concurrency N`` ingests the turns of a file the way ``memory-core serve``'s
queue workers do: up to N turns in flight, never two of one scope (a lane), each scope's turns in the
file's order, so their passages can meet in the
:class:`~memory_core.runtime.batching.BatchingEmbedder`. :func:`run_in_lanes` does the scheduling:
the earliest item (in the input's order) whose lane is free starts first, and results are handed to
``deliver`` in the input's order, as soon as every earlier item is done.

A failure behaves as in a loop over the items that stops at the first error: no item after the
failed one (in the input's order) is started any more, every item before it still runs (they would
have run first in the loop), the results before it are delivered, and then the error of the earliest
failed item is raised. Items after the failed one that were already in flight (other lanes) are let
finish, never cut off halfway, and their results are not delivered. Cancelling the caller cancels
the items in flight, like interrupting the loop cancels the item it is on.

:func:`ingest_in_lanes` ingests turns that way, and looks ahead in each lane like ``serve``'s workers
take several messages of a session at once: when a lane comes to a turn that was not prepared, it
prepares it and the lane's next turns together (``batch`` in all: extracted, and all their passages
embedded in one call; :meth:`~memory_core.service.MemoryService.prepare`), then ingests them one by
one as usual. The results are the same as without looking ahead.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from memory_core.domain.messages import Turn
from memory_core.service.preparation import PreparedTurn
from memory_core.service.results import IngestResult

__all__ = ["DEFAULT_BATCH", "TurnIngestor", "ingest_in_lanes", "run_in_lanes"]

#: Turns of one scope prepared together by default (``serve``'s workers, ``memory-core ingest``).
DEFAULT_BATCH = 8

T = TypeVar("T")
R = TypeVar("R")


async def run_in_lanes(
    items: Sequence[T],
    work: Callable[[T], Awaitable[R]],
    *,
    lane: Callable[[T], Hashable],
    concurrency: int,
    deliver: Callable[[int, T, R], None],
) -> None:
    """Run ``work`` on every item, up to ``concurrency`` at once and one at a time per lane.

    Args:
        items: The items, in the order their results are delivered (and each lane's are worked on).
        work: What to do with one item.
        lane: An item's lane (items of one lane are worked on one at a time, in order).
        concurrency: The most items in flight at once (1: one after another, in order).
        deliver: Called with ``(index, item, result)`` for each item, in the input's order.

    Raises:
        BaseException: The error of the earliest item that failed (after the rest settled, see the
            module docstring), or the first error ``deliver`` raised.
    """
    lanes: dict[Hashable, deque[int]] = {}
    for index, item in enumerate(items):
        lanes.setdefault(lane(item), deque()).append(index)
    run = _LaneRun(items, work, deliver, lanes, limit=max(1, int(concurrency)))
    try:
        run.start()
        while run.running:
            finished, _ = await asyncio.wait(run.running, return_when=asyncio.FIRST_COMPLETED)
            run.collect(finished)
            run.deliver_ready()
            run.start()
    except BaseException:  # cancelled (or interrupted): so is the work in flight
        for task in run.running:
            task.cancel()
        await asyncio.gather(*run.running, return_exceptions=True)
        raise
    run.raise_failure()


class _LaneRun(Generic[T, R]):
    """The state of one :func:`run_in_lanes`: the lanes' queues, what is in flight, what is done."""

    def __init__(
        self,
        items: Sequence[T],
        work: Callable[[T], Awaitable[R]],
        deliver: Callable[[int, T, R], None],
        lanes: dict[Hashable, deque[int]],
        *,
        limit: int,
    ) -> None:
        self.items = items
        self.work = work
        self.deliver = deliver
        self.lanes = lanes  # each lane's indexes, in order
        # (first waiting index, lane) of every lane with nothing in flight, earliest first
        self.ready = [(queue[0], n, key) for n, (key, queue) in enumerate(self.lanes.items())]
        heapq.heapify(self.ready)
        self.order = {key: n for _, n, key in self.ready}
        self.limit = limit
        self.running: dict[asyncio.Task[R], tuple[int, Hashable]] = {}
        self.results: dict[int, R] = {}
        self.errors: dict[int, BaseException] = {}
        self.stop = len(items)  # nothing at or after this index is started (the earliest failure so far)
        self.delivered = 0
        self.delivery_error: BaseException | None = None

    def start(self) -> None:
        """Start the earliest items whose lanes are free, up to the concurrency limit."""
        while self.ready and len(self.running) < self.limit and self.ready[0][0] < self.stop:
            index, _, key = heapq.heappop(self.ready)
            self.running[asyncio.ensure_future(self.work(self.items[index]))] = (index, key)

    def collect(self, finished: set[asyncio.Task[R]]) -> None:
        """Take the results (or errors) of ``finished``, in the input's order; free their lanes."""
        for task in sorted(finished, key=lambda t: self.running[t][0]):
            index, key = self.running.pop(task)
            error = task.exception() if not task.cancelled() else asyncio.CancelledError()
            if error is not None:
                self.errors[index] = error
                self.stop = min(self.stop, index)
                continue
            self.results[index] = task.result()
            queue = self.lanes[key]
            queue.popleft()
            if queue:
                heapq.heappush(self.ready, (queue[0], self.order[key], key))

    def deliver_ready(self) -> None:
        """Deliver the results that are next in the input's order (none after a failure)."""
        while self.delivery_error is None and self.delivered < self.stop and self.delivered in self.results:
            index = self.delivered
            try:
                self.deliver(index, self.items[index], self.results.pop(index))
            except Exception as exc:  # the caller's output failed: start nothing more, settle, raise
                self.delivery_error = exc
                self.stop = -1
                break
            self.delivered += 1

    def raise_failure(self) -> None:
        """Raise the error of ``deliver``, else that of the earliest item that failed, if any."""
        if self.delivery_error is not None:
            raise self.delivery_error
        if self.errors:
            raise self.errors[min(self.errors)]


class TurnIngestor(Protocol):
    """What :func:`ingest_in_lanes` needs of the memory service."""

    async def prepare(self, turns: Sequence[Turn]) -> list[PreparedTurn | None]: ...

    async def ingest(self, turn: Turn, *, prepared: PreparedTurn | None = None) -> IngestResult: ...


async def ingest_in_lanes(
    service: TurnIngestor,
    turns: Sequence[Turn],
    *,
    concurrency: int,
    batch: int,
    deliver: Callable[[int, Turn, IngestResult], Any],
) -> None:
    """Ingest ``turns``: scopes in lanes (:func:`run_in_lanes`), each lane's next ``batch`` turns
    prepared together (see the module docstring).

    Args:
        service: The memory service.
        turns: Validated turns, each scope's in the order they are to be ingested.
        concurrency: The most turns (of different scopes) in flight at once.
        batch: Turns of one scope prepared together (1: each turn on its own, no looking ahead).
        deliver: Called with ``(index, turn, result)`` for each turn, in the input's order.

    Raises:
        BaseException: As :func:`run_in_lanes` (the error of the earliest turn that failed).
    """
    size = max(1, int(batch))
    following: dict[int, list[int]] = {}  # a turn's index -> the next turns of its lane
    by_lane: dict[Hashable, list[int]] = {}
    for index, turn in enumerate(turns):
        by_lane.setdefault((turn.user_id, turn.agent_id), []).append(index)
    for indexes in by_lane.values():
        for position, index in enumerate(indexes):
            following[index] = indexes[position + 1 : position + size]
    ready: dict[int, PreparedTurn | None] = {}

    async def work(index: int) -> IngestResult:
        if size > 1 and index not in ready:
            group = [index, *following[index]]
            for member, prepared in zip(group, await service.prepare([turns[i] for i in group]), strict=True):
                ready[member] = prepared
        return await service.ingest(turns[index], prepared=ready.pop(index, None))

    await run_in_lanes(
        range(len(turns)),
        work,
        lane=lambda index: (turns[index].user_id, turns[index].agent_id),
        concurrency=concurrency,
        deliver=lambda index, _, result: deliver(index, turns[index], result),
    )
