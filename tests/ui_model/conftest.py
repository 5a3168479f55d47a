"""Real-model UI tests: the window with the real engine process and SmolLM2 (pytest-qt).

Only what the real engine can show lives here (real tokens, Stop within 1 s during
real decode and prefill, a real crash, no network from the engine process,
deterministic greedy replies, KV cache reuse figures). The window's own logic is
tested on the FakeEngine in tests/ui.
"""

from __future__ import annotations

import pytest

from app.ui.window.main_window import MainWindow
from tests.support.window import close_window, open_window, reply_over, short_replies, stats_shown_done
from tests.support.window import load as _load
from tests.support.window import send as _send

__all__ = ["close_window", "reply_over", "stats_shown_done"]  # re-exported for the tests here

LOAD_TIMEOUT_MS = 60_000
REPLY_TIMEOUT_MS = 60_000


def make_window(qtbot) -> MainWindow:
    """The window as app.main builds it (same wiring), with its own engine process."""
    return open_window(qtbot)


def load(qtbot, win: MainWindow, path) -> None:
    _load(qtbot, win, path, LOAD_TIMEOUT_MS)


@pytest.fixture
def window(qtbot, smollm2):
    """A window with SmolLM2 loaded (n_ctx from the default settings), max_tokens 48."""
    win = make_window(qtbot)
    load(qtbot, win, smollm2)
    short_replies(win)
    yield win
    close_window(win)


def send(qtbot, win: MainWindow, text: str, timeout: int = REPLY_TIMEOUT_MS):
    """Type ``text`` and press Enter; returns the Finished event once the window shows the reply as over."""
    return _send(qtbot, win, text, timeout)


def capture_requests(win: MainWindow) -> list:
    """Every request the window sends to the engine from now on (EngineClient.request_sent)."""
    sent: list = []
    win.engine.request_sent.connect(sent.append)
    return sent
