"""The Azure Functions app through the real ``azure.functions`` objects.

The bindings are read back from the decorator API (what the host indexes). The functions are called
as the Python worker calls them (``HttpRequest``, ``ServiceBusMessage``, ``TimerRequest``) on a
pipeline wired like the Azure one: the embedded store, the Table history on a fake Table service,
and a capturing publisher in place of Service Bus.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import subprocess
import sys
import typing
from datetime import timedelta
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from azure.functions.timer import TimerRequest
from functions_env import NOW, Env, functions_env, sb_message, turn_body

import function_app
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.config import Settings
from memory_core.contract.routes import INSPECTOR, http_functions
from memory_core.domain.messages import session_id_for
from memory_core.domain.records import MemoryKind, MemoryStatus, Scope
from memory_core.errors import PermanentError, TransientError
from memory_core.service.forgetting import FORGET_CHECKPOINT

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_runtime() -> Any:
    function_app.runtime.use(None)  # type: ignore[arg-type]
    yield
    function_app.runtime.use(None)  # type: ignore[arg-type]


@functools.cache
def indexed() -> tuple[Any, ...]:
    """The functions as the worker indexes them (``get_functions`` may run once per app)."""
    return tuple(function_app.app.get_functions())


def functions() -> dict[str, dict[str, Any]]:
    """Function name -> binding JSON, as the worker reports it to the host."""
    return {fn.get_function_name(): json.loads(fn.get_function_json()) for fn in indexed()}


def http(
    method: str, route: str, *, body: Any = None, params: dict[str, str] | None = None, **route_params: str
) -> func.HttpRequest:
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    return func.HttpRequest(
        method,
        f"https://memapp.azurewebsites.net/api/{route}",
        headers={"Content-Type": "application/json"},
        params=params or {},
        route_params=route_params,
        body=raw,
    )


def payload(response: func.HttpResponse) -> Any:
    assert response.headers["Content-Type"].startswith("application/json")
    return json.loads(response.get_body())


# ------------------------------------------------------------------------------------------------
# Bindings (what the host indexes)
# ------------------------------------------------------------------------------------------------


def test_service_bus_trigger_binding() -> None:
    (binding,) = functions()["ingest_turns"]["bindings"]
    assert binding["type"] == "serviceBusTrigger"
    assert binding["direction"] == "IN"
    assert binding["queueName"] == "%MEMORY_TURNS_QUEUE%"
    assert binding["connection"] == "ServiceBusConnection"
    assert binding["isSessionsEnabled"] is True
    assert "autoCompleteMessages" not in binding  # host.json decides (true: completed after a normal return)


def test_timer_trigger_binding() -> None:
    (binding,) = functions()["nightly_forgetting"]["bindings"]
    assert binding["type"] == "timerTrigger"
    assert binding["schedule"] == "%MEMORY_FORGET_SCHEDULE%"
    assert binding["runOnStartup"] is False
    assert binding["useMonitor"] is True


EXPECTED_ROUTES = {
    "search_memories": ("memories/search", ["POST"], "FUNCTION"),
    "list_memories": ("memories", ["GET", "POST"], "FUNCTION"),
    "memory_item": ("memories/{memory_id}", ["GET", "DELETE", "PATCH"], "FUNCTION"),
    "export_user": ("users/{user_id}/export", ["GET"], "FUNCTION"),
    "purge_user": ("users/{user_id}", ["DELETE"], "FUNCTION"),
    "post_turn": ("turns", ["POST"], "FUNCTION"),
    "run_forgetting_http": ("forgetting", ["POST"], "FUNCTION"),
    "list_users": ("users", ["GET"], "FUNCTION"),
    "user_agents": ("users/{user_id}/agents", ["GET"], "FUNCTION"),
    "forgetting_preview": ("forgetting/preview", ["GET"], "FUNCTION"),
    "retention_curves": ("forgetting/curves", ["GET"], "FUNCTION"),
    "list_entities": ("entities", ["GET"], "FUNCTION"),
    "entity_item": ("entities/{entity_id}", ["GET", "DELETE"], "FUNCTION"),
    "export_entity": ("entities/{entity_id}/export", ["GET"], "FUNCTION"),
    "health": ("health", ["GET"], "ANONYMOUS"),
    "openapi_document": ("openapi.json", ["GET"], "FUNCTION"),
    # Static files that hold no data; the API calls the page makes carry the credential.
    "inspector": ("inspector/{*path}", ["GET"], "ANONYMOUS"),
}


def test_http_bindings_cover_the_contract_without_clashes() -> None:
    found = functions()
    assert set(found) == set(EXPECTED_ROUTES) | {"ingest_turns", "nightly_forgetting"}
    seen: set[tuple[str, str]] = set()
    for name, (route, methods, auth) in EXPECTED_ROUTES.items():
        trigger, output = found[name]["bindings"]
        assert trigger["type"] == "httpTrigger" and output == {
            "direction": "OUT",
            "type": "http",
            "name": "$return",
        }
        assert trigger["route"] == route
        assert sorted(trigger["methods"]) == sorted(methods)
        assert trigger["authLevel"] == auth
        for method in methods:
            key = (method, route)
            assert key not in seen, f"{method} {route} is bound twice"
            seen.add(key)
    # The contract of memory_core.contract.api (method + path template) is served exactly.
    from memory_core.contract.routes import ROUTES

    contract = {(r.method, r.path.lstrip("/")) for r in ROUTES}
    assert seen - {("GET", "inspector/{*path}")} == contract


def test_the_http_functions_are_the_route_tables() -> None:
    bound = {
        fn.get_function_name(): json.loads(fn.get_function_json())["bindings"][0]
        for fn in indexed()
        if fn.get_function_name() not in {"ingest_turns", "nightly_forgetting"}
    }
    expected = [*http_functions(), INSPECTOR]
    assert set(bound) == {f.name for f in expected}
    for function in expected:
        trigger = bound[function.name]
        assert trigger["route"] == function.route
        assert trigger["methods"] == list(function.methods)
        assert trigger["authLevel"] == ("ANONYMOUS" if function.anonymous else function_app.HTTP_AUTH_LEVEL.name)
        assert callable(getattr(function_app, function.name))


def test_every_user_function_is_indexable_as_the_worker_indexes_it() -> None:
    for fn in indexed():
        user = fn.get_user_function()
        hints = typing.get_type_hints(user)
        params = list(inspect.signature(user).parameters)
        assert Path(inspect.getfile(user)) == ROOT / "function_app.py"
        assert user.__name__ == fn.get_function_name()
        (trigger,) = [b for b in json.loads(fn.get_function_json())["bindings"] if b["direction"] == "IN"]
        assert params == [trigger["name"]]
        if trigger["type"] == "httpTrigger":
            assert hints == {"req": func.HttpRequest, "return": func.HttpResponse}


def test_every_percent_setting_and_connection_is_a_setting_memory_core_documents() -> None:
    names = set(Settings.environment_variables())
    text = json.dumps(functions())
    import re

    for setting in re.findall(r"%([A-Za-z0-9_]+)%", text):
        assert setting in names
    # Identity-based connection: the namespace setting of the "ServiceBusConnection" group.
    assert "ServiceBusConnection__fullyQualifiedNamespace" in names


def test_every_function_is_async() -> None:
    for fn in indexed():
        assert inspect.iscoroutinefunction(fn.get_user_function()), fn.get_function_name()


def test_import_builds_nothing() -> None:
    code = (
        "import function_app, sys\n"
        "assert function_app.runtime._service is None\n"
        "assert 'memory_core.bootstrap' not in sys.modules\n"
        "heavy = ('azure.servicebus', 'azure.data.tables', 'azure.search', 'azure.identity', 'openai', 'aiohttp', 'numpy')\n"
        "assert not [m for m in sys.modules if m.startswith(heavy)], sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, env={"PATH": ""}
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_indexing_imports_neither_the_http_api_nor_the_service() -> None:
    heavy = ("memory_core.service", "memory_core.ports", "memory_core.entrypoints.http", "memory_core.contract.views")
    code = f"import function_app, sys; print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    out = subprocess.check_output([sys.executable, "-c", code], cwd=ROOT, text=True, timeout=60, env={"PATH": ""})
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------------------
# Service Bus trigger
# ------------------------------------------------------------------------------------------------


async def _ingest(env: Env, body: bytes | dict[str, Any], message_id: str, delivery: int = 1) -> None:
    scope = Scope.of("u1", "a1")
    await function_app.ingest_turns(
        sb_message(body, message_id=message_id, session_id=session_id_for(scope), delivery_count=delivery)
    )


def test_a_turn_is_ingested_once_even_when_redelivered(tmp_path: Path) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            turn = turn_body("turn-1", "I love green tea. I am allergic to peanuts.")
            await _ingest(env, turn, "turn-1")
            scope = Scope.of("u1", "a1")
            page = await env.service.list(scope)
            facts = sorted(r.memory for r in page.records if r.kind is MemoryKind.FACT)
            assert facts == ["I am allergic to peanuts", "I love green tea"]
            (episode,) = [r for r in page.records if r.kind is MemoryKind.EPISODE]
            assert episode.memory == "I love green tea. I am allergic to peanuts."
            assert [p.turn_id for p in episode.provenance] == ["turn-1"]
            assert await env.history.turn_processed(scope, "turn-1")
            rows_before = env.tables.snapshot()
            store_before = [r.model_dump() for r in (await env.service.list(scope)).records]
            await _ingest(env, turn, "turn-1", delivery=2)  # at-least-once: the same message again
            assert env.tables.snapshot() == rows_before
            assert [r.model_dump() for r in (await env.service.list(scope)).records] == store_before

    asyncio.run(body())


def test_a_recall_update_on_the_session_reinforces_once(tmp_path: Path) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            await _ingest(env, turn_body("turn-1", "I love green tea."), "turn-1")
            scope = Scope.of("u1", "a1")
            (record,) = [r for r in (await env.service.list(scope)).records if r.kind is MemoryKind.FACT]
            recall = {
                "schema": "memory-core.recall.v1",
                "recall_id": "recall-1",
                "user_id": "u1",
                "agent_id": "a1",
                "memory_ids": [record.id],
                "at": NOW.isoformat(),
            }
            await _ingest(env, recall, "recall-1")
            await _ingest(env, recall, "recall-1", delivery=2)
            after = await env.service.get(scope, record.id)
            assert after.access_count == record.access_count + 1

    asyncio.run(body())


def test_a_poison_message_is_set_aside_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            caplog.set_level(logging.ERROR, logger="memory_core.functions")
            bad = turn_body("turn-9", "hello")
            bad["user_id"] = "no spaces allowed"
            await _ingest(env, bad, "turn-9", delivery=1)  # returns normally: the host completes it
            await _ingest(env, b"\xff not json", "msg-garbage")
            letters = {d["message_id"]: d for d in await env.history.dead_letters()}
            assert set(letters) == {"turn-9", "msg-garbage"}
            assert letters["turn-9"]["reason"] == "ValidationError"
            assert "user_id" in letters["turn-9"]["description"]
            assert letters["turn-9"]["session_id"] == "u1|a1"
            assert letters["turn-9"]["delivery_count"] == 1
            assert json.loads(letters["turn-9"]["body"])["turn_id"] == "turn-9"
            assert "not UTF-8 JSON" in letters["msg-garbage"]["description"]
            lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            assert any("turn-9" in line and "ValidationError" in line and "user_id" in line for line in lines)
            assert (await env.service.list(Scope.of("u1", "a1"))).records == []

    asyncio.run(body())


def test_without_a_dead_letter_store_a_poison_message_is_left_to_service_bus(tmp_path: Path) -> None:
    async def body() -> None:
        async with functions_env(tmp_path, dead_letters=False) as env:
            function_app.runtime.use(env.service)
            with pytest.raises(PermanentError, match="left to Service Bus"):
                await _ingest(env, b"[]", "msg-1")

    asyncio.run(body())


@pytest.mark.parametrize("dead_letters", [True, False])
def test_an_unexpected_failure_is_a_recorded_dead_letter_not_a_storm_of_redeliveries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_letters: bool
) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(function_app, "_sleep", record)

    class Missing(HashingEmbedder):  # as a module left out of the deployment fails
        async def embed_passages(self, texts: Any) -> Any:
            raise ModuleNotFoundError("No module named 'sudachipy'")

    async def body() -> None:
        async with functions_env(tmp_path, embedder=Missing(), dead_letters=dead_letters) as env:
            function_app.runtime.use(env.service)
            if dead_letters:
                await _ingest(env, turn_body("turn-3", "京都に住んでいます。"), "turn-3", delivery=1)
                (letter,) = await env.history.dead_letters()
                assert letter["reason"] == "UnexpectedModuleNotFoundError" and "sudachipy" in letter["description"]
                assert json.loads(letter["body"])["turn_id"] == "turn-3"  # kept, to replay once fixed
                assert waits == []
            else:
                with pytest.raises(PermanentError, match="left to Service Bus"):
                    await _ingest(env, turn_body("turn-3", "京都に住んでいます。"), "turn-3", delivery=3)
                assert waits == [8.0]  # abandoned after a pause, not at once

    asyncio.run(body())


def test_a_transient_failure_is_raised_for_redelivery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(function_app, "_sleep", record)

    class Throttled(HashingEmbedder):
        async def embed_passages(self, texts: Any) -> Any:
            raise TransientError("embedding service throttled (HTTP 429)")

    async def body() -> None:
        async with functions_env(tmp_path, embedder=Throttled()) as env:
            function_app.runtime.use(env.service)
            with pytest.raises(TransientError, match="429"):
                await _ingest(env, turn_body("turn-2", "I love green tea."), "turn-2")
            with pytest.raises(TransientError):
                await _ingest(env, turn_body("turn-2", "I love green tea."), "turn-2", delivery=9)
            assert waits == [2.0, 60.0]  # spaced out, bounded
            assert await env.history.dead_letters() == []
            assert not await env.history.turn_processed(Scope.of("u1", "a1"), "turn-2")

    asyncio.run(body())


# ------------------------------------------------------------------------------------------------
# Timer trigger
# ------------------------------------------------------------------------------------------------


def test_nightly_forgetting_archives_decayed_memories_and_warns_when_late(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            old = NOW - timedelta(days=400)
            await _ingest(env, turn_body("turn-old", "I love green tea.", at=old), "turn-old")
            await _ingest(env, turn_body("turn-new", "I am allergic to peanuts."), "turn-new")
            caplog.set_level(logging.INFO, logger="memory_core")
            await function_app.nightly_forgetting(TimerRequest(past_due=True))
            statuses = {
                r.memory: r.status.value
                for r in (await env.service.list(Scope.of("u1", "a1"))).records
            }
            assert statuses == {
                "I love green tea": "archived",
                "I am allergic to peanuts": "active",
                "I love green tea.": "archived",  # the episodes fade too
                "I am allergic to peanuts.": "active",
            }
            messages = [r.getMessage() for r in caplog.records]
            assert any("past due" in m for m in messages if "late" in m)
            (summary,) = [m for m in messages if m.startswith("forgetting done:")]
            assert "scanned 4" in summary and "archived 2" in summary
            assert await env.history.get_checkpoint(FORGET_CHECKPOINT) is None

    asyncio.run(body())


def test_forgetting_stops_at_its_budget_and_the_next_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = iter(range(1000))
    monkeypatch.setattr(function_app, "_monotonic", lambda: float(next(ticks)) * 10)
    monkeypatch.setattr(function_app, "FORGET_TIME_BUDGET_SECONDS", 15.0)
    monkeypatch.setattr(function_app, "FORGET_PAGE_SIZE", 1)

    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            old = NOW - timedelta(days=400)
            for i, text in enumerate(
                ["I love green tea.", "I like jazz.", "I live in Osaka.", "I work at night."]
            ):
                await _ingest(env, turn_body(f"turn-{i}", text, at=old), f"turn-{i}")
            scope = Scope.of("u1", "a1")

            async def archived() -> int:
                page = await env.service.list(scope, statuses=[MemoryStatus.ARCHIVED])
                return len(page.records)

            await function_app.nightly_forgetting(TimerRequest(past_due=False))
            # started at t=0; after page 1 t=10 (< 15, go on), after page 2 t=20: out of budget
            cursor = await env.history.get_checkpoint(FORGET_CHECKPOINT)
            assert cursor is not None and await archived() == 2
            monkeypatch.setattr(function_app, "FORGET_PAGE_SIZE", 100)
            await function_app.nightly_forgetting(TimerRequest(past_due=False))  # resumes at the cursor
            assert await archived() == 8  # four facts and their four episodes
            assert await env.history.get_checkpoint(FORGET_CHECKPOINT) is None

    asyncio.run(body())


# ------------------------------------------------------------------------------------------------
# HTTP functions
# ------------------------------------------------------------------------------------------------


def test_http_routes_forward_to_the_api(tmp_path: Path) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            await _ingest(env, turn_body("turn-1", "I love green tea. I am allergic to peanuts."), "turn-1")

            health = await function_app.health(http("GET", "health"))
            assert health.status_code == 200 and payload(health)["status"] == "ok"

            search = await function_app.search_memories(
                http(
                    "POST", "memories/search", body={"user_id": "u1", "agent_id": "a1", "query": "green tea"}
                )
            )
            assert search.status_code == 200, search.get_body()
            hits = payload(search)["hits"]
            assert hits and hits[0]["memory"]["memory"] == "I love green tea"
            assert hits[0]["memory"]["kind"] == "fact" and hits[0]["memory"]["provenance"][0]["turn_id"] == "turn-1"
            # The recall update goes on the scope's ordered path, not straight to the store.
            assert [u.memory_ids for u in env.publisher.recalls] == [[h["memory"]["id"] for h in hits]]

            listed = await function_app.list_memories(
                http("GET", "memories", params={"user_id": "u1", "agent_id": "a1"})
            )
            assert listed.status_code == 200
            assert sorted(m["kind"] for m in payload(listed)["memories"]) == ["episode", "fact", "fact"]

            memory_id = hits[0]["memory"]["id"]
            scope_q = {"user_id": "u1", "agent_id": "a1"}
            got = await function_app.memory_item(
                http("GET", f"memories/{memory_id}", params=scope_q, memory_id=memory_id)
            )
            assert got.status_code == 200
            missing = await function_app.memory_item(
                http("GET", "memories/nope", params=scope_q, memory_id="nope")
            )
            assert missing.status_code == 404 and payload(missing)["error"]["code"] == "not_found"
            deleted = await function_app.memory_item(
                http("DELETE", f"memories/{memory_id}", params=scope_q, memory_id=memory_id)
            )
            assert deleted.status_code == 200 and payload(deleted)["status"] == "deleted"

            exported = await function_app.export_user(http("GET", "users/u1/export", user_id="u1"))
            assert exported.status_code == 200

            queued = await function_app.post_turn(
                http("POST", "turns", body=turn_body("turn-7", "I like jazz."))
            )
            assert queued.status_code == 202 and payload(queued)["status"] == "queued"
            assert [t.turn_id for t in env.publisher.turns] == ["turn-7"]

            dry = await function_app.run_forgetting_http(http("POST", "forgetting"))
            assert dry.status_code == 200 and payload(dry)["dry_run"] is True

            refused = await function_app.purge_user(http("DELETE", "users/u1", user_id="u1"))
            assert refused.status_code == 422
            purged = await function_app.purge_user(
                http("DELETE", "users/u1", params={"confirm": "true"}, user_id="u1")
            )
            assert purged.status_code == 200
            assert (await env.service.list(Scope.of("u1", "a1"))).records == []

            doc = await function_app.openapi_document(http("GET", "openapi.json"))
            assert doc.status_code == 200 and "/memories/search" in json.dumps(payload(doc)["paths"])

    asyncio.run(body())


def test_the_inspector_routes_forward_to_the_api(tmp_path: Path) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            await _ingest(env, turn_body("turn-1", "I love green tea. I am allergic to peanuts."), "turn-1")
            scope_q = {"user_id": "u1", "agent_id": "a1"}

            users = await function_app.list_users(http("GET", "users"))
            assert users.status_code == 200, users.get_body()
            assert [u["user_id"] for u in payload(users)["users"]] == ["u1"]
            agents = await function_app.user_agents(http("GET", "users/u1/agents", user_id="u1"))
            assert payload(agents)["agents"][0]["agent_id"] == "a1"
            assert payload(agents)["agents"][0]["counts"]["active"] == 3

            sorted_page = await function_app.list_memories(
                http("GET", "memories", params={**scope_q, "order": "importance desc", "kind": "fact"})
            )
            listed = payload(sorted_page)
            assert listed["total"] == 2 and listed["next_offset"] is None and listed["next_cursor"] is None

            preview = await function_app.forgetting_preview(http("GET", "forgetting/preview", params=scope_q))
            assert preview.status_code == 200 and payload(preview)["scanned"] == 3

            ids = ",".join(m["id"] for m in listed["memories"])
            curves = await function_app.retention_curves(
                http("GET", "forgetting/curves", params={**scope_q, "ids": ids, "days": "90"})
            )
            assert curves.status_code == 200 and len(payload(curves)["curves"]) == 2

    asyncio.run(body())


def test_the_inspector_page_is_served_with_its_policy() -> None:
    async def body() -> None:
        page = await function_app.inspector(http("GET", "inspector/", path=""))
        assert page.status_code == 200 and page.mimetype == "text/html"
        assert b'src="ui/app.js"' in page.get_body()
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        assert page.headers["X-Content-Type-Options"] == "nosniff"
        script = await function_app.inspector(http("GET", "inspector/ui/app.js", path="ui/app.js"))
        assert script.status_code == 200 and script.headers["Content-Type"].startswith("text/javascript")
        bare = await function_app.inspector(http("GET", "inspector"))
        assert bare.status_code == 308 and bare.headers["Location"] == "inspector/"
        for path in ("ui/../../function_app.py", "ui/app.py", "../host.json", "ui/App.js"):
            missing = await function_app.inspector(http("GET", f"inspector/{path}", path=path))
            assert missing.status_code == 404, path

    asyncio.run(body())


def test_bad_requests_get_4xx_with_a_message(tmp_path: Path) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            not_json = await function_app.search_memories(http("POST", "memories/search", body=b"{oops"))
            assert not_json.status_code == 400 and payload(not_json)["error"]["message"]
            bad_scope = await function_app.search_memories(
                http("POST", "memories/search", body={"user_id": "bad id", "agent_id": "a1", "query": "x"})
            )
            assert bad_scope.status_code == 422 and "user_id" in json.dumps(payload(bad_scope))
            too_big = await function_app.post_turn(http("POST", "turns", body=b"x" * (300 * 1024)))
            assert too_big.status_code == 413
            odd_id = await function_app.memory_item(
                http("GET", "memories/a%2Fb", params={"user_id": "u1", "agent_id": "a1"}, memory_id="a/b")
            )
            assert 400 <= odd_id.status_code < 500

    asyncio.run(body())


def test_missing_settings_answer_503_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MEMORY_STORE", "azure_search")
    monkeypatch.delenv("AZURE_SEARCH_ENDPOINT", raising=False)

    async def body() -> None:
        response = await function_app.health(http("GET", "health"))
        assert response.status_code == 503
        message = payload(response)["error"]["message"]
        # The anonymous caller learns that it is not configured; the log says which setting is missing.
        assert "not configured" in message and "AZURE_SEARCH" not in message
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["X-Content-Type-Options"] == "nosniff"

    with caplog.at_level("ERROR", logger="memory_core.functions"):
        asyncio.run(body())
    assert "AZURE_SEARCH_ENDPOINT" in caplog.text


def test_every_api_answer_is_no_store_and_nosniff_and_health_shows_no_details(tmp_path: Path) -> None:
    async def body() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            answers = [
                await function_app.health(http("GET", "health")),
                await function_app.search_memories(
                    http("POST", "memories/search", body={"user_id": "u1", "agent_id": "a1", "query": "tea"})
                ),
                await function_app.search_memories(http("POST", "memories/search", body=b"not json")),
            ]
            assert [a.status_code for a in answers] == [200, 200, 400]
            for answer in answers:
                assert answer.headers["Cache-Control"] == "no-store"
                assert answer.headers["X-Content-Type-Options"] == "nosniff"
            assert payload(answers[0])["details"] == {}

    asyncio.run(body())


def test_a_misconfigured_app_keeps_queue_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_core.errors import ConfigurationError

    monkeypatch.setenv("MEMORY_STORE", "azure_search")
    monkeypatch.delenv("AZURE_SEARCH_ENDPOINT", raising=False)
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(function_app, "_sleep", record)
    message = sb_message(turn_body("turn-1", "hi"), message_id="turn-1", session_id="u1|a1", delivery_count=3)
    with pytest.raises(ConfigurationError):
        asyncio.run(function_app.ingest_turns(message))
    assert waits == [8.0]
