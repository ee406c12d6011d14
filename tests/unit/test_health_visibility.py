"""``GET /health`` is anonymous: an anonymous caller sees the verdict, an administrator every fact
(issue 29, item 12: no error strings, paths or settings in an anonymous health answer)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from memory_core.domain.access import ROLE_ADMIN, ROLE_USER, Principal, PrincipalKind
from memory_core.entrypoints.http.dispatcher import MemoryApi
from memory_core.entrypoints.http.kit import ApiRequest
from memory_core.errors import AuthenticationError, TransientError

FACTS: dict[str, Any] = {
    "ingestion": "stopped",
    "problem": "3 message(s) wait; last error: OperationalError: unable to open /srv/memory/memory.db.queue",
    "queue": {"error": "OperationalError: unable to open /srv/memory/memory.db.queue"},
    "workers": [{"name": "worker-1", "last_error": "sqlite3.OperationalError: disk I/O error"}],
}


class _Tokens:
    """An authenticator that knows two bearer tokens, and fails to decide for a third."""

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        given = {k.lower(): v for k, v in headers.items()}.get("authorization")
        if given == "Bearer admin":
            return Principal("app-1", PrincipalKind.APP, roles=frozenset({ROLE_ADMIN}))
        if given == "Bearer user":
            return Principal("oid-1", PrincipalKind.USER, roles=frozenset({ROLE_USER}), user_id="u1")
        if given == "Bearer unsure":
            raise TransientError("the signing keys could not be fetched")
        raise AuthenticationError("no bearer token")


def _health(api: MemoryApi, **request: Any) -> tuple[int, dict[str, Any]]:
    response = asyncio.run(api.handle(ApiRequest("GET", "/health", {}, **request)))
    return response.status, response.body


def _api(authenticator: Any = None) -> MemoryApi:
    return MemoryApi(
        object(),  # type: ignore[arg-type]  # health never touches the service
        health_details=lambda: FACTS,
        healthy=lambda d: d["ingestion"] != "stopped",
        authenticator=authenticator,
    )


def test_an_anonymous_caller_sees_the_verdict_without_errors_or_paths() -> None:
    status, body = _health(_api(), anonymous=True)
    assert status == 503 and body["status"] == "unhealthy"
    assert body["details"] == {"ingestion": "stopped"}
    assert "/srv" not in str(body) and "Error" not in str(body)


def test_the_token_holder_sees_every_fact() -> None:
    status, body = _health(_api())  # the transport checked the token (or there is none: loopback)
    assert status == 503 and body["details"] == FACTS


@pytest.mark.parametrize(
    ("authorization", "sees_all"),
    [(None, False), ("Bearer wrong", False), ("Bearer unsure", False), ("Bearer user", False), ("Bearer admin", True)],
)
def test_with_an_authenticator_only_an_administrator_sees_every_fact(authorization: str | None, sees_all: bool) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    status, body = _health(_api(_Tokens()), headers=headers, anonymous=True)
    assert status == 503  # the verdict is the same for everyone
    assert body["details"] == (FACTS if sees_all else {"ingestion": "stopped"})
