"""``McpPool``: one client per configured MCP server, kept in step with the settings; the one owner of
the connections (the Tools dialog and the chat read it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from app.core.mcp.config import McpServerConfig, McpSettings
from app.mcp.client import McpClient
from app.mcp.values import CloseReason, McpTool, ServerState

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 8.0  # all clients together, at quit (the SDK's stop of a stuck server takes up to about 6 s)

ClientFactory = Callable[[McpServerConfig, Callable[[ServerState], None]], McpClient]


def _client(config: McpServerConfig, on_state: Callable[[ServerState], None]) -> McpClient:
    return McpClient(config, on_state=on_state)


class McpPool:
    """The clients of the servers in :class:`McpSettings`, by name.

    Args:
        on_state: called with ``(server name, state)`` whenever a client's state changes, on that
            client's thread or the caller's (see :class:`McpClient`).
        make_client: builds a client (tests give a shorter connect time limit).
    """

    def __init__(
        self,
        on_state: Callable[[str, ServerState], None] | None = None,
        make_client: ClientFactory = _client,
    ) -> None:
        self._on_state = on_state
        self._make_client = make_client
        self._clients: dict[str, McpClient] = {}

    def apply(self, settings: McpSettings) -> None:
        """Start a client for each new server, close the removed ones, and restart one whose
        settings changed; the others keep their connection."""
        wanted = {s.name: s for s in settings.servers}
        for name in [n for n, c in self._clients.items() if wanted.get(n) != c.config]:
            reason = CloseReason.RESTARTED if name in wanted else CloseReason.REMOVED
            self._clients.pop(name).close(reason=reason)
        for name, config in wanted.items():
            if name not in self._clients:
                self._start(config)
        self._clients = {name: self._clients[name] for name in wanted}

    def reconnect(self, name: str) -> None:
        """Close the server ``name``'s client (if any) and start a new one."""
        client = self._clients.pop(name, None)
        if client is not None:
            client.close(reason=CloseReason.RESTARTED)
            self._start(client.config)

    def client(self, name: str) -> McpClient | None:
        """The client of the server ``name``, or None."""
        return self._clients.get(name)

    @property
    def clients(self) -> tuple[McpClient, ...]:
        """Every client, in the settings' order."""
        return tuple(self._clients.values())

    def enabled_tools(self, settings: McpSettings) -> tuple[McpTool, ...]:
        """The tools offered to the model: those of connected servers not switched off in ``settings``."""
        return tuple(
            tool
            for client in self._clients.values()
            if client.state is ServerState.CONNECTED
            for tool in client.tools
            if settings.tool_enabled(tool.server, tool.name)
        )

    def close_all(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """Close every client (their servers stop side by side); returns whether all their threads
        ended within ``wait_s`` seconds in all."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
        deadline = time.monotonic() + wait_s
        ended = all([c.close(max(0.0, deadline - time.monotonic())) for c in clients])
        if not ended:
            log.warning("MCP servers still stopping after %.0f s; left to the SDK's shutdown", wait_s)
        return ended

    def _start(self, config: McpServerConfig) -> None:
        name = config.name

        def on_state(state: ServerState) -> None:
            if self._on_state is not None:
                self._on_state(name, state)

        client = self._make_client(config, on_state)
        self._clients[name] = client
        client.start()
