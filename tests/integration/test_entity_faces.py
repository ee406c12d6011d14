"""Entities on every face: the store's ``memories_of``, the HTTP routes over a real socket (list, one
with its memories, forget, export; scopes, bad ids, unknown ids, a store without an entity index), the
command line, the Python API (embedded and remote) and an export read back by ``import``."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from runtime_helpers import RunningRuntime, running

from memory_core import AsyncMemory, Memory
from memory_core.adapters.sqlite.store import SQLiteMemoryStore
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main
from memory_core.domain.entities import entity_id
from memory_core.domain.records import MemoryRecord, MemoryStatus, Scope
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest
from memory_core.errors import NotFoundError, UnsupportedError, ValidationError

TOKEN = "entity-faces-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = datetime.now(UTC)
ALICE, BOB = Scope.of("alice", "travel"), Scope.of("bob", "travel")
Q = "user_id=alice&agent_id=travel"
#: (scope, id, text, days ago)
MEMORIES = [
    (ALICE, "m-ana-1", "My sister Ana moved to Lisbon.", 5),
    (ALICE, "m-ana-2", "Ana teaches chemistry at a high school.", 3),
    (ALICE, "m-rex", "My dog Rex likes the beach.", 2),
    (ALICE, "m-tea", "I like green tea.", 1),
    (BOB, "m-tom", "My brother Tom moved to Paris.", 1),
]
ANA = entity_id(ALICE, "person", "ana")
REX = entity_id(ALICE, "pet", "rex")
TOM = entity_id(BOB, "person", "tom")
UNKNOWN = "ent_" + "0" * 24


def _rows() -> list[dict[str, Any]]:
    rows = []
    for scope, memory_id, text, days in MEMORIES:
        at = (NOW - timedelta(days=days)).isoformat()
        rows.append(
            {"id": memory_id, "user_id": scope.user_id, "agent_id": scope.agent_id, "memory": text,
             "created_at": at, "updated_at": at}
        )
    return rows


def _seed(db: Path) -> None:
    async def seed() -> None:
        async with build_service(load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))) as service:
            await service.import_records(_rows())

    asyncio.run(seed())


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[RunningRuntime]:
    db = tmp_path / "memory.db"
    _seed(db)
    with running(db, workers=1, token=TOKEN) as runtime:
        yield runtime


def call(rt: RunningRuntime, method: str, path: str, status: int = 200) -> Any:
    reply = rt.client.request(method, path, headers=AUTH)
    assert reply.status == status, (method, path, reply.status, reply.body)
    return reply.body


def test_the_ids_are_the_ones_the_index_gives() -> None:
    assert ANA.startswith("ent_") and len({ANA, REX, TOM}) == 3


# -- the store ---------------------------------------------------------------------------------------
def test_memories_of_lists_each_entitys_memories_but_the_deleted_ones(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteMemoryStore(tmp_path / "m.db")
        try:
            await store.upsert([MemoryRecord.model_validate(r) for r in _rows()])
            found = await store.memories_of(ALICE, [REX, ANA, UNKNOWN, TOM, ANA])
            assert found == {REX: ["m-rex"], ANA: ["m-ana-1", "m-ana-2"]}  # in the order asked
            assert list(found) == [REX, ANA]
            assert await store.memories_of(BOB, [TOM, ANA]) == {TOM: ["m-tom"]}  # another scope's id: absent
            assert await store.memories_of(ALICE, []) == {}
            await store.mark_status(ALICE, "m-ana-2", MemoryStatus.DELETED, reason="test")
            assert await store.memories_of(ALICE, [ANA]) == {ANA: ["m-ana-1"]}
            await store.mark_status(ALICE, "m-ana-2", MemoryStatus.ARCHIVED, reason="test")  # back, archived
            assert await store.memories_of(ALICE, [ANA]) == {ANA: ["m-ana-1", "m-ana-2"]}
            await store.mark_status(ALICE, "m-ana-1", MemoryStatus.DELETED, reason="test")
            await store.mark_status(ALICE, "m-ana-2", MemoryStatus.DELETED, reason="test")
            assert await store.memories_of(ALICE, [ANA]) == {}  # the entity went with its last memory
            for bad in ("ent 1", "", "x" * 129, "ent_'; DROP TABLE entities", "m-ana-1", ANA.upper(), ANA + "0"):
                with pytest.raises(ValidationError) as error:
                    await store.memories_of(ALICE, [bad])
                assert error.value.field == "entity_id"
        finally:
            await store.close()

    asyncio.run(scenario())


# -- HTTP ----------------------------------------------------------------------------------------------
def test_the_entities_of_a_scope_with_their_counts(rt: RunningRuntime) -> None:
    listed = call(rt, "GET", f"/api/entities?{Q}")
    assert (listed["user_id"], listed["agent_id"]) == ("alice", "travel")
    by_name = {e["name"]: e for e in listed["entities"]}
    assert set(by_name) == {"Ana", "Lisbon", "Rex"}  # Bob's Tom is not Alice's
    ana = by_name["Ana"]
    assert (ana["id"], ana["kind"], ana["relation"], ana["memory_count"]) == (ANA, "person", "sister", 2)
    assert (by_name["Rex"]["kind"], by_name["Rex"]["relation"]) == ("pet", "dog")
    assert ana["first_mentioned"] < ana["last_mentioned"]
    assert [e["kind"] for e in listed["entities"]] == ["person", "pet", "place"]
    assert call(rt, "GET", "/api/entities?user_id=nobody&agent_id=travel")["entities"] == []
    assert rt.client.get(f"/api/entities?{Q}").status == 401  # the token guards it like every route


def test_one_entity_with_its_memories_as_the_memory_routes_show_them(rt: RunningRuntime) -> None:
    detail = call(rt, "GET", f"/api/entities/{ANA}?{Q}")
    assert (detail["id"], detail["name"], detail["memory_count"]) == (ANA, "Ana", 2)
    assert [m["id"] for m in detail["memories"]] == ["m-ana-2", "m-ana-1"]  # newest first
    one = call(rt, "GET", f"/api/memories/m-ana-1?{Q}")
    one.pop("history")
    shown = detail["memories"][1]
    assert shown.pop("retention_score") == pytest.approx(one.pop("retention_score"), abs=1e-6)  # as of now
    assert shown == one


def test_unknown_and_other_scopes_entities_are_404(rt: RunningRuntime) -> None:
    for path in (f"/api/entities/{TOM}?{Q}", f"/api/entities/{UNKNOWN}?{Q}", f"/api/entities/{ANA}?user_id=bob&agent_id=travel",
                 f"/api/entities/{ANA}?user_id=alice&agent_id=music"):
        for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/export")):
            route, query = path.split("?")
            error = call(rt, method, f"{route}{suffix}?{query}", 404)["error"]
            assert error["code"] == "not_found" and "entity" in error["message"]
    assert call(rt, "GET", f"/api/entities?{Q}")["entities"][0]["memory_count"] == 2  # nothing was forgotten


@pytest.mark.parametrize("bad", ["ent 1", "ent_1;DROP", "x" * 129, "ent_1'", "..", "ent_é", "m-ana-1", "ent_0000", "ENT_" + "0" * 24])
def test_a_bad_entity_id_is_422_naming_it(rt: RunningRuntime, bad: str) -> None:
    for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/export")):
        error = call(rt, method, f"/api/entities/{quote(bad, safe='')}{suffix}?{Q}", 422)["error"]
        assert error["code"] == "validation_error" and error["field"] == "entity_id", error
        assert "entity id" in error["message"]


def test_the_scope_is_required_and_checked(rt: RunningRuntime) -> None:
    assert call(rt, "GET", "/api/entities?agent_id=travel", 422)["error"]["field"] == "user_id"
    assert call(rt, "GET", f"/api/entities/{ANA}?user_id=a%20b", 422)["error"]["field"] == "user_id"
    assert call(rt, "POST", f"/api/entities?{Q}", 405)["error"]["code"] == "method_not_allowed"


def test_forgetting_an_entity_deletes_its_memories_and_the_entity(rt: RunningRuntime) -> None:
    report = call(rt, "DELETE", f"/api/entities/{ANA}?{Q}")
    assert report["entity"]["id"] == ANA and report["entity_removed"] is True
    assert sorted(m["id"] for m in report["forgotten"]) == ["m-ana-1", "m-ana-2"]
    assert {m["status"] for m in report["forgotten"]} == {"deleted"}
    call(rt, "GET", f"/api/entities/{ANA}?{Q}", 404)
    names = {e["name"] for e in call(rt, "GET", f"/api/entities?{Q}")["entities"]}
    assert names == {"Rex"}  # Lisbon was only in Ana's memory; Rex stays
    memory = call(rt, "GET", f"/api/memories/m-ana-1?{Q}")
    assert memory["status"] == "deleted"
    assert memory["history"][-1]["event"] == "DELETE" and ANA in memory["history"][-1]["reason"]
    assert "Ana" not in memory["history"][-1]["reason"]
    assert call(rt, "GET", f"/api/memories/m-tea?{Q}")["status"] == "active"
    bob = call(rt, "GET", "/api/entities?user_id=bob&agent_id=travel")["entities"]
    assert [e["name"] for e in bob] == ["Tom", "Paris"]
    call(rt, "DELETE", f"/api/entities/{ANA}?{Q}", 404)  # again: nothing is left to forget


def test_an_entitys_export_is_read_back_by_import(rt: RunningRuntime, tmp_path: Path) -> None:
    export = call(rt, "GET", f"/api/entities/{ANA}/export?{Q}")
    assert (export["user_id"], export["agent_id"], export["count"], export["next_cursor"]) == ("alice", "travel", 2, None)
    assert [m["id"] for m in export["memories"]] == ["m-ana-1", "m-ana-2"] and export["queued"] == []
    assert all("embedding" not in m or m["embedding"] is None for m in export["memories"])
    assert {h["memory_id"] for h in export["history"]} <= {"m-ana-1", "m-ana-2"}
    vectors = call(rt, "GET", f"/api/entities/{ANA}/export?{Q}&include_vectors=true")
    assert all(len(m["embedding"]) > 0 for m in vectors["memories"])
    lines = tmp_path / "ana.jsonl"
    lines.write_text("".join(json.dumps(m) + "\n" for m in export["memories"]), encoding="utf-8")
    other = tmp_path / "other.db"
    assert _cli("--db", str(other), "import", str(lines))[0] == 0
    code, out = _cli("--db", str(other), "--json", "entities", "--user", "alice", "--agent", "travel")
    assert code == 0
    assert {e["name"]: e["memory_count"] for e in json.loads(out)["entities"]} == {"Ana": 2, "Lisbon": 1}


def test_a_store_without_an_entity_index_answers_501(tmp_path: Path) -> None:
    class WithoutEntities:  # the store with everything but the entity index
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            if name in {"entities", "entity_memories", "memories_of"}:
                raise AttributeError(name)
            return getattr(self._inner, name)

    async def scenario() -> None:
        settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(tmp_path / "m.db"))
        plain = build_service(settings)
        service = build_service(settings, store=WithoutEntities(plain._store))  # type: ignore[arg-type]
        try:
            api = MemoryApi(service)
            for method, path in (("GET", "/entities"), ("GET", f"/entities/{ANA}"), ("DELETE", f"/entities/{ANA}"),
                                 ("GET", f"/entities/{ANA}/export")):
                response = await api.handle(ApiRequest(method, path, {"user_id": "alice", "agent_id": "travel"}))
                assert response.status == 501, (path, response.body)
                assert response.body["error"]["code"] == "not_supported"
                assert "entity index" in response.body["error"]["message"]
            with pytest.raises(UnsupportedError):
                await service.entities(ALICE)
        finally:
            await plain.close()

    asyncio.run(scenario())


# -- the command line ------------------------------------------------------------------------------------
def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_the_command_line_lists_shows_exports_and_forgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    db = tmp_path / "memory.db"
    _seed(db)
    scope = ["--user", "alice", "--agent", "travel"]
    code, out = _cli("--db", str(db), "entities", *scope)
    assert code == 0
    assert f"{ANA}  person Ana (sister)  [2 memories;" in out and f"{REX}  pet    Rex (dog)  [1 memory;" in out
    code, out = _cli("--db", str(db), "entities", "show", ANA[:10], *scope)  # a unique start is enough
    assert code == 0 and out.splitlines()[0] == f"{ANA}  person  Ana (sister)"
    assert "m-ana-2" in out.splitlines()[1] and "m-ana-1" in out.splitlines()[2]
    code, out = _cli("--db", str(db), "--json", "entities", "show", ANA, *scope)
    assert code == 0 and [m["id"] for m in json.loads(out)["memories"]] == ["m-ana-2", "m-ana-1"]
    code, out = _cli("--db", str(db), "export", "--entity", ANA, *scope)
    assert code == 0 and [json.loads(line)["id"] for line in out.splitlines()] == ["m-ana-1", "m-ana-2"]
    code, out = _cli("--db", str(db), "--json", "export", "--entity", ANA, *scope)
    assert code == 0 and json.loads(out)["count"] == 2
    assert _cli("--db", str(db), "entities", "show", "ent_", *scope)[0] == 2  # several start so
    assert _cli("--db", str(db), "entities", "show", TOM, *scope)[0] == 3  # Bob's
    assert _cli("--db", str(db), "entities", "show", *scope)[0] == 2  # no id
    assert _cli("--db", str(db), "entities", "forget", "bad id", *scope)[0] == 2
    code, out = _cli("--db", str(db), "entities", "forget", ANA, *scope)
    assert code == 0 and out == f"forgot {ANA} (Ana (sister)): 2 memories deleted; the entity is gone\n"
    code, out = _cli("--db", str(db), "--json", "entities", *scope)
    assert [e["name"] for e in json.loads(out)["entities"]] == ["Rex"]
    code, out = _cli("--db", str(db), "--json", "entities", "--user", "bob", "--agent", "travel")
    assert [e["id"] for e in json.loads(out)["entities"] if e["kind"] == "person"] == [TOM]


# -- the Python API -----------------------------------------------------------------------------------
def test_the_python_api_embedded(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _seed(db)
    with Memory(db, embedder="hash") as m:
        found = m.entities(user_id="alice", agent_id="travel")
        assert [(s.entity.name, s.memory_count) for s in found] == [("Ana", 2), ("Rex", 1), ("Lisbon", 1)]
        ana = m.entity(ANA, user_id="alice", agent_id="travel")
        assert [r.id for r in ana.memories] == ["m-ana-2", "m-ana-1"] and ana.memories[0].embedding is None
        with pytest.raises(ValidationError) as missing:
            m.entity(ANA)
        assert missing.value.field == "user_id"
        with pytest.raises(ValidationError) as bad:
            m.forget_entity("ent 1", user_id="alice", agent_id="travel")
        assert bad.value.field == "entity_id"
        with pytest.raises(NotFoundError):
            m.entity(TOM, user_id="alice", agent_id="travel")
        report = m.forget_entity(ANA, user_id="alice", agent_id="travel")
        assert report.entity_removed and sorted(r.id for r in report.forgotten) == ["m-ana-1", "m-ana-2"]
        assert [s.entity.name for s in m.entities(user_id="alice", agent_id="travel")] == ["Rex"]
        assert m.get("m-ana-1", user_id="alice", agent_id="travel").status is MemoryStatus.DELETED


def test_the_python_api_async_and_remote_go_through_the_routes(rt: RunningRuntime) -> None:
    assert rt.runtime.server is not None
    url = f"http://{rt.runtime.server.host}:{rt.runtime.server.port}"

    async def scenario() -> None:
        async with AsyncMemory(url=url, api_token=TOKEN) as m:
            found = await m.entities(user_id="alice", agent_id="travel")
            assert (found[0].entity.id, found[0].memory_count) == (ANA, 2)
            assert found[0].entity.first_mentioned.tzinfo is not None
            ana = await m.entity(ANA, user_id="alice", agent_id="travel")
            assert [r.memory for r in ana.memories] == [MEMORIES[1][2], MEMORIES[0][2]]
            with pytest.raises(NotFoundError):
                await m.entity(ANA, user_id="bob", agent_id="travel")
            report = await m.forget_entity(ANA, user_id="alice", agent_id="travel")
            assert report.entity_removed and {r.status for r in report.forgotten} == {MemoryStatus.DELETED}
            assert [s.entity.name for s in await m.entities(user_id="alice", agent_id="travel")] == ["Rex"]

    asyncio.run(scenario())
    with Memory(url=url, api_token=TOKEN) as m:  # the synchronous class, remote
        assert [s.entity.name for s in m.entities(user_id="bob", agent_id="travel")] == ["Tom", "Paris"]
