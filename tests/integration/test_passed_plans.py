"""A plan with a date, end to end: the provider injects it as a plan with its date, and once the date
has passed as a past event (never as something to come); it stays an active memory search finds, and
the MCP answers say the same."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import Agent, AgentSession, BaseChatClient, ChatResponse, Message

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.bootstrap import build_service, load_settings
from memory_core.client.local import LocalMemoryClient
from memory_core.domain.messages import Turn
from memory_core.domain.records import MemoryKind, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, SearchMode
from memory_core.entrypoints.mcp.render import search_text
from memory_core.entrypoints.mcp.tools import MemoryTools
from memory_core.integrations.agent_framework import MemoryContextProvider
from memory_core.language.sanitize import RECALL_START_PREFIX
from memory_core.ports import FixedClock
from memory_core.service import MemoryService

#: Monday 30 November 2026: "next Friday" is 4 December, 「来週の金曜日」 11 December.
SAID = datetime(2026, 11, 30, 10, tzinfo=UTC)
CASES = [
    pytest.param("I'm flying to Osaka next Friday.", "When am I flying to Osaka?", "Osaka", "2026-12-04", id="en"),
    pytest.param("来週の金曜日に大阪へ行きます。", "大阪にはいつ行きますか？", "大阪", "2026-12-11", id="ja"),
]


class RecordingChatClient(BaseChatClient):
    """An in-process chat model: records every model input and answers with a fixed text."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[list[Message]] = []

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        self.inputs.append(list(messages))
        return ChatResponse(messages=[Message(role="assistant", contents=["Noted."])])


def block_lines(chat: RecordingChatClient) -> list[str]:
    [block] = [m for m in chat.inputs[-1] if m.text.startswith(RECALL_START_PREFIX)]
    return block.text.split("\n")[3:-1]


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(SAID)


@pytest.fixture
def service(tmp_path: Path, clock: FixedClock) -> Any:
    built = build_service(
        load_settings(environ={}, sqlite_path=str(tmp_path / "memory.db"), embedder="hash"),
        embedder=HashingEmbedder(),
        clock=clock,
    )
    yield built
    asyncio.run(built.close())


async def say(service: MemoryService, scope: Scope, text: str) -> None:
    turn = {
        "turn_id": "t-plan",
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "occurred_at": SAID,
        "messages": [{"role": "user", "text": text}],
    }
    await service.ingest(Turn.model_validate(turn))


@pytest.mark.parametrize(("statement", "question", "cue", "day"), CASES)
def test_a_plan_is_injected_with_its_date_then_as_past_once_the_date_has_passed(
    service: MemoryService, clock: FixedClock, statement: str, question: str, cue: str, day: str
) -> None:
    scope = Scope.of("ren", "travel")

    async def scenario() -> None:
        await say(service, scope, statement)
        chat = RecordingChatClient()
        provider = MemoryContextProvider(
            client=LocalMemoryClient(service), user_id=scope.user_id, agent_id=scope.agent_id,
            outbox_path=None, flush_interval=None, store_turns=False, relevance_floor=None,
        )
        agent = Agent(client=chat, context_providers=[provider])

        # -- before the day: a plan, with its date ---------------------------------------------------
        clock.set(SAID + timedelta(days=2))
        await agent.run(question, session=AgentSession())
        lines = block_lines(chat)
        assert any(line.startswith(f"1. [plan; {day}; ") or f". [plan; {day}; " in line for line in lines), lines
        assert any(f"[episode; said 2026-11-30; about {day}]" in line for line in lines), lines
        assert not any("[past" in line for line in lines)

        # -- the first instant after the day: a past event, not a plan ------------------------------
        clock.set(datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=1))
        await agent.run(question, session=AgentSession())
        lines = block_lines(chat)
        assert any(f"[past; was planned for {day}; " in line for line in lines), lines
        assert not any(". [plan" in line for line in lines), lines

        # -- it is kept: an active plan with its span, found by search -------------------------------
        found = await service.search(scope, cue, MemorySearchOptions(mode=SearchMode.KEYWORD), recall=False)
        [fact] = [h.record for h in found.hits if h.record.kind is MemoryKind.FACT]
        assert fact.category == "plan" and fact.status is MemoryStatus.ACTIVE
        assert fact.event_at == datetime.fromisoformat(day).replace(tzinfo=UTC)

        # -- the MCP answer says the same ------------------------------------------------------------
        tools = MemoryTools(service, scope)
        output = await tools.search(cue, mode="keyword")
        [item] = [m for m in output.memories if m.kind == "fact"]
        assert item.tense == "past" and item.event_at == fact.event_at
        text = search_text(output)
        assert f"[past; fact; was planned for {day}; importance=" in text, text
        clock.set(SAID)
        text = search_text(await tools.search(cue, mode="keyword"))
        assert f"[plan; fact; {day}; importance=" in text, text

    asyncio.run(scenario())
