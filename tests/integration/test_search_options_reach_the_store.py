"""Every search option reaches the store, whichever entry point sends it, under its own name.

HTTP (``POST /api/memories/search`` over a real socket), the command line (``memory-core search``),
the Python API (sync, async and remote), the MCP search tool and the agent provider (in-process, and
remote through the HTTP API) all produce
:class:`MemorySearchOptions` through one converter. The store records what it was asked; each entry
point must deliver every option unchanged. ``CHANGED`` names a non-default value for *every* option,
so adding an option without carrying it through an entry point fails here.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from runtime_helpers import Client

from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.cli.memories import SEARCH_FLAGS, option_flag
from memory_core.contract.views import SearchRequest
from memory_core.domain.records import MemoryKind, Scope
from memory_core.domain.search import MemorySearchOptions, OrderBy, RankingProfile, SearchMode, SearchResult
from memory_core.domain.search_request import SearchRequest as StoreSearchRequest
from memory_core.entrypoints.embedded.server import ApiServer
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.service import MemoryService
from memory_core.service.search import MIN_CANDIDATES, TIME_CANDIDATES

SCOPE = Scope.of("u1", "a1")

#: A value other than the default for every search option. (Not ``semantic``: a semantic search
#: cannot be sorted by a field, and ``order_by`` is set here.)
CHANGED: dict[str, Any] = {
    "mode": SearchMode.VECTOR,
    "ranking_profile": RankingProfile.RECENT,
    "top": 7,
    "order_by": OrderBy.IMPORTANCE_DESC,
    "category": "travel",
    "include_archived": True,
    "include_superseded": True,
    "min_importance": 0.25,
    "min_retention_score": 0.125,
    "min_score": 0.375,
    "kind": MemoryKind.FACT,
    "vector_k": 17,
    "vector_weight": 2.5,
    "reference_time": datetime(2026, 3, 15, 9, 0, tzinfo=UTC),
    "as_of": datetime(2026, 3, 1, tzinfo=UTC),
    "filters": {"AND": [{"metadata.topic": {"in": ["trains", "ferries"]}}, {"importance": {"gte": 0.5}}]},
}
EXPECTED = MemorySearchOptions(**CHANGED)
#: What the store is asked: every option as sent, with twice ``top`` or ``MIN_CANDIDATES`` if more (the
#: service re-ranks episodes after their facts and archived memories at a discount before it keeps ``top``).
RECEIVED = EXPECTED.model_copy(update={"top": max(2 * EXPECTED.top, MIN_CANDIDATES)})


def test_the_changed_values_cover_every_option_and_differ_from_the_defaults() -> None:
    assert set(CHANGED) == set(MemorySearchOptions.model_fields)
    defaults = MemorySearchOptions()
    for name, value in CHANGED.items():
        assert getattr(defaults, name) != value, name
    assert set(SEARCH_FLAGS) == set(MemorySearchOptions.model_fields)
    assert set(MemorySearchOptions.model_fields) <= set(SearchRequest.model_fields)


class RecordingStore(SQLiteMemoryStore):
    """The real embedded store, remembering the options of every search it was asked for."""

    received: ClassVar[list[MemorySearchOptions]] = []

    async def search(self, request: StoreSearchRequest) -> SearchResult:
        type(self).received.append(request.options)
        return await super().search(request)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[MemorySearchOptions]]:
    received: ClassVar[list[MemorySearchOptions]] = []
    monkeypatch.setattr(RecordingStore, "received", received)
    yield received


def service_on(db: Path) -> MemoryService:
    settings = load_settings(environ={}, sqlite_path=str(db), embedder="hash")
    return build_service(settings, store=RecordingStore(db), embedder=HashingEmbedder())


def test_over_http(tmp_path: Path, recorded: list[MemorySearchOptions]) -> None:
    async def scenario() -> None:
        service = service_on(tmp_path / "m.db")
        server = ApiServer(MemoryApi(service), asyncio.get_running_loop(), port=0)
        server.start()
        try:
            body = {"user_id": "u1", "agent_id": "a1", "query": "tea", **json.loads(EXPECTED.model_dump_json())}
            reply = await asyncio.to_thread(Client(server.host, server.port).post, "/api/memories/search", body)
            assert reply.status == 200, reply.body
        finally:
            await asyncio.to_thread(server.stop)
            await service.close()

    asyncio.run(scenario())
    assert recorded == [RECEIVED]


def cli_text(value: Any) -> str:
    """An option's value as the command line is given it (a filter as JSON)."""
    return json.dumps(value) if isinstance(value, dict) else str(getattr(value, "value", value))


def test_from_the_command_line(tmp_path: Path, recorded: list[MemorySearchOptions], monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_core.bootstrap as bootstrap

    db = tmp_path / "m.db"
    SQLiteMemoryStore(db).close_sync()  # the command line searches a store that exists
    monkeypatch.setattr(
        bootstrap, "build_store", lambda settings, **kw: RecordingStore(settings.sqlite_path, clock=kw["clock"])
    )
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    argv = ["--db", str(db), "--json", "search", "tea", "--user", "u1", "--agent", "a1"]
    for name, value in CHANGED.items():
        flag, options = SEARCH_FLAGS[name]
        if options.get("action") == "store_true":
            argv.append(flag)
        else:
            argv += [flag, cli_text(value)]
    out = io.StringIO()
    assert main(argv, out=out) == 0, out.getvalue()
    assert recorded == [RECEIVED]


def test_through_the_agent_provider_in_process_and_remote(tmp_path: Path, recorded: list[MemorySearchOptions]) -> None:
    pytest.importorskip("agent_framework")
    from memory_core.client.local import LocalMemoryClient
    from memory_core.integrations.agent_framework import MemoryContextProvider

    async def scenario() -> None:
        service = service_on(tmp_path / "m.db")
        local = MemoryContextProvider(
            client=LocalMemoryClient(service), user_id="u1", agent_id="a1", outbox_path=None, **CHANGED
        )
        await local.search_memories("tea")
        server = ApiServer(MemoryApi(service), asyncio.get_running_loop(), port=0)
        server.start()
        try:
            async with MemoryContextProvider.remote(
                base_url=f"http://{server.host}:{server.port}",
                user_id="u1",
                agent_id="a1",
                outbox_path=None,
                flush_interval=None,
                **CHANGED,
            ) as remote:
                await remote.search_memories("tea")
        finally:
            await asyncio.to_thread(server.stop)
            await service.close()

    asyncio.run(scenario())
    assert recorded == [RECEIVED, RECEIVED]


def test_vector_weight_over_http_changes_the_ranking(tmp_path: Path) -> None:
    """A wins the keyword leg and is second in the vector leg; B the other way round. With equal
    weights they tie; a vector weight below 1 puts A first, above 1 puts B first."""
    embedder = HashingEmbedder()
    query = "green tea"
    close_to_query = embedder.embed_sync(query).tolist()
    elsewhere = embedder.embed_sync("quantum chromodynamics lecture").tolist()

    async def scenario() -> list[tuple[float, list[str], list[dict[str, Any]]]]:
        db = tmp_path / "w.db"
        service = build_service(
            load_settings(environ={}, sqlite_path=str(db), embedder="hash"), embedder=embedder
        )
        await service.import_records(
            [
                {"id": "A", "user_id": "u1", "agent_id": "a1", "memory": "green tea, green tea", "embedding": elsewhere},
                {
                    "id": "B",
                    "user_id": "u1",
                    "agent_id": "a1",
                    "memory": "in the evening I sometimes have green tea with my family after dinner",
                    "embedding": close_to_query,
                },
            ]
        )
        server = ApiServer(MemoryApi(service), asyncio.get_running_loop(), port=0)
        server.start()
        client = Client(server.host, server.port)
        results = []
        try:
            for weight in (0.5, 2.0):
                body = {
                    "user_id": "u1",
                    "agent_id": "a1",
                    "query": query,
                    "ranking_profile": "none",
                    "vector_weight": weight,
                    "recall": False,
                }
                reply = await asyncio.to_thread(client.post, "/api/memories/search", body)
                assert reply.status == 200, reply.body
                hits = reply.body["hits"]
                results.append((weight, [h["memory"]["id"] for h in hits], [h["breakdown"] for h in hits]))
        finally:
            await asyncio.to_thread(server.stop)
            await service.close()
        return results

    (low, low_order, low_breakdown), (high, high_order, high_breakdown) = asyncio.run(scenario())
    assert low_order == ["A", "B"] and high_order == ["B", "A"]
    for weight, breakdown in ((low, low_breakdown), (high, high_breakdown)):
        for leg in breakdown:
            expected = 1 / (60 + leg["keyword_rank"]) + weight / (60 + leg["vector_rank"])
            assert leg["relevance"] == pytest.approx(expected)


#: Each search option as a caller writes it: enums by value, the rest as they are.
AS_GIVEN: dict[str, Any] = {name: getattr(value, "value", value) for name, value in CHANGED.items()}


def test_every_face_names_every_option_under_its_own_name() -> None:
    """The option's own name is a parameter of each face (older aliases may stand beside it)."""
    from memory_core.cli.parser import build_parser
    from memory_core.entrypoints.python_api.async_memory import AsyncMemory
    from memory_core.entrypoints.python_api.memory import Memory

    names = set(MemorySearchOptions.model_fields)
    assert names <= set(inspect.signature(AsyncMemory.search).parameters)
    assert names <= set(inspect.signature(Memory.search).parameters)
    search = next(
        action.choices["search"]
        for action in build_parser()._subparsers._group_actions  # type: ignore[union-attr]
        if getattr(action, "choices", None) and "search" in action.choices
    )
    flags = {flag for action in search._actions for flag in action.option_strings}
    assert {option_flag(name) for name in names} <= flags
    pytest.importorskip("agent_framework")
    from memory_core.integrations.agent_framework import MemoryContextProvider

    assert names <= set(inspect.signature(MemoryContextProvider.__init__).parameters)


def _recording_store(monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_core.bootstrap as bootstrap

    monkeypatch.setattr(
        bootstrap, "build_store", lambda settings, **kw: RecordingStore(settings.sqlite_path, clock=kw["clock"])
    )


def test_from_the_command_line_under_the_options_own_names(
    tmp_path: Path, recorded: list[MemorySearchOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    SQLiteMemoryStore(db).close_sync()
    _recording_store(monkeypatch)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    argv = ["--db", str(db), "--json", "search", "tea", "--user", "u1", "--agent", "a1"]
    for name, value in AS_GIVEN.items():
        argv += [option_flag(name)] if value is True else [option_flag(name), cli_text(value)]
    out = io.StringIO()
    assert main(argv, out=out) == 0, out.getvalue()
    assert recorded == [RECEIVED]


def test_from_the_python_api_sync_async_and_remote(
    tmp_path: Path, recorded: list[MemorySearchOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_core.entrypoints.python_api.async_memory import AsyncMemory
    from memory_core.entrypoints.python_api.memory import Memory

    _recording_store(monkeypatch)
    with Memory(tmp_path / "sync.db", embedder="hash") as memory:
        memory.search("tea", user_id="u1", agent_id="a1", **AS_GIVEN)

    async def scenario() -> None:
        async with AsyncMemory(tmp_path / "async.db", embedder="hash") as memory:
            await memory.search("tea", user_id="u1", agent_id="a1", **CHANGED)
        service = service_on(tmp_path / "served.db")
        server = ApiServer(MemoryApi(service), asyncio.get_running_loop(), port=0)
        server.start()
        try:
            async with AsyncMemory(url=f"http://{server.host}:{server.port}") as remote:
                await remote.search("tea", user_id="u1", agent_id="a1", **AS_GIVEN)
        finally:
            await asyncio.to_thread(server.stop)
            await service.close()

    asyncio.run(scenario())
    assert recorded == [RECEIVED, RECEIVED, RECEIVED]


def test_the_python_api_keeps_profile_as_the_older_name(tmp_path: Path, recorded: list[MemorySearchOptions], monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_core.entrypoints.python_api.memory import Memory
    from memory_core.errors import ValidationError

    _recording_store(monkeypatch)
    with Memory(tmp_path / "m.db", embedder="hash") as memory:
        memory.search("tea", user_id="u1", agent_id="a1", profile="recent")
        with pytest.raises(ValidationError) as both:
            memory.search("tea", user_id="u1", agent_id="a1", profile="recent", ranking_profile="none")
        with pytest.raises(ValidationError) as bad:
            memory.search("tea", user_id="u1", agent_id="a1", profile="loudest")
    assert [options.ranking_profile for options in recorded] == [RankingProfile.RECENT]
    assert both.value.field == "profile" and bad.value.field == "profile"


def test_through_the_mcp_search_tool(tmp_path: Path, recorded: list[MemorySearchOptions]) -> None:
    pytest.importorskip("mcp")
    from mcp.client import Client

    from memory_core.entrypoints.mcp.server import build_server
    from memory_core.entrypoints.mcp.tools import MemoryTools

    async def scenario() -> dict[str, Any]:
        service = service_on(tmp_path / "m.db")
        try:
            server = build_server(MemoryTools(service, SCOPE))
            async with Client(server) as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                result = await client.call_tool("search_memories", {"query": "tea", **AS_GIVEN})
                assert not result.is_error, result
                schema: dict[str, Any] = tools["search_memories"].input_schema
                return schema
        finally:
            await service.close()

    schema = asyncio.run(scenario())
    assert set(MemorySearchOptions.model_fields) <= set(schema["properties"])
    assert recorded == [RECEIVED]


def test_a_question_about_time_weighs_more_candidates(tmp_path: Path, recorded: list[MemorySearchOptions]) -> None:
    """A when-question or a period asks the store for ``TIME_CANDIDATES``; any other question for
    ``MIN_CANDIDATES``; a field order keeps ``MIN_CANDIDATES`` (nothing is re-ranked by relevance)."""

    async def scenario() -> None:
        async with service_on(tmp_path / "m.db") as service:
            for query in ("When did I start pottery?", "What did I do in March 2026?", "いつ引っ越した？"):
                await service.search(SCOPE, query, {"top": 5}, recall=False)
            await service.search(SCOPE, "What do I like to drink?", {"top": 5}, recall=False)
            await service.search(SCOPE, "When did I start pottery?", {"top": 5, "order_by": "updated_at desc"}, recall=False)

    asyncio.run(scenario())
    # the period names a month with no memory in it: searched again without it, as widely
    assert [r.top for r in recorded] == [TIME_CANDIDATES] * 4 + [MIN_CANDIDATES, MIN_CANDIDATES]
