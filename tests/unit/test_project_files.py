"""Project hygiene: one version, written once; the license file the metadata names; a changelog."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

import memory_core

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_is_written_once_and_the_installed_package_has_it() -> None:
    pyproject = _pyproject()
    project = pyproject["project"]
    assert isinstance(project, dict)
    assert "version" not in project and "version" in project["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "memory_core.version.__version__"}
    assert importlib.metadata.version("memory-core") == memory_core.__version__


def test_the_version_is_read_without_importing_the_package() -> None:
    """setuptools reads ``attr:`` statically when it is a plain string, so a build needs none of the
    package's dependencies; a computed version would make it import memory_core (pydantic, numpy)."""
    tree = ast.parse((ROOT / "memory_core" / "version.py").read_text(encoding="utf-8"))
    values = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
    ]
    assert len(values) == 1 and isinstance(values[0], ast.Constant)
    assert values[0].value == memory_core.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", memory_core.__version__)


def test_the_license_file_is_the_license_the_metadata_names() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict) and project["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 memory-core contributors" in text


def test_the_changelog_has_an_unreleased_section_and_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert any(h.startswith(f"{memory_core.__version__} - ") for h in headings)
