"""Least privilege, checked: the roles ``infra/app/rbac.bicep`` grants agree with the role table of
``docs/deploy.md``, and the Function App's identity holds no control-plane role on Azure AI Search
(Search Service Contributor could delete or redefine the index; only the developer who runs the
postprovision hook's ``memory-core index ensure`` gets it), and Azure Service Bus Data Owner (which
Flex Consumption's target-based scaling needs to read the queue's length) is granted on the turns queue
alone, never the namespace, with no redundant Receiver / Sender assignments beside it."""

from __future__ import annotations

from typing import Any

import pytest
from test_infra_bicep import (
    ALLOWED_ROLES,
    MAIN,
    RBAC,
    ROOT,
    body,
    chain,
    declared,
    load,
    local_modules,
    mutate,
    resolve,
)

SEARCH_SERVICE_CONTRIBUTOR = "Search Service Contributor"
SERVICE_BUS_DATA_OWNER = "Azure Service Bus Data Owner"
#: The resource a role is scoped to, as the docs' table names it.
SCOPE_NAMES = {
    "turnsQueue": "turns queue",
    "serviceBus": "Service Bus namespace",
    "search": "search service",
    "openAi": "OpenAI account",
    "storage": "storage account",
    "applicationInsights": "Application Insights",
}


def granted(docs: dict[str, dict[str, Any]]) -> dict[tuple[str, str], str]:
    """``(role, scope) -> who`` from the Bicep: every role of rbac.bicep, and whether the app's identity
    and the developer get it (a role behind ``manageSearchIndex`` goes to whoever the caller sets it for)."""
    main = docs[MAIN]
    calls = local_modules(main, RBAC)
    app_call = next(
        m
        for m in calls.values()
        if chain(body(m)["params"]["principalId"]) == ["functionIdentity", "outputs", "principalId"]
    )
    developer_call = next(m for m in calls.values() if body(m)["params"]["principalId"] == "principalId")
    out: dict[tuple[str, str], str] = {}
    for rel, _, res in declared(docs, "Microsoft.Authorization/roleAssignments"):
        if rel != RBAC:
            continue
        cfg = body(res)
        role_id = resolve(
            docs[rel], cfg["properties"]["roleDefinitionId"]["function"]["parameters"]["resource_name_1"]
        )
        condition = res["config"].get("condition")
        if condition is None:
            who = {"app", "developer"}
        else:
            assert condition == "manageSearchIndex", f"unexpected condition {condition!r}"
            who = {
                name
                for name, call in (("app", app_call), ("developer", developer_call))
                if body(call)["params"].get("manageSearchIndex") is True
            }
        out[(ALLOWED_ROLES[role_id], SCOPE_NAMES[cfg["scope"]])] = (
            "app and developer" if who == {"app", "developer"} else f"{' and '.join(sorted(who))} only"
        )
    return out


def documented() -> dict[tuple[str, str], str]:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    block = text.split("| Role | Scope | Who | Why |", 1)[1]
    rows = {}
    for line in block.splitlines()[2:]:
        if not line.startswith("|"):
            break
        role, scope, who, _ = (cell.strip() for cell in line.strip("|").split("|", 3))
        rows[(role, scope)] = who
    return rows


def test_the_docs_role_table_is_what_the_bicep_grants() -> None:
    assert documented() == granted(load())


def test_the_app_identity_holds_no_control_plane_role_on_search() -> None:
    grants = granted(load())
    assert grants[(SEARCH_SERVICE_CONTRIBUTOR, "search service")] == "developer only"
    app_roles = {role for (role, _), who in grants.items() if who.startswith("app")}
    assert "Search Index Data Contributor" in app_roles and SEARCH_SERVICE_CONTRIBUTOR not in app_roles


def test_granting_the_index_role_to_the_app_fails() -> None:
    docs = load(
        mutate(
            MAIN,
            "principalType: 'ServicePrincipal'\n",
            "principalType: 'ServicePrincipal'\n    manageSearchIndex: true\n",
        )
    )
    assert granted(docs)[(SEARCH_SERVICE_CONTRIBUTOR, "search service")] == "app and developer"
    assert documented() != granted(docs)


def test_an_unconditional_index_role_fails() -> None:
    docs = load(mutate(RBAC, "= if (manageSearchIndex) {", "= {"))
    assert granted(docs)[(SEARCH_SERVICE_CONTRIBUTOR, "search service")] == "app and developer"
    assert documented() != granted(docs)


def check_service_bus_owner(grants: dict[tuple[str, str], str]) -> None:
    """Data Owner on the turns queue only, for the app; no Receiver or Sender beside it (Owner has both)."""
    scopes = {scope for role, scope in grants if role == SERVICE_BUS_DATA_OWNER}
    assert scopes == {"turns queue"}, f"{SERVICE_BUS_DATA_OWNER} must be on the turns queue only, not {scopes}"
    assert grants[(SERVICE_BUS_DATA_OWNER, "turns queue")].startswith("app")
    redundant = {
        role for role, _ in grants if role.startswith("Azure Service Bus Data ") and role != SERVICE_BUS_DATA_OWNER
    }
    assert not redundant, f"{redundant}: Data Owner already grants send and receive"


def test_the_app_owns_the_turns_queue_only_for_target_based_scaling() -> None:
    check_service_bus_owner(granted(load()))


def test_data_owner_on_the_namespace_fails() -> None:
    docs = load(
        mutate(
            RBAC,
            "  name: guid(turnsQueue.id, principalId, roles.serviceBusDataOwner)\n  scope: turnsQueue\n",
            "  name: guid(serviceBus.id, principalId, roles.serviceBusDataOwner)\n  scope: serviceBus\n",
        )
    )
    grants = granted(docs)
    assert (SERVICE_BUS_DATA_OWNER, "Service Bus namespace") in grants
    with pytest.raises(AssertionError, match="turns queue only"):
        check_service_bus_owner(grants)
    assert documented() != grants


def test_a_redundant_sender_beside_the_owner_fails() -> None:
    sender = (
        "\n// Azure Service Bus Data Sender, on the turns queue.\n"
        "resource turnsQueueSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {\n"
        "  name: guid(turnsQueue.id, principalId, '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39')\n"
        "  scope: turnsQueue\n"
        "  properties: {\n"
        "    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', "
        "'69a216fc-b8fb-44d8-bc22-1f3c2cd27a39')\n"
        "    principalId: principalId\n"
        "    principalType: principalType\n"
        "  }\n"
        "}\n"
    )
    anchor = "// Search Index Data Contributor: read, write and delete memory documents.\n"
    docs = load(mutate(RBAC, anchor, sender + "\n" + anchor))
    with pytest.raises(AssertionError, match="already grants"):
        check_service_bus_owner(granted(docs))
