"""Driving the real window in pytest-qt, on a scripted engine host or the real engine.

The window is built as app.main builds it (same wiring). Its engine is the real
:class:`~app.ui.engine.client.EngineClient`, with either a scripted host
(:class:`~tests.support.fake_engine.FakeEngine`, :attr:`WindowEngine.SCRIPTED`: no process, no
weights, answers in milliseconds) or its own engine process (:attr:`WindowEngine.REAL`: the real
model). What a test does with the window (load a model, type and send, wait until the reply shows
as over) is the same on both, so it is written once here; each wait's budget follows the engine
(:func:`wait_ms`). The pytest fixtures over these are in :mod:`tests.support.window_fixtures`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QApplication

from app.core import protocol as P
from app.paths import default_paths
from app.ui.engine.client import EngineClient, EngineState
from app.ui.theme import apply_theme
from app.ui.window.compose import create_window
from app.ui.window.main_window import MainWindow
from tests.support.fake_engine import FakeEngine
from tests.support.window_fixtures import WindowEngine, both_engines

__all__ = [
    "LOAD_TIMEOUT_MS",
    "REPLY_TIMEOUT_MS",
    "SHORT_REPLY_TOKENS",
    "TINY_TEMPLATE",
    "WAIT_MS",
    "WindowEngine",
    "banner_button",
    "both_engines",
    "capture_requests",
    "close_window",
    "load",
    "make_window",
    "open_window",
    "reply_over",
    "send",
    "short_replies",
    "stats_shown_done",
    "wait_ms",
]

SHORT_REPLY_TOKENS = 48  # short replies keep the suites fast on a 2-core machine
WAIT_MS = 5_000  # the scripted engine answers in milliseconds; this is only a guard
LOAD_TIMEOUT_MS = 60_000  # the real engine: a process start and a model load on a busy machine
REPLY_TIMEOUT_MS = 60_000  # the real engine: a reply of SHORT_REPLY_TOKENS tokens
TINY_TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"


def wait_ms(win: MainWindow) -> int:
    """The budget for one engine round trip (a load, a reply) on ``win``'s engine, milliseconds."""
    return WAIT_MS if isinstance(win.engine, FakeEngine) else REPLY_TIMEOUT_MS


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


def make_window(qtbot, engine: EngineClient | WindowEngine = WindowEngine.SCRIPTED) -> MainWindow:
    """The window on ``engine``: a scripted one waits until its engine is ready, the real one does not.

    ``engine``: :attr:`WindowEngine.SCRIPTED` (a new FakeEngine), :attr:`WindowEngine.REAL` (a new
    engine process), or an engine client the test made.
    """
    if engine is WindowEngine.REAL:
        return open_window(qtbot)
    client = FakeEngine() if engine is WindowEngine.SCRIPTED else engine
    assert isinstance(client, EngineClient)
    return open_window(qtbot, client, ready_timeout_ms=WAIT_MS if isinstance(client, FakeEngine) else None)


def close_window(win: MainWindow) -> None:
    win.close()
    win.conversations.close()


def load(qtbot, win: MainWindow, path: Path | str, timeout: int | None = None) -> None:
    """Load ``path`` through the window and wait until the engine is READY with it."""
    with qtbot.waitSignal(win.engine.model_loaded, timeout=timeout or wait_ms(win)):
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


def send(qtbot, win: MainWindow, text: str, timeout: int | None = None) -> P.Finished:
    """Type ``text`` and press Enter; returns the Finished event once the window shows the reply as over."""
    timeout = timeout or wait_ms(win)
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


def banner_button(win: MainWindow, text: str) -> QAbstractButton:
    """The banner's action button labelled ``text`` (the one shown now)."""
    found = [b for b in win.banner.findChildren(QAbstractButton) if b.text() == text and b.isVisible()]
    assert found, f"no {text!r} button on the banner: {win.banner.text.text()!r}"
    return found[-1]


def capture_requests(win: MainWindow) -> list:
    """Every request the window sends to the engine from now on (EngineClient.request_sent)."""
    sent: list = []
    win.engine.request_sent.connect(sent.append)
    return sent
