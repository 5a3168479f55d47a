"""Real-model UI tests: the window with the real engine process and SmolLM2 (pytest-qt).

Only what the real engine can show lives here (real tokens, Stop within 1 s during
real decode and prefill, a real crash, no network from the engine process,
deterministic greedy replies, KV cache reuse figures). The window's own logic is
tested on the FakeEngine in tests/ui.
"""

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


def close_window(win: MainWindow) -> None:
    win.close()
    win.conversations.close()


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
    close_window(win)


def reply_over(win: MainWindow) -> bool:
    """The window shows no reply in flight: the composer offers Send again."""
    return win.composer.button.text() == "Send"


def stats_shown_done(win: MainWindow) -> bool:
    """The stats panel (drawn on its repaint clock) shows the finished turn."""
    return win.stats_panel.phase.text().startswith("✓ Done")


def send(qtbot, win: MainWindow, text: str, timeout: int = REPLY_TIMEOUT_MS):
    """Type ``text`` and press Enter; returns the Finished event once the window shows the reply as over."""
    from PySide6.QtCore import Qt

    box = win.composer.box
    box.setFocus()
    qtbot.keyClicks(box, text)
    with qtbot.waitSignal(win.engine.generation_finished, timeout=timeout) as blocker:
        qtbot.keyClick(box, Qt.Key.Key_Return)
    fin = blocker.args[0]
    qtbot.waitUntil(
        lambda: reply_over(win) and win.chat_view.messages[-1].text.endswith(fin.text) and stats_shown_done(win),
        timeout=timeout,
    )
    return fin


def capture_requests(win: MainWindow) -> list:
    """Every request the window sends to the engine from now on (EngineClient.request_sent)."""
    sent: list = []
    win.engine.request_sent.connect(sent.append)
    return sent
