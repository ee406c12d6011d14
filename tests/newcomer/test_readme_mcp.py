"""The README's MCP client configuration (``<!-- snippet: mcp-vscode -->``), used as VS Code would.

The JSON is read as written (``servers``, or ``mcpServers`` as Claude Desktop spells it; ``//`` comment
lines allowed, as in VS Code's ``mcp.json``). Each stdio server is started with its command, arguments
and environment, in an empty workspace folder (``${workspaceFolder}``), with the installed
``memory-core`` first on ``PATH``; then the official SDK's client remembers a statement, finds it,
lists it and forgets it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from snippet_runner import SNIPPET_TIMEOUT, newcomer_env, readme_snippet

TOOLS = {"search_memories", "remember", "forget", "list_memories"}
STATEMENT = "I'm vegetarian and I live in Kyoto."


def _servers(text: str, workspace: Path) -> dict[str, dict[str, Any]]:
    """The stdio servers of a VS Code (or Claude Desktop) MCP configuration."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    config = json.loads("\n".join(lines).replace("${workspaceFolder}", str(workspace)))
    servers = config.get("servers", config.get("mcpServers"))
    assert isinstance(servers, dict) and servers, "the configuration should name at least one server"
    stdio = {name: s for name, s in servers.items() if s.get("type", "stdio") == "stdio"}
    assert stdio, "the configuration should have a stdio server (the one VS Code starts itself)"
    unresolved = re.findall(r"\$\{[^}]+\}", json.dumps(stdio))
    assert not unresolved, f"variables a test cannot fill: {unresolved}"
    return stdio


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict), result
    return data


async def _exercise(server: dict[str, Any], workspace: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=server["command"],
        args=list(server.get("args", [])),
        env=newcomer_env(**server.get("env", {})),
        cwd=workspace,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names >= TOOLS, names

        remembered = _structured(await session.call_tool("remember", {"text": STATEMENT}))
        assert remembered["decisions"], remembered
        found = _structured(await session.call_tool("search_memories", {"query": "vegetarian"}))
        texts = [m["memory"] for m in found["memories"]]
        assert any("vegetarian" in t for t in texts), texts

        listed = _structured(await session.call_tool("list_memories", {}))
        target = next(m for m in listed["memories"] if "vegetarian" in m["memory"])
        forgotten = _structured(await session.call_tool("forget", {"memory_id": target["id"]}))
        assert forgotten["memory_id"] == target["id"], forgotten
        again = _structured(await session.call_tool("search_memories", {"query": "vegetarian"}))
        assert target["id"] not in [m["id"] for m in again["memories"]]


def test_the_mcp_configuration_starts_a_server_that_remembers(tmp_path: Path) -> None:
    text = readme_snippet("mcp-vscode")
    try:
        import mcp  # noqa: F401 - the client SDK
    except ImportError:
        if os.environ.get("MEMORY_REQUIRE_SNIPPETS") == "1":
            raise
        pytest.skip("the MCP client SDK is not installed (pip install 'memory-core[mcp]')")
    for server in _servers(text, tmp_path).values():
        asyncio.run(asyncio.wait_for(_exercise(server, tmp_path), timeout=SNIPPET_TIMEOUT))
