"""Reading many memories of a scope at once (:class:`~memory_core.capabilities.BatchReader`), on both stores.

The same behaviours run against the embedded store (a temporary file) and the Azure AI Search adapter
on the simulated search service (every request body validated against the REST contract subset):
``get_many`` returns what ``get`` returns, for any status, only of the scope asked for, and refuses a
bad id before anything is read. Then each adapter's own cost: SQLite one query per 900 ids (counted
with SQLite's statement trace), Azure one search request per 1,000 ids (captured and checked field by
field), and the ``memory-core serve`` proxy still offering the capability.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AzureKeyCredential
from azure_fixtures import check_request, make_record, make_store
from azure_transport import CapturingTransport, json_response
from contract.store_contract import EMBEDDER, HOSTILE_IDS, NOW, U1A1, U1A2, U2A1, make
from fake_search_service import FakeSearchService
from rest_contract import validate

from memory_core.adapters.azure.documents import to_document
from memory_core.adapters.azure.search_index import SELECT_FIELDS, VECTOR_FIELD, ensure_index
from memory_core.adapters.azure.search_store import AzureSearchMemoryStore
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.capabilities import BatchReader, supports
from memory_core.domain.records import MemoryStatus, Scope
from memory_core.domain.validation import validate_memory_id
from memory_core.errors import ValidationError
from memory_core.ports import FixedClock, MemoryStore
from memory_core.runtime.offload import StorageThread, offloaded

ENDPOINT = "https://memtest.search.windows.net"
SEARCH = "/indexes('{indexName}')/docs/search.post.search"
SCOPE = Scope.of("u1", "a1")


def _is_bad(value: str) -> bool:
    try:
        validate_memory_id(value)
    except ValidationError:
        return True
    return False


#: The contract's hostile ids that are not memory ids (``-leading-dash`` is one).
BAD_IDS = [value for value in HOSTILE_IDS if _is_bad(value)]


# ------------------------------------------------------------------------------------------------
# Both stores
# ------------------------------------------------------------------------------------------------

Opener = Callable[[Path], Any]


@asynccontextmanager
async def sqlite_store(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    store = SQLiteMemoryStore(tmp_path / "memory.db", clock=FixedClock(NOW))
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def azure_store(tmp_path: Path, transport: CapturingTransport | None = None) -> AsyncIterator[MemoryStore]:
    """The Azure adapter on the simulated search service (on ``transport``, when given, to count requests)."""
    clock = FixedClock(NOW)
    service = FakeSearchService(now=lambda: clock.now().timestamp())
    if transport is None:
        transport = CapturingTransport()
    transport.fallback = service
    credential = AzureKeyCredential("test-admin-key")
    assert await ensure_index(ENDPOINT, "m", credential, dimensions=EMBEDDER.dimensions, transport=transport) == (
        "created"
    )
    store = AzureSearchMemoryStore(
        ENDPOINT, "m", credential, dimensions=EMBEDDER.dimensions, clock=clock, transport=transport
    )
    try:
        yield store
    finally:
        await store.close()


STORES = pytest.mark.parametrize("open_store", [sqlite_store, azure_store], ids=["sqlite", "azure"])


def run(open_store: Opener, tmp_path: Path, scenario: Callable[[MemoryStore], Awaitable[None]]) -> None:
    async def main() -> None:
        async with open_store(tmp_path) as store:
            await scenario(store)

    asyncio.run(main())


def reader(store: MemoryStore) -> BatchReader:
    assert isinstance(store, BatchReader) and supports(store, BatchReader)
    return store


@STORES
def test_get_many_returns_what_get_returns_of_every_status(open_store: Opener, tmp_path: Path) -> None:
    async def scenario(store: MemoryStore) -> None:
        records = [
            make("prefers an aisle seat", id="a"),
            make("allergic to peanuts", id="b", status=MemoryStatus.ARCHIVED),
            make("used to live in Lyon", id="c", status=MemoryStatus.DELETED),
            make("no embedding here", id="d", with_vector=False),
        ]
        await store.upsert(records)
        found = await reader(store).get_many(U1A1, ["d", "c", "b", "a"])
        assert list(found) == ["d", "c", "b", "a"]  # in the order asked
        for memory_id, record in found.items():
            assert record == await store.get(U1A1, memory_id)
        assert found["a"].embedding is not None and found["a"].embedding == records[0].embedding
        assert found["d"].embedding is None
        assert [found[i].status for i in "abc"] == [MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED, MemoryStatus.DELETED]

    run(open_store, tmp_path, scenario)


@STORES
def test_get_many_reads_only_the_scope_asked_for(open_store: Opener, tmp_path: Path) -> None:
    async def scenario(store: MemoryStore) -> None:
        await store.upsert(
            [
                make("mine", U1A1, id="mine"),
                make("same user, other agent", U1A2, id="other-agent"),
                make("other user, same agent", U2A1, id="other-user"),
            ]
        )
        ids = ["mine", "other-agent", "other-user", "missing", "mine"]
        assert list(await reader(store).get_many(U1A1, ids)) == ["mine"]
        assert list(await reader(store).get_many(U1A2, ids)) == ["other-agent"]
        assert list(await reader(store).get_many(U2A1, ids)) == ["other-user"]
        assert await reader(store).get_many(Scope.of("nobody", "agent-1"), ids) == {}
        assert await reader(store).get_many(U1A1, []) == {}

    run(open_store, tmp_path, scenario)


@STORES
def test_get_many_refuses_a_bad_id_or_scope(open_store: Opener, tmp_path: Path) -> None:
    assert "-leading-dash" not in BAD_IDS and len(BAD_IDS) >= 10

    async def scenario(store: MemoryStore) -> None:
        await store.upsert([make("secret", id="a")])
        for bad in BAD_IDS:
            with pytest.raises(ValidationError) as info:
                await reader(store).get_many(U1A1, ["a", bad])
            assert info.value.field == "memory_ids"
        with pytest.raises(ValidationError):
            await reader(store).get_many(U1A1, "a")  # type: ignore[arg-type]  # one string is not ids
        smuggled = Scope.model_construct(user_id="x' or user_id ne '", agent_id="agent-1")
        with pytest.raises(ValidationError):
            await reader(store).get_many(smuggled, ["a"])

    run(open_store, tmp_path, scenario)


# ------------------------------------------------------------------------------------------------
# SQLite: one query per 900 ids
# ------------------------------------------------------------------------------------------------


def _selects(store: SQLiteMemoryStore) -> list[str]:
    """Every statement the store's connection runs from now on (SQLite's own trace)."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    return statements


def test_sqlite_get_many_queries_900_ids_at_a_time(tmp_path: Path) -> None:
    async def main() -> None:
        async with sqlite_store(tmp_path) as store:
            assert isinstance(store, SQLiteMemoryStore)
            mine = [make(f"memory number {i}", id=f"m{i:05d}", with_vector=i % 2 == 0) for i in range(2_000)]
            await store.upsert(mine)
            await store.upsert([make("someone else's", U2A1, id="m99999")])
            ids = [r.id for r in reversed(mine)] + [f"gone{i}" for i in range(100)] + ["m99999"]
            statements = _selects(store)
            found = await store.get_many(U1A1, ids)
            store._conn.set_trace_callback(None)
            assert len(ids) == 2_101
            assert len(statements) == 3  # ceil(2,101 / 900)
            assert all(s.startswith("SELECT ") for s in statements)
            assert all(" FROM memories WHERE user_id = 'user-1' AND agent_id = 'agent-1' AND id IN (" in s for s in statements)
            assert list(found) == [r.id for r in reversed(mine)]
            by_get = {r.id: await store.get(U1A1, r.id) for r in mine}
            assert found == by_get

    asyncio.run(main())


def test_sqlite_get_many_refuses_a_bad_id_before_any_sql(tmp_path: Path) -> None:
    async def main() -> None:
        async with sqlite_store(tmp_path) as store:
            assert isinstance(store, SQLiteMemoryStore)
            await store.upsert([make("secret", id="a")])
            statements = _selects(store)
            for bad in BAD_IDS:
                with pytest.raises(ValidationError):
                    # the bad id comes after a first chunk of good ones: still nothing is read
                    await store.get_many(U1A1, [*(f"ok{i}" for i in range(1_000)), bad])
            store._conn.set_trace_callback(None)
            assert statements == []

    asyncio.run(main())


# ------------------------------------------------------------------------------------------------
# Azure AI Search: one search request per 1,000 ids, checked against the REST contract
# ------------------------------------------------------------------------------------------------


def whole_documents(*documents: dict[str, Any]) -> Any:
    """A 200 search answer with every selected field, the vector too (as ``select`` asks for it)."""
    selected = {*SELECT_FIELDS, VECTOR_FIELD}
    body = {"value": [{"@search.score": 1.0, **{k: v for k, v in d.items() if k in selected}} for d in documents]}
    validate("SearchDocumentsResult", body)
    return json_response(200, body)


def test_azure_get_many_sends_one_scoped_search_in_request() -> None:
    first, second = make_record("m1"), make_record("m2", status=MemoryStatus.DELETED, embedding=None)
    stray = make_record("m3", user_id="someone-else")  # never answered by the service; dropped anyway
    transport = CapturingTransport([whole_documents(to_document(second), to_document(stray), to_document(first))])
    found = asyncio.run(make_store(transport).get_many(SCOPE, ["m1", "m2", "m1", "m3", "m9"]))
    (captured,) = transport.requests
    body = check_request(captured, "POST", SEARCH)  # contract + index attributes (filterable, retrievable)
    assert body == {
        "filter": "user_id eq 'u1' and agent_id eq 'a1' and search.in(id, 'm1,m2,m3,m9', ',')",
        "select": ",".join([*SELECT_FIELDS, VECTOR_FIELD]),
        "top": 4,
    }
    assert found == {"m1": first, "m2": second}
    assert found["m1"].embedding == first.embedding  # what get returns: with the embedding


def test_azure_get_many_returns_what_get_returns() -> None:
    record = make_record("m1")
    document = to_document(record)
    transport = CapturingTransport([json_response(200, document), whole_documents(document)])
    store = make_store(transport)
    one = asyncio.run(store.get(SCOPE, "m1"))
    many = asyncio.run(store.get_many(SCOPE, ["m1"]))
    assert many == {"m1": one} and one == record


def test_azure_get_many_chunks_1000_ids_per_request() -> None:
    ids = [f"id-{i:04d}-{'x' * 120}" for i in range(2_500)]  # 128 characters, the longest id
    assert all(len(i) == 128 for i in ids)
    transport = CapturingTransport(fallback=lambda captured: whole_documents())
    found = asyncio.run(make_store(transport).get_many(SCOPE, ids))
    assert found == {}
    bodies = [check_request(r, "POST", SEARCH) for r in transport.requests]
    assert [b["top"] for b in bodies] == [1000, 1000, 500]
    prefix, suffix = "user_id eq 'u1' and agent_id eq 'a1' and search.in(id, '", "', ',')"
    sent: list[str] = []
    for body in bodies:
        assert body["filter"].startswith(prefix) and body["filter"].endswith(suffix)
        sent += body["filter"][len(prefix) : -len(suffix)].split(",")
        assert len(body["filter"]) < 130_000  # ~129 KB at most: far below the service's request size
    assert sent == ids


def test_azure_get_many_refuses_bad_ids_before_any_request() -> None:
    transport = CapturingTransport()
    store = make_store(transport)
    for bad in BAD_IDS:
        with pytest.raises(ValidationError):
            asyncio.run(store.get_many(SCOPE, [*(f"ok{i}" for i in range(1_500)), bad]))
    assert asyncio.run(store.get_many(SCOPE, [])) == {}
    assert transport.requests == []


def test_azure_get_many_on_the_simulated_service_reads_2_100_ids_in_3_requests(tmp_path: Path) -> None:
    transport = CapturingTransport()

    async def main() -> None:
        async with azure_store(tmp_path, transport) as store:
            assert isinstance(store, AzureSearchMemoryStore)
            mine = [make(f"memory number {i}", id=f"m{i:05d}") for i in range(2_000)]
            await store.upsert(mine)
            await store.upsert([make("someone else's", U2A1, id="z-other")])
            ids = [r.id for r in mine] + [f"gone{i}" for i in range(99)] + ["z-other"]
            before = len(transport.requests)
            found = await store.get_many(U1A1, ids)
            reads = transport.requests[before:]
            assert [(r.method, r.path) for r in reads] == [("POST", "/indexes('m')/docs/search.post.search")] * 3
            assert [r.body["top"] for r in reads] == [1000, 1000, 100]
            assert list(found) == [r.id for r in mine]
            assert found == {r.id: r for r in mine}

    asyncio.run(main())


# ------------------------------------------------------------------------------------------------
# memory-core serve: the offloaded SQLite store still reads many at once
# ------------------------------------------------------------------------------------------------


def test_the_offloaded_store_of_serve_still_offers_batch_reads(tmp_path: Path) -> None:
    async def main() -> None:
        store = offloaded(SQLiteMemoryStore(tmp_path / "memory.db", clock=FixedClock(NOW)), StorageThread("store"))
        try:
            assert supports(store, BatchReader)
            await store.upsert([make("prefers an aisle seat", id="a"), make("other", U1A2, id="b")])
            found = await store.get_many(U1A1, ["a", "b"])
            assert found == {"a": await store.get(U1A1, "a")}
        finally:
            await store.close()

    asyncio.run(main())
