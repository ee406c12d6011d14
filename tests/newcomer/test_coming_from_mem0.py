"""The "coming from Mem0" page (``docs/coming-from-mem0.md``): every code block, run as pasted.

Each ``<!-- snippet: ... -->`` block runs as a script in an empty working directory with the installed
package (the hashing embedder, so no model is loaded) and must finish cleanly, printing what it
shows; the page must name every call its table maps.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from readme_snippets import snippet, snippet_names
from snippet_runner import explain, newcomer_env, run_python

PAGE = Path(__file__).resolve().parents[2] / "docs" / "coming-from-mem0.md"
TEXT = PAGE.read_text(encoding="utf-8")
NAMES = snippet_names(TEXT)


def test_the_page_has_its_snippets_and_every_fenced_python_block_is_one() -> None:
    assert NAMES == [
        "mem0-add-search",
        "mem0-infer-false",
        "mem0-filters",
        "mem0-run-id",
        "mem0-scoping",
        "mem0-delete-reset",
    ]
    assert TEXT.count("```python") == len(NAMES), "every python block needs a <!-- snippet: ... --> name"


@pytest.mark.parametrize("name", NAMES)
def test_each_block_runs_as_pasted(name: str, tmp_path: Path) -> None:
    result = run_python(snippet(name, TEXT), tmp_path, newcomer_env(MEMORY_EMBEDDER="hash"), name="mem0.py")
    assert result.returncode == 0, explain(result)
    assert "Traceback" not in result.stderr, explain(result)
    assert result.stdout.strip(), "the block should print what it shows\n" + explain(result)


def test_the_scoping_block_shows_why_a_user_is_needed(tmp_path: Path) -> None:
    result = run_python(snippet("mem0-scoping", TEXT), tmp_path, newcomer_env(MEMORY_EMBEDDER="hash"))
    assert "user_id: is required for get(): every memory belongs to one user" in result.stdout, explain(result)


def test_the_table_maps_every_call_of_the_python_api() -> None:
    from memory_core import Memory

    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", TEXT, re.MULTILINE)
    ours = " ".join(right for _, right in rows)
    for call in ("add", "search", "get_all", "get", "update", "delete", "delete_all", "history", "reset"):
        assert hasattr(Memory, call)
        assert f"m.{call}(" in ours, f"the table does not map {call}"
