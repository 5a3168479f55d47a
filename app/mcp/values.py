"""What an MCP client hands out: a server's tools, a call's result, and its failures in words."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

STARTING = "starting"  # what a client is doing until its tools are listed (``describe`` in app.mcp.connection)


class ServerState(str, enum.Enum):
    """Where one server's connection stands."""

    IDLE = "idle"  # not started
    CONNECTING = "connecting"  # started, the handshake and the tool list not yet answered
    CONNECTED = "connected"  # tools listed, calls accepted
    FAILED = "failed"  # would not start or answer (see the client's ``error``)
    STOPPED = "stopped"  # died or closed the connection after it was connected
    CLOSED = "closed"  # closed by Glassbox


class CloseReason(str, enum.Enum):
    """Why Glassbox closed a server's connection (what a call it cut short says)."""

    DISCONNECTED = "disconnected"  # the window closed, or a caller closed it
    REMOVED = "removed"  # taken out of Tools → MCP servers
    RESTARTED = "restarted"  # Reconnect, or its settings changed: a new connection replaces it


class McpFailure(str, enum.Enum):
    """Why a server could not do what was asked."""

    WONT_START = "wont_start"  # the command could not run, exited, or never answered the handshake
    DIED = "died"  # the connection ended mid-call (the process exited, the HTTP server went away)
    TIMED_OUT = "timed_out"  # no answer within the time limit
    REFUSED = "refused"  # the server answered with an error (unknown tool, bad arguments...)
    NOT_CONNECTED = "not_connected"  # the server is not connected (never was, stopped, or closed)


class McpServerError(Exception):
    """One server's failure: its kind and a sentence naming the server and what to do.

    Attributes:
        server: the server's name as set up.
        failure: the kind.
        message: the sentence (also ``str(error)``).
    """

    def __init__(self, server: str, failure: McpFailure, message: str) -> None:
        super().__init__(message)
        self.server = server
        self.failure = failure
        self.message = message


@dataclass(frozen=True)
class McpTool:
    """One tool a server offers (MCP ``tools/list``).

    Attributes:
        server: the server's name as set up.
        name: the tool's name as the server calls it.
        description: what it does, in the server's words ("" when it gives none).
        input_schema: the JSON schema of its arguments (an object schema).
    """

    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class ToolResult:
    """One tool call's answer (MCP ``tools/call``).

    Attributes:
        server, tool: who was called.
        text: the result as text: the text parts joined by blank lines, other parts named
            (``[image, image/png]``), the structured result as JSON when there is no text.
        is_error: the tool itself reported an error (``isError``); the text says what, and it goes to
            the model like any result.
        seconds: from sending the call to its answer.
    """

    server: str
    tool: str
    text: str
    is_error: bool = False
    seconds: float = 0.0
