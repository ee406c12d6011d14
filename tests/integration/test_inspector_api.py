"""The routes the memory inspector reads, and its page, over a real socket on the embedded runtime.

Users and agents with counts by status, the filtered and sorted memory listing, the scoped forgetting
dry run, retention curves, and the static page (served without the token, with its security headers,
under the same Host and Origin rules as the API). Every parameter is checked strictly: a bad one is
422 naming it.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from runtime_helpers import RunningRuntime, running

from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import DEFAULT_AGENT_ID
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest

TOKEN = "inspector-api-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
Q = "user_id=alice&agent_id=travel"
NOW = datetime.now(UTC)


def _record(memory_id: str, user: str, agent: str, days_ago: float, **fields: Any) -> dict[str, Any]:
    at = (NOW - timedelta(days=days_ago)).isoformat()
    return {
        "id": memory_id,
        "user_id": user,
        "agent_id": agent,
        "memory": f"note {memory_id}",
        "created_at": at,
        "updated_at": at,
        **fields,
    }


RECORDS = [
    _record("m01", "alice", "travel", 1, importance=0.9, category="preference"),
    _record("m02", "alice", "travel", 2, importance=0.3, category="plan", kind="episode"),
    _record("m03", "alice", "travel", 3, importance=0.6, category="preference", access_count=5),
    _record(
        "m04", "alice", "travel", 300, importance=0.1, status="active", retention_score=0.5
    ),  # to archive
    _record("m05", "alice", "travel", 4, importance=0.5, status="deleted"),
    _record("m06", "alice", "travel", 5, importance=0.7, status="archived", retention_score=0.1),
    _record("m07", "alice", "music", 1, importance=0.5),
    _record("m08", "bob", "travel", 1, importance=0.5),
    _record("m09", "carol", "travel", 1, importance=0.5),
]


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRuntime]:
    db = tmp_path_factory.mktemp("inspector-api") / "memory.db"

    async def seed() -> None:
        async with build_service(load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(db))) as service:
            await service.import_records(RECORDS)

    asyncio.run(seed())
    with running(db, workers=1, token=TOKEN) as runtime:
        yield runtime


def get(rt: RunningRuntime, path: str, status: int = 200) -> Any:
    reply = rt.client.get(path, headers=AUTH)
    assert reply.status == status, (path, reply.status, reply.body)
    return reply.body


def refused(rt: RunningRuntime, path: str, field: str) -> None:
    error = get(rt, path, 422)["error"]
    assert error["code"] == "validation_error" and error["field"] == field, (path, error)


# -- users and agents ------------------------------------------------------------------------------
def test_users_are_listed_with_counts_and_paged(rt: RunningRuntime) -> None:
    everyone = get(rt, "/api/users")
    assert everyone["next_cursor"] is None
    assert everyone["users"][0] == {
        "user_id": "alice",
        "counts": {"active": 5, "archived": 1, "deleted": 1, "total": 7},
    }
    assert [u["user_id"] for u in everyone["users"]] == ["alice", "bob", "carol"]
    first = get(rt, "/api/users?limit=2")
    assert [u["user_id"] for u in first["users"]] == ["alice", "bob"] and first["next_cursor"] == "bob"
    rest = get(rt, f"/api/users?limit=2&cursor={first['next_cursor']}")
    assert [u["user_id"] for u in rest["users"]] == ["carol"] and rest["next_cursor"] is None
    largest = get(rt, "/api/users?limit=1000")  # the documented maximum page
    assert [u["user_id"] for u in largest["users"]] == ["alice", "bob", "carol"]
    for bad, field in (
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=%EF%BC%91", "limit"),
        ("cursor=a%20b", "cursor"),
        (f"cursor={'x' * 300}", "cursor"),
    ):
        refused(rt, f"/api/users?{bad}", field)


def test_agents_of_a_user_with_counts(rt: RunningRuntime) -> None:
    agents = get(rt, "/api/users/alice/agents")
    assert agents == {
        "user_id": "alice",
        "agents": [
            {"agent_id": "music", "counts": {"active": 1, "archived": 0, "deleted": 0, "total": 1}},
            {"agent_id": "travel", "counts": {"active": 4, "archived": 1, "deleted": 1, "total": 6}},
        ],
    }
    assert get(rt, "/api/users/nobody/agents") == {"user_id": "nobody", "agents": []}
    refused(rt, f"/api/users/{quote('x y')}/agents", "user_id")
    assert rt.client.get("/api/users/alice/agents").status == 401  # the token guards it like every route


def test_a_store_that_cannot_list_users_says_so_with_501(tmp_path: Path) -> None:
    class WithoutDirectory:  # the store with everything but count_users (like Azure AI Search)
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            if name == "count_users":
                raise AttributeError(name)
            return getattr(self._inner, name)

    async def scenario() -> None:
        settings = load_settings({"MEMORY_EMBEDDER": "hash"}, sqlite_path=str(tmp_path / "m.db"))
        plain = build_service(settings)
        service = build_service(settings, store=WithoutDirectory(plain._store))  # type: ignore[arg-type]
        try:
            response = await MemoryApi(service).handle(ApiRequest("GET", "/users", {}))
            assert response.status == 501 and response.body["error"]["code"] == "not_supported"
            agents = await MemoryApi(service).handle(ApiRequest("GET", "/users/alice/agents", {}))
            assert agents.status == 200
        finally:
            await plain.close()

    asyncio.run(scenario())


# -- the filtered, sorted listing ------------------------------------------------------------------
def test_memories_filtered_sorted_and_paged_by_offset(rt: RunningRuntime) -> None:
    newest = get(rt, f"/api/memories?{Q}&order=updated_at%20desc&limit=2")
    assert [m["id"] for m in newest["memories"]] == ["m01", "m02"]
    assert newest["total"] == 6 and newest["next_offset"] == 2 and newest["next_cursor"] is None
    last = get(rt, f"/api/memories?{Q}&order=updated_at%20desc&limit=2&offset=4")
    assert [m["id"] for m in last["memories"]] == ["m06", "m04"] and last["next_offset"] is None
    important = get(rt, f"/api/memories?{Q}&order=importance%20desc&status=active")
    assert [m["id"] for m in important["memories"]] == ["m01", "m03", "m02", "m04"]
    assert get(rt, f"/api/memories?{Q}&order=access_count%20desc&limit=1")["memories"][0]["id"] == "m03"
    preferences = get(rt, f"/api/memories?{Q}&category=Preference")  # categories are case-insensitive
    assert [m["id"] for m in preferences["memories"]] == ["m01", "m03"] and preferences["total"] == 2
    episodes = get(rt, f"/api/memories?{Q}&kind=episode")
    assert [m["id"] for m in episodes["memories"]] == ["m02"]
    beyond = get(rt, f"/api/memories?{Q}&offset=100")
    assert beyond["memories"] == [] and beyond["total"] == 6 and beyond["next_offset"] is None
    keyset = get(rt, f"/api/memories?{Q}&limit=2")  # without the new parameters: by id, as before
    assert keyset["next_cursor"] == "m02" and keyset["total"] is None and keyset["next_offset"] is None


@pytest.mark.parametrize(
    "query, field",
    [
        ("order=importance", "order"),
        ("order=id%20asc", "order"),
        ("order=updated_at%20desc%3B", "order"),
        ("kind=facts", "kind"),
        ("status=gone", "status"),
        ("category=a%20b", "category"),
        (f"category={'x' * 65}", "category"),
        ("offset=-1", "offset"),
        ("offset=100001", "offset"),
        ("offset=1e3", "offset"),
        ("offset=%D9%A3", "offset"),
        ("order=updated_at%20desc&cursor=m01", "cursor"),
        ("offset=0&cursor=m01", "cursor"),
    ],
)
def test_every_listing_parameter_is_checked(rt: RunningRuntime, query: str, field: str) -> None:
    refused(rt, f"/api/memories?{Q}&{query}", field)


# -- forgetting ------------------------------------------------------------------------------------
def test_the_scoped_dry_run_lists_what_would_change_and_writes_nothing(rt: RunningRuntime) -> None:
    def stored() -> list[dict[str, Any]]:  # what a write would change (a read shows the retention now)
        return [{k: v for k, v in m.items() if k != "retention_score"} for m in get(rt, f"/api/memories?{Q}")["memories"]]

    before = stored()
    preview = get(rt, f"/api/forgetting/preview?{Q}")
    assert preview["dry_run"] is True and preview["complete"] is True
    assert preview["user_id"] == "alice" and preview["agent_id"] == "travel"
    assert preview["scanned"] == 5  # active and archived, not deleted; this agent only
    changes = {c["id"]: c for c in preview["changes"]}
    assert changes["m04"]["change"] == "archive" and changes["m04"]["new_status"] == "archived"
    assert preview["archived"] == 1 and preview["written"] == 0
    rescored = [c for c in preview["changes"] if c["change"] == "rescore"]
    assert len(rescored) == preview["rescored"] and all(c["old_status"] == c["new_status"] for c in rescored)
    assert [c["change"] for c in preview["changes"]].index("archive") == 0  # status changes first
    assert {c["user_id"] for c in preview["changes"]} == {"alice"}
    assert stored() == before
    paged = get(rt, f"/api/forgetting/preview?{Q}&limit=2")
    assert paged["scanned"] == 2 and paged["next_cursor"] == "m02" and paged["complete"] is False
    rest = get(rt, f"/api/forgetting/preview?{Q}&cursor=m02")
    assert rest["scanned"] == 3
    for bad, field in (("limit=0", "limit"), ("limit=10001", "limit"), ("cursor=a%20b", "cursor")):
        refused(rt, f"/api/forgetting/preview?{Q}&{bad}", field)
    default = get(rt, "/api/forgetting/preview?user_id=alice")  # no agent_id: the default agent's memories
    assert default["agent_id"] == DEFAULT_AGENT_ID and default["scanned"] == 0
    refused(rt, "/api/forgetting/preview?agent_id=travel", "user_id")


def test_retention_curves_follow_the_policy(rt: RunningRuntime) -> None:
    curves = get(rt, f"/api/forgetting/curves?{Q}&ids=m01,m03,m04&days=90")
    policy = HumanMemoryPolicy()
    assert curves["policy"]["archive_threshold"] == policy.archive_threshold and curves["days"] == 90
    by_id = {c["id"]: c for c in curves["curves"]}
    assert list(by_id) == ["m01", "m03", "m04"]
    m01 = by_id["m01"]
    assert m01["points"][0][0] == 0 and m01["points"][-1][0] == 90 and len(m01["points"]) == 61
    retention = [r for _, r in m01["points"]]
    assert all(a >= b for a, b in itertools.pairwise(retention))  # it only fades
    expected = policy.retention_value(age_days=1 + 90, importance=0.9, access_count=0)
    assert math.isclose(retention[-1], expected, abs_tol=1e-3)
    fades = m01["archives_in_days"]
    assert fades is not None and math.isclose(
        policy.retention_value(age_days=1 + fades, importance=0.9, access_count=0),
        policy.archive_threshold,
        abs_tol=1e-3,
    )
    assert by_id["m04"]["archives_in_days"] == 0  # already at or below the threshold
    assert by_id["m03"]["archives_in_days"] > m01["archives_in_days"] - 60  # recalls slow the fading
    for bad, field in (
        ("", "ids"),
        ("ids=", "ids"),
        ("ids=m01,a%20b", "ids"),
        ("ids=m01&days=0", "days"),
        ("ids=m01&days=3651", "days"),
        ("ids=" + ",".join(f"x{i}" for i in range(51)), "ids"),
    ):
        refused(rt, f"/api/forgetting/curves?{Q}&{bad}", field)
    assert get(rt, f"/api/forgetting/curves?{Q}&ids=m08", 404)["error"]["code"] == "not_found"  # bob's


# -- the page ----------------------------------------------------------------------------------------
def _raw(rt: RunningRuntime, method: str, path: str, headers: dict[str, str] | None = None) -> Any:
    import http.client

    assert rt.runtime.server is not None
    conn = http.client.HTTPConnection("127.0.0.1", rt.runtime.server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_the_page_and_its_assets_are_served_without_the_token_and_locked_down(rt: RunningRuntime) -> None:
    status, headers, body = _raw(rt, "GET", "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="ui/app.js"></script>' in body
    policy = headers["content-security-policy"]
    for rule in ("default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'none'"):
        assert rule in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    for asset, kind in (
        ("app.js", "text/javascript"),
        ("charts.js", "text/javascript"),
        ("app.css", "text/css"),
        ("icon.svg", "image/svg+xml"),
    ):
        status, headers, body = _raw(rt, "GET", f"/ui/{asset}")
        assert status == 200 and headers["content-type"].startswith(kind) and body, asset
        assert "script-src 'self'" in headers["content-security-policy"]
    for path in ("/ui/missing.js", "/ui/../pyproject.toml", "/ui/%2e%2e/api.py", "/ui/App.js", "/ui/", "/x"):
        assert _raw(rt, "GET", path)[0] == 404, path
    assert _raw(rt, "POST", "/", {"Content-Length": "0"})[0] == 405
    assert _raw(rt, "GET", "/", {"Host": "evil.example:80"})[0] == 403  # DNS rebinding
    assert _raw(rt, "GET", "/ui/app.js", {"Origin": "http://evil.example"})[0] == 403
    assert rt.client.get("/api/users").status == 401  # the data still needs the token


# -- the benchmark ------------------------------------------------------------------------------------
def test_bench_inspector_times_every_view_against_a_real_server(tmp_path: Path) -> None:
    import io
    import json

    from memory_core.cli.main import main

    out = io.StringIO()
    argv = ["--json", "bench", "inspector", "--memories", "300", "--other-users", "2", "--runs", "2"]
    assert main([*argv, "--keep", str(tmp_path / "bench.db")], out=out) == 0
    report = json.loads(out.getvalue())
    assert report["benchmark"] == "inspector" and report["meets_bar"] is True
    assert set(report["calls_ms"]) >= {"/", "/ui/app.js", "/api/users?limit=50"}
    assert "forgetting dry run of the scope" in report["views_ms"]
    assert report["first_view_api_ms"]["p50"] > 0
