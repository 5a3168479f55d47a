"""UI tests drive the real window (the same wiring as app.main) on a FakeEngine (pytest-qt).

No engine process and no model weights: the window talks to
:class:`tests.support.fake_engine.FakeEngine`, which answers with scripted
protocol events on the Qt event loop. What only the real engine can show lives
in tests/ui_model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtWidgets import QAbstractButton

from app.main import create_window
from app.paths import default_paths
from app.ui.engine_client import EngineState
from app.ui.main_window import MainWindow
from app.ui.theme import apply_theme
from tests.support.fake_engine import FakeEngine
from tests.support.models import llama_metadata, llama_tensors, write_gguf

WAIT_MS = 5_000  # the fake engine answers in milliseconds; this is only a guard
TINY_TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A structurally valid Q4_1 llama GGUF with a chat template (zeros for weights)."""
    path = tmp_path_factory.mktemp("models") / "Tiny-Chat-Q4_1.gguf"
    md = llama_metadata(name="Tiny Chat", file_type=3, extra={"tokenizer.chat_template": TINY_TEMPLATE})
    return write_gguf(path, md, llama_tensors(qtype="Q4_1")).resolve()


def make_window(qtbot, engine: FakeEngine | None = None) -> MainWindow:
    """The window as app.main builds it, on a FakeEngine (started, like app.main does)."""
    from PySide6.QtWidgets import QApplication

    apply_theme(QApplication.instance())
    win = create_window(default_paths().ensure(), engine=engine or FakeEngine())
    qtbot.addWidget(win)
    win.resize(1500, 940)
    win.show()
    with qtbot.waitSignal(win.engine.engine_ready, timeout=WAIT_MS):
        win.engine.start()
    return win


def close_window(win: MainWindow) -> None:
    win.close()
    win.conversations.close()


def load(qtbot, win: MainWindow, path) -> None:
    with qtbot.waitSignal(win.engine.model_loaded, timeout=WAIT_MS):
        assert win.load_model(str(path))
    assert win.engine.state == EngineState.READY


@pytest.fixture
def window(qtbot, tiny_model):
    """A window on a FakeEngine with the tiny model loaded (max_tokens 48, as on the real model)."""
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    win.sampler_panel.set_settings(replace(win.sampler_panel.settings(), max_tokens=48), emit=True)
    yield win
    close_window(win)


def reply_over(win: MainWindow) -> bool:
    """The window shows no reply in flight: the composer offers Send again."""
    return win.composer.button.text() == "Send"


def stats_shown_done(win: MainWindow) -> bool:
    """The stats panel (drawn on its repaint clock) shows the finished turn."""
    return win.stats_panel.phase.text().startswith("✓ Done")


def send(qtbot, win: MainWindow, text: str, timeout: int = WAIT_MS):
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


def banner_button(win: MainWindow, text: str) -> QAbstractButton:
    """The banner's action button labelled ``text`` (the one shown now)."""
    found = [b for b in win.banner.findChildren(QAbstractButton) if b.text() == text and b.isVisible()]
    assert found, f"no {text!r} button on the banner: {win.banner.text.text()!r}"
    return found[-1]
