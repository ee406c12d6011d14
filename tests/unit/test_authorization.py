"""The authorisation model on its own (``memory_core.domain.access``, pure), the route table that applies it, and
the settings that configure Microsoft Entra ID validation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memory_core.config import Settings
from memory_core.contract.routes import ROUTES
from memory_core.domain.access import (
    ADMIN_ACTIONS,
    ADMIN_SCOPE,
    AGENT_ACTIONS,
    ROLE_ADMIN,
    ROLE_AGENT,
    ROLE_USER,
    USER_ACTIONS,
    USER_SCOPE,
    Action,
    Principal,
    PrincipalKind,
    authorize,
    bearer_token,
)
from memory_core.entrypoints.http.kit import ApiRequest, Headers
from memory_core.errors import AuthenticationError, ConfigurationError, ForbiddenError

ROOT = Path(__file__).resolve().parents[2]
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"

ALICE = Principal("oid-alice", PrincipalKind.USER, frozenset({ROLE_USER}), user_id="alice")
ALICE_BY_SCOPE = Principal("oid-alice", PrincipalKind.USER, scopes=frozenset({USER_SCOPE}), user_id="alice")
BOT = Principal("client-bot", PrincipalKind.APP, frozenset({ROLE_AGENT}), agent_ids=frozenset({"support"}))
ANY_BOT = Principal("client-any", PrincipalKind.APP, frozenset({ROLE_AGENT}), agent_ids=frozenset({"*"}))
ADMIN_USER = Principal(
    "oid-root",
    PrincipalKind.USER,
    frozenset({ROLE_ADMIN}),
    frozenset({USER_SCOPE, ADMIN_SCOPE}),
    user_id="root",
)
#: A user holding Memory.Admin, in a token a client app got with Memory.ReadWrite alone.
ADMIN_ROLE_WITHOUT_ADMIN_SCOPE = Principal(
    "oid-root", PrincipalKind.USER, frozenset({ROLE_ADMIN}), frozenset({USER_SCOPE}), user_id="root"
)
ADMIN_APP = Principal("client-ops", PrincipalKind.APP, frozenset({ROLE_ADMIN}))
HOLDER = Principal.token_holder()
NOBODY_USER = Principal("oid-eve", PrincipalKind.USER, frozenset(), user_id="eve")
NOBODY_APP = Principal("client-x", PrincipalKind.APP, frozenset({"Other.Role"}))


def allowed(principal: Principal, action: Action, user_id: str | None, agent_id: str | None) -> bool:
    try:
        authorize(principal, action, user_id=user_id, agent_id=agent_id)
    except ForbiddenError:
        return False
    return True


SCOPED = [a for a in Action if a is not Action.FORGET]


@pytest.mark.parametrize("principal", [ADMIN_USER, ADMIN_APP, HOLDER], ids=lambda p: p.describe())
@pytest.mark.parametrize("action", list(Action))
def test_an_admin_may_do_everything_everywhere(principal: Principal, action: Action) -> None:
    assert allowed(principal, action, "anyone", "any-agent")
    assert allowed(principal, action, "anyone", None)
    assert allowed(principal, action, None, None)


@pytest.mark.parametrize("principal", [ALICE, ALICE_BY_SCOPE], ids=["role", "scope"])
@pytest.mark.parametrize("action", SCOPED)
def test_a_user_acts_only_for_themselves(principal: Principal, action: Action) -> None:
    assert allowed(principal, action, "alice", "any-agent") is (action in USER_ACTIONS)
    assert allowed(principal, action, "alice", None) is (action in USER_ACTIONS)
    assert not allowed(principal, action, "bob", "any-agent")
    assert not allowed(principal, action, None, None)


@pytest.mark.parametrize("action", SCOPED)
def test_an_agent_acts_only_for_its_agents(action: Action) -> None:
    expected = action in AGENT_ACTIONS
    assert allowed(BOT, action, "alice", "support") is expected
    assert allowed(BOT, action, "bob", "support") is expected  # any user of its agents
    assert not allowed(BOT, action, "alice", "travel")
    assert not allowed(BOT, action, "alice", None)
    assert allowed(ANY_BOT, action, "alice", "travel") is expected


@pytest.mark.parametrize(
    "principal", [ALICE, ALICE_BY_SCOPE, BOT, ANY_BOT, NOBODY_USER, NOBODY_APP], ids=lambda p: p.describe()
)
def test_forgetting_needs_admin(principal: Principal) -> None:
    with pytest.raises(ForbiddenError, match=r"forgetting: it needs the Memory\.Admin role"):
        authorize(principal, Action.FORGET, user_id=None, agent_id=None)


def test_the_grants_are_the_documented_ones() -> None:
    assert {Action.SEARCH, Action.READ, Action.DELETE, Action.POST_TURN, Action.ADD, Action.UPDATE} == AGENT_ACTIONS
    assert AGENT_ACTIONS | {Action.EXPORT, Action.PURGE} == USER_ACTIONS
    assert set(Action) == ADMIN_ACTIONS
    assert Action.FORGET not in USER_ACTIONS | AGENT_ACTIONS


def test_roles_only_count_for_their_kind_of_token() -> None:
    # Memory.Agent in a delegated token, Memory.User in an app-only token: neither grants anything.
    user_with_agent_role = Principal("oid", PrincipalKind.USER, frozenset({ROLE_AGENT}), user_id="u1")
    app_with_user_role = Principal(
        "client", PrincipalKind.APP, frozenset({ROLE_USER}), agent_ids=frozenset({"*"})
    )
    for principal in (user_with_agent_role, app_with_user_role):
        assert not principal.acts_as_user and not principal.acts_as_agent
        assert not allowed(principal, Action.SEARCH, "u1", "a1")


def test_messages_say_what_is_missing() -> None:
    with pytest.raises(ForbiddenError, match=r"own user_id 'alice', not for user_id 'bob'.*Memory\.Admin"):
        authorize(ALICE, Action.PURGE, user_id="bob", agent_id=None)
    with pytest.raises(
        ForbiddenError,
        match=r"not bound to agent_id 'travel' \(bound to: support\).*MEMORY_AUTH_AGENT_BINDINGS",
    ):
        authorize(BOT, Action.SEARCH, user_id="alice", agent_id="travel")
    with pytest.raises(
        ForbiddenError, match=r"may not export: an agent identity \(Memory\.Agent\) may search, read"
    ):
        authorize(BOT, Action.EXPORT, user_id="alice", agent_id="support")
    with pytest.raises(
        ForbiddenError, match=r"holds no grant of this API \(roles: none\).*Memory\.ReadWrite scope"
    ):
        authorize(NOBODY_USER, Action.SEARCH, user_id="eve", agent_id="a1")
    with pytest.raises(ForbiddenError, match=r"roles: Other\.Role"):
        authorize(NOBODY_APP, Action.SEARCH, user_id="eve", agent_id="a1")
    unbound = Principal("client-new", PrincipalKind.APP, frozenset({ROLE_AGENT}))
    with pytest.raises(ForbiddenError, match=r"bound to: none"):
        authorize(unbound, Action.SEARCH, user_id="u1", agent_id="a1")


# ---- the route table: one gate, no route forgotten ------------------------------------------------


def test_every_route_but_health_and_openapi_is_authorised_as_an_action() -> None:
    unguarded = {r.operation for r in ROUTES if r.action is None}
    assert unguarded == {"health", "openapi"}
    assert {r.operation for r in ROUTES if r.anonymous} == {"health"}
    assert {r.action for r in ROUTES if r.action is not None} == set(Action)


def test_an_anonymous_route_cannot_carry_an_action() -> None:
    route = ROUTES[0]
    with pytest.raises(ValueError, match="anonymous"):
        type(route)(
            route.method, route.segments, route.operation, route.summary, route.action, route.target, True
        )


def test_authorize_is_called_from_one_place_only() -> None:
    callers = []
    for path in [*sorted((ROOT / "memory_core").rglob("*.py")), ROOT / "function_app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "authorize":
                callers.append(path.relative_to(ROOT).as_posix())
    assert callers == ["memory_core/entrypoints/http/dispatcher.py"]


def test_auth_is_pure_domain() -> None:
    tree = ast.parse((ROOT / "memory_core" / "domain" / "access.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memory_core"):
            assert node.module in {"memory_core.errors", "memory_core.domain.records"}, node.module
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            assert all(
                n.split(".")[0] in {"__future__", "collections", "dataclasses", "enum", "typing"}
                for n in names
            )


# ---- headers and the bearer token -----------------------------------------------------------------


def test_headers_are_case_insensitive_and_never_printed() -> None:
    request = ApiRequest("GET", "/health", {}, headers={"AUTHORIZATION": "Bearer abc", "X-Other": "1"})
    assert isinstance(request.headers, Headers)
    assert request.headers["authorization"] == "Bearer abc"
    assert request.headers.get("Authorization") == "Bearer abc"
    assert "x-other" in request.headers and "missing" not in request.headers
    assert "abc" not in repr(request) and "abc" not in repr(request.headers)
    assert ApiRequest("GET", "/health", {}).headers == {}


def test_bearer_token() -> None:
    assert bearer_token({"authorization": "Bearer  abc.def "}) == "abc.def"
    assert bearer_token(Headers({"Authorization": "bearer xyz"})) == "xyz"
    with pytest.raises(AuthenticationError) as missing:
        bearer_token({})
    assert missing.value.error is None
    with pytest.raises(AuthenticationError) as basic:
        bearer_token({"Authorization": "Basic dXNlcjpwYXNz"})
    assert basic.value.error is None and "dXNlcjpwYXNz" not in str(basic.value)
    with pytest.raises(AuthenticationError) as empty:
        bearer_token({"Authorization": "Bearer "})
    assert empty.value.error == "invalid_token"


# ---- settings -----------------------------------------------------------------------------------


def test_auth_settings_are_off_by_default_and_parsed_when_set() -> None:
    assert not Settings().auth_enabled
    settings = Settings.from_env(
        {
            "MEMORY_AUTH_TENANT_ID": TENANT,
            "MEMORY_AUTH_AUDIENCE": "api://memory-core, 11111111-2222-3333-4444-555555555555",
            "MEMORY_AUTH_AGENT_BINDINGS": '{"client-a": ["support", "travel"], "client-b": ["*"]}',
        }
    )
    assert settings.auth_enabled
    assert settings.auth_audiences() == ("api://memory-core", "11111111-2222-3333-4444-555555555555")
    assert settings.agent_binding_map() == {"client-a": ("support", "travel"), "client-b": ("*",)}
    assert settings.auth_user_id_claim == "oid"
    assert settings.auth_authority == "https://login.microsoftonline.com"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"MEMORY_AUTH_TENANT_ID": TENANT}, "MEMORY_AUTH_AUDIENCE is empty"),
        ({"MEMORY_AUTH_AUDIENCE": "api://memory-core"}, "MEMORY_AUTH_TENANT_ID is empty"),
        (
            {"MEMORY_AUTH_TENANT_ID": "contoso.onmicrosoft.com", "MEMORY_AUTH_AUDIENCE": "api://m"},
            "must be the directory \\(tenant\\) id, a GUID",
        ),
        ({"MEMORY_AUTH_TENANT_ID": TENANT, "MEMORY_AUTH_AUDIENCE": " , "}, "names no audience"),
        ({"MEMORY_AUTH_TENANT_ID": TENANT, "MEMORY_AUTH_AUDIENCE": "api://a b"}, "audience with spaces"),
        ({"MEMORY_AUTH_USER_ID_CLAIM": "o id"}, "must be a claim name"),
        ({"MEMORY_AUTH_AGENT_BINDINGS": "{not json"}, "is not JSON: .* at position 1"),
        ({"MEMORY_AUTH_AGENT_BINDINGS": '["a1"]'}, "must be a JSON object"),
        ({"MEMORY_AUTH_AGENT_BINDINGS": '{"c": "a1"}'}, "must be a non-empty list of agent ids"),
        ({"MEMORY_AUTH_AGENT_BINDINGS": '{"c": []}'}, "must be a non-empty list of agent ids"),
        ({"MEMORY_AUTH_AGENT_BINDINGS": '{"c": ["bad agent"]}'}, "invalid agent id 'bad agent'"),
        ({"MEMORY_AUTH_AGENT_BINDINGS": '{" c": ["a1"]}'}, "empty or padded client id"),
        ({"MEMORY_AUTH_AUTHORITY": "http://login.example.com"}, "must be an https URL"),
        ({"MEMORY_AUTH_AUTHORITY": "ftp://127.0.0.1"}, "must be an https URL"),
    ],
)
def test_auth_settings_say_what_is_wrong(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env(env)


def test_a_loopback_authority_may_be_http() -> None:
    assert Settings.from_env({"MEMORY_AUTH_AUTHORITY": "http://127.0.0.1:8080"}).auth_authority.startswith(
        "http:"
    )


@pytest.mark.parametrize("action", [Action.FORGET, Action.PURGE, Action.EXPORT])
def test_a_users_admin_role_needs_the_admin_scope(action: Action) -> None:
    """A user's token lists their app roles whichever client app asked for it: an app consented for
    Memory.ReadWrite alone must not act with its user's admin rights (only their own scope)."""
    with pytest.raises(ForbiddenError):
        authorize(ADMIN_ROLE_WITHOUT_ADMIN_SCOPE, action, user_id="someone-else", agent_id=None)
    authorize(ADMIN_USER, action, user_id="someone-else", agent_id=None)
    assert not ADMIN_ROLE_WITHOUT_ADMIN_SCOPE.is_admin and ADMIN_USER.is_admin and ADMIN_APP.is_admin
