"""Real-model UI tests: the window with the real engine process and SmolLM2 (pytest-qt).

Only what the real engine can show lives here (real tokens, Stop within 1 s during
real decode and prefill, a real crash, no network from the engine process,
deterministic greedy replies, KV cache reuse figures), and the window tests that must
hold on both engines (:data:`tests.support.window_fixtures.both_engines`). The window's
own logic is tested on the scripted engine in tests/ui. The fixtures are
:mod:`tests.support.window_fixtures`; the helpers :mod:`tests.support.window`.
"""

from __future__ import annotations

import pytest

from tests.support.window_fixtures import WindowEngine


@pytest.fixture
def window_engine() -> WindowEngine:
    """The ``window`` here runs on the real engine."""
    return WindowEngine.REAL
