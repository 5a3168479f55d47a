"""docs/CONTRIBUTING.md's "How to add a panel", run as written: its code blocks are the panel's
module, the lines added at the end of ``Panels.__init__`` and the panel's test. The recipe's
Latency panel is the tenth dock (after the ninth, Speculation); the same lines with another name make
an eleventh. Each gets its View-menu action (the tenth its key, the eleventh none), refreshes on the repaint clock, and a restart restores where it was.
"""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.ui.window import panels as panels_module
from app.ui.window.menus import shortcut_sheet
from app.ui.window.panels import Panels
from tests.support.fake_engine import FakeEngine
from tests.support.window import close_window, load, open_window, short_replies

CONTRIBUTING = Path(__file__).resolve().parents[2] / "docs" / "CONTRIBUTING.md"
WAIT_MS = 5_000  # the fake engine answers in milliseconds; this is only a guard
LEFT = Qt.DockWidgetArea.LeftDockWidgetArea
RIGHT = Qt.DockWidgetArea.RightDockWidgetArea


def recipe_blocks() -> list[str]:
    """The Python code blocks of the recipe, in order: the widget, the dock, the test."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    section = text.split("## How to add a panel", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", section, re.M | re.S)
    return [textwrap.dedent(code) for _indent, code in blocks]


def tenth(dock_lines: str) -> str:
    """The recipe's dock lines for a second panel of the same kind, named Gaps."""
    out = dock_lines.replace('"Latency", "latencyDock"', '"Gaps", "gapsDock"')
    return out.replace("self.latency_panel", "self.gaps_panel").replace("self.latency_dock", "self.gaps_dock")


@pytest.fixture
def with_recipe(monkeypatch):
    """``app/ui/panels/latency.py`` as the recipe writes it, and ``Panels.__init__`` ending with the
    recipe's lines (then the same lines for an eleventh dock)."""
    widget, dock_lines, _test = recipe_blocks()
    module = types.ModuleType("app.ui.panels.latency")
    module.__file__ = "app/ui/panels/latency.py"
    exec(compile(widget, "CONTRIBUTING.md: app/ui/panels/latency.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "app.ui.panels.latency", module)
    original = Panels.__init__

    def init(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        local = dict(inspect.signature(original).bind(self, *args, **kwargs).arguments)
        namespace = {**vars(panels_module), **local}
        exec("from app.ui.panels.latency import LatencyPanel", namespace)  # "among its imports"
        for lines in (dock_lines, tenth(dock_lines)):
            exec(compile(lines, "CONTRIBUTING.md: Panels.__init__", "exec"), namespace)

    monkeypatch.setattr(Panels, "__init__", init)
    return module


@pytest.fixture
def window(qtbot, tiny_model, with_recipe):
    """The window as app.main builds it (fake engine, tiny model loaded), with the recipe's panels."""
    win = open_window(qtbot, FakeEngine(), ready_timeout_ms=WAIT_MS)
    load(qtbot, win, tiny_model, WAIT_MS)
    short_replies(win)
    yield win
    close_window(win)


def _view_toggle(win, title: str):
    [view] = [a.menu() for a in win.menuBar().actions() if a.text() == "&View"]
    [toggle] = [a for a in view.actions() if a.text() == f"{title} panel"]
    return toggle


def test_the_tenth_and_eleventh_docks_get_their_view_menu_actions_and_keys(qtbot, window, with_recipe):
    docks = window.docks
    assert len(docks) == 11
    latency, gaps = window.panels.latency_dock, window.panels.gaps_dock
    assert isinstance(window.panels.latency_panel, with_recipe.LatencyPanel)
    assert list(docks)[9:] == [latency, gaps] and docks.named("latencyDock") is latency
    assert _view_toggle(window, "Latency").shortcut().toString() == "Ctrl+Shift+0"
    assert _view_toggle(window, "Gaps").shortcut().isEmpty()  # docks past the tenth have no key
    listed = dict(shortcut_sheet(window.menuBar()))
    assert "View → Latency panel" in listed
    assert window.dockWidgetArea(latency) == RIGHT and latency.isVisible() and gaps.isVisible()
    # The key closes and opens it, as the first nine's do.
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    ctrl_shift = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(QApplication.focusWidget() or window, Qt.Key.Key_0, ctrl_shift)
    assert not latency.isVisible()
    qtbot.keyClick(QApplication.focusWidget() or window, Qt.Key.Key_0, ctrl_shift)
    assert latency.isVisible()


def test_the_recipes_own_test_passes_on_the_repaint_clock(qtbot, window):
    """The recipe's test, as written: the label is set only by ``refresh``, which only the repaint
    clock calls (through the dock's ``refresh``)."""
    namespace: dict = {}
    exec(compile(recipe_blocks()[2], "CONTRIBUTING.md: the test", "exec"), namespace)
    namespace["test_the_latency_panel_shows_the_last_gap"](qtbot, window)
    shown = window.panels.latency_panel.label.text()
    assert shown.endswith(" ms") and shown != "–"
    qtbot.waitUntil(lambda: window.panels.gaps_panel.label.text() == shown, timeout=WAIT_MS)  # the eleventh too


def test_a_restart_restores_where_the_new_docks_were(qtbot, tiny_model, with_recipe):
    first = open_window(qtbot, FakeEngine(), ready_timeout_ms=WAIT_MS)
    try:
        latency, gaps = first.panels.latency_dock, first.panels.gaps_dock
        assert latency.isVisible() and first.dockWidgetArea(gaps) == RIGHT
        latency.close()
        first.addDockWidget(LEFT, gaps)
        assert first.dockWidgetArea(gaps) == LEFT
    finally:
        close_window(first)  # saves the layout, as quitting does
    again = open_window(qtbot, FakeEngine(), ready_timeout_ms=WAIT_MS)
    try:
        assert again.panels.latency_dock.isHidden() and not _view_toggle(again, "Latency").isChecked()
        assert again.dockWidgetArea(again.panels.gaps_dock) == LEFT and again.panels.gaps_dock.isVisible()
        assert again.dockWidgetArea(again.stats_dock) == RIGHT and again.stats_dock.isVisible()
    finally:
        close_window(again)
