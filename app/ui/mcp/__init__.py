"""MCP servers in the window: Tools → MCP servers… (the servers, their tools, on/off per tool).

:mod:`app.ui.mcp.servers` owns the connections (an :class:`~app.mcp.pool.McpPool` kept in step with
the settings), :mod:`app.ui.mcp.dialog` is the Tools dialog, :mod:`app.ui.mcp.entry` its menu entry.
"""
