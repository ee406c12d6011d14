"""The shape of the code (DESIGN section 2), checked on the source: the direction of imports, one home
for the use cases, no reach-through from entry points into the service's parts, no capability probes."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memory_core"
DOMAIN = ("models.py", "policy.py", "ranking.py", "errors.py", "text.py")
ENTRY_POINTS = [
    ROOT / "function_app.py",
    PACKAGE / "api.py",
    PACKAGE / "cli.py",
    *sorted((PACKAGE / "local").glob("*.py")),
    *sorted((PACKAGE / "integrations").glob("*.py")),
]
SDKS = ("azure", "openai", "agent_framework", "opentelemetry", "httpx")


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported(path: Path) -> Iterator[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(parts[: len(parts) - node.level])
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_domain_imports_only_itself() -> None:
    for name in DOMAIN:
        for module in imported(PACKAGE / name):
            if module.startswith("memory_core"):
                assert module.split(".")[1] in {d.removesuffix(".py") for d in DOMAIN}, (name, module)


def test_the_service_imports_no_adapter_no_sdk_and_no_settings() -> None:
    for path in [*modules(PACKAGE / "service"), PACKAGE / "extraction.py", PACKAGE / "consolidation.py"]:
        for module in imported(path):
            assert not module.startswith(("memory_core.adapters", "memory_core.config", "memory_core.bootstrap")), (
                path.name,
                module,
            )
            assert module.split(".")[0] not in SDKS, (path.name, module)


def test_only_the_composition_root_gives_adapters_their_settings() -> None:
    for path in [*modules(PACKAGE / "adapters"), PACKAGE / "telemetry.py"]:
        for module in imported(path):
            assert not module.startswith(("memory_core.config", "memory_core.bootstrap")), (path.name, module)
    for module in imported(PACKAGE / "telemetry.py"):
        assert not module.startswith("memory_core.adapters"), module


def test_use_cases_live_once() -> None:
    defined: dict[str, list[str]] = {}
    for path in [*modules(PACKAGE), ROOT / "function_app.py"]:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                defined.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert defined["ForgettingRun"] == ["memory_core/service/forgetting.py"]
    assert defined["run_forgetting"] == [
        "memory_core/local/scheduler.py",  # the scheduler's port on the service (a protocol)
        "memory_core/service/forgetting.py",
        "memory_core/service/memory_service.py",
    ]
    assert defined["ingest_turn"] == ["memory_core/service/ingest.py"]
    # The forgetting rule (the policy over a page of retention inputs) is applied in one place.
    callers = [
        str(path.relative_to(ROOT))
        for path in modules(PACKAGE)
        if "retention_array(" in path.read_text(encoding="utf-8") and path.name != "policy.py"
    ]
    assert callers == ["memory_core/service/forgetting.py"]


def test_entry_points_hold_the_service_and_never_reach_into_it() -> None:
    private_parts = {"_store", "_history", "_clock", "_embedder", "_policy", "_publisher", "_extractor"}
    for path in ENTRY_POINTS:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
                inner = node.value
                if inner.attr in {"service", "pipeline"}:
                    assert node.attr not in {"store", "history", "clock", *private_parts}, (path.name, node.lineno)
            if isinstance(node, ast.Attribute) and node.attr in private_parts:
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id == "self", (path.name, node.lineno, node.attr)


def test_capabilities_are_ports_not_probes() -> None:
    """No ``getattr``/``hasattr`` on a service, history or store in the entry points and the service."""
    for path in [*ENTRY_POINTS, *modules(PACKAGE / "service")]:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"}:
                target = ast.unparse(node.args[0]) if node.args else ""
                assert not any(w in target for w in ("service", "history", "store", "pipeline", "clock")), (
                    path.name,
                    node.lineno,
                    ast.unparse(node),
                )
