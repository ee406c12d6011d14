"""The shape of the code (DESIGN section 2), checked on the source: the floor plan and the direction of
imports, one home for the use cases, no reach-through from entry points into the service's parts, no
capability probes."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memory_core"

#: The layers, top to bottom: a module may import its own layer's modules and those of any layer below.
#: Layers on one line share a rank but do not import each other unless ``SIDEWAYS`` allows it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("tools",),
    ("entrypoints", "integrations"),
    ("client",),
    ("bootstrap",),
    ("contract", "runtime", "telemetry"),
    ("service", "adapters"),
    ("ports", "capabilities", "config"),
    ("domain",),
    ("language", "errors", "version", "web"),
)
#: Imports between two layers of one rank that the plan allows (importer, imported).
SIDEWAYS = {
    ("capabilities", "ports"),
    ("entrypoints", "integrations"),
    ("runtime", "telemetry"),
    ("contract", "telemetry"),
}
#: The only places that may import inside a function (lazily) from the package.
LAZY_IMPORTERS = ("bootstrap", "cli", "tools")
#: The package root holds at most these modules.
ROOT_MODULES = {"__init__", "__main__", "version", "errors", "config", "ports", "capabilities", "bootstrap", "telemetry"}
SDKS = ("azure", "openai", "agent_framework", "opentelemetry", "httpx")
ENTRY_POINTS = [
    ROOT / "function_app.py",
    *sorted((PACKAGE / "entrypoints").rglob("*.py")),
    *sorted((PACKAGE / "cli").rglob("*.py")),
    *sorted((PACKAGE / "client").rglob("*.py")),
    *sorted((PACKAGE / "integrations").rglob("*.py")),
]


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


ALL_MODULES = {module_name(p): p for p in modules(PACKAGE)}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # a module of the package (a name imported from a package resolves to its module)
    line: int
    lazy: bool  # inside a function


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module_name(path).split(".")
    package = parts if path.name == "__init__.py" else parts[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _function_lines(module: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    lines.add(inner.lineno)
    return lines


def imports_of(path: Path) -> Iterator[Import]:
    """Every import of a package module in ``path``: top level, inside functions and TYPE_CHECKING alike."""
    module = tree(path)
    lazy = _function_lines(module)
    me = module_name(path) if path.is_relative_to(PACKAGE) else path.stem
    for node in ast.walk(module):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(path, node)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in ALL_MODULES else base for a in node.names]
        for name in names:
            if name == "memory_core" or name.startswith("memory_core."):
                while name not in ALL_MODULES and "." in name:
                    name = name.rpartition(".")[0]
                yield Import(me, name, node.lineno, node.lineno in lazy)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank_of(layer: str) -> int:
    for rank, names in enumerate(LAYERS):
        if layer in names:
            return rank
    raise AssertionError(f"{layer} is in no layer of the plan")


def package_imports() -> list[Import]:
    return [i for path in modules(PACKAGE) for i in imports_of(path)]


def test_the_package_root_holds_only_the_root_modules() -> None:
    root = {p.stem for p in PACKAGE.glob("*.py")}
    assert root <= ROOT_MODULES, sorted(root - ROOT_MODULES)
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {name for rank in LAYERS for name in rank if not (PACKAGE / f"{name}.py").exists()}


def test_every_import_points_down_the_plan() -> None:
    wrong = []
    for imp in package_imports():
        if imp.importer == "memory_core.__main__":
            assert imp.imported.startswith("memory_core.cli"), imp
            continue
        if imp.importer == "memory_core":  # the public face: the domain's names, the errors, and the Python
            # API and the Agent Framework provider (a face of the same rank) on first use
            assert layer_of(imp.imported) in {"domain", "errors", "version"} or imp.imported.startswith(
                "memory_core.entrypoints.python_api."
            ) or imp.imported == "memory_core.integrations.agent_framework", imp
            continue
        here, there = layer_of(imp.importer), layer_of(imp.imported)
        assert there != "__init__", f"{imp.importer} imports the package root (line {imp.line})"
        if here == there:
            continue
        if rank_of(here) > rank_of(there) or (rank_of(here) == rank_of(there) and (here, there) not in SIDEWAYS):
            wrong.append(f"{imp.importer}:{imp.line} -> {imp.imported}")
    assert wrong == []


def test_only_the_composition_root_the_cli_and_the_tools_import_lazily() -> None:
    lazy = [
        f"{imp.importer}:{imp.line} -> {imp.imported}"
        for imp in package_imports()
        if imp.lazy and layer_of(imp.importer) not in LAZY_IMPORTERS
    ]
    assert lazy == []


def test_nothing_outside_the_cli_imports_the_cli_or_the_tools() -> None:
    for imp in package_imports():
        if layer_of(imp.imported) == "cli":
            assert layer_of(imp.importer) == "cli" or imp.importer == "memory_core.__main__", imp
        if layer_of(imp.imported) == "tools":
            assert layer_of(imp.importer) in {"cli", "tools"}, imp
    for imp in imports_of(ROOT / "function_app.py"):
        assert layer_of(imp.imported) not in {"cli", "tools"}, imp


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for imp in package_imports():
        if imp.importer != imp.imported:
            graph.setdefault(imp.importer, set()).add(imp.imported)
    # a package's __init__ is loaded before its modules: an edge to a module passes through its packages
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_service_imports_no_adapter_no_sdk_and_no_settings() -> None:
    for path in modules(PACKAGE / "service"):
        for imp in imports_of(path):
            assert layer_of(imp.imported) not in {"adapters", "config", "bootstrap"}, imp
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.split(".")[0] in SDKS for n in names), (path.name, names)


def test_azure_sdks_are_imported_only_by_the_azure_adapters_and_the_composition_root() -> None:
    for path in modules(PACKAGE):
        if path.is_relative_to(PACKAGE / "adapters" / "azure") or path.is_relative_to(PACKAGE / "adapters" / "models"):
            continue
        if path.name == "bootstrap.py":
            continue
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.split(".")[0] == "azure" for n in names), (str(path.relative_to(ROOT)), names)


def test_only_the_composition_root_gives_adapters_their_settings() -> None:
    for path in [*modules(PACKAGE / "adapters"), PACKAGE / "telemetry.py"]:
        for imp in imports_of(path):
            assert layer_of(imp.imported) not in {"config", "bootstrap"}, imp
    for imp in imports_of(PACKAGE / "telemetry.py"):
        assert layer_of(imp.imported) != "adapters", imp


def test_use_cases_live_once() -> None:
    defined: dict[str, list[str]] = {}
    for path in [*modules(PACKAGE), ROOT / "function_app.py"]:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                defined.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert defined["ForgettingRun"] == ["memory_core/service/forgetting.py"]
    assert defined["run_forgetting"] == [
        "memory_core/runtime/scheduler.py",  # the scheduler's port on the service (a protocol)
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


#: The most lines a module may have, by where it lives (the first prefix that matches).
MODULE_LINES = (("memory_core/tools/", 800), ("memory_core/web/", None), ("memory_core/ports.py", 700), ("", 600))
#: Cyclomatic complexity (radon's) no function may pass, and the one only a few may.
MOST_COMPLEX, COMPLEX, MOST_ABOVE_COMPLEX = 20, 15, 15


def test_every_module_fits_on_a_few_screens() -> None:
    too_long = []
    for path in modules(PACKAGE):
        where = path.relative_to(ROOT).as_posix()
        limit = next(most for prefix, most in MODULE_LINES if where.startswith(prefix))
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if limit is not None and lines > limit:
            too_long.append(f"{where}: {lines} lines (at most {limit})")
    assert not too_long, too_long


def test_no_function_is_too_complex() -> None:
    radon = pytest.importorskip("radon.complexity", reason="radon is in the dev extras")
    scores: dict[str, int] = {}
    for path in modules(PACKAGE):
        for block in radon.cc_visit(path.read_text(encoding="utf-8")):
            for function in [block, *getattr(block, "methods", [])]:
                if not hasattr(function, "methods"):  # a function or method, not a class
                    scores[f"{module_name(path)}.{function.fullname}"] = function.complexity
    worst = {name: score for name, score in scores.items() if score > MOST_COMPLEX}
    complex_ = {name: score for name, score in scores.items() if score > COMPLEX}
    assert not worst, worst
    assert len(complex_) <= MOST_ABOVE_COMPLEX, complex_
