"""The README's "Try it" commands (``<!-- snippet: try-it -->``), run as pasted from a fresh checkout.

The working folder holds only what a clone ships that the commands name (``samples/``); each line's
``.venv/bin/memory-core`` is the installed command (this interpreter's ``-m memory_core``). The demo
lines are left to the demo's own tests; the import, search and forget lines run in order on one store.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from snippet_runner import SNIPPET_TIMEOUT, explain, newcomer_env, readme_snippet

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "records.jsonl"
COMMAND = ".venv/bin/memory-core"


def _commands(block: str) -> list[list[str]]:
    """Each line of the block as arguments after ``memory-core`` (comments dropped, demo left out)."""
    commands: list[list[str]] = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == COMMAND, f"a Try it line that is not {COMMAND}: {line!r}"
        if "demo" not in words:
            commands.append(words[1:])
    return commands


def test_the_sample_records_are_the_import_format_in_two_languages() -> None:
    rows = [json.loads(line) for line in SAMPLE.read_text("utf-8").splitlines() if line.strip()]
    assert 24 <= len(rows) <= 100
    assert all({"user_id", "agent_id", "memory"} <= row.keys() for row in rows)
    japanese = [row for row in rows if any("\u3040" <= ch <= "\u9fff" for ch in row["memory"])]
    assert japanese and len(japanese) < len(rows)


def test_the_try_it_commands_run_as_pasted(tmp_path: Path) -> None:
    commands = _commands(readme_snippet("try-it"))
    assert any("import" in c for c in commands) and any("search" in c for c in commands)
    for word in (w for c in commands for w in c if w.endswith(".jsonl")):
        (tmp_path / word).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / word, tmp_path / word)
    env = newcomer_env(MEMORY_EMBEDDER="hash")
    outputs: dict[str, str] = {}
    for arguments in commands:
        done = subprocess.run(
            [sys.executable, "-m", "memory_core", *arguments],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=SNIPPET_TIMEOUT,
        )
        assert done.returncode == 0, f"{shlex.join(arguments)}: {explain(done)}"
        outputs.setdefault(next(w for w in arguments if not w.startswith("-") and w != "my.db"), done.stdout)
    count = sum(1 for line in SAMPLE.read_text("utf-8").splitlines() if line.strip())
    assert f"\nimported {count} memories" in outputs["import"], outputs["import"]
    assert "窓側の席が好き" in outputs["search"].splitlines()[0], outputs["search"]
