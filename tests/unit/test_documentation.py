"""The README is a front door and the documentation site holds the rest.

The README stays short, every page under ``docs/`` is in the site's navigation (``mkdocs.yml``),
every relative link of the README and of the pages names a file that exists (and a heading of it,
for a link with an anchor), and every README section a page includes (``--8<-- "README.md:name"``)
is there. ``mkdocs build --strict`` (``.ci/run``) checks the rendered site as well.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: The README's length limit, in lines.
README_MAX_LINES = 350

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+?)\s*$")
_FENCE = re.compile(r"^\s*```")
_INCLUDE = re.compile(r'^--8<-- "README\.md:([a-z0-9-]+)"$', re.M)


def pages() -> list[str]:
    """Every Markdown page under docs/, relative to it."""
    return sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))


def nav_pages(config: dict[str, Any] | None = None) -> list[str]:
    """Every page named in mkdocs.yml's nav."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8")) if config is None else config

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from walk(value)

    return list(walk(config.get("nav", [])))


def outside_fences(text: str) -> Iterator[str]:
    """The lines of ``text`` outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def slugs(text: str) -> set[str]:
    """The anchors of the headings of ``text``, as GitHub and as MkDocs (Python-Markdown's toc) make them."""
    found: set[str] = set()
    for line in outside_fences(text):
        match = _HEADING.match(line)
        if not match:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)).replace("`", "").strip().lower()
        found.add(re.sub(r" ", "-", re.sub(r"[^\w\- ]", "", title)))  # GitHub
        ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
        found.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_title).strip()))  # MkDocs
    return found


def broken_links(source: Path, text: str) -> list[str]:
    """The relative links of ``text`` (the file ``source``) whose file or heading does not exist."""
    broken = []
    for line in outside_fences(text):
        for match in _LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (source.parent / path).resolve() if path else source
            if not file.exists():
                broken.append(f"{target} (no file {path})")
            elif anchor and file.suffix == ".md" and anchor not in slugs(text if not path else file.read_text("utf-8")):
                broken.append(f"{target} (no heading #{anchor} in {path or source.name})")
    return broken


def test_the_readme_is_a_front_door() -> None:
    count = len(README.read_text("utf-8").splitlines())
    assert count <= README_MAX_LINES, (
        f"README.md has {count} lines (at most {README_MAX_LINES}): move detail to a page under docs/"
    )


def test_every_page_is_in_the_navigation() -> None:
    listed = nav_pages()
    missing = [page for page in pages() if page not in listed]
    assert not missing, (
        f"docs/ pages missing from the nav of mkdocs.yml: {missing}; add each under the section it "
        "belongs to (for example time.md, turns.md, defaults.md under 'How it works', "
        "agent-framework-provider.md under 'Use it', coming-from-mem0.md under 'Use it')"
    )
    absent = [page for page in listed if not (DOCS / page).is_file()]
    assert not absent, f"mkdocs.yml's nav names pages that docs/ does not have: {absent}"


def test_the_navigation_check_names_a_missing_page() -> None:
    config = {"nav": [{"Home": "index.md"}, {"Use it": [{"Python API": "python-api.md"}]}]}
    assert nav_pages(config) == ["index.md", "python-api.md"]
    assert "memory-model.md" in pages() and "memory-model.md" not in nav_pages(config)


@pytest.mark.parametrize("name", ["README.md", *(f"docs/{page}" for page in pages())])
def test_relative_links_resolve(name: str) -> None:
    source = ROOT / name
    assert not broken_links(source, source.read_text("utf-8")), broken_links(source, source.read_text("utf-8"))


def test_the_link_check_finds_a_broken_link_and_anchor() -> None:
    source = DOCS / "index.md"
    text = "# Title\n\n[a](python-api.md) [b](nowhere.md) [c](python-api.md#no-such-heading) [d](#title)\n"
    assert broken_links(source, text) == [
        "nowhere.md (no file nowhere.md)",
        "python-api.md#no-such-heading (no heading #no-such-heading in python-api.md)",
    ]


def test_the_readme_sections_the_pages_include_are_there() -> None:
    readme = README.read_text("utf-8")
    included = [name for page in pages() for name in _INCLUDE.findall((DOCS / page).read_text("utf-8"))]
    assert included, "no page includes a README section"
    for name in included:
        assert readme.count(f"<!-- --8<-- [start:{name}] -->") == 1, f"README.md has no section {name!r}"
        assert readme.count(f"<!-- --8<-- [end:{name}] -->") == 1, f"README.md's section {name!r} has no end"
