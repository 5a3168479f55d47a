"""A small MCP server for the tests, on the official SDK's ``MCPServer`` (FastMCP in mcp 1.x), over stdio.

Run as ``python tests/support/mcp_server.py`` (stdio), or with ``--http PORT`` (streamable HTTP at
``http://127.0.0.1:PORT/mcp``). Its tools:
``add(a, b)`` (a + b), ``echo(text)`` (the text back), ``crash()`` (the process exits at once with
code 3, mid-call: the client sees the connection end) and ``hang(seconds)`` (sleeps an hour by default, for the time
limit; with ``seconds``, answers ``woke after <seconds> s (call #<n>)``, n counting its calls: a slow tool). With ``GLASSBOX_TEST_MCP_PIDFILE`` set, it writes its process id there first.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

SERVER_NAME = "glassbox-test"
CRASH_EXIT_CODE = 3
PIDFILE_ENV = "GLASSBOX_TEST_MCP_PIDFILE"

server = MCPServer(SERVER_NAME)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def crash() -> str:
    """End the server's process at once, mid-call (a server that dies)."""
    sys.stdout.flush()
    os._exit(CRASH_EXIT_CODE)


_HANG_CALLS = [0]


@server.tool()
async def hang(seconds: float = 3600.0) -> str:
    """Never answer (a server that hangs): sleeps an hour (ended with the server when its stdin closes);
    with ``seconds``, a slow tool that answers which call of it this was."""
    _HANG_CALLS[0] += 1
    n = _HANG_CALLS[0]
    await anyio.sleep(seconds)
    return f"woke after {seconds:g} s (call #{n})"


def script_path() -> Path:
    """This file, to run as the server's command."""
    return Path(__file__).resolve()


if __name__ == "__main__":
    if os.environ.get(PIDFILE_ENV):  # where a test finds the process to kill while it is idle
        Path(os.environ[PIDFILE_ENV]).write_text(str(os.getpid()), encoding="utf-8")
    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # streamable HTTP on 127.0.0.1:<port>, path /mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
