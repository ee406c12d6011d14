"""``memory-core mcp``: one user's memories as a Model Context Protocol server."""
