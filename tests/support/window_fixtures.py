"""The window fixtures, one set for every folder (tests/conftest.py lists this module in ``pytest_plugins``).

- ``window_engine``: the :class:`WindowEngine` a test runs on; scripted unless
  a folder's conftest says otherwise (tests/ui_model: the real engine) or the test is parametrized
  over it (:data:`both_engines`).
- ``tiny_model``: a structurally valid Q4_1 llama GGUF with a chat template (zeros for weights).
- ``window_model``: the model the ``window`` loads: ``tiny_model`` on the scripted engine, SmolLM2
  on the real one.
- ``window``: the window as app.main builds it, on ``window_engine``, with ``window_model`` loaded
  (n_ctx from the default settings) and max_tokens 48; closed after the test.

This module imports no Qt and no app module at import time (every test session loads it, tests/unit
too); the fixtures import what they use.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


class WindowEngine(str, enum.Enum):
    """Which engine a window test runs on."""

    SCRIPTED = "scripted"  # the real client on a scripted host (FakeEngine), the tiny synthetic model
    REAL = "real"  # the real client on its own engine process, SmolLM2


both_engines = pytest.mark.parametrize("window_engine", list(WindowEngine), ids=[e.value for e in WindowEngine])
"""Run a test on both engines: it asks for ``window`` / ``window_engine`` / ``window_model`` as usual."""


@pytest.fixture
def window_engine() -> WindowEngine:
    """The scripted engine (tests/ui_model's conftest gives the real one)."""
    return WindowEngine.SCRIPTED


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A structurally valid Q4_1 llama GGUF with a chat template (zeros for weights)."""
    from tests.support.models import llama_metadata, llama_tensors, write_gguf
    from tests.support.window import TINY_TEMPLATE

    path = tmp_path_factory.mktemp("models") / "Tiny-Chat-Q4_1.gguf"
    md = llama_metadata(name="Tiny Chat", file_type=3, extra={"tokenizer.chat_template": TINY_TEMPLATE})
    return write_gguf(path, md, llama_tensors(qtype="Q4_1")).resolve()


@pytest.fixture
def window_model(request: pytest.FixtureRequest, window_engine: WindowEngine) -> Path:
    """The model the ``window`` loads on ``window_engine``."""
    name = "tiny_model" if window_engine is WindowEngine.SCRIPTED else "smollm2"
    path: Path = request.getfixturevalue(name)
    return path


@pytest.fixture
def window(qtbot, window_engine: WindowEngine, window_model: Path) -> Iterator[MainWindow]:
    """The window on ``window_engine`` with ``window_model`` loaded, max_tokens 48."""
    from tests.support.window import close_window, load, make_window, short_replies

    win = make_window(qtbot, window_engine)
    load(qtbot, win, window_model)
    short_replies(win)
    yield win
    close_window(win)
