"""One MCP server's session on the official SDK: the transport opened, the handshake, the tool list, a
call, and every failure turned into a :class:`~app.mcp.values.McpServerError` naming the server.

Runs inside the client's asyncio loop (:mod:`app.mcp.client`); nothing here blocks a thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
import mcp_types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from app import APP_NAME, __version__
from app.core.mcp.config import McpServerConfig, McpTransport
from app.mcp.values import STARTING, McpFailure, McpServerError, McpTool, ToolResult

MAX_TOOL_PAGES = 50  # tools/list pages followed (a server whose cursor never ends cannot hang the start)


@asynccontextmanager
async def open_session(config: McpServerConfig, errlog: TextIO) -> AsyncIterator[ClientSession]:
    """The server's transport and an SDK session over it (not yet initialized).

    ``errlog`` takes a stdio server's stderr (a real file: the process writes to it directly).

    Raises:
        OSError: a stdio command that cannot be started (not found, not executable).
    """
    if config.transport is McpTransport.HTTP:
        transport = streamable_http_client(config.url)
    else:
        params = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env) or None)
        transport = stdio_client(params, errlog=errlog)
    info = mcp_types.Implementation(name=APP_NAME, version=__version__)
    async with transport as (read, write), ClientSession(read, write, client_info=info) as session:
        yield session


async def handshake(session: ClientSession, server: str, timeout_s: float) -> tuple[McpTool, ...]:
    """MCP ``initialize`` then the whole tool list, within ``timeout_s`` seconds.

    Raises:
        TimeoutError: no answer in time; the SDK's errors as :func:`describe` reads them.
    """
    with anyio.fail_after(timeout_s):
        await session.initialize()
        return await list_tools(session, server)


async def list_tools(session: ClientSession, server: str) -> tuple[McpTool, ...]:
    """Every tool the server lists (``tools/list``, its pages followed, at most :data:`MAX_TOOL_PAGES`)."""
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += [McpTool(server, t.name, (t.description or "").strip(), dict(t.input_schema)) for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


async def call_tool(
    session: ClientSession, server: str, name: str, arguments: dict[str, Any], timeout_s: float
) -> ToolResult:
    """``tools/call``: the result as text, within ``timeout_s`` seconds.

    Raises:
        the SDK's errors (``MCPError`` with ``REQUEST_TIMEOUT`` past the time limit, ``CONNECTION_CLOSED``
        when the server dies), as :func:`describe` reads them.
    """
    t0 = time.perf_counter()
    # The SDK's own time limit answers first; the outer one only guards against a limit it missed.
    with anyio.fail_after(timeout_s + 5.0):
        result = await session.call_tool(name, arguments, read_timeout_seconds=timeout_s)
    return ToolResult(server, name, result_text(result), bool(result.is_error), time.perf_counter() - t0)


async def alive(session: ClientSession, timeout_s: float) -> bool:
    """Whether the server still answers: an MCP ``ping``; False only when the connection has closed (a
    server busy past ``timeout_s`` seconds, or one that refuses pings, counts as alive)."""
    try:
        with anyio.fail_after(timeout_s):
            await session.send_ping()
    except MCPError as exc:
        return exc.code != mcp_types.CONNECTION_CLOSED
    except TimeoutError:
        return True
    return True


def result_text(result: mcp_types.CallToolResult) -> str:
    """A tool result as the text the model and the person see: the text parts joined by blank lines,
    an embedded text resource's text, other parts named; the structured result as JSON when no part
    is text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{block.type}, {getattr(block, 'mime_type', '?')}]")
    if not any(isinstance(b, mcp_types.TextContent) for b in result.content) and result.structured_content:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n\n".join(parts)


def describe(exc: BaseException, server: str, doing: str, timeout_s: float, stderr_tail: str = "") -> McpServerError:
    """``exc`` (raised while ``doing``: :data:`STARTING`, or "the call to add") as a failure naming ``server``.

    During the start every failure is :attr:`McpFailure.WONT_START`; later a closed connection is
    :attr:`McpFailure.DIED`, a time limit :attr:`McpFailure.TIMED_OUT`, an error answer
    :attr:`McpFailure.REFUSED`. ``stderr_tail`` (a stdio server's last output) is quoted when the
    server would not start or died.
    """
    exc = _leaf(exc)
    if isinstance(exc, McpServerError):
        return exc
    said = f" Its last output: {stderr_tail}" if stderr_tail else ""
    timed_out = isinstance(exc, TimeoutError) or (isinstance(exc, MCPError) and exc.code == mcp_types.REQUEST_TIMEOUT)
    closed = isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED
    if doing == STARTING:
        if timed_out:
            why = f"did not answer MCP's handshake within {timeout_s:g} s: check that it is an MCP server"
        elif closed:
            why = "closed the connection while starting: check its command or URL"
        elif isinstance(exc, FileNotFoundError | PermissionError):
            what = "was not found" if isinstance(exc, FileNotFoundError) else "may not be run (permission denied)"
            why = f"could not start: its command {exc.filename or ''!s} {what}".replace("  ", " ")
        elif isinstance(exc, MCPError):
            why = f"refused the handshake: {exc.message}"
        else:
            why = f"could not start: {type(exc).__name__}: {exc}"
        return McpServerError(server, McpFailure.WONT_START, f"MCP server {server!r} {why}.{said}")
    if timed_out:
        msg = f"MCP server {server!r} did not answer {doing} within {timeout_s:g} s (it hangs, or the work is slow)."
        return McpServerError(server, McpFailure.TIMED_OUT, msg)
    if closed:
        msg = f"MCP server {server!r} stopped during {doing} (the connection closed; it may have crashed).{said}"
        return McpServerError(server, McpFailure.DIED, msg)
    if isinstance(exc, MCPError):
        return McpServerError(server, McpFailure.REFUSED, f"MCP server {server!r} refused {doing}: {exc.message}.")
    if isinstance(exc, ValidationError):
        msg = f"MCP server {server!r} answered {doing} with something that is not a valid MCP message."
        return McpServerError(server, McpFailure.REFUSED, msg)
    msg = f"MCP server {server!r} failed during {doing}: {type(exc).__name__}: {exc}.{said}"
    return McpServerError(server, McpFailure.DIED, msg)


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside task groups' exception groups (anyio wraps what its tasks raise)."""
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup (3.11; anyio's backport on 3.10)
    while isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc
