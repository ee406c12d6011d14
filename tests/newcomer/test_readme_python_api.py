"""The README's Python API snippet (``<!-- snippet: python-api -->``), run as pasted.

It runs as a script in an empty working directory with the installed package; it must finish cleanly,
print what it found, and leave the memories it added in the embedded store it used.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from snippet_runner import explain, newcomer_env, readme_snippet, run_python

from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.records import Scope


async def _count(store: Path, scope: Scope) -> int:
    service = build_service(load_settings(environ={}, sqlite_path=str(store)))
    try:
        return len((await service.list(scope)).records)
    finally:
        await service.close()


def test_the_python_api_snippet_runs_as_pasted_and_stores_memories(tmp_path: Path) -> None:
    code = readme_snippet("python-api")
    result = run_python(code, tmp_path, newcomer_env(), name="memory_api.py")
    assert result.returncode == 0, explain(result)
    assert "Traceback" not in result.stderr, explain(result)
    assert result.stdout.strip(), "the snippet should print what it found\n" + explain(result)

    users = sorted(set(re.findall(r'user_id="([^"]+)"', code)))
    agents = sorted(set(re.findall(r'agent_id="([^"]+)"', code))) or ["default"]
    assert users, "the snippet should name the user whose memories it adds (user_id=...)"
    stores = [p for p in tmp_path.rglob("*.db") if p.name != "outbox.db"]
    assert stores, f"the snippet should leave an embedded store under its working directory: {explain(result)}"
    if re.search(r"\.delete(_all)?\(", code):
        return  # it shows deleting too: what is left is up to the snippet
    found = sum(
        asyncio.run(_count(store, Scope.of(user, agent))) for store in stores for user in users for agent in agents
    )
    assert found > 0, f"no memory of {users} / {agents} in {[p.name for p in stores]}"
