"""Entry points: the HTTP dispatcher, the embedded host, the Python API and the MCP server."""
