"""The newcomer test: the README's snippets, run exactly as written, against the installed package.

CI runs this folder in a second, fresh virtual environment holding a non-editable install of the
clean clone (``.ci/run``), so a snippet that needs a file, an extra or an import the package does not
ship fails here. The tests import only the installed ``memory_core``, :mod:`readme_snippets` and the
local OpenAI-compatible server of ``tests/integration``; each snippet runs in a subprocess of this
interpreter, in an empty working directory, with an environment a newcomer would have (no
``MEMORY_*``, ``OPENAI_*`` or ``AZURE_*`` variables but the ones the test sets).

A snippet not in the README yet is skipped, saying so; with ``MEMORY_REQUIRE_SNIPPETS=1`` (CI) it
fails instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
for folder in (TESTS, TESTS / "integration"):  # readme_snippets, fake_openai_server
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from readme_snippets import snippet, snippet_names  # noqa: E402

__all__ = ["SNIPPET_TIMEOUT", "explain", "newcomer_env", "readme_snippet", "run_python"]

#: Seconds one snippet may take (a cold start loads the local embedding model).
SNIPPET_TIMEOUT = 240.0


def readme_snippet(name: str) -> str:
    """The code of the README block ``name``: skipped if there is none yet (failed under
    ``MEMORY_REQUIRE_SNIPPETS=1``); a repeated name always fails."""
    names = snippet_names()
    if name not in names:
        reason = f"the README has no `<!-- snippet: {name} -->` block yet"
        if os.environ.get("MEMORY_REQUIRE_SNIPPETS") == "1":
            pytest.fail(f"{reason} (MEMORY_REQUIRE_SNIPPETS=1 requires every newcomer snippet)")
        pytest.skip(reason)
    return snippet(name)


def newcomer_env(**extra: str) -> dict[str, str]:
    """This process's environment without memory-core, OpenAI or Azure OpenAI settings, plus ``extra``,
    with this interpreter's ``bin`` first on ``PATH`` (so ``memory-core`` is the installed one)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MEMORY_", "OPENAI_", "AZURE_OPENAI_")) and key != "PYTHONPATH"
    }
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra)
    return env


def run_python(
    code: str, cwd: Path, env: Mapping[str, str], *, name: str = "snippet.py"
) -> subprocess.CompletedProcess[str]:
    """Write ``code`` to ``cwd/name`` and run it with this interpreter, as ``python name`` in ``cwd``."""
    script = cwd / name
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, name],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT,
        check=False,
    )


def explain(result: subprocess.CompletedProcess[str]) -> str:
    """The exit status and output of a run, for an assertion message."""
    return f"exit status {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
