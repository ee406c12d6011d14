"""The HTTP API over a real socket on the embedded runtime: every route, every error, scopes, hostile ids."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from runtime_helpers import RunningRuntime, running, turn_body

from memory_core.contract.parameters import MAX_BODY_BYTES
from memory_core.domain.validation import MEMORY_ID_PATTERN
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest
from memory_core.errors import TransientError

CONVERSATION = [
    "I like green tea. I am allergic to peanuts.",
    "My favorite city is Kyoto.",
    "I prefer window seats on flights.",
]
Q = "user_id=u1&agent_id=a1"


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRuntime]:
    db = tmp_path_factory.mktemp("http") / "memory.db"
    with running(db, workers=2) as runtime:
        client = runtime.client
        for i, text in enumerate(CONVERSATION):
            assert client.post("/api/turns", turn_body(i, text)).status == 202
        client.post(
            "/api/turns", turn_body(0, "I like coffee.", user="u2", prefix="u2-t")
        )  # another user, same agent
        runtime.drain()
        yield runtime


def _memories(rt: RunningRuntime, query: str = Q) -> list[dict[str, Any]]:
    reply = rt.client.get(f"/api/memories?{query}")
    assert reply.status == 200, reply.body
    return list(reply.body["memories"])


def _error(reply: Any, status: int, code: str, field: str | None = "*") -> dict[str, Any]:
    assert reply.status == status, (reply.status, reply.body)
    assert reply.headers["content-type"].startswith("application/json")
    error = reply.body["error"]
    keys = {"code", "message", "field"} | ({"problems"} if code == "validation_error" else set())
    assert set(error) == keys and error["code"] == code and error["message"]
    if code == "validation_error":  # every problem, the first being the field's
        assert error["problems"][0]["field"] == error["field"] and error["problems"][0]["message"]
    if field != "*":
        assert error["field"] == field, error
    return dict(error)


# -- routes -------------------------------------------------------------------------------------
def test_health_and_openapi(rt: RunningRuntime) -> None:
    health = rt.client.get("/api/health")
    assert health.status == 200 and health.body["status"] == "ok"
    details = health.body["details"]
    assert set(details["queue"]) == {"active", "locked", "dead_letters", "sessions", "oldest_age_seconds"}
    assert details["ingestion"] == "ok" and len(details["workers"]) == rt.runtime.options.workers
    doc = rt.client.get("/api/openapi.json").body
    assert doc["openapi"].startswith("3.") and doc["servers"] == [{"url": "/api"}]
    operations = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert operations == {
        ("/memories/search", "post"),
        ("/memories", "get"),
        ("/memories", "post"),
        ("/memories/{memory_id}", "get"),
        ("/memories/{memory_id}", "patch"),
        ("/memories/{memory_id}", "delete"),
        ("/users/{user_id}/export", "get"),
        ("/users/{user_id}", "delete"),
        ("/turns", "post"),
        ("/forgetting", "post"),
        ("/users", "get"),
        ("/users/{user_id}/agents", "get"),
        ("/forgetting/preview", "get"),
        ("/forgetting/curves", "get"),
        ("/entities", "get"),
        ("/entities/{entity_id}", "get"),
        ("/entities/{entity_id}", "delete"),
        ("/entities/{entity_id}/export", "get"),
        ("/health", "get"),
        ("/openapi.json", "get"),
    }
    for path, item in doc["paths"].items():
        for op in item.values():
            for status, response in op["responses"].items():
                ref = response["content"]["application/json"]["schema"].get("$ref")
                if (path, status) == ("/health", "503"):  # unhealthy: the health body, not an error
                    assert ref == "#/components/schemas/HealthResponse"
                elif status >= "400":
                    assert ref == "#/components/schemas/ErrorResponse"


def test_turns_are_queued_then_ingested_in_the_background(rt: RunningRuntime) -> None:
    memories = _memories(rt)
    texts = sorted(m["memory"] for m in memories)
    assert "I like green tea" in texts and "I am allergic to peanuts" in texts
    assert all("embedding" not in m for m in memories)
    # the same scope sending the same turn again: nothing is queued, and the answer says so
    again = rt.client.post("/api/turns", turn_body(0, CONVERSATION[0]))
    assert again.status == 202 and again.body == {"turn_id": "t0", "session_id": "u1|a1", "status": "duplicate"}
    rt.drain()
    assert sorted(m["memory"] for m in _memories(rt)) == texts  # a repeated turn changes nothing


def test_list_pages_with_a_cursor_and_filters_by_status(rt: RunningRuntime) -> None:
    everything = _memories(rt)
    first = rt.client.get(f"/api/memories?{Q}&limit=1").body
    assert len(first["memories"]) == 1 and first["next_cursor"] == first["memories"][0]["id"]
    second = rt.client.get(f"/api/memories?{Q}&limit=100&cursor={first['next_cursor']}").body
    assert [m["id"] for m in first["memories"] + second["memories"]] == [m["id"] for m in everything]
    assert second["next_cursor"] is None
    assert _memories(rt, f"{Q}&status=deleted") == []


def test_list_takes_a_searchs_filters_as_json(rt: RunningRuntime) -> None:
    everything = _memories(rt)
    category = everything[0]["category"]
    wanted = {m["id"] for m in everything if m["category"] == category}
    filters = quote(json.dumps({"category": category}))
    first = rt.client.get(f"/api/memories?{Q}&limit=1&filters={filters}").body
    rest = rt.client.get(f"/api/memories?{Q}&cursor={first['next_cursor']}&filters={filters}").body
    assert {m["id"] for m in first["memories"] + rest["memories"]} == wanted
    others = _memories(rt, f"{Q}&filters=" + quote(json.dumps({"category": {"ne": category}})))
    assert [m["id"] for m in others] == [m["id"] for m in everything if m["category"] != category]
    _error(rt.client.get(f"/api/memories?{Q}&filters=%7Bnope"), 422, "validation_error", "filters")
    _error(rt.client.get(f"/api/memories?{Q}&filters=%5B%5D"), 422, "validation_error", "filters")
    bad = quote(json.dumps({"importance": {"above": 1}}))
    _error(rt.client.get(f"/api/memories?{Q}&filters={bad}"), 422, "validation_error", "filters.importance.above")
    _error(rt.client.get(f"/api/memories?{Q}&order=importance%20desc&filters={filters}"), 422, "validation_error", "filters")


def test_search_returns_hits_with_breakdowns_and_records_the_recall_through_the_queue(
    rt: RunningRuntime,
) -> None:
    reply = rt.client.post(
        "/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "green tea", "top": 3}
    )
    assert reply.status == 200
    hits = reply.body["hits"]
    assert hits and hits[0]["memory"]["memory"] == "I like green tea"
    assert {"relevance", "boost", "functions"} <= set(hits[0]["breakdown"])
    before = hits[0]["memory"]["access_count"]
    rt.drain()  # the recall update travels the scope's ordered queue
    detail = rt.client.get(f"/api/memories/{hits[0]['memory']['id']}?{Q}").body
    assert detail["access_count"] == before + 1 and detail["last_accessed_at"] is not None
    no_recall = rt.client.post(
        "/api/memories/search",
        {"user_id": "u1", "agent_id": "a1", "query": "green tea", "recall": False, "mode": "keyword"},
    )
    assert no_recall.status == 200 and no_recall.body["mode"] == "keyword"
    semantic = rt.client.post(
        "/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "tea", "mode": "semantic"}
    )
    assert semantic.body["semantic_ranker_available"] is False and semantic.body["notes"]


def test_get_shows_the_history_and_delete_is_soft_and_recorded(rt: RunningRuntime) -> None:
    target = next(m for m in _memories(rt) if m["memory"] == "I prefer window seats on flights")
    detail = rt.client.get(f"/api/memories/{target['id']}?{Q}")
    assert detail.status == 200 and [h["event"] for h in detail.body["history"]] == ["ADD"]
    assert detail.body["history"][0]["turn_id"] == "t2"
    deleted = rt.client.delete(f"/api/memories/{target['id']}?{Q}")
    assert deleted.status == 200 and deleted.body["status"] == "deleted"
    assert rt.client.delete(f"/api/memories/{target['id']}?{Q}").status == 200  # idempotent
    history = rt.client.get(f"/api/memories/{target['id']}?{Q}").body["history"]
    assert [h["event"] for h in history] == ["ADD", "DELETE"]
    assert history[1]["before"]["status"] == "active" and history[1]["after"]["status"] == "deleted"
    hits = rt.client.post(
        "/api/memories/search",
        {"user_id": "u1", "agent_id": "a1", "query": "window seats flights", "recall": False},
    ).body["hits"]
    assert target["id"] not in [h["memory"]["id"] for h in hits]
    assert [m["id"] for m in _memories(rt, f"{Q}&status=deleted")] == [target["id"]]


def test_export_returns_every_record_without_embeddings_unless_asked(rt: RunningRuntime) -> None:
    reply = rt.client.get("/api/users/u1/export")
    assert reply.status == 200 and reply.body["user_id"] == "u1" and reply.body["agent_id"] is None
    assert reply.body["next_cursor"] is None  # a small export is one page
    records = reply.body["memories"]
    assert reply.body["count"] == len(records) == len(_memories(rt))
    assert all(r.get("embedding") is None for r in records)  # vectors are left out by default
    with_vectors = rt.client.get("/api/users/u1/export?include_vectors=true").body["memories"]
    assert [r["id"] for r in with_vectors] == [r["id"] for r in records]
    assert all(isinstance(r["embedding"], list) and len(r["embedding"]) > 8 for r in with_vectors)
    assert {r["user_id"] for r in records} == {"u1"}
    assert rt.client.get("/api/users/u1/export?agent_id=other").body["memories"] == []
    assert rt.client.get("/api/users/nobody/export").body == {
        "user_id": "nobody",
        "agent_id": None,
        "count": 0,
        "memories": [],
        "history": [],
        "queued": [],
        "next_cursor": None,
    }


def test_forgetting_is_a_dry_run_unless_asked_and_pages(rt: RunningRuntime) -> None:
    rt.drain()  # recall updates of earlier searches must not land between the dry run and the real one
    dry = rt.client.post("/api/forgetting")
    assert dry.status == 200 and dry.body["dry_run"] is True and dry.body["scanned"] >= 3
    assert dry.body["archived"] >= 1  # u2's memory is from May and was never recalled
    assert dry.body["written"] == 0 and _memories(rt, "user_id=u2&agent_id=a1")[0]["status"] == "active"
    page = rt.client.post("/api/forgetting?limit=1").body
    assert page["scanned"] == 1 and page["next_cursor"] and page["complete"] is False
    rest = rt.client.post(f"/api/forgetting?cursor={page['next_cursor']}&limit=10000").body
    assert rest["complete"] is True and page["scanned"] + rest["scanned"] == dry.body["scanned"]
    applied = rt.client.post("/api/forgetting?dry_run=false").body
    assert (
        applied["dry_run"] is False
        and applied["archived"] == dry.body["archived"]
        and applied["written"] >= 1
    )
    assert _memories(rt, "user_id=u2&agent_id=a1")[0]["status"] == "archived"
    assert rt.client.post("/api/forgetting").body["archived"] == 0


def test_scopes_are_isolated(rt: RunningRuntime) -> None:
    mine = _memories(rt)[0]
    other = "user_id=u2&agent_id=a1"
    _error(rt.client.get(f"/api/memories/{mine['id']}?{other}"), 404, "not_found")
    _error(rt.client.delete(f"/api/memories/{mine['id']}?{other}"), 404, "not_found")
    _error(rt.client.get(f"/api/memories/{mine['id']}?user_id=u1&agent_id=a2"), 404, "not_found")
    assert [m["memory"] for m in _memories(rt, other) if m["kind"] == "fact"] == ["I like coffee"]
    hits = rt.client.post(
        "/api/memories/search", {"user_id": "u2", "agent_id": "a1", "query": "green tea peanuts"}
    ).body["hits"]
    assert {h["memory"]["user_id"] for h in hits} <= {"u2"}
    assert rt.client.get(f"/api/memories/{mine['id']}?{Q}").body["status"] in {
        "active",
        "archived",
        "deleted",
    }


# -- errors -------------------------------------------------------------------------------------
def test_routing_errors(rt: RunningRuntime) -> None:
    _error(rt.client.get("/api/nope"), 404, "no_route")
    _error(rt.client.get("/elsewhere"), 404, "no_route")
    _error(rt.client.get("/api/memories/"), 404, "no_route")
    reply = rt.client.request("PUT", "/api/turns", {"x": 1})
    _error(reply, 405, "method_not_allowed")
    assert reply.headers["allow"] == "POST"
    assert rt.client.request("PUT", f"/api/memories/abc?{Q}").headers["allow"] == "DELETE, GET, PATCH"


def test_bad_bodies(rt: RunningRuntime) -> None:
    _error(rt.client.post("/api/memories/search", raw=b"{not json"), 400, "bad_request", "body")
    _error(rt.client.post("/api/memories/search", raw=b"[1, 2]"), 400, "bad_request", "body")
    _error(rt.client.post("/api/memories/search", raw=b""), 400, "bad_request", "body")
    _error(rt.client.post("/api/memories/search", raw=b'{"user_id": NaN}'), 400, "bad_request", "body")
    _error(rt.client.post("/api/memories/search", raw=b"\xff\xfe"), 400, "bad_request", "body")
    _error(rt.client.post("/api/memories/search", raw=b"[" * 50_000), 400, "bad_request", "body")
    _error(
        rt.client.post("/api/memories/search", {"user_id": "u1", "agent_id": "a1"}),
        422,
        "validation_error",
        "query",
    )
    _error(
        rt.client.post("/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "x", "top": 0}),
        422,
        "validation_error",
        "top",
    )
    _error(
        rt.client.post(
            "/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "x", "mode": "magic"}
        ),
        422,
        "validation_error",
        "mode",
    )
    semantic_sorted = {"mode": "semantic", "order_by": "importance desc"}
    error = _error(
        rt.client.post("/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "x", **semantic_sorted}),
        422,
        "validation_error",
        "order_by",
    )
    assert "semantic" in error["message"]
    _error(
        rt.client.post("/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "x", "extra": 1}),
        422,
        "validation_error",
        "extra",
    )
    bad_turn = turn_body(9, "hello")
    bad_turn["schema"] = "memory-core.turn.v2"
    _error(rt.client.post("/api/turns", bad_turn), 422, "validation_error", "schema")
    _error(
        rt.client.post("/api/turns", {**turn_body(9, "x"), "messages": []}),
        422,
        "validation_error",
        "messages",
    )


def test_body_too_large_is_413(rt: RunningRuntime) -> None:
    big = b'{"query": "' + b"x" * MAX_BODY_BYTES + b'"}'
    _error(rt.client.post("/api/memories/search", raw=big), 413, "payload_too_large")
    # the framework-neutral handler enforces the same limit (Azure Functions hands it the body)
    api = MemoryApi(rt.runtime.service, max_body_bytes=10)
    reply = rt.call(api.handle(ApiRequest("POST", "/turns", {}, b"x" * 11)))
    assert reply.status == 413 and reply.body["error"]["code"] == "payload_too_large"


def test_bad_query_parameters(rt: RunningRuntime) -> None:
    _error(rt.client.get("/api/memories?agent_id=a1"), 422, "validation_error", "user_id")
    assert rt.client.get("/api/memories?user_id=u1").status == 200  # agent_id: the default agent
    _error(rt.client.get(f"/api/memories?{Q}&limit=0"), 422, "validation_error", "limit")
    _error(rt.client.get(f"/api/memories?{Q}&limit=abc"), 422, "validation_error", "limit")
    _error(rt.client.get(f"/api/memories?{Q}&limit=100000"), 422, "validation_error", "limit")
    _error(rt.client.get(f"/api/memories?{Q}&status=gone"), 422, "validation_error", "status")
    _error(rt.client.get(f"/api/memories?{Q}&cursor=a%20b"), 422, "validation_error", "cursor")
    _error(rt.client.post("/api/forgetting?dry_run=maybe"), 422, "validation_error", "dry_run")
    _error(rt.client.post("/api/forgetting?cursor=abc"), 422, "validation_error", "cursor")
    _error(rt.client.post("/api/forgetting?limit=-1"), 422, "validation_error", "limit")


HOSTILE = [
    "../../etc/passwd",
    "x' OR '1'='1",
    "a b",
    '"; DROP TABLE memories; --',
    "<script>alert(1)</script>",
    "ユーザー",
    "a" * 129,
    "-leading-dash",
    "nul\x00byte",
    "user_id eq 'x' or true",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_ids_are_rejected_with_422(rt: RunningRuntime, hostile: str) -> None:
    h = quote(hostile, safe="")
    _error(rt.client.get(f"/api/memories?user_id={h}&agent_id=a1"), 422, "validation_error", "user_id")
    _error(rt.client.get(f"/api/memories?user_id=u1&agent_id={h}"), 422, "validation_error", "agent_id")
    if MEMORY_ID_PATTERN.fullmatch(hostile):  # a valid memory id (memory ids may start with "-")
        _error(rt.client.get(f"/api/memories/{h}?{Q}"), 404, "not_found")
    else:
        _error(rt.client.get(f"/api/memories/{h}?{Q}"), 422, "validation_error", "memory_id")
        _error(rt.client.delete(f"/api/memories/{h}?{Q}"), 422, "validation_error", "memory_id")
    _error(rt.client.get(f"/api/users/{h}/export"), 422, "validation_error", "user_id")
    _error(rt.client.delete(f"/api/users/{h}?confirm=true"), 422, "validation_error", "user_id")
    _error(
        rt.client.post("/api/memories/search", {"user_id": hostile, "agent_id": "a1", "query": "x"}),
        422,
        "validation_error",
        "user_id",
    )
    _error(rt.client.post("/api/turns", turn_body(1, "x", user=hostile)), 422, "validation_error", "user_id")


def test_transient_failures_are_503_with_retry_after(
    rt: RunningRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise TransientError("the search service is throttling")

    monkeypatch.setattr(rt.runtime.service, "search", unavailable)
    reply = rt.client.post("/api/memories/search", {"user_id": "u1", "agent_id": "a1", "query": "tea"})
    _error(reply, 503, "unavailable")
    assert int(reply.headers["retry-after"]) > 0


def test_purge_needs_confirmation_and_removes_memories_and_history(tmp_path: Path) -> None:
    with running(tmp_path / "purge.db") as rt:
        client = rt.client
        client.post("/api/turns", turn_body(0, "I like green tea.", user="gone"))
        client.post("/api/turns", turn_body(0, "I like black tea.", user="stays", prefix="s"))
        rt.drain()
        [memory] = [m for m in _memories(rt, "user_id=gone&agent_id=a1") if m["kind"] == "fact"]
        _error(client.delete("/api/users/gone"), 422, "validation_error", "confirm")
        _error(client.delete("/api/users/gone?confirm=false"), 422, "validation_error", "confirm")
        assert len(_memories(rt, "user_id=gone&agent_id=a1")) == 2  # nothing was removed: a fact, an episode
        reply = client.delete("/api/users/gone?confirm=true")
        assert reply.status == 200
        assert reply.body.pop("purged_at").endswith("Z")
        assert reply.body == {
            "user_id": "gone",
            "agent_id": None,
            "purged_memories": 2,
            "purged_history": 2,
            "purged_queued": 0,
        }
        assert _memories(rt, "user_id=gone&agent_id=a1") == []
        _error(client.get(f"/api/memories/{memory['id']}?user_id=gone&agent_id=a1"), 404, "not_found")
        history = rt.call(rt.runtime.service.history_of(_scope("gone", "a1"), memory["id"]))
        assert history == []
        assert len(_memories(rt, "user_id=stays&agent_id=a1")) == 2


def _scope(user: str, agent: str) -> Any:
    from memory_core.domain.records import Scope

    return Scope.of(user, agent)


def test_keep_alive_connections_survive_errors(rt: RunningRuntime) -> None:
    import http.client

    conn = http.client.HTTPConnection(rt.runtime.server.host, rt.runtime.server.port, timeout=10)  # type: ignore[union-attr]
    try:
        for path in ["/api/health", "/api/nope", f"/api/memories?{Q}", "/api/health"]:
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            assert resp.status in {200, 404}
        started = time.monotonic()
        conn.request("POST", "/api/memories/search", body=b"{}", headers={"Content-Type": "application/json"})
        assert conn.getresponse().status == 422 and time.monotonic() - started < 5
    finally:
        conn.close()


def test_a_chat_api_turn_without_id_or_date_is_queued_and_a_replay_is_a_repeat(rt: RunningRuntime) -> None:
    body = {
        "user_id": "chat-user",
        "agent_id": "agent",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "I live in Porto."}]}],
    }
    first = rt.client.post("/api/turns", body)
    assert first.status == 202 and first.body["turn_id"].startswith("turn-"), first.body
    rt.drain()
    again = rt.client.post("/api/turns", body)
    assert again.status == 202 and again.body["turn_id"] == first.body["turn_id"]
    assert again.body["status"] == "duplicate", again.body


def test_an_invalid_turn_lists_every_problem_with_its_path(rt: RunningRuntime) -> None:
    reply = rt.client.post(
        "/api/turns", {"user_id": "a b", "agent_id": "", "messages": [{"role": "robot", "content": "x"}]}
    )
    error = _error(reply, 422, "validation_error", "messages.0.role")
    assert [p["field"] for p in error["problems"]] == ["messages.0.role", "user_id", "agent_id"]
    assert "more problem" not in error["message"] and "user_id" in error["message"]


def test_post_memories_adds_now_verbatim_or_extracted_and_patch_corrects_one(rt: RunningRuntime) -> None:
    scope = "user_id=adder&agent_id=agent"
    verbatim = rt.client.post(
        "/api/memories", {"user_id": "adder", "agent_id": "agent", "messages": "Call me Bo.", "infer": False}
    )
    assert verbatim.status == 200 and verbatim.body["status"] == "ingested", verbatim.body
    [decision] = verbatim.body["decisions"]
    assert decision["event"] == "ADD" and decision["after"]["memory"] == "Call me Bo."
    memory_id = decision["memory_id"]
    inferred = rt.client.post(
        "/api/memories",
        {"user_id": "adder", "agent_id": "agent", "messages": [{"role": "user", "content": "I am vegetarian."}]},
    )
    assert inferred.status == 200 and any(d["event"] == "ADD" for d in inferred.body["decisions"]), inferred.body
    patched = rt.client.request("PATCH", f"/api/memories/{memory_id}?{scope}", {"text": "Call me Bob."})
    assert patched.status == 200 and patched.body["memory"] == "Call me Bob." and patched.body["id"] == memory_id
    history = rt.client.get(f"/api/memories/{memory_id}?{scope}").body["history"]
    assert [entry["event"] for entry in history][-1] == "UPDATE"
    _error(rt.client.request("PATCH", f"/api/memories/{'0' * 32}?{scope}", {"text": "x"}), 404, "not_found")
    _error(rt.client.request("PATCH", f"/api/memories/{memory_id}?{scope}", {"text": ""}), 422, "validation_error", "text")
    bad = rt.client.post("/api/memories", {"user_id": "adder", "messages": "x", "infer": "no"})
    _error(bad, 422, "validation_error", "infer")
