"""UI tests drive the real window (the same wiring as app.main) on a FakeEngine (pytest-qt).

No engine process and no model weights: the window talks to
:class:`tests.support.fake_engine.FakeEngine`, which answers with scripted
protocol events on the Qt event loop. What only the real engine can show lives
in tests/ui_model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QAbstractButton

from app.ui.window.main_window import MainWindow
from tests.support.fake_engine import FakeEngine
from tests.support.models import llama_metadata, llama_tensors, write_gguf
from tests.support.window import close_window, open_window, reply_over, short_replies, stats_shown_done
from tests.support.window import load as _load
from tests.support.window import send as _send

__all__ = ["close_window", "reply_over", "stats_shown_done"]  # re-exported for the tests here

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
    return open_window(qtbot, engine or FakeEngine(), ready_timeout_ms=WAIT_MS)


def load(qtbot, win: MainWindow, path) -> None:
    _load(qtbot, win, path, WAIT_MS)


@pytest.fixture
def window(qtbot, tiny_model):
    """A window on a FakeEngine with the tiny model loaded (max_tokens 48, as on the real model)."""
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    short_replies(win)
    yield win
    close_window(win)


def send(qtbot, win: MainWindow, text: str, timeout: int = WAIT_MS):
    """Type ``text`` and press Enter; returns the Finished event once the window shows the reply as over."""
    return _send(qtbot, win, text, timeout)


def banner_button(win: MainWindow, text: str) -> QAbstractButton:
    """The banner's action button labelled ``text`` (the one shown now)."""
    found = [b for b in win.banner.findChildren(QAbstractButton) if b.text() == text and b.isVisible()]
    assert found, f"no {text!r} button on the banner: {win.banner.text.text()!r}"
    return found[-1]
