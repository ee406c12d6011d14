"""The README's agent snippet (``<!-- snippet: agent -->``), run as pasted, twice.

The snippet reads its model from the environment; here ``OPENAI_BASE_URL`` points Agent Framework's
``OpenAIChatClient`` at the local OpenAI-compatible server (the Responses API), which records every
request. Memory is the embedded default: a store in ``.memory-core/`` of the working directory, turns
ingested by the provider's in-process worker. Checked: the first run's statement is stored, the second
run's request to the model carries it as recalled memory, and so does the first run of the next
process.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from snippet_runner import explain, newcomer_env, readme_snippet, run_python

pytest.importorskip("agent_framework")

from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.bootstrap import build_service, load_settings
from memory_core.domain.messages import session_id_for
from memory_core.domain.records import Scope
from memory_core.language.sanitize import RECALL_START_PREFIX

ANSWERS = ["Noted: vegetarian, in Kyoto.", "Try a shojin ryori place near Nanzen-ji."]


def _recalled(request: RecordedRequest) -> list[str]:
    """The recalled-memory blocks the model was given in one request."""
    return [text for text in request.texts() if text.startswith(RECALL_START_PREFIX)]


def _scope(code: str) -> Scope:
    """The scope the snippet configures (``user_id=...``, ``agent_id=...``)."""
    user = re.search(r'user_id="([^"]+)"', code)
    agent = re.search(r'agent_id="([^"]+)"', code)
    assert user and agent, "the agent snippet should name its user_id and agent_id"
    return Scope.of(user.group(1), agent.group(1))


async def _stored(store: Path, scope: Scope) -> list[str]:
    service = build_service(load_settings(environ={}, sqlite_path=str(store)))
    try:
        page = await service.list(scope)
        return [record.memory for record in page.records]
    finally:
        await service.close()


def test_the_agent_snippet_remembers_across_runs_and_processes(tmp_path: Path) -> None:
    code = readme_snippet("agent")
    scope = _scope(code)
    with FakeOpenAIServer() as server:
        server.script(*(Reply.text(answer) for answer in ANSWERS * 2))
        env = newcomer_env(OPENAI_API_KEY="test", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="fake-model")

        first = run_python(code, tmp_path, env, name="agent.py")
        assert first.returncode == 0, explain(first)
        assert "Traceback" not in first.stderr, explain(first)
        assert first.stdout.splitlines() == ANSWERS, explain(first)
        assert len(server.requests) == 2, [r.path for r in server.requests]
        assert all(r.path.endswith("/responses") for r in server.requests)
        assert all(r.headers.get("authorization") == "Bearer test" for r in server.requests)

        statement, question = server.requests
        assert _recalled(statement) == []  # nothing remembered yet
        assert "I'm vegetarian and I live in Kyoto." in statement.texts()
        (block,) = _recalled(question)  # the next run recalls what the first said
        assert '"I\'m vegetarian"' in block and "Kyoto" in block, block

        # The statement is in the store, and nothing waits in the queue: closing drained it.
        store = tmp_path / ".memory-core" / "memory.db"
        memories = asyncio.run(_stored(store, scope))
        assert "I'm vegetarian" in memories and any("Kyoto" in m for m in memories), memories
        queue = SQLiteQueue(f"{store}.queue")
        try:
            assert queue.waiting_in_session(session_id_for(scope), subject="turn") == []
        finally:
            queue.close_sync()

        second = run_python(code, tmp_path, env, name="agent.py")  # the next process
        assert second.returncode == 0, explain(second)
        assert len(server.requests) == 4
        (block,) = _recalled(server.requests[2])  # its very first run already knows
        assert '"I\'m vegetarian"' in block, block
