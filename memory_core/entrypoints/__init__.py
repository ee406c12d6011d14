"""Entry points: the HTTP API, the Azure Functions bodies, the embedded host, the Python API and the MCP server."""
