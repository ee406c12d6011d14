"""Offline checks of the Azure OpenAI models the deployment names by default.

``infra/model-retirements.json`` lists, with its source and the day it was checked, the retirement
date of every model version a default in ``infra/main.bicep`` may name. These tests fail when a default
chat or embedding model is not in that list, is listed as Deprecated or Retired (no new deployments),
or has reached its retirement date by ``date.today()``: the day a default expires, this file says so,
and the default must move to a current model (refresh the list from its source first).

They also check that the model, version, deployment type and capacity are parameters with defaults
and descriptions, that they reach the deployments in ``infra/app/openai.bicep``, that
``infra/main.parameters.json`` maps them to azd environment values, and that the API version the app
gets is the v1 API. The templates are parsed with the helpers of ``test_infra_bicep.py``; the tests at
the end run the checks on mutated copies to show that they fail.
"""

from __future__ import annotations

import json
import re
import warnings
from datetime import date, timedelta
from typing import Any

import pytest
from test_infra_bicep import (
    INFRA,
    MAIN,
    Param,
    body,
    code_settings,
    decorator,
    load,
    local_modules,
    mutate,
    param_default,
    resolve,
)

OPENAI = "app/openai.bicep"
RETIREMENTS = INFRA / "model-retirements.json"
PARAMETERS = INFRA / "main.parameters.json"
USES = ("chat", "embedding")
# Per use: the openai.bicep parameter behind each part of the deployment resource.
DEPLOYMENT_FIELDS = {
    ("name",): "DeploymentName",
    ("properties", "model", "name"): "ModelName",
    ("properties", "model", "version"): "ModelVersion",
    ("sku", "name"): "DeploymentSku",
    ("sku", "capacity"): "DeploymentCapacity",
}
# What main.parameters.json maps each model parameter from. A deployment name takes its model's
# value, so that a deployment stays named after its model.
AZD_NAMES = {
    "chatModelName": "AZURE_OPENAI_CHAT_MODEL",
    "chatDeploymentName": "AZURE_OPENAI_CHAT_MODEL",
    "chatModelVersion": "AZURE_OPENAI_CHAT_MODEL_VERSION",
    "chatDeploymentSku": "AZURE_OPENAI_CHAT_DEPLOYMENT_SKU",
    "chatDeploymentCapacity": "AZURE_OPENAI_CHAT_DEPLOYMENT_CAPACITY",
    "embeddingModelName": "AZURE_OPENAI_EMBEDDING_MODEL",
    "embeddingDeploymentName": "AZURE_OPENAI_EMBEDDING_MODEL",
    "embeddingModelVersion": "AZURE_OPENAI_EMBEDDING_MODEL_VERSION",
    "embeddingDeploymentSku": "AZURE_OPENAI_EMBEDDING_DEPLOYMENT_SKU",
    "embeddingDeploymentCapacity": "AZURE_OPENAI_EMBEDDING_DEPLOYMENT_CAPACITY",
}
LIFECYCLES = {"GA", "Preview", "Legacy", "Deprecated", "Retired"}
NOT_DEPLOYABLE = {"Deprecated", "Retired"}
# Defaults that retire sooner than this get a warning, before the test starts failing.
WARN_BEFORE = timedelta(days=90)
SUBSTITUTION = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?:=([^}]*))?\}")

# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def retirements() -> dict[str, Any]:
    return json.loads(RETIREMENTS.read_text(encoding="utf-8"))


def parameters_file() -> dict[str, Any]:
    return json.loads(PARAMETERS.read_text(encoding="utf-8"))["parameters"]


def openai_params(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What main.bicep passes to infra/app/openai.bicep."""
    (module,) = local_modules(docs[MAIN], OPENAI).values()
    return body(module)["params"]


def model_params() -> list[str]:
    return [f"{use}{field}" for use in USES for field in DEPLOYMENT_FIELDS.values()]


def model_defaults(docs: dict[str, dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """use -> (model name, version) that main.bicep deploys when nothing is overridden."""
    main = docs[MAIN]
    params = openai_params(docs)
    return {
        use: (
            param_default(main, resolve(main, params[f"{use}ModelName"])),
            param_default(main, resolve(main, params[f"{use}ModelVersion"])),
        )
        for use in USES
    }


# ---------------------------------------------------------------------------------------------
# Checks (each raises AssertionError)
# ---------------------------------------------------------------------------------------------


def check_model_parameters(docs: dict[str, dict[str, Any]]) -> None:
    """Model, version, type and capacity are main.bicep parameters, with defaults and descriptions."""
    main = docs[MAIN]
    for name in [*model_params(), "openAiApiVersion"]:
        assert name in main["parameters"], f"main.bicep has no parameter {name}"
        default = main["parameters"][name]["default"]
        assert default not in (None, ""), f"main.bicep parameter {name} needs a default"
        assert decorator(main, name, "description"), f"main.bicep parameter {name} needs a @description"
    for use in USES:
        sku = param_default(main, Param(f"{use}DeploymentSku"))
        assert sku == "GlobalStandard", f"{use}DeploymentSku defaults to {sku!r}, not GlobalStandard"
        capacity = param_default(main, Param(f"{use}DeploymentCapacity"))
        assert isinstance(capacity, int) and capacity > 0, f"{use}DeploymentCapacity must be a positive int"


def check_parameters_reach_deployments(docs: dict[str, dict[str, Any]]) -> None:
    """main.bicep passes each parameter to openai.bicep, which puts it on the right deployment."""
    main, openai = docs[MAIN], docs[OPENAI]
    params = openai_params(docs)
    for name in model_params():
        assert name in params, f"main.bicep does not pass {name} to {OPENAI}"
        assert resolve(main, params[name]) == Param(name), f"main.bicep passes {name} as something else"
    deployments = [
        res
        for res in openai["resources"].values()
        if res["type"] == "Microsoft.CognitiveServices/accounts/deployments" and not res["existing"]
    ]
    by_use = {}
    for res in deployments:
        cfg = body(res)
        for use in USES:
            if resolve(openai, cfg["name"]) == Param(f"{use}DeploymentName"):
                by_use[use] = cfg
    assert set(by_use) == set(USES), f"{OPENAI} must name one deployment per use: {sorted(by_use)}"
    for use, cfg in by_use.items():
        for path, field in DEPLOYMENT_FIELDS.items():
            value: Any = cfg
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            assert resolve(openai, value) == Param(f"{use}{field}"), (
                f"{OPENAI}: the {use} deployment's {'.'.join(path)} must be the parameter {use}{field}"
            )


def check_api_version(docs: dict[str, dict[str, Any]]) -> None:
    """The app gets the API version parameter, and it defaults to the v1 API.

    The GA v1 API (``/openai/v1/``) takes no dated version and has no retirement date; a dated
    version would need its own entry in a retirement list.
    """
    main = docs[MAIN]
    setting = main["variables"]["memoryAppSettings"]["value"]["AZURE_OPENAI_API_VERSION"]
    assert resolve(main, setting) == Param("openAiApiVersion"), "AZURE_OPENAI_API_VERSION is openAiApiVersion"
    default = param_default(main, Param("openAiApiVersion"))
    assert default == "v1", f"openAiApiVersion defaults to {default!r}, not the v1 API"


def check_parameters_file(docs: dict[str, dict[str, Any]], mapped: dict[str, Any] | None = None) -> None:
    """main.parameters.json maps every model parameter to its azd environment value."""
    main = docs[MAIN]
    mapped = parameters_file() if mapped is None else mapped
    outputs = set(main["outputs"])
    read_by_app = code_settings()
    for name, env in AZD_NAMES.items():
        assert name in mapped, f"main.parameters.json does not map {name} (from {env})"
        match = SUBSTITUTION.fullmatch(str(mapped[name]["value"]))
        assert match, f"main.parameters.json maps {name} from {mapped[name]['value']!r}, not ${{{env}}}"
        assert match.group(1) == env, f"main.parameters.json maps {name} from {match.group(1)}, not {env}"
        # An inline default (${NAME=value}) must not contradict the Bicep default.
        if match.group(2) is not None:
            assert match.group(2) == str(param_default(main, Param(name))), (
                f"main.parameters.json default for {name} differs from main.bicep"
            )
        # azd writes outputs back into the environment: mapped from one, a parameter would keep the
        # value of the first provision even after the default moves.
        assert env not in outputs, f"{env} is a main.bicep output; map {name} from another name"
        assert env not in read_by_app, f"{env} is a setting memory-core reads; map {name} from another name"
    for use in USES:
        assert param_default(main, Param(f"{use}DeploymentName")) == param_default(
            main, Param(f"{use}ModelName")
        ), f"{use}DeploymentName defaults to the model name"


def check_retirement_list(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The list is well formed; returns it by (model, version)."""
    assert str(data.get("source", "")).startswith("https://learn.microsoft.com/"), "name the source page"
    date.fromisoformat(data["checked"])
    date.fromisoformat(data["sourceUpdated"])
    assert "refresh" in data["note"], "the note says the list must be refreshed"
    index: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in data["models"]:
        key = (entry["name"], entry["version"])
        assert key not in index, f"{key} is listed twice"
        assert entry["use"] in USES, f"{key}: use is chat or embedding"
        assert entry["lifecycle"] in LIFECYCLES, f"{key}: unknown lifecycle {entry['lifecycle']!r}"
        date.fromisoformat(entry["retirement"])
        index[key] = entry
    return index


def check_defaults_not_retired(
    docs: dict[str, dict[str, Any]], data: dict[str, Any], today: date
) -> list[str]:
    """Every default model+version is listed, deployable and retires after ``today``.

    Returns warnings for defaults that retire within WARN_BEFORE.
    """
    index = check_retirement_list(data)
    notes = []
    for use, (name, version) in model_defaults(docs).items():
        entry = index.get((str(name), str(version)))
        assert entry is not None, (
            f"the default {use} model {name} version {version} is not in infra/model-retirements.json: "
            f"look up its retirement date at {data['source']} and add it"
        )
        assert entry["use"] == use, f"{name} {version} is listed for {entry['use']}, not {use}"
        assert entry["lifecycle"] not in NOT_DEPLOYABLE, (
            f"the default {use} model {name} {version} is {entry['lifecycle']}: new subscriptions cannot "
            f"deploy it; move the default in infra/main.bicep to a current model"
        )
        retirement = date.fromisoformat(entry["retirement"])
        assert retirement > today, (
            f"the default {use} model {name} {version} retires on {retirement} (today is {today}): "
            f"move the default in infra/main.bicep to a current model and refresh infra/model-retirements.json"
        )
        if retirement - today < WARN_BEFORE:
            notes.append(f"the default {use} model {name} {version} retires on {retirement}")
    return notes


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_model_parameters_have_defaults_and_descriptions() -> None:
    check_model_parameters(load())


def test_model_parameters_reach_the_openai_deployments() -> None:
    check_parameters_reach_deployments(load())


def test_the_app_gets_the_v1_api() -> None:
    check_api_version(load())


def test_azd_environment_values_map_the_model_parameters() -> None:
    check_parameters_file(load())


def test_retirement_list_is_well_formed() -> None:
    check_retirement_list(retirements())


def test_default_models_are_listed_and_not_retired_today() -> None:
    for note in check_defaults_not_retired(load(), retirements(), date.today()):
        warnings.warn(f"{note}: plan the move to a newer model", stacklevel=1)


# ---- the checks bite: each one fails on a mutated copy -----------------------------------------


def test_an_unlisted_default_fails() -> None:
    docs = load(mutate(MAIN, "param chatModelVersion string = '", "param chatModelVersion string = '1999-"))
    with pytest.raises(AssertionError, match=r"is not in infra/model-retirements\.json"):
        check_defaults_not_retired(docs, retirements(), date.today())


def test_a_default_fails_on_its_retirement_day() -> None:
    docs = load()
    data = retirements()
    name, version = model_defaults(docs)["chat"]
    (entry,) = [m for m in data["models"] if (m["name"], m["version"]) == (name, version)]
    retirement = date.fromisoformat(entry["retirement"])
    check_defaults_not_retired(docs, data, retirement - timedelta(days=1))
    with pytest.raises(AssertionError, match="retires on"):
        check_defaults_not_retired(docs, data, retirement)
    with pytest.raises(AssertionError, match="retires on"):
        check_defaults_not_retired(docs, data, retirement + timedelta(days=1))


def test_a_default_soon_to_retire_is_reported() -> None:
    docs = load()
    data = retirements()
    listed = {(m["name"], m["version"]): date.fromisoformat(m["retirement"]) for m in data["models"]}
    first, (name, _) = min((listed[default], default) for default in model_defaults(docs).values())
    notes = check_defaults_not_retired(docs, data, first - timedelta(days=10))
    assert any(name in note for note in notes)


def test_a_deprecated_default_fails() -> None:
    main = (INFRA / MAIN).read_text(encoding="utf-8")
    name = re.search(r"param chatModelName string = '([^']+)'", main).group(1)
    version = re.search(r"param chatModelVersion string = '([^']+)'", main).group(1)
    overrides = mutate(
        MAIN, f"param chatModelName string = '{name}'", "param chatModelName string = 'gpt-4o-mini'"
    )
    text = overrides[MAIN].replace(
        f"param chatModelVersion string = '{version}'", "param chatModelVersion string = '2024-07-18'"
    )
    with pytest.raises(AssertionError, match="Deprecated"):
        check_defaults_not_retired(load({MAIN: text}), retirements(), date.today())


def test_a_parameter_not_passed_to_the_deployment_fails() -> None:
    docs = load(
        mutate(MAIN, "    chatModelVersion: chatModelVersion\n", "    chatModelVersion: '2024-07-18'\n")
    )
    with pytest.raises(AssertionError, match="chatModelVersion"):
        check_parameters_reach_deployments(docs)
    docs = load(mutate(OPENAI, "      version: embeddingModelVersion\n", "      version: '1'\n"))
    with pytest.raises(AssertionError, match="embeddingModelVersion"):
        check_parameters_reach_deployments(docs)


def test_a_dated_api_version_fails() -> None:
    docs = load(
        mutate(MAIN, "param openAiApiVersion string = 'v1'", "param openAiApiVersion string = '2024-10-21'")
    )
    with pytest.raises(AssertionError, match="v1"):
        check_api_version(docs)


def test_a_missing_or_pinning_azd_mapping_fails() -> None:
    docs = load()
    mapped = parameters_file()
    without = {k: v for k, v in mapped.items() if k != "chatModelVersion"}
    with pytest.raises(AssertionError, match="does not map chatModelVersion"):
        check_parameters_file(docs, without)
    renamed = {**mapped, "chatModelName": {"value": "${AZURE_OPENAI_CHAT_DEPLOYMENT}"}}
    with pytest.raises(AssertionError, match="not AZURE_OPENAI_CHAT_MODEL"):
        check_parameters_file(docs, renamed)
    contradicting = {**mapped, "chatModelVersion": {"value": "${AZURE_OPENAI_CHAT_MODEL_VERSION=1999-01-01}"}}
    with pytest.raises(AssertionError, match=r"differs from main\.bicep"):
        check_parameters_file(docs, contradicting)


def test_a_malformed_retirement_list_fails() -> None:
    data = retirements()
    doubled = {**data, "models": [*data["models"], data["models"][0]]}
    with pytest.raises(AssertionError, match="listed twice"):
        check_retirement_list(doubled)
    bad_date = {**data, "models": [{**data["models"][0], "retirement": "soon"}]}
    with pytest.raises(ValueError):
        check_retirement_list(bad_date)
