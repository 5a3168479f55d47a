"""Engine tests run the real engine process on the real SmolLM2 model (helpers: :mod:`tests.support.engine`)."""

from __future__ import annotations

import pytest

from tests.support.engine import Engine, start_engine


@pytest.fixture(scope="module")
def engine(smollm2):
    """SmolLM2 in an engine process, n_ctx 4096, shared by a test module."""
    eng = start_engine(smollm2, n_ctx=4096)
    yield eng
    eng.host.stop()


@pytest.fixture
def fresh_engine(smollm2):
    """A factory for an engine with its own settings (stopped after the test)."""
    made: list[Engine] = []

    def make(**settings) -> Engine:
        eng = start_engine(smollm2, **settings)
        made.append(eng)
        return eng

    yield make
    for eng in made:
        eng.host.stop()
