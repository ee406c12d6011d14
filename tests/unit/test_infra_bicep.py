"""Offline checks over the deployment: Bicep templates, azure.yaml, local.settings.sample.json, the settings table.

Every ``.bicep`` file is parsed twice: with pycep-parser (a JSON view of parameters, variables,
resources, modules and outputs) and with tree-sitter-bicep (a syntax tree that keeps comments).
The assertions run on those parsed structures, not on raw text. Each check is a plain function that
raises ``AssertionError``; the tests at the end run some of them on mutated copies of the templates
to show that they fail when the property they guard is broken.

The app-settings checks read the list of settings from ``Settings.environment_variables()`` at test
time, so a new setting in ``memory_core/config.py`` fails these tests until the Bicep sets it (or it
is added, with a reason, to ``INTENTIONALLY_UNSET``), ``local.settings.sample.json`` has it and the
settings table of ``docs/configuration.md`` shows it.

Run this file as a script to print the settings table (``python tests/unit/test_infra_bicep.py``), or
with ``--write`` to rewrite it in ``docs/configuration.md``.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
import tree_sitter
import tree_sitter_bicep
import yaml
from pycep import BicepParser

from memory_core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
MAIN = "main.bicep"
FUNCTION = "app/function.bicep"
RBAC = "app/rbac.bicep"
SERVICEBUS = "app/servicebus.bicep"
SEARCH = "app/search.bicep"

# ---------------------------------------------------------------------------------------------
# What the deployment may and may not do
# ---------------------------------------------------------------------------------------------

# Settings memory-core reads that the Azure deployment leaves at their default on purpose.
INTENTIONALLY_UNSET = {
    # Keys are disabled on the search service (disableLocalAuth); the app uses its managed identity.
    "AZURE_SEARCH_API_KEY": "keys are disabled on the search service; Microsoft Entra ID is used",
    # Only the embedded store reads it; in Azure MEMORY_STORE=azure_search.
    "MEMORY_SQLITE_PATH": "only the embedded SQLite store uses it",
    # Only the local embedder reads it; in Azure MEMORY_EMBEDDER=azure_openai.
    "MEMORY_EMBEDDER_THREADS": "only the local embedder uses it",
    "MEMORY_QUERY_CACHE_SIZE": "the default (1024 queries per process) suits the Function App",
    "MEMORY_HEAVY_OPERATIONS": "the default (2 heavy operations per process) suits the Function App",
    # Only the embedded store reads it; in Azure, Azure AI Search does the vector search.
    "MEMORY_VECTOR_INDEX_MIN_SCOPE": "only the embedded SQLite store uses it",
    "MEMORY_SQLITE_CHECK_SECONDS": "only the embedded SQLite store and queue use it",
    # Empty selects Azure OpenAI whenever its endpoint and chat deployment are set, as they are here.
    "MEMORY_LLM_PROVIDER": "empty selects `azure`, since the endpoint and chat deployment are set",
    # OpenAI and OpenAI-compatible servers only; the deployment uses Azure OpenAI with Entra ID.
    "MEMORY_LLM_MODEL": "only the `openai` and `compatible` providers use it",
    "MEMORY_LLM_BASE_URL": "only the `openai` and `compatible` providers use it",
    "MEMORY_LLM_API_KEY": "only the `openai` and `compatible` providers use it (no keys in Azure)",
    "MEMORY_LLM_HEADERS": "no gateway headers are needed in front of Azure OpenAI",
    "MEMORY_LLM_TIMEOUT_SECONDS": "the default suits Azure OpenAI",
    "MEMORY_EMBEDDING_MODEL": "only the `openai` and `compatible` embedders use it",
    "MEMORY_EMBEDDING_DIMENSIONS": "the default is the size of the deployed text-embedding-3-small",
    # The embedded server's and the MCP server's tokens; the Function App's routes are guarded by the
    # Functions host or Entra ID.
    "MEMORY_API_TOKEN": "only `memory-core serve` uses it",
    "MEMORY_MCP_TOKEN": "only `memory-core mcp` uses it",
    # The MCP server's fixed scope; the Function App serves no MCP.
    "MEMORY_MCP_USER_ID": "only `memory-core mcp` uses it",
    "MEMORY_MCP_AGENT_ID": "only `memory-core mcp` uses it",
    # Microsoft Entra ID on the HTTP API: MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE come from the
    # API's app registration (infra/app/api-identity.bicep), MEMORY_AUTH_AUTHORITY from the cloud
    # deployed to, MEMORY_AUTH_AGENT_BINDINGS from a parameter; this one keeps its default.
    "MEMORY_AUTH_USER_ID_CLAIM": "the default `oid` is the right claim in Azure",
}

# App settings that memory-core does not read but the Functions host or its extensions do.
HOST_SETTINGS_ALLOWLIST = {
    # Identity-based host storage, blob service only (timer-trigger schedule and locks, host state).
    "AzureWebJobsStorage__blobServiceUri",
    "AzureWebJobsStorage__credential",
    "AzureWebJobsStorage__clientId",
    # The Service Bus trigger's identity-based connection "ServiceBusConnection" uses the user-assigned
    # identity. (ServiceBusConnection__fullyQualifiedNamespace is read by memory-core too: a Setting.)
    "ServiceBusConnection__credential",
    "ServiceBusConnection__clientId",
    # Microsoft Entra ID ingestion for Application Insights (local auth is disabled on the component).
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
}

# App settings that must not appear: Flex Consumption rejects the runtime/version/content settings
# (functionAppConfig carries them), and the others would bring keys or connection strings back.
FORBIDDEN_APP_SETTINGS = {
    "FUNCTIONS_WORKER_RUNTIME",
    "FUNCTIONS_EXTENSION_VERSION",
    "WEBSITE_RUN_FROM_PACKAGE",
    "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
    "WEBSITE_CONTENTSHARE",
    "AzureWebJobsStorage",
    "ServiceBusConnection",
    "AZURE_SEARCH_API_KEY",
}

# azd environment names are UPPER_SNAKE; the one setting that is not gets this output name.
OUTPUT_NAMES = {"ServiceBusConnection__fullyQualifiedNamespace": "AZURE_SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"}
# Not an output: azd hands outputs to hooks and local runs, and there AZURE_CLIENT_ID would make the
# Azure SDK try the app's managed identity instead of the developer's sign-in.
NOT_OUTPUTS = {"AZURE_CLIENT_ID"}

# Built-in role definition ids the templates may assign.
ALLOWED_ROLES = {
    "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0": "Azure Service Bus Data Receiver",
    "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39": "Azure Service Bus Data Sender",
    # Only on the turns queue (tests/unit/test_infra_roles.py): Flex Consumption's target-based
    # scaling reads the queue's length, which needs Manage rights.
    "090c5cfd-751d-490a-894a-3ce6f1109419": "Azure Service Bus Data Owner",
    "8ebe5a00-799e-43f5-93ac-243d3dce84a7": "Search Index Data Contributor",
    "7ca78c08-252a-4471-8644-bb5ff32d4ba0": "Search Service Contributor",
    "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd": "Cognitive Services OpenAI User",
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": "Storage Blob Data Owner",
    "3913510d-42f4-4e42-8a64-420c390055eb": "Monitoring Metrics Publisher",
    "974c5e8b-45b9-4653-ba55-5f855dd0fb88": "Storage Queue Data Contributor",
    "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3": "Storage Table Data Contributor",
}
FORBIDDEN_ROLES = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
}
# What the function identity (and the optional developer principal) must hold, exactly.
FUNCTION_ROLES = {
    "Azure Service Bus Data Owner",
    "Search Index Data Contributor",
    "Search Service Contributor",
    "Cognitive Services OpenAI User",
    "Storage Blob Data Owner",
    "Monitoring Metrics Publisher",
    "Storage Table Data Contributor",
}

# Resource type -> (property path, required literal value): key / shared-key / local auth off.
LOCAL_AUTH_OFF: dict[str, list[tuple[tuple[str, ...], bool]]] = {
    "Microsoft.Storage/storageAccounts": [
        (("properties", "allowSharedKeyAccess"), False),
        (("properties", "allowBlobPublicAccess"), False),
    ],
    "Microsoft.ServiceBus/namespaces": [(("properties", "disableLocalAuth"), True)],
    "Microsoft.Search/searchServices": [(("properties", "disableLocalAuth"), True)],
    "Microsoft.CognitiveServices/accounts": [(("properties", "disableLocalAuth"), True)],
    "Microsoft.Insights/components": [(("properties", "DisableLocalAuth"), True)],
    "Microsoft.OperationalInsights/workspaces": [(("properties", "features", "disableLocalAuth"), True)],
    "Microsoft.Web/sites/basicPublishingCredentialsPolicies": [(("properties", "allow"), False)],
}

# App settings whose values are known only at deployment: a stand-in of the right form, so that
# Settings validates them (the rest get an https URL).
DEPLOYMENT_STAND_INS = {
    "MEMORY_AUTH_TENANT_ID": "00000000-0000-0000-0000-000000000000",
    "MEMORY_AUTH_AUDIENCE": "api://00000000-0000-0000-0000-000000000000/memory-core-api-x,"
    "11111111-1111-1111-1111-111111111111",
    "MEMORY_AUTH_AGENT_BINDINGS": '{"22222222-2222-2222-2222-222222222222":["support-bot"]}',
}

GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
IDENT = re.compile(r"[A-Za-z_]\w*")
UPPER_SNAKE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")
INTERPOLATION = re.compile(r"\$\{\s*([A-Za-z_]\w*(?:\.\w+)*)\s*\}")
SEMVER = re.compile(r"\d+\.\d+\.\d+")

#: The registry modules the templates may use, at the versions they pin, with the parameters and
#: outputs each version declares (read from its main.bicep at that release tag in
#: Azure/bicep-registry-modules; no Bicep CLI here to restore them). A new version is added here only
#: after checking what it declares, so a renamed parameter (serverfarm's ``sku`` object became
#: ``skuName`` in 0.2.0) fails this test rather than the deployment.
REGISTRY_MODULES: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {
    ("avm/res/web/serverfarm", "0.7.0"): (
        frozenset(
            {
                "name", "location", "skuName", "skuCapacity", "kind", "reserved",
                "appServiceEnvironmentResourceId", "workerTierName", "perSiteScaling", "elasticScaleEnabled",
                "maximumElasticWorkerCount", "targetWorkerCount", "targetWorkerSize", "zoneRedundant", "hyperV",
                "virtualNetworkSubnetId", "isCustomMode", "rdpEnabled", "installScripts", "planDefaultIdentity",
                "registryAdapters", "storageMounts", "managedIdentities", "lock", "roleAssignments", "tags",
                "diagnosticSettings", "enableTelemetry",
            }
        ),
        frozenset({"resourceGroupName", "name", "resourceId", "location", "systemAssignedMIPrincipalId"}),
    ),
    ("avm/res/managed-identity/user-assigned-identity", "0.6.0"): (
        frozenset(
            {
                "name", "location", "federatedIdentityCredentials", "lock", "roleAssignments", "tags",
                "enableTelemetry", "isolationScope",
            }
        ),
        frozenset({"name", "resourceId", "principalId", "clientId", "resourceGroupName", "location"}),
    ),
}
SECRET_TEXT = re.compile(r"\blist[A-Z]\w*\(|AccountKey=|SharedAccessKey|InstrumentationKey=")

# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


@functools.cache
def _pycep() -> BicepParser:
    return BicepParser()


@functools.cache
def _tree_sitter() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bicep.language()))


# tree-sitter-bicep 1.1.0, its newest release, predates Bicep's `extension` statement (it knows only
# the older `import '...'` form), so a file that declares an extension would always show a syntax
# error. pycep-parser reads the statement (its "extensions"); for tree-sitter only the exact form
# `extension <alias>` (the alias that infra/bicepconfig.json pins to a version) is commented out,
# and the rest of the file is checked as usual. Any other form still fails to parse.
EXTENSION_STATEMENT = re.compile(r"^extension[ \t]+([A-Za-z_]\w*)[ \t]*$", re.MULTILINE)


def syntax_tree(text: str) -> tree_sitter.Tree:
    """tree-sitter's syntax tree of one template, ``extension <alias>`` statements commented out."""
    return _tree_sitter().parse(EXTENSION_STATEMENT.sub(r"// \g<0>", text).encode())


def bicep_files() -> list[str]:
    return sorted(p.relative_to(INFRA).as_posix() for p in INFRA.rglob("*.bicep"))


def read(rel: str) -> str:
    return (INFRA / rel).read_text(encoding="utf-8")


@functools.cache
def parse_text(text: str) -> dict[str, Any]:
    """pycep's JSON view of one template (cached by content; callers must not modify it)."""
    return _pycep().parse(text=text)


def load(overrides: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Every template under infra/, parsed; ``overrides`` replaces the text of some files."""
    texts = {rel: read(rel) for rel in bicep_files()}
    texts.update(overrides or {})
    return {rel: parse_text(text) for rel, text in texts.items()}


def mutate(rel: str, old: str, new: str) -> dict[str, str]:
    text = read(rel)
    assert text.count(old) == 1, f"mutation target {old!r} must occur exactly once in {rel}"
    return {rel: text.replace(old, new)}


# ---------------------------------------------------------------------------------------------
# Reading expressions in pycep's JSON
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A value that is a template parameter."""

    name: str


def chain(expr: Any) -> list[str] | None:
    """``a.b.c`` as ``['a', 'b', 'c']``; None when ``expr`` is not a plain identifier chain."""
    if isinstance(expr, str):
        return [expr] if IDENT.fullmatch(expr) else None
    if isinstance(expr, dict) and isinstance(expr.get("operator"), dict):
        op = expr["operator"]
        if op["type"] == "property_accessor":
            left = chain(op["operands"]["operand_1"])
            right = chain(op["operands"]["operand_2"])
            if left is not None and right is not None:
                return [*left, *right]
    return None


def resolve(doc: dict[str, Any], expr: Any) -> Any:
    """Follow variables (and member access into them) to a value; a parameter becomes ``Param``.

    pycep renders a string literal and an identifier alike, so a bare word that names a variable or
    a parameter of this template is read as a reference to it.
    """
    parts = chain(expr)
    if not parts:
        return expr
    head, *rest = parts
    if head in doc.get("variables", {}):
        value = resolve(doc, doc["variables"][head]["value"])
        for key in rest:
            if not isinstance(value, dict) or key not in value:
                return expr
            value = resolve(doc, value[key])
        return value
    if head in doc.get("parameters", {}) and not rest:
        return Param(head)
    return expr


def param_default(doc: dict[str, Any], value: Any) -> Any:
    return doc["parameters"][value.name]["default"] if isinstance(value, Param) else value


def decorator(doc: dict[str, Any], param: str, kind: str) -> Any:
    for dec in doc["parameters"][param]["decorators"]:
        if dec["type"] == kind:
            return dec["argument"]
    return None


def walk(obj: Any) -> Iterator[Any]:
    yield obj
    if isinstance(obj, dict):
        for value in obj.values():
            yield from walk(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from walk(value)


def key_values(obj: Any) -> Iterator[tuple[str, Any]]:
    for node in walk(obj):
        if isinstance(node, dict):
            yield from node.items()


def references(obj: Any) -> Iterator[list[str]]:
    """Identifier chains used anywhere in ``obj``, including inside ``'${...}'`` interpolations."""
    for node in walk(obj):
        parts = chain(node) if isinstance(node, dict) else None
        if parts:
            yield parts
        if isinstance(node, str):
            for match in INTERPOLATION.finditer(node):
                yield match.group(1).split(".")


def body(resource_or_module: dict[str, Any]) -> dict[str, Any]:
    """The declared object, looking through ``= if (cond) {...}``."""
    config = resource_or_module["config"]
    return config["config"] if "condition" in config else config


def get_path(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def declared(docs: dict[str, dict[str, Any]], rtype: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(file, symbol, resource) for every resource of ``rtype`` the templates create (not ``existing``)."""
    for rel, doc in docs.items():
        for symbol, res in doc.get("resources", {}).items():
            if res["type"].lower() == rtype.lower() and not res["existing"]:
                yield rel, symbol, res


def local_modules(doc: dict[str, Any], path: str) -> dict[str, dict[str, Any]]:
    return {
        symbol: mod
        for symbol, mod in doc.get("modules", {}).items()
        if mod["type"] == "local" and mod["detail"]["path"].removeprefix("./") == path
    }


def code_settings() -> set[str]:
    return set(Settings.environment_variables())


# ---------------------------------------------------------------------------------------------
# Checks (each raises AssertionError)
# ---------------------------------------------------------------------------------------------


def check_structure(docs: dict[str, dict[str, Any]]) -> None:
    """Subscription scope, one resource group, modules that exist and agree with their callers."""
    main = docs[MAIN]
    assert main["globals"]["scope"]["value"] == "subscription"
    groups = list(declared({MAIN: main}, "Microsoft.Resources/resourceGroups"))
    assert len(groups) == 1, "main.bicep creates exactly one resource group"
    group = groups[0][1]
    for rel, doc in docs.items():
        for symbol, mod in doc.get("modules", {}).items():
            cfg = body(mod)
            if rel == MAIN:
                assert cfg.get("scope") == group, f"module {symbol} deploys into the resource group"
            if mod["type"] == "local":
                target = (INFRA / Path(rel).parent / mod["detail"]["path"]).resolve()
                assert target.is_file(), f"{rel}: module {symbol} points at a missing {target.name}"
                callee = docs[target.relative_to(INFRA).as_posix()]
                passed = set(cfg.get("params", {}))
                declared_params = set(callee.get("parameters", {}))
                required = {n for n, p in callee.get("parameters", {}).items() if p["default"] is None}
                assert passed <= declared_params, f"{symbol}: unknown params {passed - declared_params}"
                assert required <= passed, f"{symbol}: required params missing {required - passed}"
            else:
                detail = mod["detail"]
                assert detail["path"].startswith("avm/res/"), f"{symbol}: registry modules are AVM"
                assert SEMVER.fullmatch(detail["tag"] or ""), f"{symbol}: pin the AVM version"
                known = REGISTRY_MODULES.get((detail["path"], detail["tag"]))
                assert known is not None, f"{symbol}: {detail['full']} is not a checked module version"
                passed = set(cfg.get("params", {}))
                assert passed <= known[0], f"{symbol}: {detail['full']} has no params {passed - known[0]}"
        # `module.outputs.x` must name an output the local module declares.
        for parts in references(doc):
            if len(parts) >= 3 and parts[1] == "outputs":
                mod = doc.get("modules", {}).get(parts[0])
                if mod is not None and mod["type"] == "local":
                    target = (INFRA / Path(rel).parent / mod["detail"]["path"]).resolve()
                    outputs = docs[target.relative_to(INFRA).as_posix()].get("outputs", {})
                    assert parts[2] in outputs, f"{rel}: {parts[0]} has no output {parts[2]}"
                elif mod is not None:
                    known = REGISTRY_MODULES.get((mod["detail"]["path"], mod["detail"]["tag"]))
                    assert known is not None and parts[2] in known[1], f"{rel}: {parts[0]} has no output {parts[2]}"


def check_abbreviations(docs: dict[str, dict[str, Any]]) -> None:
    abbrs = json.loads((INFRA / "abbreviations.json").read_text(encoding="utf-8"))
    used = {parts[1] for parts in references(docs[MAIN]) if parts[0] == "abbrs" and len(parts) == 2}
    assert used, "names are built from abbreviations.json"
    assert used <= set(abbrs), f"missing abbreviations: {used - set(abbrs)}"


def check_parameters_file(docs: dict[str, dict[str, Any]]) -> None:
    params = docs[MAIN]["parameters"]
    data = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))["parameters"]
    assert set(data) <= set(params), f"main.parameters.json sets unknown parameters {set(data) - set(params)}"
    required = {name for name, p in params.items() if p["default"] is None}
    assert required <= set(data), f"required parameters not in main.parameters.json: {required - set(data)}"
    assert data["environmentName"]["value"] == "${AZURE_ENV_NAME}"
    assert data["location"]["value"] == "${AZURE_LOCATION}"
    assert data["principalId"]["value"] == "${AZURE_PRINCIPAL_ID}"


def check_turns_queue(docs: dict[str, dict[str, Any]]) -> None:
    queues = list(declared(docs, "Microsoft.ServiceBus/namespaces/queues"))
    assert len(queues) == 1, "exactly one Service Bus queue (the turns queue)"
    rel, _, queue = queues[0]
    doc = docs[rel]
    props = queue["config"]["properties"]
    assert props.get("requiresSession") is True, "turns are processed in order per scope: sessions"
    assert props.get("requiresDuplicateDetection") is True, "a resent turn must be dropped"
    assert props.get("duplicateDetectionHistoryTimeWindow"), "set the duplicate detection window"
    assert props.get("deadLetteringOnMessageExpiration") is True
    max_delivery = resolve(doc, props.get("maxDeliveryCount"))
    default = param_default(doc, max_delivery)
    assert isinstance(default, int) and 1 <= default <= 2000, "maxDeliveryCount must be set"
    # The namespace tier must support sessions and duplicate detection (not Basic).
    namespace = doc["resources"][queue["config"]["parent"]]
    assert namespace["config"]["sku"]["name"] in {"Standard", "Premium"}
    # main.bicep passes its own parameter, whose default is the name memory-core expects.
    main = docs[MAIN]
    (module,) = local_modules(main, rel).values()
    passed = resolve(main, body(module)["params"]["queueName"])
    assert param_default(main, passed) == Settings().turns_queue
    max_passed = resolve(main, body(module)["params"]["maxDeliveryCount"])
    assert isinstance(param_default(main, max_passed), int)


def check_local_auth_disabled(docs: dict[str, dict[str, Any]]) -> None:
    for rtype, rules in LOCAL_AUTH_OFF.items():
        found = list(declared(docs, rtype))
        assert found, f"no {rtype} declared: nothing to check"
        for rel, symbol, res in found:
            for path, expected in rules:
                value = get_path(body(res), path)
                assert value is expected, f"{rel}: {symbol}.{'.'.join(path)} must be {expected}"
    for rel, symbol, res in declared(docs, "Microsoft.Search/searchServices"):
        assert "authOptions" not in body(res)["properties"], f"{rel}: {symbol} must not allow API keys"
    for rel, symbol, res in declared(docs, "Microsoft.CognitiveServices/accounts"):
        assert body(res)["properties"].get("customSubDomainName"), f"{rel}: {symbol} needs a subdomain"
    # Every site turns basic (user name + password) publishing off for both scm and ftp.
    for rel, symbol, _ in declared(docs, "Microsoft.Web/sites"):
        policies = {
            body(res)["name"]
            for _, _, res in declared(
                {rel: docs[rel]}, "Microsoft.Web/sites/basicPublishingCredentialsPolicies"
            )
            if body(res).get("parent") == symbol
        }
        assert policies == {"scm", "ftp"}, f"{rel}: {symbol} must disable basic auth for scm and ftp"
    # Nowhere (resources or module parameters) turns local auth or shared keys on, or reads keys.
    for rel, doc in docs.items():
        for key, value in key_values({k: doc.get(k, {}) for k in ("resources", "modules", "outputs")}):
            lowered = key.lower()
            if lowered == "disablelocalauth":
                assert value is True, f"{rel}: {key} must be true"
            if lowered in {"allowsharedkeyaccess", "allowblobpublicaccess"}:
                assert value is False, f"{rel}: {key} must be false"
            if lowered == "operator" and isinstance(value, dict):
                assert value.get("type") != "function_accessor", f"{rel}: no list*() key or secret reads"
            if lowered == "function" and isinstance(value, dict):
                assert not str(value.get("type", "")).startswith("list"), f"{rel}: no list*() calls"
        for node in walk({k: doc.get(k, {}) for k in ("variables", "resources", "modules", "outputs")}):
            if isinstance(node, str):
                assert not SECRET_TEXT.search(node), f"{rel}: no keys or list*() calls in strings: {node!r}"


def check_role_assignments(docs: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Every role assignment: an allowed role, named guid(scope.id, principal, role), resource scope."""
    found = []
    for rel, symbol, res in declared(docs, "Microsoft.Authorization/roleAssignments"):
        doc = docs[rel]
        cfg = body(res)
        role_def = cfg["properties"]["roleDefinitionId"]["function"]
        assert role_def["type"] == "subscription_resource_id", f"{symbol}: use subscriptionResourceId(...)"
        assert role_def["parameters"]["resource_type"] == "Microsoft.Authorization/roleDefinitions"
        role = resolve(doc, role_def["parameters"]["resource_name_1"])
        assert isinstance(role, str) and GUID.fullmatch(role), f"{symbol}: role id must be a literal GUID"
        assert role not in FORBIDDEN_ROLES, f"{symbol}: {FORBIDDEN_ROLES.get(role)} is not least privilege"
        assert role in ALLOWED_ROLES, f"{symbol}: role {role} is not in the allowed set"
        scope = cfg.get("scope")
        assert scope in doc["resources"], f"{symbol}: scope it to one resource, not a group or subscription"
        name = cfg["name"]["function"] if isinstance(cfg["name"], dict) else {}
        assert name.get("type") == "guid", f"{symbol}: name it guid(scope, principal, role)"
        args = [v for v in name["parameters"].values() if v is not None]
        assert len(args) == 3, f"{symbol}: guid(scope.id, principalId, roleId)"
        assert chain(args[0]) == [scope, "id"], f"{symbol}: the guid starts with the scope's id"
        assert args[1] == cfg["properties"]["principalId"], f"{symbol}: the guid includes the principal"
        assert resolve(doc, args[2]) == role, f"{symbol}: the guid includes the role id"
        found.append((rel, symbol, role))
    assert found, "no role assignments found"
    # Registry modules can create role assignments of their own; none may be passed any.
    for rel, doc in docs.items():
        for symbol, mod in doc.get("modules", {}).items():
            if mod["type"] != "local":
                assert "roleAssignments" not in body(mod).get("params", {}), f"{rel}: {symbol} assigns roles"
    return found


def check_role_comments(docs: dict[str, dict[str, Any]]) -> None:
    """The comment right above each role assignment names its role (tree-sitter keeps comments)."""
    for rel, symbol, role in check_role_assignments(docs):
        tree = syntax_tree(read(rel))
        decls = [
            node
            for node in tree.root_node.named_children
            if node.type == "resource_declaration" and node.named_children[0].text.decode() == symbol
        ]
        assert len(decls) == 1, f"{rel}: {symbol} not found by tree-sitter"
        comments = []
        node = decls[0].prev_named_sibling
        while node is not None and node.type == "comment":
            comments.append(node.text.decode())
            node = node.prev_named_sibling
        assert ALLOWED_ROLES[role] in " ".join(comments), f"{rel}: comment {symbol} with its role"


def check_function_roles(docs: dict[str, dict[str, Any]]) -> None:
    """The function identity gets exactly FUNCTION_ROLES; the developer the same, only if given."""
    roles = {ALLOWED_ROLES[role] for rel, _, role in check_role_assignments(docs) if rel == RBAC}
    assert roles == FUNCTION_ROLES, f"rbac.bicep roles differ: {roles ^ FUNCTION_ROLES}"
    main = docs[MAIN]
    calls = local_modules(main, RBAC)
    function_calls = [
        m
        for m in calls.values()
        if chain(body(m)["params"]["principalId"]) == ["functionIdentity", "outputs", "principalId"]
    ]
    assert len(function_calls) == 1 and "condition" not in function_calls[0]["config"]
    assert body(function_calls[0])["params"]["principalType"] == "ServicePrincipal"
    developer = [m for m in calls.values() if body(m)["params"]["principalId"] == "principalId"]
    assert len(developer) == 1, "one optional role set for the developer principal"
    condition = developer[0]["config"].get("condition", {})
    assert condition.get("operator", {}).get("type") == "not", "developer roles only when principalId is set"


def check_function_app(docs: dict[str, dict[str, Any]]) -> None:
    fn = docs[FUNCTION]
    ((_, site_symbol, site),) = declared({FUNCTION: fn}, "Microsoft.Web/sites")
    cfg = body(site)
    assert cfg["kind"] == "functionapp,linux"
    assert cfg["identity"]["type"] == "UserAssigned"
    assert cfg["properties"]["httpsOnly"] is True
    fac = cfg["properties"]["functionAppConfig"]
    assert fac["runtime"]["name"] == "python"
    version = resolve(fn, fac["runtime"]["version"])
    assert isinstance(version, Param)
    assert set(decorator(fn, version.name, "allowed")) <= {"3.11", "3.12"}
    storage = fac["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["authentication"]["type"] == "UserAssignedIdentity"
    assert fac["scaleAndConcurrency"]["maximumInstanceCount"]
    main = docs[MAIN]
    ((_, plan),) = [
        (s, m) for s, m in main["modules"].items() if m["detail"]["path"] == "avm/res/web/serverfarm"
    ]
    assert body(plan)["params"]["skuName"] == "FC1"  # the module sets the FlexConsumption tier itself
    assert body(plan)["params"]["reserved"] is True
    ((_, fn_module),) = local_modules(main, FUNCTION).items()
    assert chain(body(fn_module)["params"]["planId"]) == ["plan", "outputs", "resourceId"]
    assert param_default(main, resolve(main, body(fn_module)["params"]["pythonVersion"])) in {"3.11", "3.12"}
    assert site_symbol


def check_search_and_openai(docs: dict[str, dict[str, Any]]) -> None:
    main = docs[MAIN]
    ((rel, _, search),) = declared(docs, "Microsoft.Search/searchServices")
    doc = docs[rel]
    sku = resolve(doc, body(search)["sku"]["name"])
    assert "free" not in set(decorator(doc, sku.name, "allowed")), "the semantic ranker needs basic or higher"
    semantic = resolve(doc, body(search)["properties"]["semanticSearch"])
    assert set(decorator(doc, semantic.name, "allowed")) <= {"free", "standard"}
    assert param_default(main, Param("searchSku")) in decorator(doc, sku.name, "allowed")
    assert param_default(main, Param("searchSemanticSearch")) in {"free", "standard"}
    deployments = list(declared(docs, "Microsoft.CognitiveServices/accounts/deployments"))
    assert len(deployments) == 2, "a chat deployment and an embedding deployment"
    (openai_module,) = local_modules(main, deployments[0][0]).values()
    params = body(openai_module)["params"]
    for kind in ("chat", "embedding"):
        for field in ("DeploymentName", "ModelName", "ModelVersion", "DeploymentSku", "DeploymentCapacity"):
            value = param_default(main, resolve(main, params[f"{kind}{field}"]))
            assert value not in (None, ""), f"{kind}{field} needs a default"
    names = {param_default(main, resolve(main, params[f"{k}DeploymentName"])) for k in ("chat", "embedding")}
    assert len(names) == 2
    # A deployment is named after its model.
    assert param_default(main, Param("embeddingDeploymentName")) == param_default(
        main, Param("embeddingModelName")
    )
    # The index has no vectorizer (queries bring their vectors), so the search service calls nothing:
    # it has no managed identity, and no role is granted to it.
    identity = body(search).get("identity", {}).get("type", "None")
    assert identity == "None", "the search service needs no identity (no vectorizer)"
    assert "principalId" not in docs[rel].get("outputs", {}), "the search service has no identity"
    for rel_, _, res in declared(docs, "Microsoft.Authorization/roleAssignments"):
        principal = json.dumps(body(res)["properties"]["principalId"])
        assert "search" not in principal.lower(), f"{rel_}: a role for the search service's identity"


def app_settings(docs: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(memory-core settings from main.bicep, host settings from function.bicep)."""
    return (
        docs[MAIN]["variables"]["memoryAppSettings"]["value"],
        docs[FUNCTION]["variables"]["hostSettings"]["value"],
    )


def check_app_settings(docs: dict[str, dict[str, Any]], code: set[str] | None = None) -> None:
    """Every setting the code reads is set, and nothing is set that neither the code nor the host reads."""
    code = code_settings() if code is None else code
    memory, host = app_settings(docs)
    main, fn = docs[MAIN], docs[FUNCTION]
    # The two objects really are the Function App's app settings.
    ((_, fn_module),) = local_modules(main, FUNCTION).items()
    assert body(fn_module)["params"]["appSettings"] == "memoryAppSettings"
    configs = [
        res
        for _, _, res in declared({FUNCTION: fn}, "Microsoft.Web/sites/config")
        if body(res)["name"] == "appsettings"
    ]
    assert len(configs) == 1, "one appsettings resource"
    merged = body(configs[0])["properties"]["function"]
    assert merged["type"] == "union" and list(merged["parameters"].values()) == [
        "hostSettings",
        "appSettings",
    ]

    stale = INTENTIONALLY_UNSET.keys() - code
    assert not stale, f"INTENTIONALLY_UNSET names settings the code no longer reads: {sorted(stale)}"
    missing = code - INTENTIONALLY_UNSET.keys() - memory.keys()
    assert not missing, f"settings the code reads but the Bicep does not set: {sorted(missing)}"
    unknown = memory.keys() - code
    assert not unknown, f"memoryAppSettings sets what the code does not read: {sorted(unknown)}"
    unset_but_set = INTENTIONALLY_UNSET.keys() & memory.keys()
    assert not unset_but_set, f"set although listed as intentionally unset: {sorted(unset_but_set)}"
    not_allowed = host.keys() - HOST_SETTINGS_ALLOWLIST
    assert not not_allowed, f"host settings outside the allowlist: {sorted(not_allowed)}"
    assert not host.keys() & code, "a setting the code reads belongs in memoryAppSettings"
    forbidden = (memory.keys() | host.keys()) & FORBIDDEN_APP_SETTINGS
    assert not forbidden, f"forbidden app settings: {sorted(forbidden)}"

    # Azure mode, identity-based connections.
    assert memory["MEMORY_STORE"] == "azure_search"
    assert memory["MEMORY_EMBEDDER"] == "azure_openai"
    assert chain(memory["AZURE_CLIENT_ID"]) == ["functionIdentity", "outputs", "clientId"]
    assert chain(body(fn_module)["params"]["identityClientId"]) == ["functionIdentity", "outputs", "clientId"]
    for prefix in ("AzureWebJobsStorage", "ServiceBusConnection"):
        assert host[f"{prefix}__credential"] == "managedidentity"
        assert resolve(fn, host[f"{prefix}__clientId"]) == Param("identityClientId")
    assert "Authorization=AAD" in host["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"]

    # The values make a valid Settings, and parameter defaults equal the code's defaults.
    env = {}
    for name, expr in memory.items():
        ref = resolve(main, expr)
        value = param_default(main, ref)
        if isinstance(ref, Param):
            assert isinstance(value, str), f"{name}: app settings are strings (parameter {ref.name})"
        # Literals and parameter defaults as written; values known only at deployment get a stand-in.
        env[name] = (
            value if isinstance(value, str) else DEPLOYMENT_STAND_INS.get(name, "https://runtime.example")
        )
    Settings.from_env(env)
    defaults = Settings()
    for name, expr in memory.items():
        ref = resolve(main, expr)
        if isinstance(ref, Param):
            field = next(f.name for f in fields(Settings) if f.metadata["env"] == name)
            from_bicep = getattr(Settings.from_env({name: param_default(main, ref)}), field)
            assert from_bicep == getattr(defaults, field), (
                f"{ref.name} default differs from Settings ({name})"
            )


def check_outputs(docs: dict[str, dict[str, Any]]) -> None:
    """UPPER_SNAKE outputs for azd that mirror the app settings (hooks and local runs read them)."""
    main = docs[MAIN]
    outputs = main["outputs"]
    memory, _ = app_settings(docs)
    for name in outputs:
        assert UPPER_SNAKE.fullmatch(name), f"output {name} is not UPPER_SNAKE"
        assert not re.search(r"KEY|SECRET|PASSWORD", name), f"output {name} looks like a secret"
    for name in memory:
        if name in NOT_OUTPUTS:
            assert name not in outputs, f"{name} must not be an output"
            continue
        out = OUTPUT_NAMES.get(name, name)
        assert out in outputs, f"no output {out} for app setting {name}"
        assert chain(outputs[out]["value"]) == ["memoryAppSettings", name], f"{out} must mirror {name}"
    service = resolve(main, "serviceName")
    assert f"SERVICE_{service.upper()}_NAME" in outputs
    assert {"AZURE_LOCATION", "AZURE_TENANT_ID", "AZURE_RESOURCE_GROUP"} <= set(outputs)


def check_azure_yaml(docs: dict[str, dict[str, Any]]) -> None:
    data = yaml.safe_load((ROOT / "azure.yaml").read_text(encoding="utf-8"))
    assert data["infra"]["path"] == "infra" and (ROOT / data["infra"]["path"] / "main.bicep").is_file()
    (service_name, service) = next(iter(data["services"].items()))
    assert len(data["services"]) == 1, "one Python function service"
    assert service_name == resolve(docs[MAIN], "serviceName"), "azure.yaml service = azd-service-name tag"
    assert service["language"] == "python" and service["host"] == "function"
    assert (ROOT / service["project"]).resolve() == ROOT
    hook = data["hooks"]["postprovision"]
    assert hook["posix"]["shell"] == "sh" and hook["windows"]["shell"] == "pwsh"
    for platform in ("posix", "windows"):
        assert "memory-core index ensure" in hook[platform]["run"]
        assert hook[platform].get("continueOnError") is False


def check_local_settings(code: set[str] | None = None, docs: dict[str, dict[str, Any]] | None = None) -> None:
    """The Core Tools sample: Azurite for host storage, every setting, the deployed configuration."""
    code = code_settings() if code is None else code
    docs = load() if docs is None else docs
    data = json.loads((ROOT / "local.settings.sample.json").read_text(encoding="utf-8"))
    values = data["Values"]
    assert data["IsEncrypted"] is False
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"
    assert values["FUNCTIONS_WORKER_RUNTIME"] == "python"
    extra = values.keys() - code - {"AzureWebJobsStorage", "FUNCTIONS_WORKER_RUNTIME"}
    assert not extra, f"local.settings.sample.json sets what the code does not read: {sorted(extra)}"
    missing = code - values.keys()
    assert not missing, f"local.settings.sample.json lacks {sorted(missing)}"
    assert all(isinstance(v, str) for v in values.values())
    assert values["AZURE_SEARCH_API_KEY"] == "", "no keys in the sample"
    assert values["AZURE_CLIENT_ID"] == "", "locally the developer's own credential is used"
    # Same choices as the deployment (it runs against the deployed resources), same tunable defaults.
    main = docs[MAIN]
    memory, _ = app_settings(docs)
    for name, expr in memory.items():
        value = param_default(main, resolve(main, expr))
        if isinstance(value, str) and name in values:
            assert values[name] == value, (
                f"local.settings.sample.json {name}={values[name]!r}, Bicep {value!r}"
            )
    # Filled in from `azd env get-values`, the sample is a valid configuration.
    filled = {k: v or "https://filled-from-azd.example" for k, v in values.items() if k in code}
    filled["AZURE_SEARCH_API_KEY"] = ""
    filled["AZURE_CLIENT_ID"] = ""
    filled["MEMORY_API_TOKEN"] = filled["MEMORY_MCP_TOKEN"] = ""  # the embedded servers' own, not azd's
    # Microsoft Entra ID on the HTTP API: azd fills in a tenant GUID, an audience list, the authority
    # and the agent bindings (the first two empty without the app registration); the sample keeps its
    # own values (no tenant and audience: the key-only mode).
    filled.update({k: values[k] for k in filled if k.startswith("MEMORY_AUTH_")})
    Settings.from_env(filled)


def render_settings_table(docs: dict[str, dict[str, Any]] | None = None) -> str:
    """The settings table of docs/configuration.md, from Settings and the Bicep app settings."""
    docs = load() if docs is None else docs
    main = docs[MAIN]
    memory, _ = app_settings(docs)
    lines = [
        "| Setting | Default | What it does | Where Azure sets it |",
        "|---|---|---|---|",
    ]
    for f in fields(Settings):
        name = f.metadata["env"]
        default = f"`{f.default}`" if f.default != "" else "(empty)"
        lines.append(f"| `{name}` | {default} | {f.metadata['doc']} | {azure_source(main, memory, name)} |")
    return "\n".join(lines)


def azure_source(main: dict[str, Any], memory: dict[str, Any], name: str) -> str:
    if name in INTENTIONALLY_UNSET:
        return f"not set: {INTENTIONALLY_UNSET[name]}"
    if name not in memory:
        return "MISSING"
    out = "" if name in NOT_OUTPUTS else f"; azd output `{OUTPUT_NAMES.get(name, name)}`"
    return describe_value(main, memory[name]) + out


def describe_value(main: dict[str, Any], expr: Any) -> str:
    """Where an app setting's value comes from, in words (a parameter, a module output, a condition)."""
    op = expr.get("operator") if isinstance(expr, dict) else None
    if isinstance(op, dict) and op["type"] == "conditional":
        operands = op["operands"]
        cond = resolve(main, operands["condition"])
        when = (
            f"parameter `{cond.name}` (default `{str(param_default(main, cond)).lower()}`)"
            if isinstance(cond, Param)
            else f"`{cond}`"
        )
        otherwise = operands["false_value"]
        otherwise_text = "empty" if otherwise == "" else describe_value(main, otherwise)
        return f"{describe_value(main, operands['true_value'])} if {when}, else {otherwise_text}"
    if isinstance(op, dict) and op["type"] == "property_accessor":
        target, member = op["operands"]["operand_1"], op["operands"]["operand_2"]
        function = target.get("function") if isinstance(target, dict) else None
        members = chain(member)
        if isinstance(function, dict) and not function.get("parameters") and members:
            return f"`{function['type']}().{'.'.join(members)}`"
    function = expr.get("function") if isinstance(expr, dict) else None
    if isinstance(function, dict) and function["type"] == "string":
        (argument,) = [v for v in function.get("parameters", {}).values() if v is not None]
        param = resolve(main, argument)
        if isinstance(param, Param):
            default = json.dumps(param_default(main, param), separators=(",", ":"))
            return f"parameter `{param.name}` as JSON (default `{default}`)"
    value = resolve(main, expr)
    if isinstance(value, Param):
        return f"parameter `{value.name}` (default `{param_default(main, value)}`)"
    parts = chain(expr)
    if parts and len(parts) == 3 and parts[1] == "outputs":
        detail = main["modules"][parts[0]]["detail"]
        where = f"infra/{detail['path'].removeprefix('./')}" if "tag" not in detail else detail["path"]
        return f"output `{parts[2]}` of `{where}`"
    return f"`{value}`"


#: The page that holds the settings table, between these two markers.
SETTINGS_PAGE = ROOT / "docs" / "configuration.md"
SETTINGS_START, SETTINGS_END = "<!-- BEGIN settings -->", "<!-- END settings -->"


def check_settings_page(page: str, docs: dict[str, dict[str, Any]]) -> None:
    start, end = SETTINGS_START, SETTINGS_END
    assert page.count(start) == 1 and page.count(end) == 1, "docs/configuration.md has no settings markers"
    block = page.split(start, 1)[1].split(end, 1)[0]
    assert "## Settings" in block
    table = [line.strip() for line in block.splitlines() if line.strip().startswith("|")]
    expected = render_settings_table(docs).splitlines()
    assert table == expected, (
        "the settings table of docs/configuration.md is out of date; regenerate it with "
        "python tests/unit/test_infra_bicep.py --write"
    )


def write_settings_page() -> None:
    """Rewrite the table between the markers of docs/configuration.md (the text around it is kept)."""
    page = SETTINGS_PAGE.read_text(encoding="utf-8")
    before, rest = page.split(SETTINGS_START, 1)
    block, after = rest.split(SETTINGS_END, 1)
    kept = [line for line in block.splitlines() if not line.strip().startswith("|")]
    while kept and not kept[-1].strip():
        kept.pop()
    new_block = "\n".join(kept) + "\n\n" + render_settings_table() + "\n"
    SETTINGS_PAGE.write_text(before + SETTINGS_START + new_block + SETTINGS_END + after, encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_the_templates_are_there() -> None:
    files = bicep_files()
    assert MAIN in files and {FUNCTION, RBAC, SERVICEBUS, SEARCH} <= set(files)


@pytest.mark.parametrize("rel", bicep_files())
def test_every_bicep_file_parses_with_pycep(rel: str) -> None:
    doc = parse_text(read(rel))
    assert doc.get("resources") or doc.get("modules")


@pytest.mark.parametrize("rel", bicep_files())
def test_every_bicep_file_parses_with_tree_sitter(rel: str) -> None:
    tree = syntax_tree(read(rel))
    assert not tree.root_node.has_error, f"{rel} has syntax errors"


def test_tree_sitter_reports_broken_bicep() -> None:
    broken = read(SERVICEBUS).replace("resource turnsQueue", "resource turnsQueue {", 1)
    assert _tree_sitter().parse(broken.encode()).root_node.has_error


def test_structure_modules_and_parameters() -> None:
    docs = load()
    check_structure(docs)
    check_abbreviations(docs)
    check_parameters_file(docs)


def test_turns_queue_requires_sessions_and_duplicate_detection() -> None:
    check_turns_queue(load())


def test_no_shared_key_or_local_auth() -> None:
    check_local_auth_disabled(load())


def test_role_assignments_are_least_privilege_and_named_with_guid() -> None:
    docs = load()
    check_role_assignments(docs)
    check_role_comments(docs)
    check_function_roles(docs)


def test_function_app_is_flex_consumption_python_with_identity() -> None:
    check_function_app(load())


def test_search_tier_and_openai_deployments() -> None:
    check_search_and_openai(load())


def test_app_settings_match_what_the_code_reads_both_ways() -> None:
    check_app_settings(load())


def test_outputs_mirror_the_app_settings_for_azd() -> None:
    check_outputs(load())


def test_azure_yaml() -> None:
    check_azure_yaml(load())


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_postprovision_posix_hook_is_valid_shell() -> None:
    data = yaml.safe_load((ROOT / "azure.yaml").read_text(encoding="utf-8"))
    script = data["hooks"]["postprovision"]["posix"]["run"]
    result = subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True, check=False)
    assert result.returncode == 0, result.stderr


def test_local_settings_sample_has_every_setting() -> None:
    check_local_settings()


def test_settings_table_agrees() -> None:
    check_settings_page(SETTINGS_PAGE.read_text(encoding="utf-8"), load())


# ---- the checks bite: each one fails on a mutated copy -----------------------------------------


def test_structure_check_fails_on_a_parameter_the_registry_module_does_not_declare() -> None:
    old, new = "    skuName: 'FC1'\n", "    sku: {\n      name: 'FC1'\n      tier: 'FlexConsumption'\n    }\n"
    with pytest.raises(AssertionError, match="has no params"):
        check_structure(load(mutate(MAIN, old, new)))
    with pytest.raises(AssertionError, match="not a checked module version"):
        check_structure(load(mutate(MAIN, "avm/res/web/serverfarm:0.7.0", "avm/res/web/serverfarm:0.1.1")))
    with pytest.raises(AssertionError, match="has no output"):
        check_structure(load(mutate(MAIN, "plan.outputs.resourceId", "plan.outputs.id")))


def test_queue_check_fails_without_sessions() -> None:
    docs = load(mutate(SERVICEBUS, "requiresSession: true", "requiresSession: false"))
    with pytest.raises(AssertionError, match="sessions"):
        check_turns_queue(docs)


def test_search_check_fails_when_the_search_service_gets_an_identity() -> None:
    old, new = "    type: 'None'", "    type: 'SystemAssigned'"
    with pytest.raises(AssertionError, match="no identity"):
        check_search_and_openai(load(mutate(SEARCH, old, new)))


def test_local_auth_check_fails_when_search_keys_are_enabled() -> None:
    docs = load(mutate(SEARCH, "disableLocalAuth: true", "disableLocalAuth: false"))
    with pytest.raises(AssertionError, match="disableLocalAuth"):
        check_local_auth_disabled(docs)


def test_local_auth_check_fails_on_a_key_read() -> None:
    old = "output name string = storage.name\n"
    new = old + "output key string = '${storage.listKeys().keys[0].value}'\n"
    with pytest.raises(AssertionError, match="no keys"):
        check_local_auth_disabled(load(mutate("app/storage.bicep", old, new)))


def test_role_check_fails_on_contributor() -> None:
    openai_user = "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd"
    contributor = "b24988ac-6180-42a0-ab88-20f7382dd24c"
    docs = load(mutate(RBAC, f"openAiUser: '{openai_user}'", f"openAiUser: '{contributor}'"))
    with pytest.raises(AssertionError, match="Contributor is not least privilege"):
        check_role_assignments(docs)


def test_role_check_fails_on_a_fixed_name() -> None:
    old = "name: guid(search.id, principalId, roles.searchServiceContributor)"
    docs = load(mutate(RBAC, old, "name: 'search-contributor'"))
    with pytest.raises(AssertionError, match="guid"):
        check_role_assignments(docs)


def test_app_settings_check_fails_on_a_missing_setting() -> None:
    docs = load(mutate(MAIN, "  MEMORY_TURNS_QUEUE: serviceBus.outputs.queueName\n", ""))
    with pytest.raises(AssertionError, match="MEMORY_TURNS_QUEUE"):
        check_app_settings(docs)


def test_app_settings_check_fails_on_an_unknown_setting() -> None:
    docs = load(
        mutate(MAIN, "  MEMORY_STORE: 'azure_search'\n", "  MEMORY_STORE: 'azure_search'\n  MEMORY_X: 'x'\n")
    )
    with pytest.raises(AssertionError, match="MEMORY_X"):
        check_app_settings(docs)


def test_a_new_setting_in_the_code_fails_until_deployed() -> None:
    new = code_settings() | {"MEMORY_SOMETHING_NEW"}
    with pytest.raises(AssertionError, match="MEMORY_SOMETHING_NEW"):
        check_app_settings(load(), code=new)
    with pytest.raises(AssertionError, match="MEMORY_SOMETHING_NEW"):
        check_local_settings(code=new)


def test_settings_check_fails_on_a_stale_table() -> None:
    page = SETTINGS_PAGE.read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `MEMORY_TURNS_QUEUE`"))
    with pytest.raises(AssertionError, match="out of date"):
        check_settings_page(page.replace(row + "\n", ""), load())


if __name__ == "__main__":
    import sys

    if "--write" in sys.argv[1:]:
        write_settings_page()
    else:
        print(render_settings_table())
