"""``McpServers``: the window's one owner of the MCP connections.

It keeps an :class:`~app.mcp.pool.McpPool` in step with the settings' ``mcp`` field (the
:class:`~app.ui.window.settings_controller.SettingsController` owns those), changes them through it,
turns the clients' state changes (made on their own threads) into a queued Qt signal, and closes
every server when the main window closes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QEvent, QObject, Signal

from app.core.mcp.config import McpServerConfig, McpSettings
from app.core.settings import Settings
from app.mcp.client import McpClient
from app.mcp.pool import ClientFactory, McpPool
from app.mcp.values import McpTool, ServerState
from app.ui.window.settings_controller import SettingsController

log = logging.getLogger(__name__)


class McpServers(QObject):
    """The MCP servers the person set up, connected while the window runs.

    Args:
        settings: the settings' one owner (its ``mcp`` field).
        watch: a window whose Close closes every server (None: call :meth:`shutdown`).
        make_client: builds each client (tests give a short connect time limit).

    Signals:
        state_changed(str): the server of that name connected, failed, stopped or was closed (its
            client's ``state``, ``tools`` and ``error`` say how); emitted on the window's thread.
        config_changed(): the MCP settings changed (a server added or removed, a tool switched).
    """

    state_changed = Signal(str)
    config_changed = Signal()
    _client_state = Signal(str, object)  # from a client's thread (queued)

    def __init__(
        self,
        settings: SettingsController,
        watch: QObject | None = None,
        make_client: ClientFactory | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._settings = settings
        self._client_state.connect(self._on_client_state)
        on_state: Callable[[str, ServerState], None] = self._client_state.emit
        self._pool = McpPool(on_state, make_client) if make_client is not None else McpPool(on_state)
        self._watched = watch
        if watch is not None:
            watch.installEventFilter(self)
        settings.changed.connect(self._settings_changed)
        self._applied = settings.settings.mcp
        self._pool.apply(self._applied)

    @property
    def config(self) -> McpSettings:
        """The MCP settings as they stand."""
        return self._settings.settings.mcp

    def client(self, name: str) -> McpClient | None:
        """The client of the server ``name`` (None: no such server)."""
        return self._pool.client(name)

    @property
    def clients(self) -> tuple[McpClient, ...]:
        """Every server's client, in the order added."""
        return self._pool.clients

    def enabled_tools(self) -> tuple[McpTool, ...]:
        """The tools offered to the model now: connected servers' tools that are switched on."""
        return self._pool.enabled_tools(self.config)

    def add_server(self, config: McpServerConfig) -> None:
        """Add ``config`` to the settings (it connects at once).

        Raises:
            McpConfigError: its name is taken or it cannot be used (the message says which).
        """
        mcp = self.config.with_server(config)
        self._change(lambda s: replace(s, mcp=mcp))

    def remove_server(self, name: str) -> None:
        """Remove the server ``name`` from the settings (its connection is closed)."""
        self._change(lambda s: replace(s, mcp=s.mcp.without_server(name)))

    def set_tool_enabled(self, server: str, tool: str, enabled: bool) -> None:
        """Offer ``server``'s ``tool`` to the model, or not."""
        self._change(lambda s: replace(s, mcp=s.mcp.with_tool_enabled(server, tool, enabled)))

    def set_call_timeout(self, seconds: float) -> None:
        """How long a tool call may take before it is reported as hung, seconds."""
        self._change(lambda s: replace(s, mcp=replace(s.mcp, call_timeout_s=float(seconds))))

    def set_use_in_chats(self, on: bool) -> None:
        """Offer the tools switched on to the model in the chat, or not."""
        self._change(lambda s: replace(s, mcp=replace(s.mcp, use_in_chats=bool(on))))

    def reconnect(self, name: str) -> None:
        """Close the server ``name`` and connect it again (a server that stopped, or was changed outside)."""
        self._pool.reconnect(name)
        self.state_changed.emit(name)

    def shutdown(self) -> None:
        """Close every server (their processes stopped side by side, a few seconds at most)."""
        self._pool.close_all()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The watched window closing closes every server."""
        if watched is self._watched and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def _change(self, change: Callable[[Settings], Settings]) -> None:
        self._settings.apply(change)

    def _settings_changed(self, settings: Settings) -> None:
        if settings.mcp != self._applied:
            self._applied = settings.mcp
            self._pool.apply(settings.mcp)
            self.config_changed.emit()

    def _on_client_state(self, name: str, state: ServerState) -> None:
        log.debug("MCP server %r: %s", name, state.value)
        self.state_changed.emit(name)
