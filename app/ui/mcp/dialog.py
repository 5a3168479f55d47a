"""``McpToolsDialog``: Tools → MCP servers…: the servers (add a command or a URL, remove, reconnect,
each one's status), their tools with descriptions, and a switch per tool.

It reads :class:`~app.ui.mcp.servers.McpServers` and changes things only through it; the list is
rebuilt when a server's state or the settings change (a few rows), keeping what was selected and
expanded.
"""

from __future__ import annotations

import html
import json
import shlex

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.mcp.config import MAX_CALL_TIMEOUT_S, MIN_CALL_TIMEOUT_S, McpConfigError, McpServerConfig, McpTransport
from app.mcp.client import McpClient
from app.mcp.values import ServerState
from app.ui.common import palette
from app.ui.mcp.servers import McpServers

SERVER_ROLE = Qt.ItemDataRole.UserRole  # a row's server name
TOOL_ROLE = Qt.ItemDataRole.UserRole + 1  # a tool row's tool name
INTRO = (
    "MCP servers give the model tools: programs it may ask to run. Glassbox shows you each call, with its exact "
    "arguments, and runs it only when you allow it."
)
COMMAND_HINT = "npx -y @modelcontextprotocol/server-filesystem ~/notes"
URL_HINT = "http://127.0.0.1:8000/mcp"
ENV_HINT = "NAME=value, separated by spaces (optional)"

STATE_WORDS = {
    ServerState.IDLE: ("not started", palette.MUTED),
    ServerState.CONNECTING: ("connecting…", palette.AMBER),
    ServerState.CONNECTED: ("connected", palette.GREEN),
    ServerState.FAILED: ("did not start", palette.RED),
    ServerState.STOPPED: ("stopped", palette.RED),
    ServerState.CLOSED: ("closed", palette.MUTED),
}


class McpToolsDialog(QDialog):
    """The MCP servers and their tools (not modal: the chat stays usable beside it).

    Attributes:
        tree: a row per server (status, command or URL) with a row per tool under it (check: offered
            to the model; the description beside it, the input schema in its tooltip).
        detail: the selected server's command or URL and its last error, in full.
        name_edit, command_radio, url_radio, target_edit, env_edit, add_button, add_error: the form
            that adds a server; ``add_error`` says what is wrong with it.
        remove_button, reconnect_button: act on the selected server.
        timeout_spin: the time limit per call, seconds.
    """

    def __init__(self, servers: McpServers, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("MCP servers")
        self.setObjectName("mcpToolsDialog")
        self._servers = servers
        self._filling = False
        lay = QVBoxLayout(self)
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        lay.addWidget(intro)

        self.tree = QTreeWidget()
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Server / tool", "Status / what it does"])
        self.tree.setAccessibleName("MCP servers and their tools")
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.tree.setUniformRowHeights(True)
        self.tree.itemChanged.connect(self._item_changed)
        self.tree.currentItemChanged.connect(lambda *_: self._show_detail())
        lay.addWidget(self.tree, 1)

        row = QHBoxLayout()
        self.reconnect_button = QPushButton("&Reconnect")
        self.reconnect_button.setToolTip("Close the selected server and connect it again.")
        self.reconnect_button.clicked.connect(self._reconnect)
        self.remove_button = QPushButton("Re&move")
        self.remove_button.setToolTip("Remove the selected server (its process is stopped).")
        self.remove_button.clicked.connect(self._remove)
        row.addWidget(self.reconnect_button)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        row.addWidget(QLabel("Time limit per call:"))
        self.timeout_spin = QDoubleSpinBox()
        self.timeout_spin.setRange(MIN_CALL_TIMEOUT_S, MAX_CALL_TIMEOUT_S)
        self.timeout_spin.setDecimals(0)
        self.timeout_spin.setSuffix(" s")
        self.timeout_spin.setAccessibleName("Time limit per tool call, seconds")
        self.timeout_spin.setValue(servers.config.call_timeout_s)
        self.timeout_spin.valueChanged.connect(servers.set_call_timeout)
        row.addWidget(self.timeout_spin)
        lay.addLayout(row)

        self.detail = QLabel()
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.detail)
        lay.addWidget(self._add_form())

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay.addWidget(buttons)

        # Rebuilt after the event that changed things, never inside it (a check's own itemChanged).
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(0)
        self._refresh_timer.timeout.connect(self.refresh)
        servers.state_changed.connect(lambda _name: self._refresh_timer.start())
        servers.config_changed.connect(self._refresh_timer.start)
        self.resize(880, 620)
        self.refresh()

    def _add_form(self) -> QGroupBox:
        box = QGroupBox("Add a server")
        form = QFormLayout(box)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("files")
        self.name_edit.setAccessibleName("New server's name")
        form.addRow("Name:", self.name_edit)
        kinds = QHBoxLayout()
        self.command_radio = QRadioButton("A command Glassbox starts (stdio)")
        self.url_radio = QRadioButton("A URL (streamable HTTP)")
        self.command_radio.setChecked(True)
        group = QButtonGroup(box)
        group.addButton(self.command_radio)
        group.addButton(self.url_radio)
        kinds.addWidget(self.command_radio)
        kinds.addWidget(self.url_radio)
        kinds.addStretch(1)
        form.addRow("Kind:", kinds)
        self.target_edit = QLineEdit()
        self.target_edit.setAccessibleName("New server's command or URL")
        self.target_label = QLabel("Command:")
        form.addRow(self.target_label, self.target_edit)
        self.env_edit = QLineEdit()
        self.env_edit.setPlaceholderText(ENV_HINT)
        self.env_edit.setAccessibleName("New server's environment variables")
        self.env_label = QLabel("Environment:")
        form.addRow(self.env_label, self.env_edit)
        add_row = QHBoxLayout()
        self.add_error = QLabel()
        self.add_error.setWordWrap(True)
        self.add_error.setStyleSheet(f"color: {palette.RED};")
        self.add_button = QPushButton("&Add server")
        self.add_button.clicked.connect(self.add_from_form)
        self.target_edit.returnPressed.connect(self.add_from_form)
        add_row.addWidget(self.add_error, 1)
        add_row.addWidget(self.add_button, 0, Qt.AlignmentFlag.AlignTop)
        form.addRow(add_row)
        self.command_radio.toggled.connect(self._kind_changed)
        self._kind_changed()
        return box

    # ----------------------------------------------------------------------- commands

    def add_from_form(self) -> bool:
        """Add the server the form describes; False (and the reason beside the button) when it cannot be."""
        name = self.name_edit.text().strip()
        target = self.target_edit.text().strip()
        try:
            if self.command_radio.isChecked():
                config = McpServerConfig.stdio(name, target, env=_env_pairs(self.env_edit.text()))
            else:
                config = McpServerConfig.http(name, target)
            self._servers.add_server(config)
        except McpConfigError as exc:
            self.add_error.setText(str(exc))
            return False
        self.add_error.clear()
        for edit in (self.name_edit, self.target_edit, self.env_edit):
            edit.clear()
        self.refresh()
        self.select_server(config.name)
        return True

    def select_server(self, name: str) -> None:
        """Make the server ``name``'s row the current one, expanded."""
        for item in _top_items(self.tree):
            if item.data(0, SERVER_ROLE) == name:
                self.tree.setCurrentItem(item)
                item.setExpanded(True)

    def selected_server(self) -> str | None:
        """The server of the current row (a tool row: its server), or None."""
        item = self.tree.currentItem()
        return None if item is None else item.data(0, SERVER_ROLE)

    def _remove(self) -> None:
        name = self.selected_server()
        if name is not None:
            self._servers.remove_server(name)

    def _reconnect(self) -> None:
        name = self.selected_server()
        if name is not None:
            self._servers.reconnect(name)

    def _kind_changed(self) -> None:
        stdio = self.command_radio.isChecked()
        self.target_label.setText("Command:" if stdio else "URL:")
        self.target_edit.setPlaceholderText(COMMAND_HINT if stdio else URL_HINT)
        self.env_edit.setEnabled(stdio)
        self.env_label.setEnabled(stdio)

    def _item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        tool = item.data(0, TOOL_ROLE)
        if self._filling or column != 0 or tool is None:
            return
        on = item.checkState(0) == Qt.CheckState.Checked
        self._servers.set_tool_enabled(item.data(0, SERVER_ROLE), tool, on)

    # ----------------------------------------------------------------------- the list

    def refresh(self) -> None:
        """Rebuild the list from the servers' states and the settings, keeping selection and expansion."""
        current = self.tree.currentItem()
        keep = None if current is None else (current.data(0, SERVER_ROLE), current.data(0, TOOL_ROLE))
        expanded = {item.data(0, SERVER_ROLE) for item in _top_items(self.tree) if item.isExpanded()}
        config = self._servers.config
        self._filling = True
        try:
            self.tree.clear()
            for client in self._servers.clients:
                item = self._server_item(client)
                self.tree.addTopLevelItem(item)
                for tool in client.tools if client.state is ServerState.CONNECTED else ():
                    child = QTreeWidgetItem([tool.name, _first_line(tool.description)])
                    child.setData(0, SERVER_ROLE, client.name)
                    child.setData(0, TOOL_ROLE, tool.name)
                    child.setFlags(child.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                    on = config.tool_enabled(client.name, tool.name)
                    child.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                    child.setToolTip(0, "Offered to the model" if on else "Off: not offered to the model")
                    if not on:  # the check box alone is faint on the dark theme
                        for col in (0, 1):
                            child.setForeground(col, QBrush(palette.qcolor(palette.FAINT)))
                    child.setToolTip(1, _tool_tooltip(tool.description, tool.input_schema))
                    item.addChild(child)
                item.setExpanded(client.name in expanded or keep is None or keep[0] == client.name)
                if keep is not None and keep[0] == client.name:
                    tools = [c for c in _children(item) if c.data(0, TOOL_ROLE) == keep[1]]
                    self.tree.setCurrentItem(tools[0] if tools else item)
        finally:
            self._filling = False
        top = _top_items(self.tree)
        if self.tree.currentItem() is None and top:
            self.tree.setCurrentItem(top[0])
        self._show_detail()

    def _server_item(self, client: McpClient) -> QTreeWidgetItem:
        words, colour = STATE_WORDS[client.state]
        if client.state is ServerState.CONNECTED:
            on = sum(self._servers.config.tool_enabled(client.name, t.name) for t in client.tools)
            words = f"{words} · {len(client.tools)} tools ({on} on)"
        item = QTreeWidgetItem([client.name, f"{words} — {client.config.command_line}"])
        item.setData(0, SERVER_ROLE, client.name)
        item.setForeground(1, QBrush(palette.qcolor(colour)))
        font = item.font(0)
        font.setBold(True)
        item.setFont(0, font)
        item.setToolTip(1, client.error or client.config.command_line)
        return item

    def _show_detail(self) -> None:
        name = self.selected_server()
        client = None if name is None else self._servers.client(name)
        has = client is not None
        self.remove_button.setEnabled(has)
        self.reconnect_button.setEnabled(has)
        if client is None:
            self.detail.setText(
                f"<span style='color:{palette.MUTED}'>No server yet: add one below (a command such as "
                f"<code>{html.escape(COMMAND_HINT)}</code>, or a URL).</span>"
                if not self._servers.clients
                else ""
            )
            return
        kind = "Command" if client.config.transport is McpTransport.STDIO else "URL"
        words, colour = STATE_WORDS[client.state]
        text = (
            f"<b>{html.escape(client.name)}</b>: <span style='color:{colour}'>{words}</span>. "
            f"{kind}: <code>{html.escape(client.config.command_line)}</code>"
        )
        if client.config.env:  # names only: values are often keys
            names = ", ".join(html.escape(k) for k, _ in client.config.env)
            text += f" <span style='color:{palette.MUTED}'>(environment: {names})</span>"
        if client.error and client.state in (ServerState.FAILED, ServerState.STOPPED):
            text += f"<br><span style='color:{palette.RED}'>{html.escape(client.error)}</span>"
        self.detail.setText(text)


def _env_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """``NAME=value`` words (split as a shell would) as pairs.

    Raises:
        McpConfigError: a word without ``=``, or unclosed quotes.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise McpConfigError(f"The environment cannot be read ({exc}): check its quotes.") from exc
    pairs = []
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or not name:
            raise McpConfigError(f"{word!r} is not NAME=value: write each variable as NAME=value.")
        pairs.append((name, value))
    return tuple(pairs)


def _top_items(tree: QTreeWidget) -> list[QTreeWidgetItem]:
    return [item for i in range(tree.topLevelItemCount()) if (item := tree.topLevelItem(i)) is not None]


def _children(item: QTreeWidgetItem) -> list[QTreeWidgetItem]:
    return [child for i in range(item.childCount()) if (child := item.child(i)) is not None]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _tool_tooltip(description: str, schema: dict[str, object]) -> str:
    """A tool's whole description and its arguments' JSON schema (rich text)."""
    body = html.escape(json.dumps(schema, indent=2, ensure_ascii=False))
    return f"<p>{html.escape(description or 'No description.')}</p><pre>{body}</pre>"
