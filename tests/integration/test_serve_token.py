"""``memory-core serve`` with ``MEMORY_API_TOKEN``: every route but health needs the bearer token, over a
real socket; without a token only loopback may be bound (regression: with no credentials at all, any
caller could export and erase another user's memories)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_helpers import RunningRuntime, running, turn_body

from memory_core.cli.main import main
from memory_core.client.remote import RemoteMemoryClient
from memory_core.domain.records import Scope
from memory_core.domain.search import MemorySearchOptions
from memory_core.entrypoints.embedded.server import check_binding, is_loopback
from memory_core.errors import ConfigurationError, PermanentError

TOKEN = "s3cret-token-for-the-tests-0123456789"
Q = "user_id=u1&agent_id=a1"
SEARCH = {"user_id": "u1", "agent_id": "a1", "query": "tea"}

#: Every route of the API (method, path, body) except health.
GUARDED = [
    ("POST", "/api/memories/search", SEARCH),
    ("GET", f"/api/memories?{Q}", None),
    ("GET", f"/api/memories/m-unknown?{Q}", None),
    ("DELETE", f"/api/memories/m-unknown?{Q}", None),
    ("GET", "/api/users/u1/export", None),
    ("DELETE", "/api/users/u1?confirm=true", None),
    ("POST", "/api/turns", turn_body(0, "I like green tea.")),
    ("POST", "/api/forgetting", None),
    ("GET", "/api/openapi.json", None),
    ("GET", "/api/nowhere", None),
]


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRuntime]:
    db = tmp_path_factory.mktemp("token") / "memory.db"
    with running(db, workers=1, token=TOKEN) as runtime:
        yield runtime


@pytest.mark.parametrize("method, path, body", GUARDED)
@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer",
        "Bearer wrong-token-of-the-same-length-xxxx",
        f"Basic {TOKEN}",
        f"Bearer {TOKEN}x",
        TOKEN,
    ],
)
def test_every_route_but_health_refuses_without_the_token(
    rt: RunningRuntime, method: str, path: str, body: object, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    reply = rt.client.request(method, path, body, headers=headers)
    assert reply.status == 401, (method, path, reply.status)
    assert reply.body["error"]["code"] == "unauthorized"
    assert reply.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("method, path, body", GUARDED)
def test_the_token_opens_every_route(rt: RunningRuntime, method: str, path: str, body: object) -> None:
    reply = rt.client.request(method, path, body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.status != 401
    assert reply.status in {200, 202, 404}, (method, path, reply.status, reply.body)


def test_health_needs_no_token(rt: RunningRuntime) -> None:
    assert rt.client.get("/api/health").status == 200


def test_the_remote_client_sends_the_token(rt: RunningRuntime) -> None:
    assert rt.runtime.server is not None
    base = f"http://{rt.runtime.server.host}:{rt.runtime.server.port}"

    async def scenario() -> None:
        good = RemoteMemoryClient(base, api_token=TOKEN)
        bad = RemoteMemoryClient(base)
        try:
            result = await good.search(Scope.of("u1", "a1"), "tea", MemorySearchOptions())
            assert isinstance(result.hits, list)
            with pytest.raises(PermanentError, match="401"):
                await bad.search(Scope.of("u1", "a1"), "tea", MemorySearchOptions())
        finally:
            await good.close()
            await bad.close()

    asyncio.run(scenario())


def test_binding_rules() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host)
        check_binding(host, None)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert not is_loopback(host)
        with pytest.raises(ConfigurationError, match=r"refusing to serve on .* without a token"):
            check_binding(host, None)
        check_binding(host, TOKEN)
    with pytest.raises(ConfigurationError, match="at least 16 characters"):
        check_binding("127.0.0.1", "short")


def test_serve_refuses_a_public_address_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMORY_API_TOKEN", raising=False)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")
    code = main(
        ["--db", str(tmp_path / "m.db"), "serve", "--host", "0.0.0.0", "--port", "0"], out=io.StringIO()
    )
    assert code != 0
    assert "refusing to serve on 0.0.0.0 without a token" in capsys.readouterr().err


def test_the_remote_client_sends_credentials_only_over_https_or_to_this_machine() -> None:
    with pytest.raises(ConfigurationError, match="over plain http"):
        RemoteMemoryClient("http://memory.example.com", api_token=TOKEN)
    with pytest.raises(ConfigurationError, match="over plain http"):
        RemoteMemoryClient("http://10.0.0.5:7071", function_key="key")
    RemoteMemoryClient("https://memory.example.com", api_token=TOKEN)
    RemoteMemoryClient("http://localhost:7071", api_token=TOKEN)


ENTRA = {"MEMORY_AUTH_TENANT_ID": "00000000-0000-0000-0000-0000000000aa", "MEMORY_AUTH_AUDIENCE": "api://memory-core-tests"}


def test_serve_honours_the_entra_id_settings(tmp_path: Path) -> None:
    # (it answered 200 to an anonymous erase of another user while these were set)
    with running(tmp_path / "m.db", workers=1, environ=ENTRA) as runtime:
        client = runtime.client
        for method, path, body in [g for g in GUARDED if g[1] != "/api/nowhere"]:  # (no route: 404)
            reply = client.request(method, path, body)
            assert reply.status == 401, (method, path, reply.status)
        forged = client.request("DELETE", "/api/users/someone?confirm=true", headers={"Authorization": "Bearer abc.def.ghi"})
        assert forged.status == 401
        assert client.get("/api/health").status == 200


def test_serve_refuses_the_entra_id_settings_beside_a_shared_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="set one of them"):
        RunningRuntime(tmp_path / "m.db", workers=1, environ=ENTRA, token=TOKEN).start()
