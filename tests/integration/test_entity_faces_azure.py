"""The entity routes on the Azure AI Search store, offline (the simulated service checks every request
against the REST contract subset): the same use cases and answers as on the embedded store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from azure.core.credentials import AzureKeyCredential
from azure_fixtures import NOW
from azure_transport import CapturingTransport
from fake_search_service import FakeSearchService

from memory_core.adapters.azure.search_index import ensure_index
from memory_core.adapters.azure.search_store import AzureSearchMemoryStore
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.entities import entity_id
from memory_core.domain.records import MemoryRecord, Scope
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest
from memory_core.ports import FixedClock

ENDPOINT, INDEX = "https://memtest.search.windows.net", "memories"
ALICE, BOB = Scope.of("alice", "travel"), Scope.of("bob", "travel")
EMBEDDER = HashingEmbedder(64)
TEXTS = [
    (ALICE, "m-ana-1", "My sister Ana moved to Lisbon."),
    (ALICE, "m-ana-2", "Ana teaches chemistry at a high school."),
    (ALICE, "m-rex", "My dog Rex likes the beach."),
    (BOB, "m-tom", "My brother Tom moved to Paris."),
]
ANA, TOM = entity_id(ALICE, "person", "ana"), entity_id(BOB, "person", "tom")
Q = {"user_id": "alice", "agent_id": "travel"}


def test_the_entity_routes_answer_alike_on_azure_ai_search(tmp_path: Path) -> None:
    async def main() -> None:
        fake = FakeSearchService(now=lambda: NOW.timestamp())
        transport = CapturingTransport(fallback=fake)
        credential = AzureKeyCredential("test-admin-key")
        await ensure_index(ENDPOINT, INDEX, credential, dimensions=EMBEDDER.dimensions, transport=transport)
        store = AzureSearchMemoryStore(
            ENDPOINT, INDEX, credential, dimensions=EMBEDDER.dimensions, clock=FixedClock(NOW), transport=transport
        )
        vectors = await EMBEDDER.embed_passages([t for _, _, t in TEXTS])
        await store.upsert(
            [
                MemoryRecord(id=i, user_id=s.user_id, agent_id=s.agent_id, memory=t, created_at=NOW, updated_at=NOW,
                             embedding=v.tolist())
                for (s, i, t), v in zip(TEXTS, vectors, strict=True)
            ]
        )
        settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(tmp_path / "m.db"))
        service = build_service(settings, store=store)
        api = MemoryApi(service)

        async def call(method: str, path: str, status: int = 200, query: dict[str, str] = Q) -> dict:  # type: ignore[type-arg]
            response = await api.handle(ApiRequest(method, path, query))
            assert response.status == status, (method, path, response.body)
            return response.body  # type: ignore[no-any-return]

        try:
            listed = (await call("GET", "/entities"))["entities"]
            assert {e["name"]: e["memory_count"] for e in listed} == {"Ana": 2, "Rex": 1, "Lisbon": 1}
            detail = await call("GET", f"/entities/{ANA}")
            assert sorted(m["id"] for m in detail["memories"]) == ["m-ana-1", "m-ana-2"]
            await call("GET", f"/entities/{TOM}", 404)  # Bob's
            await call("GET", f"/entities/{ANA}", 404, {"user_id": "bob", "agent_id": "travel"})
            export = await call("GET", f"/entities/{ANA}/export")
            assert [m["id"] for m in export["memories"]] == ["m-ana-1", "m-ana-2"]
            report = await call("DELETE", f"/entities/{ANA}")
            assert report["entity_removed"] is True and len(report["forgotten"]) == 2
            await call("GET", f"/entities/{ANA}", 404)
            assert [e["name"] for e in (await call("GET", "/entities"))["entities"]] == ["Rex"]
            assert (await call("GET", "/memories/m-ana-1"))["status"] == "deleted"
        finally:
            await service.close()

    asyncio.run(main())
