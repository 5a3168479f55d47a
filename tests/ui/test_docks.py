"""The dock registry (app/ui/window/docks.py) on a bare main window: keys for the first ten docks
and none past them, names unique, tab groups, the columns the layout sizes, refresh on the clock."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMainWindow

from app.core.inspection.pipeline_guide import LiveView
from app.ui.window.docks import DockRegistry, DockSpec
from app.ui.window.window_layout import fit_to_screen

RIGHT = Qt.DockWidgetArea.RightDockWidgetArea
LEFT = Qt.DockWidgetArea.LeftDockWidgetArea


@pytest.fixture
def main(qtbot):
    win = QMainWindow()
    win.setCentralWidget(QLabel("centre"))
    qtbot.addWidget(win)
    win.resize(1200, 800)
    return win


def test_the_first_ten_docks_get_keys_and_the_eleventh_none(main):
    docks = DockRegistry(main)
    added = [docks.add(DockSpec(f"P{i}", f"p{i}Dock", QLabel(str(i)), RIGHT)) for i in range(11)]
    keys = [docks.shortcut(d) for d in added]
    assert [k.toString() for k in keys[:10] if k is not None] == [f"Ctrl+Shift+{i}" for i in (*range(1, 10), 0)]
    assert keys[10] is None
    assert list(docks) == added and len(docks) == 11
    assert docks.named("p10Dock") is added[10] and docks.panel("p3Dock").text() == "3"
    with pytest.raises(ValueError):
        docks.add(DockSpec("Again", "p0Dock", QLabel(), RIGHT))
    with pytest.raises(KeyError):
        docks.named("nope")


def test_tabs_columns_and_the_live_views(qtbot, main):
    docks = DockRegistry(main)
    a = docks.add(DockSpec("A", "aDock", QLabel(), LEFT, share=3))
    b = docks.add(DockSpec("B", "bDock", QLabel(), LEFT, share=7, shows=(LiveView.MODEL,)))
    c = docks.add(DockSpec("C", "cDock", QLabel(), LEFT, tab_with="aDock"))
    d = docks.add(DockSpec("D", "dDock", QLabel(), LEFT, hidden=True))
    with pytest.raises(KeyError):
        docks.add(DockSpec("E", "eDock", QLabel(), LEFT, tab_with="nope"))
    assert docks.tab_groups() == [(a, c)] and main.tabifiedDockWidgets(a) == [c]
    assert docks.column(LEFT) == [a, b] and d.isHidden()
    assert docks.showing(LiveView.MODEL) is b and docks.showing(LiveView.FUNNEL) is None
    docks.raise_fronts()
    fit_to_screen(main, docks)  # before the window is shown, as the window does
    main.show()
    qtbot.waitUntil(lambda: b.height() > 2 * a.height(), timeout=2_000)  # 7 shares against 3


def test_refresh_reaches_docks_on_screen_and_those_refreshed_hidden(qtbot, main):
    docks = DockRegistry(main)
    ticks: dict[str, list[bool]] = {"shown": [], "hidden": [], "hidden_too": []}
    docks.add(DockSpec("S", "sDock", QLabel(), RIGHT, refresh=ticks["shown"].append))
    docks.add(DockSpec("H", "hDock", QLabel(), RIGHT, hidden=True, refresh=ticks["hidden"].append))
    docks.add(
        DockSpec("T", "tDock", QLabel(), RIGHT, hidden=True, refresh=ticks["hidden_too"].append, refresh_hidden=True)
    )
    main.show()
    qtbot.waitExposed(main)
    docks.refresh(True)
    docks.refresh(False)
    assert ticks == {"shown": [True, False], "hidden": [], "hidden_too": [True, False]}


STRAY_CHILD = """
import json, os, sys, tempfile
os.environ["GLASSBOX_HOME"] = tempfile.mkdtemp(prefix="glassbox-docks-")
from PySide6.QtWidgets import QApplication, QDockWidget, QTabBar
from app.core.settings import Workspace
from app.paths import default_paths
from app.ui.theme import apply_theme
from app.ui.window.compose import create_window
from tests.support.fake_engine import FakeEngine

if __name__ == "__main__":
    app = QApplication(sys.argv[:1])
    apply_theme(app)
    win = create_window(default_paths().ensure(), FakeEngine())
    win.resize(1366, 768)
    win.show()
    def bars():
        for _ in range(20):
            app.processEvents()
        docks = {d.windowTitle(): d.geometry() for d in win.findChildren(QDockWidget) if d.isVisible()}
        found = []
        for bar in win.findChildren(QTabBar):
            if bar.parent() is win and bar.isVisible():
                tabs = [bar.tabText(i) for i in range(bar.count())]
                near = bar.geometry().adjusted(-4, -4, 4, 4)
                found.append({"tabs": tabs, "at": bar.geometry().topLeft().toTuple(),
                              "against_its_docks": any(t in docks and docks[t].intersects(near) for t in tabs)})
        return found

    started = bars()
    win.workspaces.show(Workspace.SAMPLING)
    lab = bars()
    win.workspaces.show(Workspace.CHAT)
    print(json.dumps({"started": started, "lab": lab, "back": bars()}))
    win.close()
    win.conversations.close()
"""


def test_no_stray_dock_tab_bar_in_a_started_window(tmp_path) -> None:
    """Qt made three tab bars for the Tokens | Timeline group and left two visible over the Model panel,
    and more at each workspace switch (in a window started as the app starts it; a pytest-qt window made
    one, so this runs in a child)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    script = tmp_path / "docks_child.py"
    script.write_text(STRAY_CHILD)
    env = {**os.environ, "PYTHONPATH": str(repo), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, str(script)], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for when in ("started", "lab", "back"):  # started; the sampling lab shown; the chat layout again
        assert [b for b in seen[when] if not b["against_its_docks"]] == [], when
    for when in ("started", "back"):
        assert sorted(sorted(b["tabs"]) for b in seen[when]) == [["Funnel", "Stats"], ["Timeline", "Tokens"]], when


def test_the_model_panel_fits_its_dock_at_1366x768_with_a_model_loaded(qtbot, window) -> None:
    """Values were cut at the dock's edge ("n_ctx 4,096 · threa") behind a sideways scroll bar: a section
    title and the context-policy box set the panel's least width past the dock's."""
    window.resize(1366, 768)
    panel, dock = window.model_panel, window.model_dock
    qtbot.waitUntil(lambda: panel.arch_title.isVisible() and dock.width() <= 260, timeout=5000)
    scroll = dock.widget()
    assert panel.minimumSizeHint().width() <= scroll.viewport().width(), (
        panel.minimumSizeHint().width(),
        scroll.viewport().width(),
    )
    assert not scroll.horizontalScrollBar().isVisible()
