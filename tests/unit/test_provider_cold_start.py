"""A cold memory service: the provider's first search (and the first after a long idle) waits longer.

The slow search is a search that answers only when the test releases it (an event), never a timed
assertion: the test checks that the run is still waiting well past ``search_timeout``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

pytest.importorskip("agent_framework")

from agent_framework import AgentSession, Message, SessionContext

from memory_core.client.base import MemoryClient
from memory_core.domain.messages import Turn
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.domain.search import MemorySearchOptions, ScoreBreakdown, SearchHit, SearchResult
from memory_core.errors import ValidationError
from memory_core.integrations.agent_framework import MemoryContextProvider

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SHORT = 0.05  # search_timeout: the test waits many times longer than this
WELL_PAST_SHORT = 0.5


class ColdClient(MemoryClient):
    """A search that answers only once ``release`` is set (a service still starting)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.searches = 0

    async def search(
        self, scope: Scope, query: str, options: MemorySearchOptions, *, recall: bool = True
    ) -> SearchResult:
        self.searches += 1
        await self.release.wait()
        record = MemoryRecord(user_id="u1", agent_id="a1", memory="I like green tea", created_at=NOW, updated_at=NOW)
        hit = SearchHit(record=record, score=1.0, breakdown=ScoreBreakdown(relevance=1.0))
        return SearchResult(hits=[hit], mode=options.mode, ranking_profile=options.ranking_profile)

    async def publish_turn(self, turn: Turn) -> None:
        return None


def provider(client: ColdClient, **kwargs: object) -> MemoryContextProvider:
    return MemoryContextProvider(
        client=client,
        user_id="u1",
        agent_id="a1",
        search_timeout=SHORT,
        ready_timeout=0,
        relevance_floor=None,
        store_turns=False,
        outbox_path=None,
        flush_interval=None,
        **kwargs,  # type: ignore[arg-type]
    )


async def before_run(memory: MemoryContextProvider) -> SessionContext:
    context = SessionContext(input_messages=[Message(role="user", contents=["Which tea do I like?"])])
    await memory.before_run(agent=None, session=AgentSession(), context=context, state={})
    return context


def injected(context: SessionContext) -> bool:
    return any("I like green tea" in m.text for m in context.get_messages())


async def waits_for_the_cold_service(memory: MemoryContextProvider, client: ColdClient) -> SessionContext:
    """Start a run, check it still waits well past ``search_timeout``, then let the service answer."""
    client.release.clear()
    run = asyncio.create_task(before_run(memory))
    await asyncio.sleep(WELL_PAST_SHORT)
    assert not run.done(), "the first search gave up after search_timeout"
    client.release.set()
    return await run


def test_the_first_search_waits_for_a_cold_service_and_later_ones_do_not() -> None:
    async def scenario() -> None:
        client = ColdClient()
        memory = provider(client, first_search_timeout=30.0)
        assert memory.search_budget() == 30.0
        assert injected(await waits_for_the_cold_service(memory, client))
        assert memory.search_budget() == SHORT
        client.release.clear()  # the service is slow again: a warm provider waits search_timeout only
        assert not injected(await before_run(memory))
        assert client.searches == 2

    asyncio.run(scenario())


def test_the_first_search_after_a_long_idle_waits_again() -> None:
    async def scenario() -> None:
        client = ColdClient()
        client.release.set()
        memory = provider(client, first_search_timeout=30.0, cold_after=SHORT)
        assert injected(await before_run(memory))
        await asyncio.sleep(SHORT * 4)  # idle for longer than cold_after
        assert memory.search_budget() == 30.0
        assert injected(await waits_for_the_cold_service(memory, client))

    asyncio.run(scenario())


@pytest.mark.parametrize("name", ["first_search_timeout", "cold_after"])
def test_the_cold_start_budget_is_checked(name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        provider(ColdClient(), **{name: 0})


@pytest.mark.parametrize(
    ("options", "transport"),
    [({}, 10.0), ({"first_search_timeout": 30.0}, 30.0), ({"first_search_timeout": 1.0}, 5.0), ({"http_timeout": 3.0}, 3.0)],
)
def test_a_remote_client_does_not_cut_the_first_search_short(options: dict[str, float], transport: float) -> None:
    async def scenario() -> None:
        memory = MemoryContextProvider.remote(
            base_url="http://127.0.0.1:9", user_id="u1", agent_id="a1", outbox_path=None, flush_interval=None, **options
        )
        try:
            assert memory.client._http.timeout.read == transport  # type: ignore[attr-defined]
        finally:
            await memory.close()

    asyncio.run(scenario())
