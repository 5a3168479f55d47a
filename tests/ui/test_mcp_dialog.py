"""Tools → MCP servers… in the window (scripted engine): add a server by its command, see its tools with
their descriptions, switch one off, see a server that will not start say why, remove one; the settings
keep it all, and closing the window stops every server. The server is the real test MCP server
(tests/support/mcp_server.py) over stdio."""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt

from app.core.settings import SettingsStore
from app.mcp.values import ServerState
from app.ui.mcp.dialog import SERVER_ROLE, TOOL_ROLE, McpToolsDialog
from app.ui.mcp.entry import ACTION_TEXT, McpLauncher
from app.ui.window.main_window import MainWindow
from tests.support.mcp_server import script_path
from tests.support.window import close_window, make_window

CONNECT_MS = 20_000  # a Python MCP server starts in about 0.7 s here; this is only a guard


def _launcher(win: MainWindow) -> McpLauncher:
    launcher = win.findChild(McpLauncher)
    assert launcher is not None
    return launcher


def _rows(dialog: McpToolsDialog) -> dict[str, dict[str, tuple[str, bool]]]:
    """Per server row: its status text under "", then each tool's description and check."""
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for i in range(dialog.tree.topLevelItemCount()):
        top = dialog.tree.topLevelItem(i)
        rows = {"": (top.text(1), True)}
        for j in range(top.childCount()):
            c = top.child(j)
            rows[c.data(0, TOOL_ROLE)] = (c.text(1), c.checkState(0) == Qt.CheckState.Checked)
        out[top.data(0, SERVER_ROLE)] = rows
    return out


def _add(dialog: McpToolsDialog, name: str, command: str) -> bool:
    dialog.name_edit.setText(name)
    dialog.command_radio.setChecked(True)
    dialog.target_edit.setText(command)
    return dialog.add_from_form()


def test_add_a_server_switch_a_tool_off_and_keep_it(qtbot) -> None:  # type: ignore[no-untyped-def]
    win = make_window(qtbot)
    try:
        menu = win.menus.actions.tools_menu
        assert ACTION_TEXT in [a.text() for a in menu.actions()]
        launcher = _launcher(win)
        dialog = launcher.open()
        assert dialog.isVisible() and dialog.tree.topLevelItemCount() == 0
        assert "No server yet" in dialog.detail.text()

        assert _add(dialog, "test", f"{sys.executable} {script_path()}")
        client = launcher.servers.client("test")
        assert client is not None
        qtbot.waitUntil(lambda: client.state is ServerState.CONNECTED, timeout=CONNECT_MS)
        qtbot.waitUntil(lambda: "connected · 4 tools (4 on)" in _rows(dialog).get("test", {}).get("", ("",))[0])
        rows = _rows(dialog)["test"]
        assert rows["add"] == ("Add two whole numbers.", True)
        assert rows["echo"] == ("Say the text back.", True)

        # Switch "crash" off: the settings say so, and it is no longer offered.
        crash = next(
            dialog.tree.topLevelItem(0).child(j)
            for j in range(dialog.tree.topLevelItem(0).childCount())
            if dialog.tree.topLevelItem(0).child(j).data(0, TOOL_ROLE) == "crash"
        )
        crash.setCheckState(0, Qt.CheckState.Unchecked)
        assert not win.settings_ctl.settings.mcp.tool_enabled("test", "crash")
        assert {t.name for t in launcher.servers.enabled_tools()} == {"add", "echo", "hang"}
        qtbot.waitUntil(lambda: "(3 on)" in _rows(dialog)["test"][""][0])
        assert _rows(dialog)["test"]["crash"][1] is False

        # A name taken, then a command that is not there: said in words, nothing crashes.
        assert not _add(dialog, "test", "npx other")
        assert "already a server called 'test'" in dialog.add_error.text()
        assert _add(dialog, "broken", "/no/such/mcp-server")
        broken = launcher.servers.client("broken")
        assert broken is not None
        qtbot.waitUntil(lambda: broken.state is ServerState.FAILED, timeout=CONNECT_MS)
        qtbot.waitUntil(lambda: "did not start" in _rows(dialog)["broken"][""][0])
        dialog.select_server("broken")
        assert "could not start: its command /no/such/mcp-server was not found" in dialog.detail.text()

        dialog.select_server("broken")
        dialog.remove_button.click()
        assert launcher.servers.client("broken") is None
        qtbot.waitUntil(lambda: list(_rows(dialog)) == ["test"])

        win.settings_ctl.save_now()
        kept = SettingsStore(win.settings_ctl.store.path).load().mcp
        assert [s.name for s in kept.servers] == ["test"] and kept.disabled_tools == (("test", "crash"),)
    finally:
        close_window(win)
    assert client.state is ServerState.CLOSED  # the window's Close stopped the server


def test_a_bad_url_is_refused_in_the_form(qtbot) -> None:  # type: ignore[no-untyped-def]
    win = make_window(qtbot)
    try:
        dialog = _launcher(win).open()
        dialog.name_edit.setText("web")
        dialog.url_radio.setChecked(True)
        assert not dialog.env_edit.isEnabled() and dialog.target_edit.placeholderText().startswith("http://")
        dialog.target_edit.setText("localhost:8000/mcp")
        assert not dialog.add_from_form()
        assert "is not an http:// or https:// URL" in dialog.add_error.text()
        dialog.command_radio.setChecked(True)
        dialog.target_edit.setText("npx server")
        dialog.env_edit.setText("TOKEN")
        assert not dialog.add_from_form()
        assert "'TOKEN' is not NAME=value" in dialog.add_error.text()
        assert win.settings_ctl.settings.mcp.servers == ()
    finally:
        close_window(win)
