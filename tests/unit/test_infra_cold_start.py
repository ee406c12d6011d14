"""Offline checks of the always-ready setting: one parameter, off by default, reaches the HTTP functions.

``functionAlwaysReadyInstanceCount`` (``MEMORY_ALWAYS_READY_INSTANCES`` in azd) becomes the Flex
Consumption app's ``alwaysReady`` entry for the ``http`` group, and is 0 by default: no baseline is
billed unless asked for. docs/deploy.md says what it costs. The checks run on the parsed templates
(pycep-parser, see test_infra_bicep.py) and fail on mutated copies.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from test_infra_bicep import (
    FUNCTION,
    INFRA,
    MAIN,
    ROOT,
    Param,
    body,
    declared,
    decorator,
    load,
    local_modules,
    mutate,
    param_default,
    resolve,
)

PARAMETER = "functionAlwaysReadyInstanceCount"
ENV = "MEMORY_ALWAYS_READY_INSTANCES"
SUBSTITUTION = re.compile(r"^\$\{([A-Z0-9_]+)=([^}]*)\}$")


def check_always_ready(docs: dict[str, dict[str, Any]], mapped: dict[str, Any]) -> None:
    main, fn = docs[MAIN], docs[FUNCTION]
    assert param_default(main, Param(PARAMETER)) == 0, "no always-ready instance by default (no baseline cost)"
    assert decorator(main, PARAMETER, "min_value") == 0
    ((_, module),) = local_modules(main, FUNCTION).items()
    passed = resolve(main, body(module)["params"].get("alwaysReadyInstanceCount"))
    assert passed == Param(PARAMETER), f"main.bicep passes {PARAMETER} to the function app"
    assert param_default(fn, Param("alwaysReadyInstanceCount")) == 0
    ((_, _, site),) = declared({FUNCTION: fn}, "Microsoft.Web/sites")
    ready = body(site)["properties"]["functionAppConfig"]["scaleAndConcurrency"].get("alwaysReady")
    assert isinstance(ready, dict), "scaleAndConcurrency sets alwaysReady"
    operands = ready["operator"]["operands"]
    assert ready["operator"]["type"] == "conditional" and operands["false_value"] == [], "none when 0"
    condition = operands["condition"]["operator"]
    assert condition["type"] == "greater_than" and condition["operands"]["operand_2"] == 0
    assert resolve(fn, condition["operands"]["operand_1"]) == Param("alwaysReadyInstanceCount")
    (entry,) = resolve(fn, operands["true_value"])
    assert entry["name"] == "http", "the http group: the searches agents wait for"
    assert resolve(fn, entry["instanceCount"]) == Param("alwaysReadyInstanceCount")
    match = SUBSTITUTION.fullmatch(str(mapped.get(PARAMETER, {}).get("value", "")))
    assert match and match.group(1) == ENV, f"main.parameters.json maps {PARAMETER} from ${{{ENV}=...}}"
    assert match.group(2) == "0", "the same default as main.bicep"


def parameters_file() -> dict[str, Any]:
    parameters: dict[str, Any] = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))
    return parameters["parameters"]


def test_the_always_ready_setting_is_off_by_default_and_reaches_the_http_group() -> None:
    check_always_ready(load(), parameters_file())


def test_the_cost_of_always_ready_is_documented() -> None:
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = deploy.split("## Cold starts", 1)[1].split("\n## ", 1)[0]
    for word in (PARAMETER, ENV, "baseline", "GB-s", "first_search_timeout"):
        assert word in section, f"docs/deploy.md, Cold starts, says nothing of {word}"


def test_the_check_fails_when_always_ready_is_on_by_default() -> None:
    docs = load(mutate(MAIN, f"param {PARAMETER} int = 0", f"param {PARAMETER} int = 1"))
    with pytest.raises(AssertionError, match="by default"):
        check_always_ready(docs, parameters_file())


def test_the_check_fails_when_the_group_is_not_http() -> None:
    docs = load(mutate(FUNCTION, "name: 'http'", "name: 'blob'"))
    with pytest.raises(AssertionError, match="http group"):
        check_always_ready(docs, parameters_file())


def test_the_check_fails_when_azd_does_not_map_it() -> None:
    mapped = parameters_file()
    del mapped[PARAMETER]
    with pytest.raises(AssertionError, match=ENV):
        check_always_ready(load(), mapped)
