"""The API's Microsoft Entra ID app registration, checked offline: ``infra/app/api-identity.bicep``
declares the app roles and the delegated scope that ``memory_core/domain/access.py`` checks (values, member
types, stable and distinct ``guid()`` ids), a service principal and the optional ``Memory.Admin``
assignment for the developer; ``infra/bicepconfig.json`` pins the Microsoft Graph extension it uses;
``main.bicep`` creates it behind ``createApiRegistration`` and sets ``MEMORY_AUTH_TENANT_ID`` and
``MEMORY_AUTH_AUDIENCE`` from it (empty without it: the Functions key only).

Parsed like the other templates (``test_infra_bicep.py``): pycep-parser reads the ``extension``
statement and the ``Microsoft.Graph/*`` resources; tree-sitter-bicep predates ``extension``, so its
syntax check comments that one statement out (``syntax_tree``) and checks the rest.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from test_infra_bicep import (
    EXTENSION_STATEMENT,
    GUID,
    INFRA,
    INTENTIONALLY_UNSET,
    INTERPOLATION,
    MAIN,
    ROOT,
    SEMVER,
    Param,
    app_settings,
    body,
    chain,
    declared,
    load,
    local_modules,
    mutate,
    param_default,
    read,
    resolve,
    syntax_tree,
)

from memory_core.config import Settings
from memory_core.domain.access import ADMIN_SCOPE, ROLE_ADMIN, ROLE_AGENT, ROLE_USER, USER_SCOPE

IDENTITY = "app/api-identity.bicep"
BICEPCONFIG = INFRA / "bicepconfig.json"
GRAPH_V1_REGISTRY = "br:mcr.microsoft.com/bicep/extensions/microsoftgraph/v1.0"
# The app roles memory_core/domain/access.py checks, and who may hold each.
ROLE_MEMBER_TYPES = {
    ROLE_AGENT: {"Application"},
    ROLE_USER: {"User"},
    ROLE_ADMIN: {"User", "Application"},
}
OPTION = "createApiRegistration"
OPTION_ENV = "MEMORY_CREATE_API_REGISTRATION"
WIRED = ("MEMORY_AUTH_TENANT_ID", "MEMORY_AUTH_AUDIENCE")
SUBSTITUTION = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?:=([^}]*))?\}")

# ---------------------------------------------------------------------------------------------
# Checks (each raises AssertionError)
# ---------------------------------------------------------------------------------------------


def check_bicepconfig(config: dict[str, Any], docs: dict[str, dict[str, Any]]) -> None:
    """Every extension a template declares is an alias of bicepconfig.json, pinned to a release."""
    aliases = config.get("extensions", {})
    assert aliases, "infra/bicepconfig.json declares no extensions"
    for alias, reference in aliases.items():
        registry, _, version = reference.rpartition(":")
        assert registry == GRAPH_V1_REGISTRY, f"{alias}: only the Microsoft Graph v1.0 extension is expected"
        assert SEMVER.fullmatch(version), f"{alias}: pin a released version, not {version!r}"
    used: set[str] = set()
    for rel, doc in docs.items():
        declared_here = set(doc.get("extensions", {}))
        graph = [s for s, r in doc.get("resources", {}).items() if r["type"].startswith("Microsoft.Graph/")]
        if graph:
            assert declared_here, f"{rel}: Microsoft.Graph resources need `extension microsoftGraphV1`"
            for symbol in graph:
                version = doc["resources"][symbol]["api_version"]
                assert version == "v1.0", f"{rel}: {symbol} uses Microsoft Graph {version}, not v1.0"
        # The alias form only: the version lives in bicepconfig.json, not in the template.
        unknown = declared_here - aliases.keys()
        assert not unknown, f"{rel}: extension {sorted(unknown)} is not an alias of bicepconfig.json"
        used |= declared_here
    assert used == aliases.keys(), f"bicepconfig.json extensions no template uses: {aliases.keys() - used}"


def registration(docs: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """(api-identity.bicep, symbol, body) of the one app registration."""
    apps = list(declared(docs, "Microsoft.Graph/applications"))
    assert len(apps) == 1, "exactly one app registration (the API's)"
    rel, symbol, res = apps[0]
    assert rel == IDENTITY, f"the app registration lives in {IDENTITY}, not {rel}"
    assert "condition" not in res["config"], "the module is conditional, not the registration inside it"
    return docs[rel], symbol, body(res)


def check_stable_id(doc: dict[str, Any], expr: Any, what: str) -> tuple[Any, ...]:
    """An id is ``guid(uniqueName, ...)``: the same on every deployment, unique to the registration."""
    value = resolve(doc, expr)
    assert isinstance(value, dict) and value.get("function", {}).get("type") == "guid", (
        f"{what}: the id must be a guid(...) of the unique name, not {value!r}"
    )
    args = tuple(v for v in value["function"]["parameters"].values() if v is not None)
    assert resolve(doc, args[0]) == Param("uniqueName"), f"{what}: guid() must start with uniqueName"
    assert what in args[1:], f"{what}: guid() must name {what}, so each id is its own"
    return args


def check_registration(docs: dict[str, dict[str, Any]]) -> None:
    """The roles and the scope the code checks, with stable, distinct ids; v2 tokens; one tenant."""
    doc, symbol, app = registration(docs)
    assert resolve(doc, app["uniqueName"]) == Param("uniqueName")
    assert app["displayName"], "a display name"
    assert app.get("signInAudience") == "AzureADMyOrg", "tokens of this tenant only"
    # Application ID URI: api://<tenant id>/<unique name>, a format the identifier URI policy allows.
    (uri,) = app["identifierUris"]
    uri = resolve(doc, uri)
    assert uri == "api://${tenant().tenantId}/${uniqueName}", f"identifier URI {uri!r}"
    api = app["api"]
    assert api.get("requestedAccessTokenVersion") == 2, "v2 access tokens (audience: the client id)"
    # The code tells app-only tokens by idtyp=app, so access tokens must carry it.
    claims = [claim["name"] for claim in (app.get("optionalClaims") or {}).get("accessToken", [])]
    assert "idtyp" in claims, f"the access token's optional claims must include idtyp, not {claims}"

    ids: dict[str, tuple[Any, ...]] = {}
    scopes = {scope["value"]: scope for scope in api["oauth2PermissionScopes"]}
    assert set(scopes) == {USER_SCOPE, ADMIN_SCOPE}, f"delegated scopes {sorted(scopes)}"
    scope = scopes[USER_SCOPE]
    assert scope["type"] == "User" and scope["isEnabled"] is True
    assert scope["adminConsentDisplayName"] and scope["userConsentDisplayName"]
    ids[USER_SCOPE] = check_stable_id(doc, scope["id"], USER_SCOPE)
    # A user's Memory.Admin counts only with this scope, which only an administrator can consent to.
    admin = scopes[ADMIN_SCOPE]
    assert admin["type"] == "Admin" and admin["isEnabled"] is True, f"{ADMIN_SCOPE}: admin consent only"
    ids[ADMIN_SCOPE] = check_stable_id(doc, admin["id"], ADMIN_SCOPE)

    roles = app["appRoles"]
    assert isinstance(roles, list), "appRoles is a literal list"
    values = [role["value"] for role in roles]
    assert sorted(values) == sorted(ROLE_MEMBER_TYPES), (
        f"app roles {values}, expected {sorted(ROLE_MEMBER_TYPES)}"
    )
    for role in roles:
        name = role["value"]
        assert set(role["allowedMemberTypes"]) == ROLE_MEMBER_TYPES[name], f"{name}: allowed member types"
        assert role["isEnabled"] is True, f"{name} must be enabled"
        assert role["displayName"] and role["description"], f"{name}: display name and description"
        ids[name] = check_stable_id(doc, role["id"], name)
    assert len(set(ids.values())) == len(ids), "every role and the scope needs an id of its own"

    # The service principal of this registration, where roles are assigned.
    principals = list(declared({IDENTITY: doc}, "Microsoft.Graph/servicePrincipals"))
    assert len(principals) == 1, "one service principal"
    _, sp_symbol, sp = principals[0]
    assert chain(body(sp)["appId"]) == [symbol, "appId"], "the service principal is the registration's"
    assert "condition" not in sp["config"]
    assert body(sp).get("appRoleAssignmentRequired") is True, "only assigned users and apps get tokens"

    # Memory.Admin for the developer, only when one is given.
    assignments = list(declared({IDENTITY: doc}, "Microsoft.Graph/appRoleAssignedTo"))
    assert len(assignments) == 1, "one app role assignment: the developer's Memory.Admin"
    _, _, assignment = assignments[0]
    condition = assignment["config"].get("condition", {})
    assert condition.get("operator", {}).get("type") == "not", "assigned only when a developer is given"
    cfg = body(assignment)
    assert resolve(doc, cfg["principalId"]) == Param("adminUserObjectId")
    assert chain(cfg["resourceId"]) == [sp_symbol, "id"], "assigned on the API's service principal"
    admin_role = next(role for role in roles if role["value"] == ROLE_ADMIN)
    assert resolve(doc, cfg["appRoleId"]) == resolve(doc, admin_role["id"]), (
        "the role assigned is Memory.Admin"
    )
    assert param_default(doc, Param("adminUserObjectId")) == ""

    # What main.bicep reads back.
    outputs = doc["outputs"]
    assert chain(outputs["appId"]["value"]) == [symbol, "appId"]
    audience = [m.group(1) for m in INTERPOLATION.finditer(outputs["audience"]["value"])]
    assert audience == ["identifierUri", f"{symbol}.appId"], "audience: the identifier URI and the client id"
    assert outputs["scope"]["value"] == "${identifierUri}/.default"


def check_wiring(docs: dict[str, dict[str, Any]]) -> None:
    """main.bicep: the module behind createApiRegistration, the two settings from it (or empty)."""
    main = docs[MAIN]
    param = main["parameters"][OPTION]
    assert param["type"] == "bool" and param["default"] is True, f"{OPTION} is a bool, true by default"
    (module,) = local_modules(main, IDENTITY).values()
    assert module["config"].get("condition") == OPTION, f"the registration is created only if {OPTION}"
    params = body(module)["params"]
    unique = params["uniqueName"]
    assert isinstance(unique, str) and "${resourceToken}" in unique, "a unique name stable per environment"
    admin = params["adminUserObjectId"]["operator"]
    assert admin["type"] == "conditional", "Memory.Admin only for a user principal"
    assert admin["operands"]["condition"]["operator"]["operands"] == {
        "operand_1": "principalType",
        "operand_2": "User",
    }
    assert admin["operands"]["true_value"] == "principalId" and admin["operands"]["false_value"] == ""

    memory, _ = app_settings(docs)
    tenant_id = {
        "operator": {
            "type": "property_accessor",
            "operands": {"operand_1": {"function": {"type": "tenant"}}, "operand_2": "tenantId"},
        }
    }
    for name in WIRED:
        assert name not in INTENTIONALLY_UNSET, f"{name} is set by the Bicep now"
        expr = memory.get(name)
        op = expr.get("operator") if isinstance(expr, dict) else None
        assert isinstance(op, dict) and op["type"] == "conditional", f"{name}: {OPTION} ? value : ''"
        operands = op["operands"]
        assert operands["condition"] == OPTION, f"{name} depends on {OPTION}"
        assert operands["false_value"] == "", f"{name} is empty without the registration (key-only mode)"
        if name == "MEMORY_AUTH_TENANT_ID":
            assert operands["true_value"] == tenant_id, f"{name} is tenant().tenantId"
        else:
            assert chain(operands["true_value"]) == ["apiIdentity", "outputs", "audience"], (
                f"{name} is the module's audience output"
            )
        # Mirrored for azd (check_outputs in test_infra_bicep.py checks every app setting).
        assert chain(main["outputs"][name]["value"]) == ["memoryAppSettings", name]

    # Agent bindings come from an object parameter (app settings set by hand would not survive the
    # next provision, which replaces them all); its default, {}, binds nobody.
    bindings = memory.get("MEMORY_AUTH_AGENT_BINDINGS")
    function = bindings.get("function", {}) if isinstance(bindings, dict) else {}
    assert function.get("type") == "string", "MEMORY_AUTH_AGENT_BINDINGS is string(authAgentBindings)"
    (argument,) = function["parameters"].values()
    assert resolve(main, argument) == Param("authAgentBindings")
    assert main["parameters"]["authAgentBindings"]["type"] == "object"
    default = param_default(main, Param("authAgentBindings"))
    assert default == {}, "no agent is bound by default"
    assert Settings.from_env({"MEMORY_AUTH_AGENT_BINDINGS": json.dumps(default)}).agent_binding_map() == {}


def check_parameters_file(mapped: dict[str, Any], docs: dict[str, dict[str, Any]]) -> None:
    """MEMORY_CREATE_API_REGISTRATION sets the option; its inline default agrees with main.bicep."""
    main = docs[MAIN]
    assert OPTION in mapped, f"main.parameters.json does not map {OPTION}"
    match = SUBSTITUTION.fullmatch(str(mapped[OPTION]["value"]))
    assert match and match.group(1) == OPTION_ENV, f"{OPTION} comes from ${{{OPTION_ENV}}}"
    assert match.group(2) == str(param_default(main, Param(OPTION))).lower(), "same default as main.bicep"
    assert OPTION_ENV not in main["outputs"], "an output of that name would be written back into azd"


def parameters_file() -> dict[str, Any]:
    return json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))["parameters"]


def bicepconfig() -> dict[str, Any]:
    return json.loads(BICEPCONFIG.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_bicepconfig_sits_next_to_main_and_pins_the_graph_extension() -> None:
    assert (BICEPCONFIG.parent / MAIN).is_file(), "Bicep finds bicepconfig.json next to main.bicep"
    check_bicepconfig(bicepconfig(), load())


def test_registration_has_the_roles_and_the_scope_the_code_checks() -> None:
    check_registration(load())


def test_main_creates_it_behind_a_parameter_and_wires_the_settings() -> None:
    docs = load()
    check_wiring(docs)
    check_parameters_file(parameters_file(), docs)


def test_both_modes_are_valid_settings() -> None:
    """With the registration (a tenant GUID and an audience list) and without it (both empty)."""
    tenant = "00000000-0000-0000-0000-000000000000"
    audience = f"api://{tenant}/memory-core-api-abc,11111111-1111-1111-1111-111111111111"
    assert Settings.from_env({"MEMORY_AUTH_TENANT_ID": tenant, "MEMORY_AUTH_AUDIENCE": audience}).auth_enabled
    assert not Settings.from_env({"MEMORY_AUTH_TENANT_ID": "", "MEMORY_AUTH_AUDIENCE": ""}).auth_enabled


def test_identity_template_parses_with_tree_sitter_once_extension_is_set_aside() -> None:
    text = read(IDENTITY)
    assert EXTENSION_STATEMENT.findall(text) == ["microsoftGraphV1"]
    assert not syntax_tree(text).root_node.has_error
    # Another form of the statement is not set aside, and tree-sitter reports it.
    inline = text.replace("extension microsoftGraphV1", f"extension '{GRAPH_V1_REGISTRY}:1.0.0'", 1)
    assert syntax_tree(inline).root_node.has_error


def test_docs_say_how_to_turn_it_off_and_assign_roles() -> None:
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    security = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    for needle in (OPTION_ENV, "infra/app/api-identity.bicep", ROLE_AGENT, "MEMORY_AUTH_AGENT_BINDINGS"):
        assert needle in deploy, f"docs/deploy.md does not mention {needle}"
    assert OPTION_ENV in security, "docs/security.md says how to turn the registration off"


# ---- the checks bite: each one fails on a mutated copy -----------------------------------------


def role_block(role_key: str) -> str:
    """The text of one app role entry in api-identity.bicep."""
    text = read(IDENTITY)
    start = text.index(f"    {{\n      id: appRoleIds.{role_key}\n")
    end = text.index("    }\n", start) + len("    }\n")
    return text[start:end]


def test_registration_check_fails_without_a_role() -> None:
    docs = load(mutate(IDENTITY, role_block("user"), ""))
    with pytest.raises(AssertionError, match="app roles"):
        check_registration(docs)


def test_registration_check_fails_on_a_fixed_id() -> None:
    old = "agent: guid(uniqueName, 'appRole', 'Memory.Agent')"
    docs = load(mutate(IDENTITY, old, "agent: '6f2f4f0e-3a57-4bd1-9d54-2f1d1c0c2a11'"))
    assert GUID.fullmatch("6f2f4f0e-3a57-4bd1-9d54-2f1d1c0c2a11")
    with pytest.raises(AssertionError, match="guid"):
        check_registration(docs)


def test_registration_check_fails_on_an_id_borrowed_from_another_role() -> None:
    old = "user: guid(uniqueName, 'appRole', 'Memory.User')"
    docs = load(mutate(IDENTITY, old, "user: guid(uniqueName, 'appRole', 'Memory.Agent')"))
    with pytest.raises(AssertionError, match=re.escape(f"{ROLE_USER}: guid() must name {ROLE_USER}")):
        check_registration(docs)


def test_registration_check_fails_when_an_agent_role_admits_users() -> None:
    block = role_block("agent")
    docs = load(mutate(IDENTITY, block, block.replace("'Application'", "'User'")))
    with pytest.raises(AssertionError, match="member types"):
        check_registration(docs)


def test_registration_check_fails_on_another_scope() -> None:
    docs = load(mutate(IDENTITY, "value: 'Memory.ReadWrite'", "value: 'user_impersonation'"))
    with pytest.raises(AssertionError, match="delegated scope"):
        check_registration(docs)


def test_wiring_check_fails_when_the_audience_is_not_set() -> None:
    old = "MEMORY_AUTH_AUDIENCE: createApiRegistration ? apiIdentity!.outputs.audience : ''"
    docs = load(mutate(MAIN, old, "MEMORY_AUTH_AUDIENCE: ''"))
    with pytest.raises(AssertionError, match="MEMORY_AUTH_AUDIENCE"):
        check_wiring(docs)


def test_wiring_check_fails_when_the_registration_is_unconditional() -> None:
    old = "module apiIdentity './app/api-identity.bicep' = if (createApiRegistration) {"
    docs = load(mutate(MAIN, old, "module apiIdentity './app/api-identity.bicep' = {"))
    with pytest.raises(AssertionError, match=OPTION):
        check_wiring(docs)


def test_bicepconfig_check_fails_on_an_unpinned_extension() -> None:
    unpinned = {"extensions": {"microsoftGraphV1": f"{GRAPH_V1_REGISTRY}:latest"}}
    with pytest.raises(AssertionError, match="pin"):
        check_bicepconfig(unpinned, load())
    preview = {"extensions": {"microsoftGraphV1": f"{GRAPH_V1_REGISTRY}:1.1.0-preview"}}
    with pytest.raises(AssertionError, match="pin"):
        check_bicepconfig(preview, load())


def test_bicepconfig_check_fails_when_the_extension_is_not_declared() -> None:
    docs = load(mutate(IDENTITY, "extension microsoftGraphV1\n", ""))
    with pytest.raises(AssertionError, match="extension microsoftGraphV1"):
        check_bicepconfig(bicepconfig(), docs)
