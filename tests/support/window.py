"""Driving the real window in pytest-qt, on the fake engine (tests/ui) or the real one (tests/ui_model).

The two folders' conftests give these their own timeouts and engines; what a test does
with the window (load a model, type and send, wait until the reply shows as over) is
the same, so it is written once here.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.compose import create_window
from app.core import protocol as P
from app.paths import default_paths
from app.ui.engine.client import EngineClient, EngineState
from app.ui.theme import apply_theme
from app.ui.window.main_window import MainWindow

SHORT_REPLY_TOKENS = 48  # short replies keep the suites fast on a 2-core machine


def open_window(qtbot, engine: EngineClient | None = None, ready_timeout_ms: int | None = None) -> MainWindow:
    """The window as app.main builds it (same wiring), shown at 1500x940, its engine started.

    ``engine``: None for a real engine process; ``ready_timeout_ms``: wait that long for
    ``engine_ready`` (None: do not wait).
    """
    apply_theme(QApplication.instance())
    win = create_window(default_paths().ensure(), engine=engine)
    qtbot.addWidget(win)
    win.resize(1500, 940)
    win.show()
    if ready_timeout_ms is None:
        win.engine.start()
    else:
        with qtbot.waitSignal(win.engine.engine_ready, timeout=ready_timeout_ms):
            win.engine.start()
    return win


def close_window(win: MainWindow) -> None:
    win.close()
    win.conversations.close()


def load(qtbot, win: MainWindow, path, timeout: int) -> None:
    """Load ``path`` through the window and wait until the engine is READY with it."""
    with qtbot.waitSignal(win.engine.model_loaded, timeout=timeout):
        assert win.load_model(str(path))
    assert win.engine.state == EngineState.READY


def short_replies(win: MainWindow) -> None:
    """max_tokens = SHORT_REPLY_TOKENS in the Sampler panel (as the person would set it)."""
    panel = win.sampler_panel
    panel.set_settings(replace(panel.settings(), max_tokens=SHORT_REPLY_TOKENS), emit=True)


def reply_over(win: MainWindow) -> bool:
    """The window shows no reply in flight: the composer offers Send again."""
    return win.composer.button.text() == "Send"


def stats_shown_done(win: MainWindow) -> bool:
    """The stats panel (drawn on its repaint clock) shows the finished turn."""
    return win.stats_panel.phase.text().startswith("✓ Done")


def send(qtbot, win: MainWindow, text: str, timeout: int) -> P.Finished:
    """Type ``text`` and press Enter; returns the Finished event once the window shows the reply as over."""
    box = win.composer.box
    box.setFocus()
    qtbot.keyClicks(box, text)
    with qtbot.waitSignal(win.engine.generation_finished, timeout=timeout) as blocker:
        qtbot.keyClick(box, Qt.Key.Key_Return)
    fin: P.Finished = blocker.args[0]
    qtbot.waitUntil(
        lambda: reply_over(win) and win.chat_view.messages[-1].text.endswith(fin.text) and stats_shown_done(win),
        timeout=timeout,
    )
    return fin
