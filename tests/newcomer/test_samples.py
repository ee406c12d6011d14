"""``samples/embedded_agent.py`` as documented, answering through Agent Framework's ``OpenAIChatClient``.

``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` point the sample's chat client at the local OpenAI-compatible
server; the sample's second session must reach the model with what the first one said, recalled from
memory (ingested by the provider's in-process worker).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from snippet_runner import SNIPPET_TIMEOUT, explain, newcomer_env

pytest.importorskip("agent_framework")

from fake_openai_server import FakeOpenAIServer, Reply

from memory_core.language.sanitize import RECALL_START_PREFIX

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_the_embedded_sample_recalls_session_one_in_session_two(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.text("Noted."), Reply.text("Noted too."), Reply.text("Try the tofu place."))
        env = newcomer_env(OPENAI_API_KEY="test", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="fake-model")
        result = subprocess.run(
            [sys.executable, str(SAMPLES / "embedded_agent.py")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=SNIPPET_TIMEOUT,
            check=False,
        )
        assert result.returncode == 0, explain(result)
        assert "[session 2] agent: Try the tofu place." in result.stdout, explain(result)
        assert [r.path for r in server.requests] == ["/v1/responses"] * 3
        blocks = [t for t in server.requests[2].texts() if t.startswith(RECALL_START_PREFIX)]
        assert len(blocks) == 1, server.requests[2].texts()
        assert "I'm vegetarian" in blocks[0] and "Kyoto" in blocks[0], blocks[0]
