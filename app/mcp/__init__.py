"""MCP clients: the tools of the person's MCP servers, through the official ``mcp`` SDK.

Plain Python on the SDK (anyio on asyncio): no Qt, no llama.cpp (import-linter contract in
pyproject.toml). :mod:`app.mcp.values` holds what a client hands out (tools, results, failures),
:mod:`app.mcp.connection` one server's session (its transport, the SDK's calls, every failure in
words), :mod:`app.mcp.client` runs it on its own thread and answers with futures. The servers'
settings are :mod:`app.core.mcp.config`.
"""
