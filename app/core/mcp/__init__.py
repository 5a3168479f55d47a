"""MCP servers as the person set them up (Tools → MCP servers): plain values stored in settings.json.

The client that talks to them is :mod:`app.mcp`, its own room.
"""
