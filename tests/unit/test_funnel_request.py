"""The funnel's one path (app/engine/funnel_request.py): a live reply's step and a stored reply's step become
the same KeptStep, with the same checks, before the one run_funnel call (no model needed up to it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.core import protocol as P
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.params import SamplerSettings
from app.engine.errors import EngineError
from app.engine.funnel_request import checked_sampler, live_reply, live_step, stored_step
from app.engine.funnel_store import ReplyLogits

SETTINGS = SamplerSettings(temperature=0.7, seed=3)


@pytest.fixture
def reply():
    """A two-step reply over a 5-token vocabulary, still in the store's full-vocabulary ring."""
    store = ReplyLogits(reply_id=12, settings=SETTINGS, seed=99, prompt=(7, 8), n_vocab=5)
    store.record(np.array([0.0, 1.0, 2.0, 3.0, 4.0], dtype=np.float32), 4)
    store.record(np.array([4.0, 0.0, 0.0, 0.0, 0.0], dtype=np.float32), 0)
    store.close()
    return store


def test_a_live_step_is_the_whole_vocabulary_with_its_history(reply):
    kept = live_step(reply, 0)
    assert (kept.reply_id, kept.step, kept.seed, kept.drawn, kept.exact) == (12, 0, 99, 4, True)
    assert kept.history == (7, 8)
    assert kept.ids.tolist() == [0, 1, 2, 3, 4] and kept.logits.tolist() == [0, 1, 2, 3, 4]
    assert kept.logsumexp == pytest.approx(math.log(sum(math.exp(v) for v in range(5))), rel=1e-6)
    assert kept.texts is None  # the loaded vocabulary names the rows
    newest = live_step(reply, -1)  # -1: the newest step
    assert (newest.step, newest.drawn, newest.history) == (1, 0, (7, 8, 4))


def test_a_live_reply_must_be_the_one_asked_for_and_hold_the_step(reply):
    assert live_reply(reply, -1) is reply and live_reply(reply, 12) is reply
    for store, rid in ((None, -1), (reply, 11)):
        with pytest.raises(EngineError) as err:
            live_reply(store, rid)
        assert err.value.kind is P.FailureKind.NO_LOGITS
    with pytest.raises(EngineError) as err:
        live_step(reply, 2)
    assert err.value.kind is P.FailureKind.NO_LOGITS and "Token 3 of the reply" in err.value.message


def test_a_stored_step_is_its_top_n_never_exact():
    stored = StoredStep(
        reply_id=5,
        step=2,
        ids=(9, 4),
        logits=(1.5, -0.5),
        logsumexp=2.0,
        drawn=4,
        history=(1, 2, 3),
        texts={9: "x", 4: "y"},
        settings=SETTINGS,
        seed=17,
    )
    kept = stored_step(stored)
    assert (kept.reply_id, kept.step, kept.seed, kept.drawn, kept.exact, kept.logsumexp) == (5, 2, 17, 4, False, 2.0)
    assert kept.ids.dtype == np.int32 and kept.ids.tolist() == [9, 4]
    assert kept.logits.dtype == np.float32 and kept.logits.tolist() == [1.5, -0.5]
    assert kept.history == (1, 2, 3) and kept.texts == {9: "x", 4: "y"}


def test_the_settings_run_are_the_panels_or_the_replys_own_and_must_be_in_range():
    panel = SamplerSettings(top_k=5)
    assert checked_sampler(panel, SETTINGS) is panel
    assert checked_sampler(None, SETTINGS) is SETTINGS
    with pytest.raises(EngineError) as err:
        checked_sampler(None, SamplerSettings(top_p=2.0))
    assert err.value.kind is P.FailureKind.BAD_SETTINGS and "top_p" in err.value.message
