"""One chat-API transcript gives the same memories on every face: posted to ``POST /api/turns`` (over a
socket to the embedded server), piped to ``memory-core ingest``, remembered through MCP and added through
the Python API."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import running

from memory_core import Memory
from memory_core.bootstrap import build_service, load_settings
from memory_core.cli.main import main

USER, AGENT = "ana", "coach"
#: A chat-API transcript, as a client's history holds it (no turn id, no date).
TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "user", "content": "I am vegetarian and I live in Porto."},
    {"role": "assistant", "content": "Noted. Any favourite food?"},
    {"role": "user", "content": "I love green tea and I prefer window seats on flights."},
]


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMORY_SQLITE_PATH", "MEMORY_STORE", "AZURE_SEARCH_ENDPOINT", "MEMORY_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hash")


def memories(db: Path) -> list[tuple[str, str, str]]:
    """The active memories of the scope, as (text, category, kind), without ids."""
    with Memory(db) as memory:
        found = memory.get_all(user_id=USER, agent_id=AGENT)
    return sorted((r.memory, r.category, r.kind.value) for r in found)


def through_python(db: Path) -> list[tuple[str, str, str]]:
    with Memory(db) as memory:
        memory.add(TRANSCRIPT, user_id=USER, agent_id=AGENT)
    return memories(db)


def through_http(db: Path) -> list[tuple[str, str, str]]:
    with running(db, workers=1) as runtime:
        reply = runtime.client.post("/api/turns", {"user_id": USER, "agent_id": AGENT, "messages": TRANSCRIPT})
        assert reply.status == 202, reply.body
        runtime.drain()
    return memories(db)


def through_ingest(db: Path, tmp_path: Path) -> list[tuple[str, str, str]]:
    source = tmp_path / "turns.jsonl"
    source.write_text(json.dumps({"user_id": USER, "agent_id": AGENT, "messages": TRANSCRIPT}) + "\n", "utf-8")
    out = io.StringIO()
    assert main(["--db", str(db), "ingest", str(source)], out=out) == 0, out.getvalue()
    return memories(db)


def through_mcp(db: Path) -> list[tuple[str, str, str]]:
    pytest.importorskip("mcp")
    from mcp.client import Client

    from memory_core.domain.records import Scope
    from memory_core.entrypoints.mcp.server import build_server
    from memory_core.entrypoints.mcp.tools import MemoryTools

    async def scenario() -> None:
        service = build_service(load_settings(environ={}, sqlite_path=str(db), embedder="hash"))
        try:
            async with Client(build_server(MemoryTools(service, Scope.of(USER, AGENT)))) as client:
                result = await client.call_tool("remember", {"messages": TRANSCRIPT})
                assert not result.is_error, result
        finally:
            await service.close()

    asyncio.run(scenario())
    return memories(db)


def test_a_transcript_gives_the_same_memories_on_every_face(tmp_path: Path) -> None:
    expected = through_python(tmp_path / "python.db")
    assert expected, "the transcript gave no memory"
    assert any("vegetarian" in text for text, _, _ in expected), expected
    assert through_http(tmp_path / "http.db") == expected
    assert through_ingest(tmp_path / "ingest.db", tmp_path) == expected
    assert through_mcp(tmp_path / "mcp.db") == expected


def test_a_replayed_transcript_adds_nothing_on_the_turn_route_and_ingest(tmp_path: Path) -> None:
    db = tmp_path / "replay.db"
    first = through_ingest(db, tmp_path)
    assert through_ingest(db, tmp_path) == first  # the derived turn id makes the replay a repeat
    out = io.StringIO()
    source = tmp_path / "turns.jsonl"
    assert main(["--db", str(db), "--json", "ingest", str(source)], out=out) == 0
    assert [result["status"] for result in json.loads(out.getvalue())] == ["duplicate"]
