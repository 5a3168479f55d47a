"""``McpLauncher``: Tools → MCP servers…, and the one place that owns the dialog (made on first use,
kept; closing it hides it)."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from app.ui.mcp.dialog import McpToolsDialog
from app.ui.mcp.servers import McpServers

ACTION_TEXT = "&MCP servers…"
USE_TEXT = "&Use MCP tools in chats"


class McpLauncher(QObject):
    """Opens the MCP servers dialog.

    Args:
        main: the main window (the dialog's parent).
        servers: the connections' owner.
    """

    def __init__(self, main: QWidget, servers: McpServers) -> None:
        super().__init__(main)
        self._main = main
        self.servers = servers
        self.dialog: McpToolsDialog | None = None
        self.use_action: QAction | None = None

    def add_to(self, menu: QMenu) -> QAction:
        """Put "MCP servers…" and the "Use MCP tools in chats" switch in ``menu``; returns the first."""
        act = QAction(ACTION_TEXT, self._main)
        act.setToolTip("Add MCP servers and choose which of their tools the model may ask to use.")
        act.triggered.connect(self.open)
        menu.addAction(act)
        use = QAction(USE_TEXT, self._main)
        use.setCheckable(True)
        use.setChecked(self.servers.config.use_in_chats)
        use.setToolTip("Offer the tools switched on to the model in the chat; each call is shown to you first.")
        use.toggled.connect(self.servers.set_use_in_chats)
        self.servers.config_changed.connect(lambda: use.setChecked(self.servers.config.use_in_chats))
        menu.addAction(use)
        self.use_action = use
        return act

    def open(self) -> McpToolsDialog:
        """Show the dialog (made on first use), in front."""
        if self.dialog is None:
            self.dialog = McpToolsDialog(self.servers, self._main)
        self.dialog.refresh()
        if self.dialog.isVisible():  # already open, maybe behind the main window: bring it forward
            self.dialog.raise_()
            self.dialog.activateWindow()
        else:
            self.dialog.show()
        return self.dialog
