"""UI tests drive the real window with the real engine and SmolLM2 (pytest-qt)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.main import create_window
from app.paths import default_paths
from app.ui.engine_client import EngineState
from app.ui.main_window import MainWindow
from app.ui.theme import apply_theme

LOAD_TIMEOUT_MS = 60_000
REPLY_TIMEOUT_MS = 60_000


def make_window(qtbot) -> MainWindow:
    """The window as app.main builds it (same wiring), with its own engine process."""
    from PySide6.QtWidgets import QApplication

    apply_theme(QApplication.instance())
    win = create_window(default_paths().ensure())
    qtbot.addWidget(win)
    win.resize(1500, 940)
    win.show()
    win.engine.start()
    return win


def load(qtbot, win: MainWindow, path) -> None:
    with qtbot.waitSignal(win.engine.model_loaded, timeout=LOAD_TIMEOUT_MS):
        assert win.load_model(str(path))
    assert win.engine.state == EngineState.READY


@pytest.fixture
def window(qtbot, smollm2):
    """A window with SmolLM2 loaded (n_ctx from the default settings)."""
    win = make_window(qtbot)
    load(qtbot, win, smollm2)
    # Short replies keep the suite fast on a 2-core machine.
    win.sampler_panel.set_settings(replace(win.sampler_panel.settings(), max_tokens=48), emit=True)
    yield win
    win.close()
    win.conversations.close()


def send(qtbot, win: MainWindow, text: str, timeout: int = REPLY_TIMEOUT_MS):
    """Type ``text`` and press Enter; returns the Finished event."""
    from PySide6.QtCore import Qt

    box = win.composer.box
    box.setFocus()
    qtbot.keyClicks(box, text)
    with qtbot.waitSignal(win.engine.generation_finished, timeout=timeout) as blocker:
        qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.wait(60)  # let the repaint clock render the final text
    return blocker.args[0]
