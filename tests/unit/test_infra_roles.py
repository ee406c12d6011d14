"""Least privilege, checked: the roles ``infra/app/rbac.bicep`` grants agree with the role table of
``docs/deploy.md``, and the Function App's identity holds no control-plane role on Azure AI Search
(Search Service Contributor could delete or redefine the index; only the developer who runs the
postprovision hook's ``memory-core index ensure`` gets it)."""

from __future__ import annotations

from typing import Any

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
#: The resource a role is scoped to, as the docs' table names it.
SCOPE_NAMES = {
    "turnsQueue": "turns queue",
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
