"""No log line names a user by their address: every path that logs a user, agent or session id
(the queue trigger's failures and dead letters, the embedded worker's retries and dead letters,
HTTP refusals, a purge with its retries, forgetting) logs its tag instead (docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from azure_fixtures import index_result, make_store
from azure_transport import CapturingTransport, json_response
from fake_table_service import FakeTableService
from functions_env import NOW, functions_env, history_store, sb_message, turn_body

import function_app
from memory_core.adapters.models.hash_embedder import HashingEmbedder
from memory_core.adapters.sqlite.log_key import log_key_path
from memory_core.adapters.sqlite.queue import SQLiteQueue, default_queue_path
from memory_core.bootstrap import build_service
from memory_core.config import Settings
from memory_core.domain.access import ROLE_USER, Principal, PrincipalKind
from memory_core.domain.log_ids import keyed, scope_tag, use_log_key, user_tag
from memory_core.domain.messages import session_id_for
from memory_core.domain.records import Scope
from memory_core.entrypoints.functions.log_key import LOG_KEY_CHECKPOINT
from memory_core.entrypoints.functions.runtime import FunctionsRuntime
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest
from memory_core.errors import AuthenticationError, PermanentError, TransientError
from memory_core.ports import FixedClock
from memory_core.runtime.worker import QueueWorker

EMAIL = "alice.smith@example.com"
OTHER = "bob.jones@example.com"
AGENT = "support-bot"
SCOPE = Scope.of(EMAIL, AGENT)


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    function_app.runtime.use(None)  # type: ignore[arg-type]
    yield
    function_app.runtime.use(None)  # type: ignore[arg-type]
    use_log_key(None)


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured line with its traceback, as a log handler would write it."""
    handler = logging.Handler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    return "\n".join(handler.format(record) for record in caplog.records)


def assert_redacted(text: str, *tags: str) -> None:
    for raw in (EMAIL, OTHER, "alice.smith%40example.com", f"'{AGENT}'"):
        assert raw not in text, f"{raw!r} was logged:\n{text}"
    for tag in tags:
        assert tag in text, f"{tag} missing from:\n{text}"


class NamingFailure(HashingEmbedder):
    """A dependency whose error text names the user (as a search service echoing its filter does)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def embed_passages(self, texts: Any) -> Any:
        raise self.error


# -- the Functions queue trigger ------------------------------------------------------------------


async def _ingest(body: bytes | dict[str, Any], message_id: str, delivery: int = 1) -> None:
    await function_app.ingest_turns(
        sb_message(body, message_id=message_id, session_id=session_id_for(SCOPE), delivery_count=delivery)
    )


def test_the_queue_trigger_logs_tags_for_failures_and_dead_letters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def no_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(function_app, "_sleep", no_sleep)
    caplog.set_level(logging.INFO)

    async def body() -> None:
        throttled = TransientError(f"search refused the filter user_id eq '{EMAIL}' (HTTP 503)")
        async with functions_env(tmp_path / "t", embedder=NamingFailure(throttled)) as env:
            function_app.runtime.use(env.service)
            with pytest.raises(TransientError) as raised:  # the host records it: no address either
                await _ingest(turn_body("turn-1", "I love green tea.", user=EMAIL, agent=AGENT), "m1")
            assert EMAIL not in str(raised.value) and "HTTP 503" in str(raised.value)
            assert raised.value.__cause__ is None and raised.value.__suppress_context__
        async with functions_env(tmp_path / "n", embedder=NamingFailure(KeyError(EMAIL)), dead_letters=False) as env:
            function_app.runtime.use(env.service)
            with pytest.raises(PermanentError, match="left to Service Bus") as left:
                await _ingest(turn_body("turn-4", "I love green tea.", user=EMAIL, agent=AGENT), "m4")
            assert EMAIL not in str(left.value) and left.value.__suppress_context__
        async with functions_env(tmp_path / "u", embedder=NamingFailure(KeyError(EMAIL))) as env:
            function_app.runtime.use(env.service)
            await _ingest(turn_body("turn-2", "I love green tea.", user=EMAIL, agent=AGENT), "m2")
            bad = turn_body("turn-3", "hello", user=EMAIL, agent=AGENT)
            bad["messages"] = []
            await _ingest(bad, "m3")
            letters = {d["message_id"]: d for d in await env.history.dead_letters()}
            assert set(letters) == {"m2", "m3"}
            assert letters["m3"]["session_id"] == session_id_for(SCOPE)  # the record keeps the session

    asyncio.run(body())
    text = logged(caplog)
    assert "transient failure" in text and "unexpected failure" in text and "set aside as dead letter" in text
    assert_redacted(text, scope_tag(EMAIL, AGENT))


def test_the_function_app_instances_share_one_key_kept_in_the_history_table(tmp_path: Path) -> None:
    tables = FakeTableService()
    use_log_key(None)
    unkeyed = user_tag(EMAIL)

    async def instance(name: str) -> tuple[str, str | None]:
        history = history_store(tables)
        settings = Settings(store="sqlite", sqlite_path=str(tmp_path / f"{name}.db"), embedder="hash")
        service = build_service(settings, clock=FixedClock(NOW), history=history, checkpoints=history)
        runtime = FunctionsRuntime(build_service=lambda: (service, settings), build_api=lambda *a: None)  # type: ignore[arg-type, return-value]
        try:
            await runtime.service()
            assert keyed()
            return user_tag(EMAIL), await history.get_checkpoint(LOG_KEY_CHECKPOINT)
        finally:
            await runtime.close()

    first, kept = asyncio.run(instance("one"))
    use_log_key(None)
    second, again = asyncio.run(instance("two"))  # another instance, another store file: the same key
    assert first == second != unkeyed
    assert kept is not None and kept == again and len(bytes.fromhex(kept)) == 32


# -- the embedded queue worker --------------------------------------------------------------------


def test_the_embedded_worker_logs_tags_for_retries_and_dead_letters(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    path = tmp_path / "memory.db"
    settings = Settings(store="sqlite", sqlite_path=str(path), embedder="hash")
    failing = NamingFailure(TransientError(f"the embedder is busy for {EMAIL}"))

    async def body() -> None:
        service = build_service(settings, clock=FixedClock(NOW), embedder=failing)
        queue = SQLiteQueue(default_queue_path(str(path)))
        try:
            session = session_id_for(SCOPE)
            turn = turn_body("turn-1", "I love green tea.", user=EMAIL, agent=AGENT)
            queue.send(json.dumps(turn).encode(), message_id="m1", session_id=session, subject="turn")
            bad = {**turn_body("turn-2", "hi", user=EMAIL, agent=AGENT), "messages": []}
            queue.send(json.dumps(bad).encode(), message_id="m2", session_id=f"{EMAIL}|other", subject="turn")
            worker = QueueWorker(queue, service, renew_locks=False, backoff=lambda count: 3600.0)
            await worker.drain()
            assert worker.stats.abandoned == 1 and worker.stats.dead_lettered == 1
        finally:
            await queue.close()
            await service.close()

    asyncio.run(body())
    assert (Path(log_key_path(str(path))).stat().st_mode & 0o777) == 0o600
    text = logged(caplog)
    assert "retrying in" in text and "dead-lettered message m2" in text
    assert_redacted(text, scope_tag(EMAIL, AGENT), scope_tag(EMAIL, "other"))


# -- HTTP refusals --------------------------------------------------------------------------------


class BearerNames:
    """An authenticator that knows one signed-in user (``Bearer bob``); anything else is refused."""

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        if headers.get("Authorization") != "Bearer bob":
            raise AuthenticationError(f"no valid token for the request about {EMAIL}", error="invalid_token")
        return Principal(subject=OTHER, kind=PrincipalKind.USER, roles=frozenset({ROLE_USER}), user_id=OTHER)


def test_http_refusals_log_tags_for_the_path_and_the_principal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settings = Settings(store="sqlite", sqlite_path=str(tmp_path / "memory.db"), embedder="hash")

    async def body() -> None:
        service = build_service(settings, clock=FixedClock(NOW))
        api = MemoryApi(service, authenticator=BearerNames())
        try:
            encoded = EMAIL.replace("@", "%40")
            anonymous = await api.handle(ApiRequest("GET", f"/users/{encoded}/export", {}, b"", {}))
            assert anonymous.status == 401
            other = await api.handle(
                ApiRequest("GET", "/memories", {"user_id": EMAIL, "agent_id": AGENT}, b"", {"Authorization": "Bearer bob"})
            )
            assert other.status == 403 and EMAIL in json.dumps(other.body)  # the caller is told; the log is not
            search = json.dumps({"user_id": EMAIL, "agent_id": AGENT, "query": "tea"}).encode()
            found = await api.handle(ApiRequest("POST", "/memories/search", {}, search, {"Authorization": "Bearer bob"}))
            assert found.status == 403
        finally:
            await service.close()

    asyncio.run(body())
    text = logged(caplog)
    assert "not authenticated" in text and text.count("forbidden") == 2
    assert_redacted(text, user_tag(EMAIL), user_tag(OTHER))


# -- purge and forgetting -------------------------------------------------------------------------


def test_a_purge_with_retries_and_forgetting_log_tags(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    echo = {"error": {"code": "ServiceUnavailable", "message": f"busy; filter was user_id eq '{EMAIL}'"}}
    page = {"value": [{"@search.score": 1.0, "id": "m1"}]}
    transport = CapturingTransport([json_response(503, echo), json_response(200, page), index_result(("m1", 200))])
    use_log_key(None)  # the Function App's: no key
    assert asyncio.run(make_store(transport).purge(EMAIL, AGENT)) == 1
    azure = logged(caplog)
    assert "attempt 1 of 3 failed" in azure and f"purged 1 memories of {scope_tag(EMAIL, AGENT)}" in azure
    assert_redacted(azure)

    settings = Settings(store="sqlite", sqlite_path=str(tmp_path / "memory.db"), embedder="hash")

    async def body() -> None:
        service = build_service(settings, clock=FixedClock(NOW))
        try:
            await service.ingest(turn_body("turn-1", "I love green tea.", user=EMAIL, agent=AGENT))
            await service.apply_forgetting(dry_run=False)
            await service.purge(EMAIL, None)
        finally:
            await service.close()

    asyncio.run(body())
    text = logged(caplog)
    assert "forgetting (dry_run=False)" in text and "purged 2 memories, " in text
    assert_redacted(text)
