"""``MemoryContextProvider`` inside Agent Framework's agent loop (``AgentLoopMiddleware``).

One user turn run as several loop iterations is one search and one published turn (the user's words
and the final answer): the loop's own prompts ("Progress so far: ...", "Continue working ...") are
never stored as something the user said. Memories from another session carry that session's id in
their attribution (``origin_session_ids``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import (
    Agent,
    AgentLoopMiddleware,
    AgentSession,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    InMemoryHistoryProvider,
    Message,
)

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.bootstrap import build_service, load_settings
from memory_core.client.local import LocalMemoryClient
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions, SearchResult
from memory_core.integrations.agent_framework import MemoryContextProvider
from memory_core.integrations.outbox import TurnOutbox
from memory_core.language.sanitize import RECALL_START_PREFIX
from memory_core.runtime.worker import QueueWorker
from memory_core.service import MemoryService

USER, AGENT = "user-1", "concierge"
QUESTION = "What should I drink this afternoon?"
ITERATIONS = 3


class StepChatClient(BaseChatClient):
    """An in-process chat model that answers ``step 1``, ``step 2``, ... and records every input."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[list[Message]] = []

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        self.inputs.append(list(messages))
        answer = f"step {len(self.inputs)}"
        if stream:

            async def updates() -> AsyncIterator[ChatResponseUpdate]:
                yield ChatResponseUpdate(role="assistant", contents=[{"type": "text", "text": answer}])

            return self._build_response_stream(updates())

        async def response() -> ChatResponse:
            return ChatResponse(messages=[Message(role="assistant", contents=[answer])])

        return response()


class CountingClient(LocalMemoryClient):
    """The embedded client, counting searches."""

    def __init__(self, service: MemoryService) -> None:
        super().__init__(service)
        self.searches: list[str] = []

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        self.searches.append(query)
        return await super().search(scope, query, options, recall=recall)


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.queue = SQLiteQueue(tmp / "memory.db.queue")
        self.service: MemoryService = build_service(
            load_settings(environ={}, sqlite_path=str(tmp / "memory.db"), embedder="hash"),
            embedder=HashingEmbedder(),
            publisher=self.queue,
        )
        self.client = CountingClient(self.service)

    def provider(self) -> MemoryContextProvider:
        return MemoryContextProvider(
            client=self.client,
            user_id=USER,
            agent_id=AGENT,
            outbox_path=TurnOutbox(self.tmp / "outbox.db", base_delay=0.0),
            flush_interval=None,
        )

    def turns(self) -> list[dict[str, Any]]:
        bodies = [json.loads(m.body) for m in self.queue.peek(limit=1000)]
        return [b for b in bodies if b.get("schema") == "memory-core.turn.v1"]

    async def remember(self, text: str) -> str:
        """An earlier session (no loop): the user says ``text``; returns that session's id."""
        session = AgentSession()
        await Agent(client=StepChatClient(), context_providers=[self.provider()]).run(text, session=session)
        assert await QueueWorker(self.queue, self.service, renew_locks=False).drain() >= 1
        return session.session_id

    async def close(self) -> None:
        await self.service.close()
        await self.queue.close()


@pytest.fixture
def env(tmp_path: Path) -> Any:
    environment = Env(tmp_path)
    yield environment
    asyncio.run(environment.close())


def looping_agent(chat: StepChatClient, provider: MemoryContextProvider, *, history: bool) -> Agent:
    """An agent whose every run is ``ITERATIONS`` loop iterations (the loop's default prompts)."""
    providers: list[Any] = [InMemoryHistoryProvider(), provider] if history else [provider]
    loop = AgentLoopMiddleware(lambda **_: True, max_iterations=ITERATIONS)
    return Agent(client=chat, context_providers=providers, middleware=[loop])


def memory_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.text.startswith(RECALL_START_PREFIX)]


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize("history", [False, True], ids=["no-history", "history"])
def test_one_user_turn_in_a_loop_is_one_search_and_one_turn_without_the_loop_prompts(
    env: Env, stream: bool, history: bool
) -> None:
    async def scenario() -> None:
        earlier = await env.remember("I like green tea. I am allergic to peanuts.")
        env.client.searches.clear()
        published = len(env.turns())
        chat = StepChatClient()
        provider = env.provider()
        agent = looping_agent(chat, provider, history=history)
        session = AgentSession()
        if stream:
            async for _ in agent.run(QUESTION, session=session, stream=True):
                pass
        else:
            await agent.run(QUESTION, session=session)

        assert len(chat.inputs) == ITERATIONS  # the loop really ran three times
        assert env.client.searches == [QUESTION]  # one search, for what the user asked
        # Every iteration's model input has the memories, attributed to the session they came from.
        for model_input in chat.inputs:
            injected = memory_messages(model_input)
            assert len(injected) == 1, [m.text[:40] for m in model_input]
            assert "green tea" in injected[0].text
            assert injected[0].additional_properties["_attribution"]["origin_session_ids"] == [earlier]
        turns = env.turns()[published:]
        assert len(turns) == 1
        assert turns[0]["session_id"] == session.session_id
        assert turns[0]["messages"] == [
            {"role": "user", "text": QUESTION},
            {"role": "assistant", "text": f"step {ITERATIONS}"},
        ]
        assert "Progress so far" not in json.dumps(turns) and "Continue working" not in json.dumps(turns)
        await provider.close()

    asyncio.run(scenario())


def test_memories_of_the_same_session_name_no_origin(env: Env) -> None:
    async def scenario() -> None:
        provider = env.provider()
        session = AgentSession()
        agent = Agent(client=StepChatClient(), context_providers=[provider])
        await agent.run("I like green tea.", session=session)
        assert await QueueWorker(env.queue, env.service, renew_locks=False).drain() >= 1
        chat = StepChatClient()
        await Agent(client=chat, context_providers=[provider]).run("Which tea do I like?", session=session)
        injected = memory_messages(chat.inputs[-1])
        assert injected and "green tea" in injected[0].text
        assert "origin_session_ids" not in injected[0].additional_properties["_attribution"]
        await provider.close()

    asyncio.run(scenario())


def test_two_user_turns_in_loops_are_two_searches(env: Env) -> None:
    async def scenario() -> None:
        await env.remember("I like green tea.")
        env.client.searches.clear()
        published = len(env.turns())
        provider = env.provider()
        agent = looping_agent(StepChatClient(), provider, history=True)
        session = AgentSession()
        await agent.run(QUESTION, session=session)
        await agent.run("And tomorrow morning?", session=session)
        assert env.client.searches == [QUESTION, "And tomorrow morning?"]
        turns = env.turns()[published:]
        assert [t["messages"][0]["text"] for t in turns] == [QUESTION, "And tomorrow morning?"]
        await provider.close()

    asyncio.run(scenario())


def test_remote_mode_in_a_loop_names_the_origin_session_over_http(env: Env) -> None:
    from memory_core.entrypoints.embedded.server import ApiServer
    from memory_core.entrypoints.http.dispatcher import MemoryApi

    async def scenario() -> None:
        earlier = await env.remember("I am allergic to peanuts.")
        published = len(env.turns())
        server = ApiServer(MemoryApi(env.service), asyncio.get_running_loop(), port=0)
        server.start()
        try:
            chat = StepChatClient()
            async with MemoryContextProvider.remote(
                base_url=f"http://{server.host}:{server.port}",
                user_id=USER,
                agent_id=AGENT,
                outbox_path=None,
                flush_interval=None,
            ) as provider:
                await looping_agent(chat, provider, history=True).run("Suggest a snack.", session=AgentSession())
        finally:
            await asyncio.to_thread(server.stop)
        for model_input in chat.inputs:
            (injected,) = memory_messages(model_input)
            assert "I am allergic to peanuts" in injected.text
            assert injected.additional_properties["_attribution"]["origin_session_ids"] == [earlier]
        turns = env.turns()[published:]
        assert [[m["text"] for m in t["messages"]] for t in turns] == [["Suggest a snack.", f"step {ITERATIONS}"]]

    asyncio.run(scenario())


def test_a_loop_whose_user_turn_has_no_text_never_searches_for_the_loop_prompts(env: Env) -> None:
    async def scenario() -> None:
        await env.remember("I like green tea.")
        env.client.searches.clear()
        provider = env.provider()
        chat = StepChatClient()
        image = Message(role="user", contents=[{"type": "uri", "uri": "https://example.org/a.png", "media_type": "image/png"}])
        await looping_agent(chat, provider, history=False).run([image], session=AgentSession())
        assert len(chat.inputs) == ITERATIONS
        assert env.client.searches == []
        await provider.close()

    asyncio.run(scenario())
