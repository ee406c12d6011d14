"""Storage off the event loop, searches and ingestion taking turns, recall updates gathered per scope."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.domain.messages import MAX_RECALL_IDS, RecallUpdate, Turn
from memory_core.runtime.offload import StorageThread, offloaded
from memory_core.runtime.recalls import CoalescingPublisher
from memory_core.runtime.sharing import FairEmbedder, FairGate, background_work, is_background

AT = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


# -- StorageThread ---------------------------------------------------------------------------------
def test_storage_thread_alternates_between_searches_and_ingestion_and_keeps_order_within_each() -> None:
    thread = StorageThread("test-storage")
    ran: list[str] = []
    release, started = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(5)

    try:
        blocker = thread.submit(block)  # holds the thread while both lines fill
        assert started.wait(5)
        futures = [thread.submit(ran.append, f"search-{i}") for i in range(3)]
        with background_work():
            futures += [thread.submit(ran.append, f"ingest-{i}") for i in range(3)]
        futures.append(thread.submit(ran.append, "search-3"))
        release.set()
        for future in [blocker, *futures]:
            future.result(timeout=5)
    finally:
        thread.close()
    # Taking turns (the blocker counted as a search, so ingestion goes first), in order within each line.
    assert ran == ["ingest-0", "search-0", "ingest-1", "search-1", "ingest-2", "search-2", "search-3"]
    assert thread.done == {"interactive": 5, "background": 3}


def test_storage_thread_runs_on_its_thread_with_the_callers_context_and_raises_its_errors() -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")

    async def main() -> None:
        thread = StorageThread("test-storage")
        try:
            marker.set("from the caller")
            name, seen = await thread.call(lambda: (threading.current_thread().name, marker.get()))
            assert name.startswith("test-storage") and seen == "from the caller"
            with pytest.raises(ZeroDivisionError):
                await thread.call(lambda: 1 / 0)

            async def coroutine(x: int) -> tuple[int, str]:
                await asyncio.sleep(0)
                return x * 2, threading.current_thread().name

            assert await thread.run(coroutine, 21) == (42, thread.name)
        finally:
            thread.close()
        with pytest.raises(RuntimeError, match="closed"):
            thread.submit(print)

    asyncio.run(main())


class _Adapter:
    """An adapter like the SQLite ones: coroutine methods that do synchronous work."""

    name = "adapter"

    def __init__(self) -> None:
        self.closed_on: str | None = None

    async def where(self) -> str:
        return threading.current_thread().name

    def sync_helper(self) -> str:
        return threading.current_thread().name

    async def close(self) -> None:
        self.closed_on = threading.current_thread().name


def test_offloaded_runs_coroutine_methods_on_the_thread_and_leaves_the_rest_alone() -> None:
    async def main() -> None:
        inner = _Adapter()
        proxy = offloaded(inner, StorageThread("adapter-thread"))
        assert await proxy.where() == "adapter-thread"
        assert proxy.sync_helper() == threading.current_thread().name
        assert proxy.name == "adapter"
        await proxy.close()
        assert inner.closed_on == "adapter-thread"

    asyncio.run(main())


def test_the_event_loop_keeps_serving_while_a_storage_call_blocks() -> None:
    async def main() -> None:
        thread = StorageThread("slow-storage")
        release = threading.Event()
        try:
            slow = asyncio.ensure_future(thread.call(release.wait, 10))
            ticks = 0
            for _ in range(20):  # the loop runs other work while the call waits
                await asyncio.sleep(0.005)
                ticks += 1
            assert ticks == 20 and not slow.done()
            release.set()
            assert await slow is True
        finally:
            thread.close()

    asyncio.run(main())


# -- FairGate / FairEmbedder -----------------------------------------------------------------------
def test_fair_gate_takes_turns_when_both_classes_wait() -> None:
    async def main() -> list[str]:
        gate = FairGate()
        order: list[str] = []
        hold = asyncio.Event()

        async def use(label: str, background: bool) -> None:
            if background:
                with background_work():
                    async with gate.slot():
                        order.append(label)
            else:
                async with gate.slot():
                    order.append(label)

        async def holder() -> None:
            async with gate.slot():
                await hold.wait()

        first = asyncio.ensure_future(holder())
        await asyncio.sleep(0)
        tasks = [asyncio.ensure_future(use(f"s{i}", False)) for i in range(4)]
        tasks += [asyncio.ensure_future(use(f"b{i}", True)) for i in range(2)]
        await asyncio.sleep(0)
        assert gate.waiting() == {"interactive": 4, "background": 2}
        hold.set()
        await asyncio.gather(first, *tasks)
        return order

    assert asyncio.run(main()) == ["b0", "s0", "b1", "s1", "s2", "s3"]


def test_a_cancelled_waiter_gives_its_place_up() -> None:
    async def main() -> None:
        gate = FairGate()
        hold = asyncio.Event()
        entered: list[str] = []

        async def holder() -> None:
            async with gate.slot():
                await hold.wait()

        async def use(label: str) -> None:
            async with gate.slot():
                entered.append(label)

        first = asyncio.ensure_future(holder())
        await asyncio.sleep(0)
        doomed = asyncio.ensure_future(use("doomed"))
        survivor = asyncio.ensure_future(use("survivor"))
        await asyncio.sleep(0)
        doomed.cancel()
        hold.set()
        await asyncio.gather(first, survivor)
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert entered == ["survivor"]
        async with gate.slot():  # free again
            pass

    asyncio.run(main())


def test_fair_embedder_gives_the_same_vectors_and_marks_nothing_itself() -> None:
    async def main() -> None:
        inner = HashingEmbedder(dimensions=32)
        fair = FairEmbedder(inner)
        assert fair.name == inner.name and fair.dimensions == 32
        assert np.allclose(await fair.embed_query("tea"), await inner.embed_query("tea"))
        with background_work():
            assert is_background()
            assert np.allclose(await fair.embed_passages(["tea"]), await inner.embed_passages(["tea"]))
        assert not is_background()
        assert fair.gate.granted == {"interactive": 1, "background": 1}

    asyncio.run(main())


# -- CoalescingPublisher ---------------------------------------------------------------------------
class _CapturingPublisher:
    def __init__(self, *, fail: bool = False) -> None:
        self.turns: list[Turn] = []
        self.recalls: list[RecallUpdate] = []
        self.closed = False
        self.fail = fail

    async def publish_turn(self, turn: Turn) -> bool:
        self.turns.append(turn)
        return True

    async def publish_recall(self, update: RecallUpdate) -> None:
        if self.fail:
            raise OSError("the queue file is gone")
        self.recalls.append(update)

    async def purge_scope(self, user_id: str, agent_id: str | None = None) -> int:
        return 7

    def stats(self) -> str:
        return "inner"

    async def close(self) -> None:
        self.closed = True


def _recall(user: str, ids: list[str], minutes: int = 0) -> RecallUpdate:
    return RecallUpdate(user_id=user, agent_id="a1", memory_ids=ids, at=AT + timedelta(minutes=minutes))


def test_recalls_of_a_scope_within_the_window_become_one_update() -> None:
    async def main() -> None:
        inner = _CapturingPublisher()
        publisher = CoalescingPublisher(inner, window_seconds=0.05)
        await publisher.publish_recall(_recall("u1", ["m1", "m2"]))
        await publisher.publish_recall(_recall("u1", ["m2", "m3"], minutes=5))
        await publisher.publish_recall(_recall("u2", ["x1"]))
        turn = Turn.model_validate(
            {
                "turn_id": "t1",
                "user_id": "u1",
                "agent_id": "a1",
                "occurred_at": AT.isoformat(),
                "messages": [{"role": "user", "text": "hi"}],
            }
        )
        assert await publisher.publish_turn(turn) is True
        assert inner.turns == [turn] and inner.recalls == []  # turns pass straight through
        await asyncio.sleep(0.2)
        by_user = {r.user_id: r for r in inner.recalls}
        assert len(inner.recalls) == 2
        assert by_user["u1"].memory_ids == ["m1", "m2", "m3"]
        assert by_user["u1"].at == AT + timedelta(minutes=5)
        assert by_user["u2"].memory_ids == ["x1"]
        assert (publisher.received, publisher.published) == (3, 2)
        assert publisher.stats() == "inner"  # what else the queue offers is still there

    asyncio.run(main())


def test_closing_queues_what_is_held_and_a_full_update_goes_at_once() -> None:
    async def main() -> None:
        inner = _CapturingPublisher()
        publisher = CoalescingPublisher(inner, window_seconds=60)
        await publisher.publish_recall(_recall("u1", [f"m{i}" for i in range(MAX_RECALL_IDS - 1)]))
        await publisher.publish_recall(_recall("u1", ["n1", "n2"]))  # would pass the limit
        assert len(inner.recalls) == 1 and len(inner.recalls[0].memory_ids) == MAX_RECALL_IDS - 1
        await publisher.close()
        assert [r.memory_ids for r in inner.recalls[1:]] == [["n1", "n2"]]
        assert inner.closed

    asyncio.run(main())


def test_a_failing_queue_loses_only_reinforcement_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        publisher = CoalescingPublisher(_CapturingPublisher(fail=True), window_seconds=0.01)
        await publisher.publish_recall(_recall("u1", ["m1"]))
        await asyncio.sleep(0.1)
        await publisher.close()

    asyncio.run(main())
    assert "reinforcement is lost" in caplog.text


def test_window_zero_queues_each_update_at_once() -> None:
    async def main() -> None:
        inner = _CapturingPublisher()
        publisher = CoalescingPublisher(inner, window_seconds=0)
        await publisher.publish_recall(_recall("u1", ["m1"]))
        await publisher.publish_recall(_recall("u1", ["m1"]))
        assert len(inner.recalls) == 2

    asyncio.run(main())
    with pytest.raises(ValueError):
        CoalescingPublisher(_CapturingPublisher(), window_seconds=-1)


class _SlowPublisher(_CapturingPublisher):
    """Takes its time to queue, like a queue file under load."""

    async def publish_recall(self, update: RecallUpdate) -> None:
        await asyncio.sleep(0.05)
        await super().publish_recall(update)


def test_an_update_arriving_while_a_full_one_is_queued_is_not_lost() -> None:
    async def main() -> None:
        inner = _SlowPublisher()
        publisher = CoalescingPublisher(inner, window_seconds=60)
        await publisher.publish_recall(_recall("u1", [f"a{i}" for i in range(600)]))
        full = asyncio.ensure_future(publisher.publish_recall(_recall("u1", [f"b{i}" for i in range(500)])))
        await asyncio.sleep(0.01)  # the full one is being queued now
        await publisher.publish_recall(_recall("u1", ["c"]))
        await full
        await publisher.close()
        queued = [set(r.memory_ids) for r in inner.recalls]
        assert queued[0] == {f"a{i}" for i in range(600)}
        assert queued[1] == {f"b{i}" for i in range(500)} | {"c"}  # "c" joined the next gathering

    asyncio.run(main())


def test_an_update_the_queue_refuses_is_held_for_the_next_window() -> None:
    async def main() -> None:
        inner = _CapturingPublisher(fail=True)
        publisher = CoalescingPublisher(inner, window_seconds=0.02)
        await publisher.publish_recall(_recall("u1", ["m1"]))
        await asyncio.sleep(0.05)  # the first attempt failed; it is held again
        await publisher.publish_recall(_recall("u1", ["m2"]))
        inner.fail = False
        await asyncio.sleep(0.1)
        assert [r.memory_ids for r in inner.recalls] == [["m1", "m2"]]
        await publisher.close()

    asyncio.run(main())


def test_purging_a_user_drops_what_is_held_for_them() -> None:
    async def main() -> None:
        inner = _CapturingPublisher()
        publisher = CoalescingPublisher(inner, window_seconds=60)
        await publisher.publish_recall(_recall("u1", ["m1"]))
        await publisher.publish_recall(_recall("u2", ["x1"]))
        assert await publisher.purge_scope("u1") == 7  # the inner queue's count
        await publisher.close()
        assert [r.user_id for r in inner.recalls] == ["u2"]

    asyncio.run(main())
