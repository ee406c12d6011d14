"""The embedded provider never stalls the agent's event loop on its queue file.

Another process may hold the queue file's write lock (``BEGIN IMMEDIATE``) for a while: ``memory-core
serve``, a purge, a backup. The provider's queue calls (publishing a turn or a recall update, its
worker's receiving and settling) then wait on the queue's own thread, not on the agent's event loop, so
``publish_timeout`` and ``ready_timeout`` hold and the agent's other tasks keep running. A turn whose
publish timed out waits in the outbox and reaches the queue exactly once, whether the late send
succeeds (the outbox copy is removed) or fails (the outbox delivers it).

``wait_ready`` only waits for turns the worker can take now: not for the turns of a session whose
first message waits for its retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import Agent
from test_agent_provider import RecordingChatClient

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.client.local import LocalMemoryClient
from memory_core.domain.messages import Turn, session_id_for
from memory_core.domain.records import Scope
from memory_core.integrations.agent_framework import MemoryContextProvider

USER, AGENT = "alice", "concierge"
SCOPE = Scope.of(USER, AGENT)
#: Far more than a healthy loop ever pauses here (its ticks are 10 ms apart), far less than a queue
#: call blocked on a lock (seconds).
MAX_LOOP_GAP = 0.5


def local(tmp: Path, **kwargs: Any) -> MemoryContextProvider:
    kwargs.setdefault("sqlite_path", tmp / "memory.db")
    kwargs.setdefault("embedder", HashingEmbedder())
    kwargs.setdefault("outbox_path", tmp / "outbox.db")
    kwargs.setdefault("flush_interval", None)
    return MemoryContextProvider.local(user_id=USER, agent_id=AGENT, **kwargs)


def open_client(tmp: Path, **kwargs: Any) -> LocalMemoryClient:
    kwargs.setdefault("worker", True)
    return LocalMemoryClient.open(sqlite_path=tmp / "memory.db", embedder=HashingEmbedder(), queue=True, **kwargs)


def turn(turn_id: str, text: str) -> Turn:
    return Turn.model_validate(
        {
            "turn_id": turn_id,
            "user_id": USER,
            "agent_id": AGENT,
            "occurred_at": datetime.now(UTC),
            "messages": [{"role": "user", "text": text}],
        }
    )


@contextlib.contextmanager
def foreign_write_lock(queue_file: Path) -> Iterator[sqlite3.Connection]:
    """Another connection (as another process would) holding the queue file's write lock."""
    conn = sqlite3.connect(queue_file, isolation_level=None, timeout=0.0)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()


class LoopWatch:
    """Ticks every 10 ms on the loop; ``max_gap`` is the longest the loop went without ticking."""

    def __init__(self) -> None:
        self.max_gap = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.max_gap = max(self.max_gap, now - last)
            last = now

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[LoopWatch]:
        self._task = asyncio.ensure_future(self._tick())
        await asyncio.sleep(0.02)
        try:
            yield self
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def count_processed_turns(client: LocalMemoryClient) -> Counter[str]:
    """Wrap the service's ``process_message``: how often each turn id was processed."""
    seen: Counter[str] = Counter()
    service = client.service
    real = service.process_message

    async def counting(body: Any) -> Any:
        data = json.loads(body) if isinstance(body, bytes | str) else dict(body)
        if "turn_id" in data:
            seen[data["turn_id"]] += 1
        return await real(body)

    service.process_message = counting  # type: ignore[method-assign]
    return seen


async def until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.perf_counter() + timeout
    while not condition():
        assert time.perf_counter() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


def turns_queued(client: LocalMemoryClient) -> list[str]:
    assert client.queue is not None
    return [m.message_id for m in client.queue.waiting_in_session(session_id_for(SCOPE), subject="turn")]


# -- finding 1: the loop never waits for the queue file ---------------------------------------------------------
def test_publish_under_a_foreign_lock_keeps_its_timeout_and_the_loop_running(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = open_client(tmp_path)
        try:
            await client.start()
            with foreign_write_lock(tmp_path / "memory.db.queue"):
                async with LoopWatch().watching() as watch:
                    begun = time.perf_counter()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(client.publish_turn(turn("turn-1", "I keep bees.")), 1.0)
                    elapsed = time.perf_counter() - begun
                assert elapsed < 2.0, elapsed
                assert watch.max_gap < MAX_LOOP_GAP, watch.max_gap
        finally:
            await client.close()

    asyncio.run(scenario())


def test_wait_ready_returns_promptly_under_a_foreign_lock(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = open_client(tmp_path)
        try:
            await client.service.publish_turn(turn("turn-1", "I keep bees."))  # queued; the worker is not started
            assert len(turns_queued(client)) == 1
            with foreign_write_lock(tmp_path / "memory.db.queue"):
                async with LoopWatch().watching() as watch:
                    begun = time.perf_counter()
                    ready = await asyncio.wait_for(client.wait_ready(SCOPE, timeout=0.5), 1.5)
                    elapsed = time.perf_counter() - begun
                assert ready is False  # the worker cannot take the turn while the file is locked
                assert elapsed < 1.2, elapsed
                assert watch.max_gap < MAX_LOOP_GAP, watch.max_gap
            # Released: the worker takes the turn; the wait that gave up on it does not wait again.
            assert await client.wait_ready(SCOPE, timeout=5.0) is True
            await until(lambda: not turns_queued(client))
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_publish_that_times_out_under_a_lock_is_delivered_once_by_the_outbox(tmp_path: Path) -> None:
    """The late send fails (the lock outlives the busy timeout): the outbox delivers the turn, once."""

    async def scenario() -> None:
        async with local(tmp_path, publish_timeout=0.3, ready_timeout=0.3) as memory:
            client = memory.client
            assert isinstance(client, LocalMemoryClient) and client.queue is not None and memory.outbox is not None
            client.queue.busy_timeout_seconds = 0.8  # the late send gives up sooner (the test is faster)
            processed = count_processed_turns(client)
            agent = Agent(client=RecordingChatClient(), context_providers=[memory])
            with foreign_write_lock(tmp_path / "memory.db.queue"):
                async with LoopWatch().watching() as watch:
                    begun = time.perf_counter()
                    await agent.run("I keep bees.")
                    elapsed = time.perf_counter() - begun
                assert elapsed < 2.0, elapsed  # publish_timeout held: the run did not wait for the lock
                assert watch.max_gap < MAX_LOOP_GAP, watch.max_gap
                assert memory.outbox.pending() == 1
                await until(lambda: not memory._in_flight)  # the late send failed on the busy timeout
            assert memory.outbox.pending() == 1
            assert await memory.flush_outbox(force=True) == 1
            assert await memory.flush_outbox(force=True) == 0
            await until(lambda: sum(processed.values()) >= 1)
            await until(lambda: not turns_queued(client))
            assert list(processed.values()) == [1]
        assert list(processed.values()) == [1]

    asyncio.run(scenario())


def test_a_publish_that_completes_late_leaves_no_copy_in_the_outbox(tmp_path: Path) -> None:
    """The lock is released before the late send gives up: it succeeds, and its outbox copy goes."""

    async def scenario() -> None:
        async with local(tmp_path, publish_timeout=0.3, ready_timeout=0.3) as memory:
            client = memory.client
            assert isinstance(client, LocalMemoryClient) and client.queue is not None and memory.outbox is not None
            client.queue.busy_timeout_seconds = 10.0  # the late send outlives the lock, however slow the run
            processed = count_processed_turns(client)
            agent = Agent(client=RecordingChatClient(), context_providers=[memory])
            with foreign_write_lock(tmp_path / "memory.db.queue"):
                await agent.run("I keep bees.")
                assert memory.outbox.pending() == 1  # timed out: kept
                assert memory._in_flight  # and still being sent, on the queue's thread
            await until(lambda: memory.outbox is not None and memory.outbox.pending() == 0)
            assert await memory.flush_outbox(force=True) == 0
            await until(lambda: sum(processed.values()) >= 1)
            await until(lambda: not turns_queued(client))
            assert list(processed.values()) == [1]

    asyncio.run(scenario())


def test_a_send_that_completes_after_its_timeout_and_a_retry_queue_the_turn_once(tmp_path: Path) -> None:
    """Duplicate detection by message id covers a late send and its retry (the outbox's or anyone's)."""

    async def scenario() -> None:
        client = open_client(tmp_path, worker=False)
        try:
            bees = turn("turn-1", "I keep bees.")
            with foreign_write_lock(tmp_path / "memory.db.queue"):
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(client.publish_turn(bees), 0.3)  # running on the thread
                retry = asyncio.ensure_future(client.publish_turn(bees))  # behind it on the thread
                await asyncio.sleep(0.2)
            await asyncio.wait_for(retry, 5.0)  # the late send queued it; the retry is a duplicate
            assert len(turns_queued(client)) == 1
        finally:
            await client.close()

    asyncio.run(scenario())


# -- finding 2: no wait for turns the worker cannot take yet -------------------------------------------------------
def test_a_session_waiting_for_a_retry_makes_wait_ready_return_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = open_client(tmp_path)
        try:
            queue = client.queue
            assert queue is not None
            await client.service.publish_turn(turn("turn-1", "I keep bees."))
            failed = queue.receive()  # as the worker would: the extraction failed, retry in a minute
            assert failed is not None
            queue.abandon(failed, error="TransientError: the model is down", delay_seconds=60.0)
            await client.service.publish_turn(turn("turn-2", "I live in Kyoto."))  # new, behind it
            begun = time.perf_counter()
            assert await client.wait_ready(SCOPE, timeout=5.0) is True
            assert time.perf_counter() - begun < 1.0
            assert len(turns_queued(client)) == 2  # neither can be taken before the retry
        finally:
            await client.close()

    asyncio.run(scenario())


def test_turns_given_up_on_are_forgotten_once_ingested(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = open_client(tmp_path, close_timeout=5.0)
        try:
            service = client.service
            real = service.process_message

            async def slow(body: Any) -> Any:
                await asyncio.sleep(0.6)
                return await real(body)

            service.process_message = slow  # type: ignore[method-assign]
            await client.publish_turn(turn("turn-1", "I keep bees."))
            assert await client.wait_ready(SCOPE, timeout=0.1) is False
            session = session_id_for(SCOPE)
            assert len(client._given_up[session]) == 1
            begun = time.perf_counter()
            assert await client.wait_ready(SCOPE, timeout=5.0) is True  # not waited for again
            assert time.perf_counter() - begun < 0.4
            await until(lambda: not turns_queued(client))
            assert await client.wait_ready(SCOPE, timeout=1.0) is True
            assert session not in client._given_up  # pruned once it left the queue
        finally:
            await client.close()

    asyncio.run(scenario())


def test_the_given_up_turns_are_kept_for_a_bounded_number_of_sessions(tmp_path: Path) -> None:
    async def scenario() -> None:
        client = open_client(tmp_path, worker=False)
        try:
            client.MAX_GIVEN_UP_SESSIONS = 3
            client._give_up({f"m{i}": f"s{i}" for i in range(10)})
            assert list(client._given_up) == ["s7", "s8", "s9"]
        finally:
            await client.close()

    asyncio.run(scenario())
