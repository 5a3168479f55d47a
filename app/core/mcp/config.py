"""MCP server settings: which servers the person added, how each is reached, which tools are off.

Stored in settings.json under ``mcp`` (:class:`McpSettings`). A server is reached either by a stdio
command Glassbox starts (``npx -y @modelcontextprotocol/server-filesystem ~/notes``) or by a
streamable-HTTP URL (``http://127.0.0.1:8000/mcp``), as the MCP specification's two transports
(https://modelcontextprotocol.io/specification/2025-11-25/basic/transports).
"""

from __future__ import annotations

import enum
import shlex
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

DEFAULT_CALL_TIMEOUT_S = 60.0
MIN_CALL_TIMEOUT_S = 1.0
MAX_CALL_TIMEOUT_S = 3600.0
MAX_NAME_CHARS = 64


class McpTransport(str, enum.Enum):
    """How Glassbox reaches a server."""

    STDIO = "stdio"  # Glassbox starts the command and speaks JSON-RPC on its stdin / stdout
    HTTP = "http"  # streamable HTTP: POSTs to a URL (a server already running)


class McpConfigError(ValueError):
    """A server's settings cannot be used; the message names the value and what to do."""


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server.

    Attributes:
        name: what the window calls it (unique among the servers, 1-64 characters, no ``/``).
        transport: stdio or streamable HTTP.
        command: the program to start (stdio), e.g. ``npx`` or ``/usr/bin/python3``.
        args: its arguments (stdio).
        env: extra environment variables ``(NAME, value)`` for the command (stdio), over the few the
            SDK passes on (HOME, PATH, SHELL, TERM, USER, LOGNAME).
        url: the endpoint (HTTP), ``http://`` or ``https://``.
    """

    name: str
    transport: McpTransport = McpTransport.STDIO
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""

    @classmethod
    def stdio(cls, name: str, command_line: str, env: tuple[tuple[str, str], ...] = ()) -> McpServerConfig:
        """A stdio server from a command line as typed (split as a POSIX shell would, no shell run).

        Raises:
            McpConfigError: an unclosed quote, or nothing to run.
        """
        try:
            words = shlex.split(command_line)
        except ValueError as exc:
            raise McpConfigError(f"The command line of {name!r} cannot be read ({exc}): check its quotes.") from exc
        if not words:
            raise McpConfigError(f"Server {name!r} has no command: type the program to start, e.g. npx.")
        return cls(name=name.strip(), command=words[0], args=tuple(words[1:]), env=env).checked()

    @classmethod
    def http(cls, name: str, url: str) -> McpServerConfig:
        """A streamable-HTTP server at ``url``.

        Raises:
            McpConfigError: the URL is not http(s) with a host.
        """
        return cls(name=name.strip(), transport=McpTransport.HTTP, url=url.strip()).checked()

    @property
    def command_line(self) -> str:
        """The stdio command as one line (quoted where needed); the URL for HTTP."""
        if self.transport is McpTransport.HTTP:
            return self.url
        return shlex.join([self.command, *self.args])

    def checked(self) -> McpServerConfig:
        """This config, if it can be used.

        Raises:
            McpConfigError: a bad name, no command, or a URL that is not http(s)://host...
        """
        if not self.name or len(self.name) > MAX_NAME_CHARS or "/" in self.name:
            raise McpConfigError(f"A server's name must be 1-{MAX_NAME_CHARS} characters without '/': {self.name!r}.")
        if self.transport is McpTransport.STDIO:
            if not self.command.strip():
                raise McpConfigError(f"Server {self.name!r} has no command: type the program to start, e.g. npx.")
            bad = [k for k, _ in self.env if not k or "=" in k]
            if bad:
                raise McpConfigError(f"Server {self.name!r}: {bad[0]!r} is not an environment variable name.")
            return self
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise McpConfigError(
                f"Server {self.name!r}: {self.url!r} is not an http:// or https:// URL "
                "(a streamable-HTTP MCP endpoint, e.g. http://127.0.0.1:8000/mcp)."
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        if self.transport is McpTransport.HTTP:
            return {"name": self.name, "transport": self.transport.value, "url": self.url}
        return {
            "name": self.name,
            "transport": self.transport.value,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
        }

    @classmethod
    def from_dict(cls, data: object) -> McpServerConfig | None:
        """From stored values; None when the entry cannot be used (it is dropped, not guessed)."""
        if not isinstance(data, dict):
            return None
        try:
            transport = McpTransport(data.get("transport", McpTransport.STDIO.value))
        except ValueError:
            return None
        args, env = data.get("args"), data.get("env")
        try:
            return cls(
                name=_text(data.get("name")),
                transport=transport,
                command=_text(data.get("command")),
                args=tuple(a for a in args if isinstance(a, str)) if isinstance(args, list) else (),
                env=tuple((k, v) for k, v in env.items() if isinstance(k, str) and isinstance(v, str))
                if isinstance(env, dict)
                else (),
                url=_text(data.get("url")),
            ).checked()
        except McpConfigError:
            return None


@dataclass(frozen=True)
class McpSettings:
    """The MCP servers and their tools' switches.

    Attributes:
        servers: in the order added; names unique.
        disabled_tools: ``(server name, tool name)`` pairs switched off; a tool not listed is on
            (a server's new tools are offered until switched off; each call is still confirmed).
        call_timeout_s: how long a tool call may take before it is reported as hung, seconds.
        use_in_chats: offer the tools switched on to the model in the chat (Tools → Use MCP tools in
            chats; off by default: each call is confirmed, but a person turns tools on knowingly).
    """

    servers: tuple[McpServerConfig, ...] = ()
    disabled_tools: tuple[tuple[str, str], ...] = ()
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    use_in_chats: bool = False

    def server(self, name: str) -> McpServerConfig | None:
        """The server called ``name``, or None."""
        return next((s for s in self.servers if s.name == name), None)

    def with_server(self, config: McpServerConfig) -> McpSettings:
        """These settings with ``config`` added.

        Raises:
            McpConfigError: a server of that name is already there.
        """
        if self.server(config.name) is not None:
            raise McpConfigError(f"There is already a server called {config.name!r}: choose another name.")
        return replace(self, servers=(*self.servers, config.checked()))

    def without_server(self, name: str) -> McpSettings:
        """These settings without the server ``name`` (and its tools' switches)."""
        return replace(
            self,
            servers=tuple(s for s in self.servers if s.name != name),
            disabled_tools=tuple(p for p in self.disabled_tools if p[0] != name),
        )

    def tool_enabled(self, server: str, tool: str) -> bool:
        """Whether ``server``'s tool ``tool`` is offered to the model."""
        return (server, tool) not in self.disabled_tools

    def with_tool_enabled(self, server: str, tool: str, enabled: bool) -> McpSettings:
        """These settings with one tool switched on or off."""
        rest = tuple(p for p in self.disabled_tools if p != (server, tool))
        return replace(self, disabled_tools=rest if enabled else (*rest, (server, tool)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "servers": [s.to_dict() for s in self.servers],
            "disabled_tools": [list(p) for p in self.disabled_tools],
            "call_timeout_s": self.call_timeout_s,
            "use_in_chats": self.use_in_chats,
        }

    @classmethod
    def from_dict(cls, data: object) -> McpSettings:
        """From stored values; a bad server entry is dropped, a bad field gets its default."""
        if not isinstance(data, dict):
            return cls()
        servers: tuple[McpServerConfig, ...] = ()
        raw = data.get("servers")
        for entry in raw if isinstance(raw, list) else ():
            config = McpServerConfig.from_dict(entry)
            if config is not None and all(s.name != config.name for s in servers):
                servers += (config,)
        pairs = data.get("disabled_tools")
        disabled = tuple(
            (p[0], p[1])
            for p in (pairs if isinstance(pairs, list) else ())
            if isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
        )
        timeout = data.get("call_timeout_s")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool):
            timeout_s = min(MAX_CALL_TIMEOUT_S, max(MIN_CALL_TIMEOUT_S, float(timeout)))
        else:
            timeout_s = DEFAULT_CALL_TIMEOUT_S
        return cls(
            servers=servers,
            disabled_tools=disabled,
            call_timeout_s=timeout_s,
            use_in_chats=data.get("use_in_chats") is True,
        )


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""
