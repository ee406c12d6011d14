"""The embedded mode's default: ``MemoryContextProvider.local()`` ingests turns in this process.

``after_run`` only writes the turn to the durable queue beside the store; the provider's worker ingests
it in the background; the next run waits (at most ``ready_timeout``) until the turns queued for its
scope are ingested, so it finds them; closing waits (at most ``close_timeout``) for the turns the
provider queued and leaves the rest in the queue file, for the next start or ``memory-core serve``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import Agent
from test_agent_provider import RecordingChatClient, memory_messages

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.client.base import MemoryClient
from memory_core.client.local import LocalMemoryClient
from memory_core.domain.messages import Turn, session_id_for
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions, SearchResult
from memory_core.integrations.agent_framework import MemoryContextProvider
from memory_core.runtime.worker import QueueWorker

USER, AGENT = "alice", "concierge"
SCOPE = Scope.of(USER, AGENT)


def local(tmp: Path, **kwargs: Any) -> MemoryContextProvider:
    """``.local()`` as a newcomer writes it, on a store in ``tmp`` (hashing embedder: fast)."""
    kwargs.setdefault("sqlite_path", tmp / "memory.db")
    kwargs.setdefault("embedder", HashingEmbedder())
    kwargs.setdefault("outbox_path", tmp / "outbox.db")
    return MemoryContextProvider.local(user_id=USER, agent_id=AGENT, **kwargs)


def queued_turns(tmp: Path) -> int:
    queue = SQLiteQueue(tmp / "memory.db.queue")
    try:
        return len(queue.waiting_in_session(session_id_for(SCOPE), subject="turn"))
    finally:
        queue.close_sync()


def recalled(chat: RecordingChatClient) -> str:
    blocks = memory_messages(chat.last)
    return blocks[0].text if blocks else ""


def test_the_default_ingests_in_process_and_the_next_run_finds_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        chat = RecordingChatClient()
        async with local(tmp_path) as memory:
            client = memory.client
            assert isinstance(client, LocalMemoryClient) and client.queue is not None
            assert client.worker_running  # started with the provider
            agent = Agent(client=chat, context_providers=[memory])
            await agent.run("I'm vegetarian and I live in Kyoto.")  # no session: a new conversation each run
            assert recalled(chat) == ""
            await agent.run("Where should I go for dinner tonight?")
            assert "I'm vegetarian" in recalled(chat) and "I live in Kyoto" in recalled(chat)
        assert queued_turns(tmp_path) == 0  # closing waited for the turns it queued

    asyncio.run(scenario())


def test_after_run_only_queues_the_turn(tmp_path: Path) -> None:
    """Publishing returns before ingestion: a slow ingestion never holds the run up."""

    async def scenario() -> None:
        async with local(tmp_path, close_timeout=0.0) as memory:
            client = memory.client
            assert isinstance(client, LocalMemoryClient)
            service = client.service
            real = service.process_message
            started = asyncio.Event()

            async def slow(body: Any) -> Any:
                started.set()
                await asyncio.sleep(1.0)
                return await real(body)

            service.process_message = slow  # type: ignore[method-assign]
            begun = time.perf_counter()
            await Agent(client=RecordingChatClient(), context_providers=[memory]).run("I like green tea.")
            assert time.perf_counter() - begun < 0.8
            await asyncio.wait_for(started.wait(), timeout=2.0)  # the worker took it in the background

    asyncio.run(scenario())


def test_a_slow_ingestion_delays_the_next_run_by_at_most_ready_timeout(tmp_path: Path) -> None:
    async def scenario() -> None:
        chat = RecordingChatClient()
        async with local(tmp_path, ready_timeout=0.3, close_timeout=5.0) as memory:
            client = memory.client
            assert isinstance(client, LocalMemoryClient)
            service = client.service
            real = service.process_message

            async def slow(body: Any) -> Any:
                await asyncio.sleep(1.5)
                return await real(body)

            service.process_message = slow  # type: ignore[method-assign]
            agent = Agent(client=chat, context_providers=[memory])
            await agent.run("I like green tea.")
            begun = time.perf_counter()
            await agent.run("What do I drink?")  # waits 0.3 s, then answers without the new memory
            waited = time.perf_counter() - begun
            assert 0.25 < waited < 1.2, waited
            assert "green tea" not in recalled(chat)
            begun = time.perf_counter()
            await agent.run("Anything else?")  # the same bound, whatever is still queued
            assert time.perf_counter() - begun < 1.2
        # Closing waited for what was queued: every turn is ingested.
        assert queued_turns(tmp_path) == 0
        async with local(tmp_path) as again:
            assert (await again.search_memories("green tea")).hits

    asyncio.run(scenario())


def test_turns_left_queued_are_found_by_the_next_process(tmp_path: Path) -> None:
    """Whatever is still queued when a provider closes (no worker here, or a killed process) is
    ingested by the next provider's worker before its first search."""

    async def scenario() -> None:
        async with local(tmp_path, worker=False) as first:  # as if `memory-core serve` should drain it
            await Agent(client=RecordingChatClient(), context_providers=[first]).run("I am allergic to peanuts.")
        assert queued_turns(tmp_path) == 1  # durable, not ingested

        chat = RecordingChatClient()
        async with local(tmp_path) as second:
            await Agent(client=chat, context_providers=[second]).run("Suggest a snack.")
        assert "I am allergic to peanuts" in recalled(chat)
        assert queued_turns(tmp_path) == 0

    asyncio.run(scenario())


def test_closing_at_once_loses_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with local(tmp_path, close_timeout=0.0) as first:
            agent = Agent(client=RecordingChatClient(), context_providers=[first])
            for text in ["I have two cats.", "I work as a nurse.", "I prefer aisle seats."]:
                await agent.run(text)
        chat = RecordingChatClient()
        async with local(tmp_path) as second:
            await Agent(client=chat, context_providers=[second]).run("Tell me about myself: cats, work, seats?")
        block = recalled(chat)
        for fact in ["I have two cats", "I work as a nurse", "I prefer aisle seats"]:
            assert fact in block, block

    asyncio.run(scenario())


def test_worker_false_leaves_the_queue_to_serve(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with local(tmp_path, worker=False) as memory:
            client = memory.client
            assert isinstance(client, LocalMemoryClient) and not client.worker_running
            chat = RecordingChatClient()
            agent = Agent(client=chat, context_providers=[memory])
            await agent.run("I like oolong tea.")
            begun = time.perf_counter()
            await agent.run("What do I drink?")  # nobody drains here: no wait for it
            assert time.perf_counter() - begun < 1.0
            assert "oolong" not in recalled(chat)
            # What `memory-core serve` does with the same queue file:
            assert client.queue is not None
            assert await QueueWorker(client.queue, client.service, renew_locks=False).drain() >= 1
            await agent.run("What do I drink, now?")
            assert "I like oolong tea" in recalled(chat)

    asyncio.run(scenario())


class _NotReady(LocalMemoryClient):
    async def wait_ready(self, scope: Scope, *, timeout: float) -> bool:
        raise RuntimeError("the queue file is unreadable")


def test_a_failing_readiness_check_never_fails_the_run(tmp_path: Path) -> None:
    async def scenario() -> None:
        base = local(tmp_path)
        client = base.client
        assert isinstance(client, LocalMemoryClient)
        broken: MemoryClient = _NotReady(client.service)
        memory = MemoryContextProvider(client=broken, user_id=USER, agent_id=AGENT, outbox_path=None)
        response = await Agent(client=RecordingChatClient("Fine."), context_providers=[memory]).run("Hello.")
        assert response.text == "Fine."
        await memory.close()
        await base.close()

    asyncio.run(scenario())


def test_a_woken_worker_does_not_wait_for_its_next_poll(tmp_path: Path) -> None:
    async def scenario() -> None:
        base = local(tmp_path, worker=False)
        client = base.client
        assert isinstance(client, LocalMemoryClient) and client.queue is not None
        worker = QueueWorker(client.queue, client.service, idle_seconds=30.0, renew_locks=False)
        stop = asyncio.Event()
        task = asyncio.ensure_future(worker.run(stop))
        await asyncio.sleep(0.1)  # idle now, for 30 s
        turn = Turn.model_validate(
            {
                "turn_id": "turn-1",
                "user_id": USER,
                "agent_id": AGENT,
                "occurred_at": client.service.now(),
                "messages": [{"role": "user", "text": "I like jasmine tea."}],
            }
        )
        await client.service.publish_turn(turn)
        worker.wake()
        for _ in range(100):
            if worker.stats.completed:
                break
            await asyncio.sleep(0.02)
        assert worker.stats.completed == 1
        stop.set()
        await asyncio.wait_for(task, timeout=2.0)
        result: SearchResult = await client.search(SCOPE, "jasmine", MemorySearchOptions(), recall=False)
        assert result.hits
        await base.close()

    asyncio.run(scenario())
