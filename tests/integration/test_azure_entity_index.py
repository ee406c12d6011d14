"""The entity index of the Azure AI Search store, offline: the fields on the memory documents, the
requests that read and filter them (checked against the REST contract subset by the simulated
service), an existing index gaining the fields, agreement with the embedded store, and search through
entities on the Azure store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AzureKeyCredential
from azure_fixtures import NOW, check_request
from azure_transport import Captured, CapturingTransport
from fake_search_service import FakeSearchService, parse_filter

from memory_core.adapters.azure import odata
from memory_core.adapters.azure.entity_fields import ENTITY_FIELDS
from memory_core.adapters.azure.search_index import ensure_index
from memory_core.adapters.azure.search_store import AzureSearchMemoryStore
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.domain.filters import parse_filters
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.domain.search import MemorySearchOptions, SearchMode
from memory_core.domain.search_request import SearchRequest
from memory_core.errors import ValidationError
from memory_core.language.entities import Mention, mentions
from memory_core.ports import FixedClock
from memory_core.service.search import search

ENDPOINT = "https://memtest.search.windows.net"
INDEX = "memories"
SEARCH = "/indexes('{indexName}')/docs/search.post.search"
SCOPE, OTHER = Scope.of("u1", "a1"), Scope.of("u2", "a1")
EMBEDDER = HashingEmbedder(64)

Scenario = Callable[[AzureSearchMemoryStore, FakeSearchService, CapturingTransport], Awaitable[None]]


def record(memory_id: str, text: str, scope: Scope = SCOPE, **fields: Any) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id, user_id=scope.user_id, agent_id=scope.agent_id, memory=text, created_at=NOW, updated_at=NOW, **fields
    )


def run(scenario: Scenario, *, index: dict[str, Any] | None = None) -> None:
    """``scenario`` on a store over the simulated service (its index created by ``ensure_index``, or
    ``index`` as the service already holds it)."""

    async def main() -> None:
        service = FakeSearchService(now=lambda: NOW.timestamp())
        service.index = index
        transport = CapturingTransport(fallback=service)
        credential = AzureKeyCredential("test-admin-key")
        if index is None:
            await ensure_index(ENDPOINT, INDEX, credential, dimensions=EMBEDDER.dimensions, transport=transport)
        store = AzureSearchMemoryStore(
            ENDPOINT, INDEX, credential, dimensions=EMBEDDER.dimensions, clock=FixedClock(NOW), transport=transport
        )
        async with store:
            await scenario(store, service, transport)

    asyncio.run(main())


def searches(transport: CapturingTransport, since: int = 0) -> list[dict[str, Any]]:
    """The bodies of the search requests sent from request ``since`` on (each checked against the spec
    and the index; the simulated service checks every body against the spec too)."""
    bodies = []
    for captured in transport.requests[since:]:
        if captured.path.endswith("search.post.search"):
            body = captured.body
            if not body.get("vectorQueries"):  # (the fixtures' index has vectors of 4)
                body = check_request(captured, "POST", SEARCH)
            bodies.append(body)
    return bodies


def writes(transport: CapturingTransport, since: int = 0) -> list[Captured]:
    return [r for r in transport.requests[since:] if r.path.endswith("search.index")]


# -- the documents ---------------------------------------------------------------------------------
def test_a_write_names_its_entities_on_its_document() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        await store.upsert([record("m1", "My wife Mei is a pilot."), record("m2", "I like tea.")])
        wife = service.documents["m1"]
        (mei,) = await store.entities(SCOPE)
        assert (mei.kind, mei.name, mei.relation) == ("person", "Mei", "wife")
        assert wife["entity_ids"] == [mei.id] and wife["entity_names"] == ["Mei"]
        assert [r["id"] for r in json.loads(wife["entities_json"])] == [mei.id]
        assert service.documents["m2"]["entity_ids"] == [] and service.documents["m2"]["entities_json"] == "[]"

    run(scenario)


def test_a_batch_reads_the_scope_once_and_resolves_in_order() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        start = len(transport.requests)
        await store.upsert(
            [
                record("m1", "My sister works at Contoso."),
                record("m2", "My sister Ana moved to Lisbon."),
                record("m3", "Ana teaches chemistry."),
                record("o1", "My sister Ana sings.", scope=OTHER),
            ]
        )
        reads = searches(transport, start)
        assert len(reads) == 2  # one per scope, not one per memory
        assert reads[0]["filter"] == (
            "user_id eq 'u1' and agent_id eq 'a1' and (status eq 'active' or status eq 'archived') and entity_ids/any()"
        )
        assert reads[0]["select"] == "id,memory,entity_ids,entities_json"
        assert len(writes(transport, start)) == 1
        people = [e for e in await store.entities(SCOPE) if e.kind == "person"]
        assert [(e.name, e.relation) for e in people] == [("Ana", "sister")]  # "my sister", then her name
        found = await store.entity_memories(SCOPE, [Mention("person", None, "sister")])
        assert found == {people[0].id: ["m1", "m2", "m3"]}
        start = len(transport.requests)
        await store.upsert([record("m4", "I like tea.")])
        assert searches(transport, start) == []  # nothing named: nothing to read

    run(scenario)


def test_deleting_and_restoring_a_memory_rewrites_what_it_names() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        await store.upsert([record("m1", "My friend Alex lent me his car.")])
        await store.mark_status(SCOPE, "m1", MemoryStatus.DELETED, reason="forget request")
        assert service.documents["m1"]["entity_ids"] == [] and service.documents["m1"]["entity_names"] == []
        assert await store.entities(SCOPE) == []
        await store.mark_status(SCOPE, "m1", MemoryStatus.ACTIVE, reason="restored")
        assert [e.name for e in await store.entities(SCOPE)] == ["Alex"]
        start = len(transport.requests)
        await store.mark_status(SCOPE, "m1", MemoryStatus.ARCHIVED, reason="faded")
        (merge,) = [check_request(w, "POST", "/indexes('{indexName}')/docs/search.index") for w in writes(transport, start)]
        assert not set(ENTITY_FIELDS) & set(merge["value"][0])  # what it names did not change
        await store.merge(SCOPE, "m1", {"memory": "My friend Bo lent me his bike."})
        assert [e.name for e in await store.entities(SCOPE)] == ["Bo"]

    run(scenario)


def test_a_name_learnt_later_is_written_to_the_earlier_documents() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        await store.upsert([record("m1", "My sister is a chemist."), record("m2", "I like tea.")])
        assert service.documents["m1"]["entity_names"] == []
        start = len(transport.requests)
        await store.upsert([record("m3", "My sister Ana moved to Lisbon.")])
        upload, rename = [check_request(w, "POST", "/indexes('{indexName}')/docs/search.index") for w in writes(transport, start)]
        assert [a["id"] for a in upload["value"]] == ["m3"]
        assert rename["value"] == [
            {"@search.action": "merge", "id": "m1", "entity_names": ["Ana"], "entities_json": service.documents["m1"]["entities_json"]}
        ]
        assert json.loads(service.documents["m1"]["entities_json"])[0]["name"] == "Ana"
        request = SearchRequest(scope=SCOPE, query="Ana", options=MemorySearchOptions(mode=SearchMode.KEYWORD, top=10))
        assert {h.record.id for h in (await store.search(request)).hits} == {"m1", "m3"}
        start = len(transport.requests)
        await store.upsert([record("m4", "My sister Ana sings.")])
        assert len(writes(transport, start)) == 1  # nothing new learnt: no other document is written

    run(scenario)


def test_a_replayed_write_keeps_what_the_memory_names() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        batch = [record("m1", "My sister is a chemist."), record("m2", "My sister Ana moved to Lisbon.")]
        await store.upsert(batch)
        documents = json.loads(json.dumps(service.documents))
        await store.upsert(batch)
        assert service.documents == documents

    run(scenario)


def test_both_stores_give_the_same_text_the_same_entities(tmp_path: Path) -> None:
    texts = [
        "My sister works at Contoso.",
        "My sister Ana moved to Lisbon.",
        "My friend Sara plays chess.",
        "My friend Sarah plays golf.",
        "姉の花子は東京に住んでいる。",
        "同僚の田中さんは猫が好き。",
        "My dog Rex is old.",
        "My brother Luis is married to Carmen.",  # a relation of another entity: sister.spouse
        "Carmen restores old pianos.",  # a name the scope knows, without a frame
        "兄の健一には陽菜という娘がいる。",
        "陽菜は大阪の大学に通っている。",
    ]
    records = [record(f"m{i}", text) for i, text in enumerate(texts)]

    def view(entities: list[Any]) -> list[tuple[str, str, str | None, str | None]]:
        return [(e.id, e.kind, e.name, e.relation) for e in entities]

    async def write(store: Any) -> list[list[tuple[str, str, str | None, str | None]]]:
        seen = []
        await store.upsert(records[:1])
        await store.upsert(records[1:])
        seen.append(view(await store.entities(SCOPE)))
        await store.mark_status(SCOPE, "m1", MemoryStatus.DELETED, reason="forget request")  # the one that named her
        seen.append(view(await store.entities(SCOPE)))
        await store.merge(SCOPE, "m3", {"memory": "My friend Sara sings."})
        await store.upsert([record("m1", "My sister Ana moved to Porto.")])
        seen.append(view(await store.entities(SCOPE)))
        await store.upsert([record("b1", "My brother is tall.")])
        await store.upsert([record("b1", "My brother Tom is tall.")])  # the same person, now named
        seen.append(view(await store.entities(SCOPE)))
        return seen

    async def embedded() -> list[list[tuple[str, str, str | None, str | None]]]:
        store = SQLiteMemoryStore(tmp_path / "memory.db")
        try:
            return await write(store)
        finally:
            await store.close()

    expected = asyncio.run(embedded())
    assert len(expected[0]) >= 7 and ("person", "Ana", "sister") in [e[1:] for e in expected[1]]
    assert {("person", "Carmen", "brother.spouse"), ("person", "陽菜", "brother.daughter")} <= {e[1:] for e in expected[0]}

    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        assert await write(store) == expected

    run(scenario)


# -- reading by entity -----------------------------------------------------------------------------
def test_memories_of_filters_the_entity_collection() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        await store.upsert([record("m1", "My dog Rex is old."), record("m2", "Rex sleeps a lot.")])
        (rex,) = [e.id for e in await store.entities(SCOPE)]
        start = len(transport.requests)
        assert await store.memories_of(SCOPE, [rex, rex]) == {rex: ["m1", "m2"]}
        (body,) = searches(transport, start)
        assert body["filter"] == (
            "user_id eq 'u1' and agent_id eq 'a1' and (status eq 'active' or status eq 'archived') and "
            f"entity_ids/any(e: search.in(e, '{rex}', ','))"
        )
        assert body["select"] == "id,entity_ids" and body["orderby"] == "id asc"

    run(scenario)


@pytest.mark.parametrize("bad", ["ent_x' or 1 eq 1 or 'a", "ent_0,ent_1", "", "m1", "ent_" + "A" * 24])
def test_bad_entity_ids_are_refused_before_any_request(bad: str) -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        start = len(transport.requests)
        with pytest.raises(ValidationError, match="entity_ids"):
            await store.memories_of(SCOPE, [bad])
        with pytest.raises(ValidationError, match="entity_ids"):
            await store.memories_of(SCOPE, bad)  # type: ignore[arg-type]
        assert transport.requests[start:] == []

    run(scenario)


def test_the_collection_filters_quote_and_check_their_values() -> None:
    assert odata.any_in("entity_ids", ["ent_a", "o'b"]) == "entity_ids/any(e: search.in(e, 'ent_a,o''b', ','))"
    assert odata.any_of("entity_ids") == "entity_ids/any()"
    for values in ([], ["a,b"], [""]):
        with pytest.raises(ValidationError):
            odata.any_in("entity_ids", values)
    with pytest.raises(ValidationError):
        odata.any_of("memory")
    ids = parse_filters({"id": {"in": ["m1", "m-2"]}})
    assert odata.filters_expression(ids) == "search.in(id, 'm1,m-2', ',')"
    assert odata.filters_expression(parse_filters({"id": {"nin": ["m1", "m2"]}})) == "(id ne 'm1' and id ne 'm2')"


def test_the_simulated_service_reads_any_as_the_service_does() -> None:
    has = parse_filter("entity_ids/any()")
    one_of = parse_filter("entity_ids/any(e: search.in(e, 'a,b', ','))")
    equal = parse_filter("not metadata_terms/any(t: t eq 'k=''v''')")
    assert has({"entity_ids": ["x"]}) and not has({"entity_ids": []}) and not has({})
    assert one_of({"entity_ids": ["c", "b"]}) and not one_of({"entity_ids": ["c"]}) and not one_of({"entity_ids": None})
    assert equal({"metadata_terms": ["k=v"]}) and not equal({"metadata_terms": ["k='v'"]})


# -- an existing index -----------------------------------------------------------------------------
def test_an_index_without_the_entity_fields_gains_them_and_old_memories_are_indexed_when_written() -> None:
    fresh = FakeSearchService(now=lambda: NOW.timestamp())
    asyncio.run(ensure_index(ENDPOINT, INDEX, AzureKeyCredential("k"), dimensions=EMBEDDER.dimensions, transport=CapturingTransport(fallback=fresh)))
    old = json.loads(json.dumps(fresh.index))
    old["fields"] = [f for f in old["fields"] if f["name"] not in ENTITY_FIELDS]
    old["@odata.etag"] = '"0xOLD"'

    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        service.documents["m0"] = {
            "id": "m0", "user_id": "u1", "agent_id": "a1", "memory": "My wife Mei is a pilot.", "status": "active",
        }  # written before the entity fields existed
        credential = AzureKeyCredential("test-admin-key")
        start = len(transport.requests)
        assert await ensure_index(ENDPOINT, INDEX, credential, dimensions=EMBEDDER.dimensions, transport=transport) == "updated"
        put = check_request(transport.requests[start + 1], "PUT", "/indexes('{indexName}')")
        assert transport.requests[start + 1].headers["If-Match"] == '"0xOLD"'
        added = {f["name"]: f for f in put["fields"] if f["name"] in ENTITY_FIELDS}
        assert added["entity_ids"]["type"] == "Collection(Edm.String)" and added["entity_ids"]["filterable"]
        assert added["entity_names"]["searchable"] and added["entity_names"]["analyzer"] == "ja.microsoft"
        assert added["entities_json"]["retrievable"] and not added["entities_json"]["searchable"]
        assert [f["name"] for f in put["fields"]][: len(old["fields"])] == [f["name"] for f in old["fields"]]
        assert await store.entities(SCOPE) == []  # an older memory names nothing until it is written again
        await store.upsert([record("m0", "My wife Mei is a pilot.")])
        assert [e.name for e in await store.entities(SCOPE)] == ["Mei"]

    run(scenario, index=old)


# -- search through entities -----------------------------------------------------------------------
MEMORIES = [
    ("wife", "My wife Mei started flying lessons."),
    ("mei-job", "Mei is a pilot for a cargo airline."),
    ("car", "I drive an old blue Volvo to work."),
    ("job", "I work as a nurse at the city hospital."),
    ("coffee", "I like strong coffee in the morning."),
    ("later", "My wife loves sushi."),
]


async def _fill(store: AzureSearchMemoryStore) -> None:
    vectors = await EMBEDDER.embed_passages([text for _, text in MEMORIES])
    await store.upsert(
        [record(memory_id, text, embedding=v.tolist(), importance=0.5, retention_score=0.9) for (memory_id, text), v in zip(MEMORIES, vectors, strict=True)]
    )


def test_the_entity_leg_runs_on_the_azure_store_in_one_filtered_request() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        await _fill(store)
        start = len(transport.requests)
        result = await search(store, EMBEDDER, SCOPE, "What does my wife do for a living?", MemorySearchOptions(top=3), now=NOW)
        added = {h.record.id: h.breakdown.functions.get("entity", 0.0) for h in result.hits}
        assert "mei-job" in added and added["mei-job"] > 0  # it names her otherwise: the leg brings it
        narrowed = [b for b in searches(transport, start) if "search.in(id, " in b.get("filter", "")]
        assert len(narrowed) == 1
        assert "search.in(id, 'later,mei-job,wife', ',')" in narrowed[0]["filter"]
        assert "vectorQueries" in narrowed[0]  # the leg is a hybrid search of its own, narrowed

    run(scenario)


def test_a_name_said_in_another_memory_is_searchable_on_the_document() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        await _fill(store)
        assert service.documents["later"]["entity_names"] == ["Mei"]
        request = SearchRequest(scope=SCOPE, query="Mei", options=MemorySearchOptions(mode=SearchMode.KEYWORD, top=10))
        found = {h.record.id for h in (await store.search(request)).hits}
        assert found == {"wife", "mei-job", "later"}  # "later" says "my wife"; its document names Mei

    run(scenario)


def test_mentions_of_a_query_are_matched_without_creating_entities() -> None:
    async def scenario(store: AzureSearchMemoryStore, service: FakeSearchService, transport: CapturingTransport) -> None:
        await _fill(store)
        before = await store.entities(SCOPE)
        found = await store.entity_memories(SCOPE, mentions("What does Mei like?"))
        assert list(found.values()) == [["later", "mei-job", "wife"]]
        assert await store.entity_memories(SCOPE, mentions("What does Anna like?")) == {}
        assert await store.entity_memories(SCOPE, []) == {}
        assert await store.entities(SCOPE) == before

    run(scenario)
