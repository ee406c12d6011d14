"""``run_in_lanes``: items of several lanes at once, each lane in order, results in the input's order, and
a failure that stops the run as a loop over the items would."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from memory_core.runtime.lanes import run_in_lanes


async def _settle() -> None:
    """Let every task that can run, run."""
    for _ in range(10):
        await asyncio.sleep(0)


class _Gated:
    """Work whose items finish when the test says so (``release``), with what happened to each."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self.items = items  # (name, lane)
        self.gates = {name: asyncio.get_running_loop().create_future() for name, _ in items}
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.delivered: list[tuple[int, str, str]] = []

    async def work(self, item: tuple[str, str]) -> str:
        name = item[0]
        self.started.append(name)
        try:
            outcome = await self.gates[name]
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        self.finished.append(name)
        if isinstance(outcome, Exception):
            raise outcome
        return f"done {name}"

    def release(self, name: str, outcome: Any = None) -> None:
        self.gates[name].set_result(outcome)

    def deliver(self, index: int, item: tuple[str, str], result: str) -> None:
        self.delivered.append((index, item[0], result))

    def run(self, concurrency: int) -> asyncio.Task[None]:
        return asyncio.ensure_future(
            run_in_lanes(self.items, self.work, lane=lambda item: item[1], concurrency=concurrency, deliver=self.deliver)
        )


def test_each_lane_in_order_one_at_a_time_at_most_n_at_once_and_results_in_the_input_order() -> None:
    async def main() -> None:
        rng = random.Random(5)
        items = [(f"i{n}", f"lane{rng.randrange(5)}") for n in range(60)]
        in_flight: set[str] = set()
        busy_lanes: set[str] = set()
        peak = 0
        order: dict[str, list[str]] = {}
        delivered: list[int] = []

        async def work(item: tuple[str, str]) -> str:
            nonlocal peak
            name, lane = item
            assert lane not in busy_lanes  # one at a time per lane
            busy_lanes.add(lane)
            in_flight.add(name)
            peak = max(peak, len(in_flight))
            order.setdefault(lane, []).append(name)
            for _ in range(rng.randrange(1, 6)):  # finish in a scrambled order
                await asyncio.sleep(0)
            in_flight.discard(name)
            busy_lanes.discard(lane)
            return name.upper()

        def deliver(index: int, item: tuple[str, str], result: str) -> None:
            assert result == item[0].upper()
            delivered.append(index)

        await run_in_lanes(items, work, lane=lambda item: item[1], concurrency=3, deliver=deliver)
        assert delivered == list(range(len(items)))
        assert peak == 3
        for lane, names in order.items():
            assert names == [name for name, own in items if own == lane]

    asyncio.run(main())


def test_the_earliest_item_whose_lane_is_free_starts_first_and_results_wait_for_earlier_ones() -> None:
    async def main() -> None:
        g = _Gated([("a0", "A"), ("a1", "A"), ("b0", "B"), ("c0", "C"), ("a2", "A")])
        task = g.run(concurrency=2)
        await _settle()
        assert g.started == ["a0", "b0"]  # a1 waits for a0; b0 is the next item whose lane is free
        g.release("b0")
        await _settle()
        assert g.started == ["a0", "b0", "c0"] and g.delivered == []  # b0's result waits for a0 and a1
        g.release("a0")
        await _settle()
        assert g.started == ["a0", "b0", "c0", "a1"]
        assert [name for _, name, _ in g.delivered] == ["a0"]
        for name in ("c0", "a1", "a2"):
            g.release(name)
            await _settle()
        await task
        assert [(index, name) for index, name, _ in g.delivered] == [(0, "a0"), (1, "a1"), (2, "b0"), (3, "c0"), (4, "a2")]

    asyncio.run(main())


def test_a_failure_runs_what_came_before_it_starts_nothing_after_it_and_raises_the_earliest() -> None:
    async def main() -> None:
        g = _Gated([("a0", "A"), ("a1", "A"), ("b0", "B"), ("c0", "C"), ("d0", "D")])
        task = g.run(concurrency=3)
        await _settle()
        assert g.started == ["a0", "b0", "c0"]
        g.release("b0", ValueError("b0 failed"))
        await _settle()
        assert g.started == ["a0", "b0", "c0"]  # d0 comes after the failure: not started
        g.release("c0")  # after the failure, already in flight: finishes, is not cut off, not shown
        g.release("a0")
        await _settle()
        assert g.started == ["a0", "b0", "c0", "a1"]  # a1 comes before the failure: a loop runs it
        g.release("a1", KeyError("a1 failed"))  # fails later in time, but comes first
        with pytest.raises(KeyError, match="a1 failed"):
            await task
        assert [name for _, name, _ in g.delivered] == ["a0"]
        assert sorted(g.finished) == ["a0", "a1", "b0", "c0"] and g.cancelled == []
        assert "d0" not in g.started

    asyncio.run(main())


def test_cancelling_the_run_cancels_the_work_in_flight() -> None:
    async def main() -> None:
        g = _Gated([("a0", "A"), ("b0", "B"), ("c0", "C")])
        task = g.run(concurrency=2)
        await _settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(g.cancelled) == ["a0", "b0"] and "c0" not in g.started

    asyncio.run(main())


def test_an_error_while_delivering_lets_the_work_in_flight_finish_and_is_raised() -> None:
    async def main() -> None:
        g = _Gated([("a0", "A"), ("b0", "B"), ("c0", "C")])

        def broken(index: int, item: tuple[str, str], result: str) -> None:
            raise BrokenPipeError("the reader went away")

        task = asyncio.ensure_future(
            run_in_lanes(g.items, g.work, lane=lambda item: item[1], concurrency=2, deliver=broken)
        )
        await _settle()
        g.release("a0")
        await _settle()
        assert g.started == ["a0", "b0"]  # nothing more is started
        g.release("b0")
        with pytest.raises(BrokenPipeError):
            await task
        assert g.finished == ["a0", "b0"] and g.cancelled == []

    asyncio.run(main())
