"""Figures of a reply that outgrows n_ctx under "drop oldest turns" (rolling policy).

The context rebuild mid-reply is not the prompt's prefill: its progress events say
so, and the Prefill figures of the turn (app.ui.chat.turn.LiveTurn) keep the prompt's.
The messages counted as dropped add up the same in every place: PromptPrepared's
drop, each ContextShifted's, and Finished's total.
"""

from __future__ import annotations

from app.core import protocol as P
from app.ui.chat.turn import LiveTurn
from tests.support.engine import ROLLING_POLICY, SYSTEM


def test_a_context_rebuild_keeps_the_prefill_figures_and_the_dropped_counts_true(fresh_engine):
    eng = fresh_engine(n_ctx=256, context_policy=ROLLING_POLICY)
    filler = " ".join(f"fact{i}" for i in range(40))
    history = [SYSTEM]
    for i in range(3):
        history += [("user", f"Remember this: {filler}"), ("assistant", f"Noted {i}.")]
    history.append(("user", "Write the numbers from 1 to 3000, one per line."))
    turn = LiveTurn()
    turn.start()
    checks: list[tuple[int, int, float]] = []  # (prefill_done, prefill_total, prefill_elapsed_s) at each shift

    def fold(ev) -> None:
        if isinstance(ev, P.PromptPrepared):
            turn.on_prompt(ev)
        elif isinstance(ev, P.PrefillProgress):
            turn.on_prefill(ev)
        elif isinstance(ev, P.TokenEvent):
            turn.on_token(ev)
        elif isinstance(ev, P.ContextShifted):
            turn.on_shift(ev)
            checks.append((turn.prefill_done, turn.prefill_total, turn.prefill_elapsed_s))

    events: list = []
    fin = eng.generate(history, events=events, on_event=fold, temperature=0.0, max_tokens=400, repeat_penalty=1.0)
    assert isinstance(fin, P.Finished), getattr(fin, "message", fin)
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    shifts = [e for e in events if isinstance(e, P.ContextShifted)]
    assert prepared.dropped_messages >= 2, "the prompt itself must not fit, so the turn starts with a drop"
    assert shifts, f"no context shift; stop reason {fin.stats.stop_reason}, {fin.stats.generated_tokens} tokens"

    # Progress events: the prompt's prefill before the first token, the rebuilds after it.
    first_token = next(i for i, e in enumerate(events) if isinstance(e, P.TokenEvent))
    progress = [(i, e) for i, e in enumerate(events) if isinstance(e, P.PrefillProgress)]
    assert all(not e.rebuild for i, e in progress if i < first_token)
    assert all(e.rebuild for i, e in progress if i > first_token)
    for shift in shifts:
        at = events.index(shift)
        last = [e for i, e in progress if i < at][-1]
        assert last.rebuild and last.done == last.total == shift.evaluated_tokens > 0
        assert shift.kept_tokens + shift.evaluated_tokens == shift.n_past <= 256
        assert shift.rebuild_s > 0

    # The context never holds more than n_ctx, not even for the token sampled when it was full.
    assert max(e.n_past for e in events if isinstance(e, P.TokenEvent)) == 256

    # The Prefill figures during the reply stay the prompt's, whatever the rebuilds do.
    for done, total, elapsed in checks:
        assert done == total == prepared.to_evaluate
        assert elapsed <= fin.stats.ttft_s
    turn.on_finished(fin.stats)
    assert turn.prefill_tok_s == fin.stats.prefill_tok_s
    assert turn.rebuilt_tokens == sum(s.evaluated_tokens for s in shifts)

    # Dropped messages: each counted once, never more than there were before the last message.
    total = prepared.dropped_messages + sum(s.dropped_messages for s in shifts)
    assert fin.stats.dropped_messages == total == turn.dropped_messages
    assert total <= len(history) - 2, f"{total} dropped of {len(history) - 2} droppable messages"
