"""Microsoft Entra ID on the HTTP API, offline: a local key pair, a local OpenID configuration and JWKS
served over HTTP on 127.0.0.1, tokens minted with PyJWT.

The matrix runs every route x {no token, expired, wrong audience, wrong issuer, another user's token, an
agent token for another agent, the user's own token, an agent token for its agent, admin} through
``MemoryApi.handle`` on a real service (embedded store, hashing embedder) and asserts the exact status,
and that a refused request changed nothing. A few of the same cases go through the Azure Functions HTTP
functions. Then the validator's edges: a foreign key, ``alg=none``, HMAC with the public key, key
rotation (one refetch), the keys' server down (503, fail closed), the cache, and the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import azure.functions as func
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from functions_env import NOW, functions_env
from jwt.algorithms import RSAAlgorithm

import function_app
from memory_core.adapters.azure.entra_tokens import MIN_REFRESH_SECONDS, EntraTokenValidator
from memory_core.bootstrap import build_authenticator, build_service
from memory_core.config import Settings
from memory_core.domain.access import ADMIN_SCOPE, ROLE_ADMIN, ROLE_AGENT, ROLE_USER, USER_SCOPE
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest, ApiResponse
from memory_core.errors import AuthenticationError, TransientError
from memory_core.service import MemoryService

ROOT = Path(__file__).resolve().parents[2]
TENANT = "8a3f1c52-6b0e-4f7d-9c21-5e4d3b2a1f00"
OTHER_TENANT = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
AUDIENCE = "api://memory-core-tests"
API_CLIENT_ID = "5f0e9d8c-7b6a-4594-8372-615049382716"
# Users are identified by their object id (the default MEMORY_AUTH_USER_ID_CLAIM, `oid`).
ALICE = "0f1e2d3c-4b5a-4697-8877-665544332211"
BOB = "11223344-5566-4778-899a-abbccddeeff0"
ROOT_ADMIN = "99887766-5544-4332-a110-ffeeddccbbaa"
AGENT = "support-bot"
OTHER_AGENT = "travel-bot"
AGENT_CLIENT = "c1a2b3c4-0000-4000-8000-000000000001"
OTHER_AGENT_CLIENT = "c1a2b3c4-0000-4000-8000-000000000002"
BINDINGS = {AGENT_CLIENT: [AGENT], OTHER_AGENT_CLIENT: [OTHER_AGENT]}
CONFIG_PATH = f"/{TENANT}/v2.0/.well-known/openid-configuration"
KEYS_PATH = "/discovery/v2.0/keys"


# ------------------------------------------------------------------------------------------------
# A local identity provider: RSA keys, the OpenID configuration and the JWKS over HTTP
# ------------------------------------------------------------------------------------------------


@functools.cache
def rsa_key(name: str) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(kid: str, key: rsa.RSAPrivateKey) -> dict[str, Any]:
    data = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    return {**data, "kid": kid, "use": "sig"}


class _IdpHandler(BaseHTTPRequestHandler):
    server: _IdpServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        idp = self.server.idp
        idp.requests.append(self.path)
        if idp.delay:
            time.sleep(idp.delay)
        if idp.status != 200:
            body, status = b'{"error": "server_error"}', idp.status
        elif self.path == CONFIG_PATH:
            document = {
                "issuer": f"{idp.authority}/{TENANT}/v2.0",
                "jwks_uri": f"{idp.authority}{KEYS_PATH}",
                "token_endpoint": f"{idp.authority}/{TENANT}/oauth2/v2.0/token",
                "id_token_signing_alg_values_supported": ["RS256"],
            }
            body, status = json.dumps(document).encode(), 200
        elif self.path == KEYS_PATH:
            keys = [jwk(kid, rsa_key(name)) for kid, name in idp.published.items()]
            body, status = json.dumps({"keys": keys}).encode(), 200
        else:
            body, status = b"{}", 404
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _IdpServer(ThreadingHTTPServer):
    daemon_threads = True
    idp: IdentityProvider


class IdentityProvider:
    """The tenant's endpoints on 127.0.0.1: what it publishes can change during a test."""

    def __init__(self) -> None:
        self.published: dict[str, str] = {"kid-1": "key-1"}  # kid -> key name
        self.requests: list[str] = []
        self.delay = 0.0
        self.status = 200
        self._server = _IdpServer(("127.0.0.1", 0), _IdpHandler)
        self._server.idp = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def authority(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def issuer(self) -> str:
        return f"{self.authority}/{TENANT}/v2.0"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- tokens -------------------------------------------------------------------------------------
    def claims(self, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {"iss": self.issuer, "aud": AUDIENCE, "tid": TENANT, "iat": now - 30, "nbf": now - 30}
        return {**base, "exp": now + 3600, "ver": "2.0", **extra}

    def user_token(self, oid: str, *, roles: tuple[str, ...] = (ROLE_USER,), **extra: Any) -> str:
        claims = self.claims(
            oid=oid, sub=f"pairwise-{oid[:8]}", azp="spa-client", scp=USER_SCOPE, roles=list(roles)
        )
        return self.sign({**claims, **extra})

    def app_token(self, client: str, *, roles: tuple[str, ...] = (ROLE_AGENT,), **extra: Any) -> str:
        claims = self.claims(oid=f"sp-{client[-4:]}", sub=f"sp-{client[-4:]}", azp=client, roles=list(roles))
        return self.sign({**claims, "idtyp": "app", **extra})

    def sign(self, claims: dict[str, Any], *, kid: str = "kid-1", key: str | None = None) -> str:
        name = key or self.published.get(kid) or "key-1"
        return jwt.encode(claims, rsa_key(name), algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider()
    yield provider
    provider.stop()


@pytest.fixture
def fresh_idp() -> Iterator[IdentityProvider]:
    """An identity provider of its own, for tests that change what it publishes."""
    provider = IdentityProvider()
    yield provider
    provider.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def validator(idp: IdentityProvider | str, **kw: Any) -> EntraTokenValidator:
    authority = idp if isinstance(idp, str) else idp.authority
    return EntraTokenValidator(
        tenant_id=TENANT,
        audiences=[AUDIENCE, API_CLIENT_ID],
        agent_bindings=BINDINGS,
        authority=authority,
        **kw,
    )


# ------------------------------------------------------------------------------------------------
# A real service with one memory for Alice and one for Bob
# ------------------------------------------------------------------------------------------------


def turn(turn_id: str, user: str, agent: str, text: str, at: datetime | None = None) -> dict[str, Any]:
    when = (at or datetime.now(UTC) - timedelta(hours=1)).isoformat()
    return {
        "schema": "memory-core.turn.v1",
        "turn_id": turn_id,
        "user_id": user,
        "agent_id": agent,
        "occurred_at": when,
        "messages": [{"role": "user", "text": text}],
    }


@dataclass
class World:
    service: MemoryService
    api: MemoryApi
    memory_id: str  # one of Alice's facts with the support bot
    entity_id: str  # the person another of them names

    async def snapshot(self) -> list[dict[str, Any]]:
        rows = [r async for r in self.service.export(ALICE)] + [r async for r in self.service.export(BOB)]
        return sorted((r.model_dump(mode="json") for r in rows), key=lambda r: r["id"])


@asynccontextmanager
async def world(tmp_path: Path, authenticator: Any) -> AsyncIterator[World]:
    settings = Settings(
        store="sqlite", sqlite_path=str(tmp_path / "memory.db"), embedder="hash", episodes=False
    )
    service = build_service(settings)
    try:
        await service.ingest(turn("t-alice", ALICE, AGENT, "I love green tea."))
        await service.ingest(turn("t-alice-ana", ALICE, AGENT, "My sister Ana moved to Lisbon."))
        await service.ingest(turn("t-bob", BOB, AGENT, "I am allergic to peanuts."))
        page = await service.list(_scope(ALICE, AGENT))
        tea = next(r.id for r in page.records if "tea" in r.memory)
        (ana,) = [s.entity.id for s in await service.entities(_scope(ALICE, AGENT)) if s.entity.name == "Ana"]
        yield World(service, MemoryApi(service, authenticator=authenticator), tea, ana)
    finally:
        await service.close()


def _scope(user: str, agent: str) -> Any:
    from memory_core.domain.records import Scope

    return Scope.of(user, agent)


async def call(
    api: MemoryApi,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: Any = None,
    query: dict[str, str] | None = None,
) -> ApiResponse:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    raw = b"" if body is None else json.dumps(body).encode()
    return await api.handle(ApiRequest(method, path, query or {}, raw, headers=headers))


# ------------------------------------------------------------------------------------------------
# The matrix: every route x every kind of caller, exact statuses
# ------------------------------------------------------------------------------------------------

SCOPE_Q = {"user_id": ALICE, "agent_id": AGENT}
#: route -> (method, path, query, body); ``{memory}`` is Alice's memory id. Every one acts on Alice.
ROUTES: dict[str, tuple[str, str, dict[str, str], Any]] = {
    "search": ("POST", "/memories/search", {}, {"user_id": ALICE, "agent_id": AGENT, "query": "green tea"}),
    "list": ("GET", "/memories", SCOPE_Q, None),
    "get": ("GET", "/memories/{memory}", SCOPE_Q, None),
    "delete": ("DELETE", "/memories/{memory}", SCOPE_Q, None),
    "export": ("GET", f"/users/{ALICE}/export", {}, None),
    "purge": ("DELETE", f"/users/{ALICE}", {"confirm": "true"}, None),
    "post_turn": ("POST", "/turns", {}, turn("t-new", ALICE, AGENT, "I like jazz.")),
    "forgetting": ("POST", "/forgetting", {}, None),
    "users": ("GET", "/users", {}, None),
    "user_agents": ("GET", f"/users/{ALICE}/agents", {"agent_id": AGENT}, None),
    "forgetting_preview": ("GET", "/forgetting/preview", SCOPE_Q, None),
    "retention_curves": ("GET", "/forgetting/curves", {**SCOPE_Q, "ids": "{memory}"}, None),
    "openapi": ("GET", "/openapi.json", {}, None),
    "add": ("POST", "/memories", {}, {"user_id": ALICE, "agent_id": AGENT, "messages": "I like jazz.", "infer": False}),
    "update": ("PATCH", "/memories/{memory}", SCOPE_Q, {"text": "I like green tea a lot."}),
    "entities": ("GET", "/entities", SCOPE_Q, None),
    "entity": ("GET", "/entities/{entity}", SCOPE_Q, None),
    "forget_entity": ("DELETE", "/entities/{entity}", SCOPE_Q, None),
    "export_entity": ("GET", "/entities/{entity}/export", SCOPE_Q, None),
}
OK = {"search": 200, "list": 200, "get": 200, "delete": 200, "export": 200, "purge": 200}
OK |= {"post_turn": 202, "forgetting": 200, "openapi": 200}
OK |= {"add": 200, "update": 200}
OK |= {"users": 200, "user_agents": 200, "forgetting_preview": 200, "retention_curves": 200}
OK |= {"entities": 200, "entity": 200, "forget_entity": 200, "export_entity": 200}


def _only(allowed: set[str], refused: int = 403) -> dict[str, int]:
    return {route: OK[route] if route in allowed else refused for route in ROUTES}


#: caller -> route -> the exact status.
EXPECTED: dict[str, dict[str, int]] = {
    "no token": _only(set(), 401),
    "expired": _only(set(), 401),
    "wrong audience": _only(set(), 401),
    "wrong issuer": _only(set(), 401),
    "another user's token": _only({"openapi"}),
    "an agent token for another agent": _only({"openapi"}),
    "the user's own token": _only(
        {"search", "list", "get", "delete", "export", "purge", "post_turn", "add", "update", "openapi"}
        | {"user_agents", "forgetting_preview", "retention_curves"}
        | {"entities", "entity", "forget_entity", "export_entity"}
    ),
    # An agent sees its own scope only: not the list of users, nor the user's other agents (the
    # agent_id in the query of /users/{user_id}/agents does not narrow what it would reveal).
    "an agent token for its agent": _only(
        {"search", "list", "get", "delete", "post_turn", "add", "update", "openapi"}
        | {"forgetting_preview", "retention_curves", "entities", "entity", "forget_entity"}
    ),
    "admin": _only(set(ROUTES)),
}


def token_for(idp: IdentityProvider, caller: str) -> str | None:
    now = int(time.time())
    return {
        "no token": lambda: None,
        "expired": lambda: idp.user_token(ALICE, iat=now - 7200, nbf=now - 7200, exp=now - 3600),
        "wrong audience": lambda: idp.user_token(ALICE, aud="api://another-api"),
        "wrong issuer": lambda: idp.user_token(ALICE, iss=f"https://sts.windows.net/{OTHER_TENANT}/"),
        "another user's token": lambda: idp.user_token(BOB),
        "an agent token for another agent": lambda: idp.app_token(OTHER_AGENT_CLIENT),
        "the user's own token": lambda: idp.user_token(ALICE),
        "an agent token for its agent": lambda: idp.app_token(AGENT_CLIENT),
        "admin": lambda: idp.user_token(ROOT_ADMIN, roles=(ROLE_ADMIN,), scp=f"{USER_SCOPE} {ADMIN_SCOPE}"),
    }[caller]()


MATRIX = [(caller, route) for caller in EXPECTED for route in ROUTES]


@pytest.mark.parametrize("caller, route", MATRIX, ids=[f"{c} - {r}" for c, r in MATRIX])
def test_every_route_for_every_caller(idp: IdentityProvider, tmp_path: Path, caller: str, route: str) -> None:
    method, path, query, body = ROUTES[route]
    token = token_for(idp, caller)
    expected = EXPECTED[caller][route]

    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            before = await w.snapshot()
            response = await call(
                w.api,
                method,
                path.format(memory=w.memory_id, entity=w.entity_id),
                token=token,
                body=body,
                query={k: v.format(memory=w.memory_id) for k, v in query.items()},
            )
            assert response.status == expected, (caller, route, response.status, response.body)
            if expected >= 400:
                assert await w.snapshot() == before, "a refused request changed the store"
                assert response.body["error"]["code"] == {401: "unauthorized", 403: "forbidden"}[expected]
                challenge = response.headers["WWW-Authenticate"]
                assert challenge.startswith('Bearer realm="memory-core"')
                if caller == "no token":
                    assert "error=" not in challenge
                elif expected == 401:
                    assert 'error="invalid_token"' in challenge
                else:
                    assert 'error="insufficient_scope"' in challenge
            if token is not None:
                assert token not in json.dumps(response.body) and token not in json.dumps(
                    dict(response.headers)
                )

    asyncio.run(scenario())


@pytest.mark.parametrize("caller", list(EXPECTED))
def test_health_is_open_to_every_caller(idp: IdentityProvider, tmp_path: Path, caller: str) -> None:
    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            response = await call(w.api, "GET", "/health", token=token_for(idp, caller))
            assert response.status == 200 and response.body["status"] == "ok"

    asyncio.run(scenario())


def test_the_matrix_covers_every_guarded_route() -> None:
    from memory_core.contract.routes import ROUTES as _ROUTES

    assert set(ROUTES) == {r.operation for r in _ROUTES if not r.anonymous}
    assert len(MATRIX) == 171


# ------------------------------------------------------------------------------------------------
# The findings of issue 15, one regression each
# ------------------------------------------------------------------------------------------------


def test_a_user_cannot_purge_or_export_another_user_even_naming_them_in_the_path(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            alice = idp.user_token(ALICE)
            purge = await call(w.api, "DELETE", f"/users/{BOB}", token=alice, query={"confirm": "true"})
            assert purge.status == 403
            assert f"own user_id {ALICE!r}, not for user_id {BOB!r}" in purge.body["error"]["message"]
            export = await call(w.api, "GET", f"/users/{BOB}/export", token=alice)
            assert export.status == 403
            assert [r async for r in w.service.export(BOB)], "Bob's memories are still there"
            # A turn in Bob's name is refused too (the user id comes from the token, not the body).
            forged = await call(
                w.api, "POST", "/turns", token=alice, body=turn("t-x", BOB, AGENT, "Forget that.")
            )
            assert forged.status == 403
            own = await call(w.api, "DELETE", f"/users/{ALICE}", token=alice, query={"confirm": "true"})
            assert own.status == 200 and own.body["purged_memories"] >= 1

    asyncio.run(scenario())


def test_forgetting_needs_admin_even_as_a_dry_run(idp: IdentityProvider, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            for token in (idp.user_token(ALICE), idp.app_token(AGENT_CLIENT, roles=(ROLE_AGENT,))):
                for dry_run in ("true", "false"):
                    response = await call(
                        w.api, "POST", "/forgetting", token=token, query={"dry_run": dry_run}
                    )
                    assert response.status == 403
                    assert "needs the Memory.Admin role" in response.body["error"]["message"]
            admin = idp.app_token("ops-automation", roles=(ROLE_ADMIN,))
            report = await call(w.api, "POST", "/forgetting", token=admin)
            assert report.status == 200 and report.body["dry_run"] is True

    asyncio.run(scenario())


def test_an_agent_acts_for_any_user_of_its_agent_but_no_other_agent(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            bot = idp.app_token(AGENT_CLIENT)
            for user in (ALICE, BOB):
                body = {"user_id": user, "agent_id": AGENT, "query": "tea"}
                assert (await call(w.api, "POST", "/memories/search", token=bot, body=body)).status == 200
            other = {"user_id": ALICE, "agent_id": OTHER_AGENT, "query": "tea"}
            refused = await call(w.api, "POST", "/memories/search", token=bot, body=other)
            assert refused.status == 403 and "MEMORY_AUTH_AGENT_BINDINGS" in refused.body["error"]["message"]
            unbound = idp.app_token("c1a2b3c4-0000-4000-8000-00000000ffff")
            body = {"user_id": ALICE, "agent_id": AGENT, "query": "tea"}
            assert (await call(w.api, "POST", "/memories/search", token=unbound, body=body)).status == 403

    asyncio.run(scenario())


# ------------------------------------------------------------------------------------------------
# Token validation: the edges
# ------------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(claims: dict[str, Any], header: dict[str, Any], signature: bytes = b"") -> str:
    head = _b64(json.dumps(header).encode())
    body = _b64(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64(signature)}"


def rejected(v: EntraTokenValidator, token: str) -> str:
    async def attempt() -> str:
        with pytest.raises(AuthenticationError) as caught:
            await v.authenticate({"Authorization": f"Bearer {token}"})
        assert caught.value.error == "invalid_token"
        message = str(caught.value)
        assert token not in message
        return message

    return asyncio.run(attempt())


def accepted(v: EntraTokenValidator, token: str) -> Any:
    return asyncio.run(v.authenticate({"authorization": f"Bearer {token}"}))


def test_a_token_signed_by_another_key_is_refused(idp: IdentityProvider) -> None:
    v = validator(idp)
    forged = idp.sign(idp.claims(oid=ALICE, scp=USER_SCOPE, roles=[ROLE_ADMIN]), kid="kid-1", key="rogue")
    assert "signature does not verify" in rejected(v, forged)
    unknown = idp.sign(idp.claims(oid=ALICE, scp=USER_SCOPE), kid="kid-rogue", key="rogue")
    assert "unknown kid" in rejected(v, unknown)


def test_alg_none_and_hmac_with_the_public_key_are_refused(idp: IdentityProvider) -> None:
    v = validator(idp)
    claims = idp.claims(oid=ALICE, scp=USER_SCOPE, roles=[ROLE_ADMIN])
    assert "only RS256" in rejected(v, unsigned(claims, {"alg": "none", "kid": "kid-1", "typ": "JWT"}))
    assert "only RS256" in rejected(v, unsigned(claims, {"kid": "kid-1", "typ": "JWT"}))
    # The classic confusion: HS256 keyed with the RSA public key the tenant publishes.
    public_pem = (
        rsa_key("key-1")
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header = {"alg": "HS256", "kid": "kid-1", "typ": "JWT"}
    head_body = unsigned(claims, header).rsplit(".", 1)[0]
    signature = hmac.new(public_pem, head_body.encode(), hashlib.sha256).digest()
    assert "only RS256" in rejected(v, f"{head_body}.{_b64(signature)}")
    # Not a JWT at all.
    assert "not a well-formed JWT" in rejected(v, "not-a-jwt")
    assert "no signing key (kid)" in rejected(v, jwt.encode(claims, rsa_key("key-1"), algorithm="RS256"))


def test_lifetime_tenant_issuer_and_claims(idp: IdentityProvider) -> None:
    v = validator(idp)
    now = int(time.time())
    assert "not valid yet" in rejected(v, idp.user_token(ALICE, nbf=now + 600))
    assert "has expired" in rejected(v, idp.user_token(ALICE, exp=now - 3600))
    within_leeway = accepted(v, idp.user_token(ALICE, exp=now - 20))
    assert within_leeway.user_id == ALICE
    assert "another tenant" in rejected(v, idp.user_token(ALICE, tid=OTHER_TENANT))
    assert "not issued by Microsoft Entra ID for tenant" in rejected(
        v, idp.user_token(ALICE, iss=f"https://login.microsoftonline.com/{OTHER_TENANT}/v2.0")
    )
    assert "another audience; this API accepts api://memory-core-tests" in rejected(
        v, idp.user_token(ALICE, aud="api://another-api")
    )
    no_oid = idp.claims(sub="pairwise", scp=USER_SCOPE, roles=[ROLE_USER])
    assert "no 'oid' claim" in rejected(v, idp.sign(no_oid))
    no_tid = {k: val for k, val in idp.claims(oid=ALICE, scp=USER_SCOPE).items() if k != "tid"}
    assert "no 'tid' claim" in rejected(v, idp.sign(no_tid))
    assert "not a usable user id" in rejected(v, idp.user_token("bad id with spaces"))


def test_accepted_forms(idp: IdentityProvider) -> None:
    v = validator(idp)
    # v1 token (issuer sts.windows.net, appid instead of azp), audience as the client id.
    v1 = idp.sign(
        idp.claims(
            iss=f"https://sts.windows.net/{TENANT}/",
            aud=API_CLIENT_ID,
            appid=AGENT_CLIENT,
            roles=[ROLE_AGENT],
            idtyp="app",
        )
    )
    principal = accepted(v, v1)
    assert principal.kind == "app" and principal.subject == AGENT_CLIENT and principal.agent_ids == {AGENT}
    # A delegated token with only the scope (no app role) is a user acting for themselves.
    scope_only = accepted(v, idp.user_token(ALICE, roles=()))
    assert scope_only.acts_as_user and scope_only.user_id == ALICE and scope_only.roles == frozenset()
    # Another claim as the user id (MEMORY_AUTH_USER_ID_CLAIM).
    by_sub = validator(idp, user_id_claim="sub")
    assert accepted(by_sub, idp.user_token(ALICE)).user_id == f"pairwise-{ALICE[:8]}"


def test_keys_are_cached_and_a_rotation_refetches_once(fresh_idp: IdentityProvider) -> None:
    clock = Clock()
    v = validator(fresh_idp, clock=clock)
    for _ in range(5):
        accepted(v, fresh_idp.user_token(ALICE))
    assert fresh_idp.requests == [CONFIG_PATH, KEYS_PATH], "keys are fetched once, not per request"

    # The tenant rolls its keys (later on): a token with the new kid refetches once and is accepted.
    clock.now += 3600
    fresh_idp.published = {"kid-1": "key-1", "kid-2": "key-2"}
    rotated = fresh_idp.sign(fresh_idp.claims(oid=ALICE, scp=USER_SCOPE, roles=[ROLE_USER]), kid="kid-2")
    assert accepted(v, rotated).user_id == ALICE
    assert fresh_idp.requests == [CONFIG_PATH, KEYS_PATH] * 2

    # Unknown kids right after: refused without hammering the tenant (at most one refetch a minute).
    for i in range(3):
        stranger = fresh_idp.sign(fresh_idp.claims(oid=ALICE), kid=f"kid-x{i}", key="rogue")
        assert "unknown kid" in rejected(v, stranger)
    assert len(fresh_idp.requests) == 4
    clock.now += MIN_REFRESH_SECONDS + 1
    assert "unknown kid" in rejected(v, stranger)
    assert len(fresh_idp.requests) == 6, "after a minute an unknown kid may refetch again"
    assert accepted(v, rotated).user_id == ALICE and len(fresh_idp.requests) == 6


def test_the_keys_server_down_fails_closed_with_503(tmp_path: Path, fresh_idp: IdentityProvider) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"

    async def scenario() -> None:
        async with world(tmp_path, validator(closed)) as w:
            token = fresh_idp.user_token(ALICE)
            response = await call(w.api, "GET", f"/users/{ALICE}/export", token=token)
            assert response.status == 503, response.body
            assert response.body["error"]["code"] == "unavailable"
            assert "signing keys are unavailable" in response.body["error"]["message"]
            assert response.headers["Retry-After"] == "5"
            assert (await call(w.api, "GET", "/health")).status == 200

        # A server that answers 500 is the same: nothing is accepted.
        fresh_idp.status = 500
        v = validator(fresh_idp)
        with pytest.raises(TransientError, match="HTTP 500"):
            await v.authenticate({"Authorization": f"Bearer {fresh_idp.user_token(ALICE)}"})

    asyncio.run(scenario())


def test_a_failed_refresh_keeps_the_cached_keys(fresh_idp: IdentityProvider) -> None:
    clock = Clock()
    v = validator(fresh_idp, clock=clock)
    accepted(v, fresh_idp.user_token(ALICE))
    fresh_idp.status = 500
    clock.now += 2 * 24 * 3600  # the keys are old: refreshed on the next request, which fails
    assert accepted(v, fresh_idp.user_token(ALICE)).user_id == ALICE


def test_fetching_keys_does_not_block_the_event_loop(fresh_idp: IdentityProvider) -> None:
    fresh_idp.delay = 0.3
    v = validator(fresh_idp)

    async def scenario() -> int:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        tokens = [fresh_idp.user_token(ALICE) for _ in range(8)]
        results = await asyncio.gather(*(v.authenticate({"Authorization": f"Bearer {t}"}) for t in tokens))
        done.set()
        await task
        assert all(p.user_id == ALICE for p in results)
        return ticks

    assert asyncio.run(scenario()) >= 20  # the loop kept running while the documents were fetched
    assert fresh_idp.requests == [CONFIG_PATH, KEYS_PATH], "concurrent first requests share one fetch"


def test_the_settings_build_the_validator(idp: IdentityProvider) -> None:
    assert build_authenticator(Settings()) is None
    settings = Settings.from_env(
        {
            "MEMORY_AUTH_TENANT_ID": TENANT.upper(),
            "MEMORY_AUTH_AUDIENCE": f"{AUDIENCE},{API_CLIENT_ID}",
            "MEMORY_AUTH_AGENT_BINDINGS": json.dumps(BINDINGS),
            "MEMORY_AUTH_AUTHORITY": idp.authority,
        }
    )
    built = build_authenticator(settings)
    assert isinstance(built, EntraTokenValidator)
    principal = accepted(built, idp.app_token(AGENT_CLIENT))
    assert principal.agent_ids == {AGENT}


# ------------------------------------------------------------------------------------------------
# Through the Azure Functions HTTP functions
# ------------------------------------------------------------------------------------------------


def http(
    method: str,
    route: str,
    *,
    token: str | None = None,
    body: Any = None,
    params: dict[str, str] | None = None,
    **route_params: str,
) -> func.HttpRequest:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return func.HttpRequest(
        method,
        f"https://memapp.azurewebsites.net/api/{route}",
        headers=headers,
        params=params or {},
        route_params=route_params,
        body=b"" if body is None else json.dumps(body).encode(),
    )


@pytest.fixture
def _fresh_runtime() -> Iterator[None]:
    function_app.runtime.use(None)
    yield
    function_app.runtime.use(None)


@pytest.mark.usefixtures("_fresh_runtime")
def test_the_functions_validate_tokens_and_authorise(idp: IdentityProvider, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service, authenticator=validator(idp))
            await env.service.ingest(turn("t-alice", ALICE, AGENT, "I love green tea.", NOW))
            alice, bob = idp.user_token(ALICE), idp.user_token(BOB)
            bot = idp.app_token(AGENT_CLIENT)
            admin = idp.user_token(ROOT_ADMIN, roles=(ROLE_ADMIN,), scp=f"{USER_SCOPE} {ADMIN_SCOPE}")
            search = {"user_id": ALICE, "agent_id": AGENT, "query": "green tea"}

            assert (await function_app.health(http("GET", "health"))).status_code == 200
            anonymous = await function_app.search_memories(http("POST", "memories/search", body=search))
            assert anonymous.status_code == 401
            assert anonymous.headers["WWW-Authenticate"] == 'Bearer realm="memory-core"'
            expired = await function_app.search_memories(
                http(
                    "POST",
                    "memories/search",
                    body=search,
                    token=idp.user_token(ALICE, exp=int(time.time()) - 3600),
                )
            )
            assert expired.status_code == 401 and "invalid_token" in expired.headers["WWW-Authenticate"]
            found = await function_app.search_memories(
                http("POST", "memories/search", body=search, token=alice)
            )
            assert found.status_code == 200 and json.loads(found.get_body())["hits"]
            assert (
                await function_app.search_memories(http("POST", "memories/search", body=search, token=bot))
            ).status_code == 200
            purge = http("DELETE", f"users/{ALICE}", params={"confirm": "true"}, token=bob, user_id=ALICE)
            assert (await function_app.purge_user(purge)).status_code == 403
            export = http("GET", f"users/{ALICE}/export", token=bot, user_id=ALICE)
            assert (await function_app.export_user(export)).status_code == 403
            queued = await function_app.post_turn(
                http("POST", "turns", body=turn("t-2", ALICE, AGENT, "Hi.", NOW), token=bot)
            )
            assert queued.status_code == 202
            assert (
                await function_app.run_forgetting_http(http("POST", "forgetting", token=alice))
            ).status_code == 403
            assert (
                await function_app.run_forgetting_http(http("POST", "forgetting", token=admin))
            ).status_code == 200
            assert (await function_app.openapi_document(http("GET", "openapi.json"))).status_code == 401
            assert (
                await function_app.openapi_document(http("GET", "openapi.json", token=bob))
            ).status_code == 200

    asyncio.run(scenario())


@pytest.mark.usefixtures("_fresh_runtime")
def test_without_entra_settings_the_functions_warn_once_that_the_key_is_all(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memory_core.functions")

    async def scenario() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            for _ in range(3):
                assert (
                    await function_app.list_memories(http("GET", "memories", params=SCOPE_Q))
                ).status_code == 200

    asyncio.run(scenario())
    warnings = [r for r in caplog.records if "protected by the Functions key only" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.usefixtures("_fresh_runtime")
def test_routes_bound_anonymous_fail_closed_without_a_validator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(function_app, "HTTP_AUTH_LEVEL", func.AuthLevel.ANONYMOUS)

    async def scenario() -> None:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            response = await function_app.export_user(http("GET", f"users/{ALICE}/export", user_id=ALICE))
            assert response.status_code == 503
            assert "not configured" in json.loads(response.get_body())["error"]["message"]

    with caplog.at_level("ERROR", logger="memory_core.functions"):
        asyncio.run(scenario())
    assert "refusing to serve" in caplog.text  # the reason is in the log, not in the answer


def _bindings(env: dict[str, str]) -> dict[str, str]:
    code = (
        "import json, function_app\n"
        "print(json.dumps({f.get_function_name(): json.loads(f.get_function_json())['bindings'][0].get('authLevel')"
        " for f in function_app.app.get_functions()}))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_AUTH_")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_host_auth_level_follows_the_entra_settings() -> None:
    http_functions = {
        "search_memories", "list_memories", "memory_item", "export_user", "purge_user",
        "post_turn", "run_forgetting_http", "openapi_document",
    }  # fmt: skip
    keyed = _bindings({})
    assert {keyed[name] for name in http_functions} == {"FUNCTION"} and keyed["health"] == "ANONYMOUS"
    partial = _bindings({"MEMORY_AUTH_TENANT_ID": TENANT})
    assert {partial[name] for name in http_functions} == {"FUNCTION"}
    entra = _bindings({"MEMORY_AUTH_TENANT_ID": TENANT, "MEMORY_AUTH_AUDIENCE": AUDIENCE})
    assert {entra[name] for name in http_functions} == {"ANONYMOUS"} and entra["health"] == "ANONYMOUS"
    assert set(function_app.AUTH_SETTINGS) <= set(Settings.environment_variables())


# ------------------------------------------------------------------------------------------------
# The remote client acquires its own tokens (azure-identity's credential protocol)
# ------------------------------------------------------------------------------------------------


class MintingCredential:
    """An ``AsyncTokenCredential`` of an agent's app identity: the local provider signs its tokens."""

    def __init__(self, idp: IdentityProvider, client: str) -> None:
        self.idp, self.client = idp, client
        self.scopes: list[tuple[str, ...]] = []

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        self.scopes.append(scopes)
        return AccessToken(self.idp.app_token(self.client), int(time.time()) + 3600)


def test_the_remote_client_sends_its_identitys_token(idp: IdentityProvider, tmp_path: Path) -> None:
    from memory_core.client.remote import RemoteMemoryClient
    from memory_core.domain.search import MemorySearchOptions
    from memory_core.entrypoints.embedded.server import ApiServer
    from memory_core.errors import PermanentError

    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            server = ApiServer(w.api, asyncio.get_running_loop(), host="127.0.0.1", port=0)
            server.start()
            base = f"http://127.0.0.1:{server.port}"
            mine = MintingCredential(idp, AGENT_CLIENT)
            other = MintingCredential(idp, OTHER_AGENT_CLIENT)
            ours = RemoteMemoryClient(base, credential=mine, api_scope=f"{AUDIENCE}/.default")
            theirs = RemoteMemoryClient(base, credential=other, api_scope=f"{AUDIENCE}/.default")
            anonymous = RemoteMemoryClient(base)
            try:
                found = await ours.search(_scope(ALICE, AGENT), "green tea", MemorySearchOptions())
                assert found.hits[0].record.memory == "I love green tea"
                assert mine.scopes == [(f"{AUDIENCE}/.default",)]
                with pytest.raises(PermanentError, match="403"):
                    await theirs.search(_scope(ALICE, AGENT), "green tea", MemorySearchOptions())
                # the entity routes, through the same client and the same check
                assert [s.entity.id for s in await ours.entities(_scope(ALICE, AGENT))][:1] == [w.entity_id]
                ana = await ours.entity(_scope(ALICE, AGENT), w.entity_id)
                assert [r.memory for r in ana.memories] == ["My sister Ana moved to Lisbon"]
                with pytest.raises(PermanentError, match="403"):
                    await theirs.entities(_scope(ALICE, AGENT))
                with pytest.raises(PermanentError, match="403"):
                    await theirs.forget_entity(_scope(ALICE, AGENT), w.entity_id)
                with pytest.raises(PermanentError, match="401"):
                    await anonymous.search(_scope(ALICE, AGENT), "green tea", MemorySearchOptions())
            finally:
                for client in (ours, theirs, anonymous):
                    await client.close()
                await asyncio.to_thread(server.stop)

    asyncio.run(scenario())


def test_the_remote_client_wants_a_scope_with_a_credential() -> None:
    from memory_core.client.remote import RemoteMemoryClient
    from memory_core.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="credential and api_scope go together"):
        RemoteMemoryClient("http://127.0.0.1:1", credential=object())
    with pytest.raises(ConfigurationError, match="either credential"):
        RemoteMemoryClient(
            "http://127.0.0.1:1", credential=object(), api_scope="api://x/.default", api_token="t" * 20
        )


def test_a_client_app_with_the_user_scope_alone_gets_no_admin_rights(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    """Regression: a token with scp=Memory.ReadWrite and roles=[Memory.Admin] from any consented client
    could run forgetting and purge other users."""

    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            token = idp.user_token(ROOT_ADMIN, roles=(ROLE_ADMIN,), azp="some-third-party-client")
            headers = {"Authorization": f"Bearer {token}"}
            forget = await w.api.handle(ApiRequest("POST", "/forgetting", {}, b"", headers))
            purge = await w.api.handle(
                ApiRequest("DELETE", f"/users/{ALICE}", {"confirm": "true"}, b"", headers)
            )
            assert (forget.status, purge.status) == (403, 403)

    asyncio.run(scenario())


def test_the_identity_type_comes_from_the_token_not_from_a_missing_claim(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    """Regression: a token with a user's oid and roles=[Memory.Admin] but no scp and no idtyp was taken
    for app-only, so it acted as administrator without the Memory.Admin.All scope."""
    v = validator(idp)
    bare = idp.claims(oid=ROOT_ADMIN, sub=f"pairwise-{ROOT_ADMIN[:8]}", azp="some-client", roles=[ROLE_ADMIN])
    assert "neither whether it is app-only" in rejected(v, idp.sign(bare))
    assert "carries a delegated 'scp'" in rejected(v, idp.sign({**bare, "idtyp": "app", "scp": USER_SCOPE}))
    assert "not 'app' or 'user'" in rejected(v, idp.sign({**bare, "idtyp": "device"}))
    # What Entra ID issues stays accepted: app-only with idtyp=app, delegated with scp (idtyp or not).
    assert accepted(v, idp.app_token(AGENT_CLIENT)).kind == "app"
    assert accepted(v, idp.user_token(ALICE)).acts_as_user
    assert accepted(v, idp.user_token(ALICE, idtyp="user")).acts_as_user

    async def scenario() -> None:
        async with world(tmp_path, validator(idp)) as w:
            headers = {"Authorization": f"Bearer {idp.sign(bare)}"}
            forget = await w.api.handle(ApiRequest("POST", "/forgetting", {}, b"", headers))
            purge = await w.api.handle(
                ApiRequest("DELETE", f"/users/{ALICE}", {"confirm": "true"}, b"", headers)
            )
            assert (forget.status, purge.status) == (401, 401)

    asyncio.run(scenario())
