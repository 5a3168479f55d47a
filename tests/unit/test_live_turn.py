"""LiveTurn folds a rolling-policy context rebuild without touching the prompt's prefill figures."""

from __future__ import annotations

import pytest

from app.core import protocol as P
from app.core.chat.context import GenerationStats
from app.ui.chat.turn import LiveTurn, TurnPhase


def _prepared(to_evaluate: int, dropped: int) -> P.PromptPrepared:
    return P.PromptPrepared(
        request_id=1,
        elapsed_s=0.01,
        prompt_tokens=to_evaluate,
        cached_tokens=0,
        to_evaluate=to_evaluate,
        dropped_messages=dropped,
        new_tokens=(),
        prompt_text="",
    )


def _token(index: int, t_s: float, n_past: int) -> P.TokenEvent:
    return P.TokenEvent(1, "x", 100 + index, "x", index, t_s, n_past)


def test_a_rebuild_mid_reply_is_not_the_prompts_prefill():
    turn = LiveTurn()
    turn.start()
    turn.on_prompt(_prepared(361, dropped=2))
    turn.on_prefill(P.PrefillProgress(1, 200, 361, 1.01))
    turn.on_prefill(P.PrefillProgress(1, 361, 361, 2.01))
    for i in range(30):
        turn.on_token(_token(i, 2.1 + i, 362 + i))
    assert (turn.prefill_done, turn.prefill_total) == (361, 361)
    assert turn.prefill_elapsed_s == pytest.approx(2.0)

    # The context is full: the rebuild evaluates 11 of 150 tokens by t = 30.96 s.
    turn.on_prefill(P.PrefillProgress(1, 11, 150, 30.96, rebuild=True))
    assert turn.phase is TurnPhase.DECODE and turn.rebuilding
    assert (turn.rebuild_done, turn.rebuild_total) == (11, 150)
    assert (turn.prefill_done, turn.prefill_total) == (361, 361)
    assert turn.prefill_elapsed_s == pytest.approx(2.0)
    assert turn.prefill_tok_s == pytest.approx(180.5)

    turn.on_shift(P.ContextShifted(1, 2, 0, 190, kept_tokens=40, evaluated_tokens=150, rebuild_s=1.5))
    assert not turn.rebuilding
    assert (turn.rebuilt_tokens, turn.rebuilt_s, turn.rebuild_tok_s) == (150, 1.5, 100.0)
    assert turn.context_parts() == (40, 150, 0)
    turn.on_token(_token(30, 33.0, 191))
    assert turn.context_parts() == (40, 150, 1)
    # Dropped before the reply and by the shift, each counted once.
    assert turn.dropped_messages == 4
    assert turn.prefill_tok_s == pytest.approx(180.5)

    turn.on_finished(
        GenerationStats(
            prompt_tokens=361,
            evaluated_tokens=361,
            prefill_s=2.0,
            generated_tokens=31,
            context_used=191,
            dropped_messages=4,
            context_shifts=1,
        )
    )
    assert turn.prefill_tok_s == pytest.approx(180.5) and turn.dropped_messages == 4
    assert turn.context_parts() == (40, 150, 1)


def test_without_a_shift_the_context_parts_are_the_prompts():
    turn = LiveTurn()
    turn.start()
    turn.on_prompt(P.PromptPrepared(1, 0.0, 100, 60, 40, 0, (), ""))
    turn.on_prefill(P.PrefillProgress(1, 20, 40, 0.5))
    assert turn.context_parts() == (60, 20, 0)
    turn.on_prefill(P.PrefillProgress(1, 40, 40, 1.0))
    turn.on_token(_token(0, 1.1, 101))
    assert turn.context_parts() == (60, 40, 1)
    assert turn.dropped_messages == 0
