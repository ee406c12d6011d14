"""Nothing when nothing is relevant: with the local e5 model, every hit carries a relevance (0-1) that
``min_score`` filters, and through the real Agent Framework provider a question about something never
said injects no memories while a related one does."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import Agent, AgentSession, BaseChatClient, ChatResponse, Message

from memory_core.adapters.models.local_embedder import E5LocalEmbedder
from memory_core.entrypoints.python_api.async_memory import AsyncMemory
from memory_core.integrations.agent_framework import MemoryContextProvider
from memory_core.language.sanitize import RECALL_START_PREFIX

SAID = ["I teach chemistry at a secondary school.", "I go climbing every Saturday.", "猫を二匹飼っています。"]
RELATED = ["What subject does the user teach?", "What does the user do on Saturdays?", "ユーザーのペットは？"]
UNRELATED = ["What is the user's blood type?", "How tall is the user?", "ユーザーの年収はいくら？"]


class RecordingChatClient(BaseChatClient):
    """An in-process chat model: records every model input and answers with a fixed text."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[list[Message]] = []

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        self.inputs.append(list(messages))
        return ChatResponse(messages=[Message(role="assistant", contents=["OK."])])


def test_an_unrelated_question_injects_nothing_and_a_related_one_does(tmp_path: Path) -> None:
    path = tmp_path / "m.db"

    async def scenario() -> tuple[dict[str, list[float | None]], dict[str, int], dict[str, int]]:
        embedder = E5LocalEmbedder(threads=1)
        async with AsyncMemory(path, embedder="e5-local") as memory:
            for text in SAID:
                await memory.add(text, user_id="u")
            relevances = {
                q: [h.relevance for h in (await memory.search(q, user_id="u", top=10)).hits] for q in RELATED + UNRELATED
            }
            floored = {q: len((await memory.search(q, user_id="u", min_score=0.5)).hits) for q in RELATED + UNRELATED}
        chat = RecordingChatClient()
        provider = MemoryContextProvider.local(
            sqlite_path=str(path), embedder=embedder, user_id="u", agent_id="default",
            outbox_path=None, flush_interval=None, store_turns=False,
        )
        injected: dict[str, int] = {}
        async with provider:
            agent = Agent(client=chat, context_providers=[provider])
            for question in RELATED + UNRELATED:
                await agent.run(question, session=AgentSession())
                injected[question] = sum(m.text.startswith(RECALL_START_PREFIX) for m in chat.inputs[-1])
        return relevances, floored, injected

    relevances, floored, injected = asyncio.run(scenario())
    for question, values in relevances.items():
        assert values and all(v is not None and 0.0 <= v <= 1.0 for v in values), question
    assert all(floored[q] >= 1 for q in RELATED) and all(floored[q] == 0 for q in UNRELATED), floored
    assert all(injected[q] == 1 for q in RELATED), injected
    assert all(injected[q] == 0 for q in UNRELATED), injected
