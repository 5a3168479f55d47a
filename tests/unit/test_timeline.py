"""The turn on a time axis (app.core.inspection.timeline): folded from the engine's events, stored compactly."""

from __future__ import annotations

import json

import pytest

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.conversations import MessageMeta
from app.core.inspection.timeline import PrefillSlice, TimelineRecorder, TurnTimeline


def prompt(elapsed_s: float = 0.010) -> P.PromptPrepared:
    return P.PromptPrepared(
        1, elapsed_s, 300, 100, 200, 0, (), "text", template_s=0.004, tokenize_s=0.003, reuse_s=0.001
    )


def token(i: int, t_s: float, piece: str = "x") -> P.TokenEvent:
    return P.TokenEvent(1, piece, 500 + i, piece, i, t_s, 300 + i)


# Sample times: TTFT 0.5 s, steps of 10 ms except one of 50 ms (token 3) and one of 21 ms (token 5).
TIMES = [0.5, 0.51, 0.52, 0.57, 0.58, 0.601, 0.611]


def recorded() -> TurnTimeline:
    rec = TimelineRecorder()
    rec.on_prompt(prompt())
    rec.on_prefill(P.PrefillProgress(1, 60, 200, 0.2))  # progress inside the first slice: not a slice
    rec.on_prefill(P.PrefillProgress(1, 128, 200, 0.3, slice_tokens=128))
    rec.on_prefill(P.PrefillProgress(1, 199, 200, 0.45, slice_tokens=71))
    rec.on_prefill(P.PrefillProgress(1, 200, 200, 0.49, slice_tokens=1))
    for i, t in enumerate(TIMES):
        rec.on_token(token(i, t, f"p{i}"))
    rec.on_finished(0.62, StopReason.EOS)
    return rec.snapshot()


def test_the_recorder_folds_the_events_into_phases_slices_and_steps() -> None:
    t = recorded()
    assert (t.template_s, t.tokenize_s, t.reuse_s, t.prepared_s) == (0.004, 0.003, 0.001, 0.010)
    assert (t.prompt_tokens, t.cached_tokens) == (300, 100)
    # Each slice starts where the previous one (or the prompt's preparation) ended.
    assert t.slices == (
        PrefillSlice(0.010, 0.3, 128),
        PrefillSlice(0.3, 0.45, 71),
        PrefillSlice(0.45, 0.49, 1),
    )
    assert sum(s.tokens for s in t.slices) == 200
    assert t.slices[0].tok_s == pytest.approx(128 / 0.29)
    assert t.ttft_s == 0.5 and t.prefill_end_s == 0.49
    assert t.step_latencies_ms() == pytest.approx([10, 10, 50, 10, 21, 10])
    assert t.median_step_ms() == pytest.approx(10)
    # Steps over 2x the median: the 50 ms one and the 21 ms one (token indices 3 and 5).
    assert t.slow_steps() == (3, 5)
    assert t.token_pieces == tuple(f"p{i}" for i in range(7)) and t.token_ids == tuple(range(500, 507))
    assert (t.end_s, t.stop_reason) == (0.62, StopReason.EOS)


def test_a_turn_that_failed_ends_at_its_last_event() -> None:
    rec = TimelineRecorder()
    rec.on_prompt(prompt())
    rec.on_token(token(0, 0.5))
    rec.on_token(token(1, 0.53))
    rec.on_finished(0.0, StopReason.ERROR)
    t = rec.snapshot()
    assert t.end_s == 0.53 and t.stop_reason is StopReason.ERROR


def test_rebuild_slices_are_kept_apart_from_the_prompt_prefill() -> None:
    rec = TimelineRecorder()
    rec.on_prompt(prompt())
    rec.on_prefill(P.PrefillProgress(1, 200, 200, 0.3, slice_tokens=200))
    rec.on_token(token(0, 0.31))
    rec.on_prefill(P.PrefillProgress(1, 90, 90, 0.4, rebuild=True, slice_tokens=90))
    t = rec.snapshot()
    assert t.slices[1] == PrefillSlice(0.31, 0.4, 90, rebuild=True)
    assert t.prefill_end_s == 0.3


def test_the_stored_form_round_trips_through_json() -> None:
    t = recorded()
    back = TurnTimeline.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back is not None
    assert back.slices == t.slices and back.token_ids == t.token_ids and back.token_pieces == t.token_pieces
    # Steps are kept as float32 milliseconds: sub-microsecond agreement.
    assert back.token_times_s == pytest.approx(t.token_times_s, abs=1e-6)
    assert back.slow_steps() == t.slow_steps()
    assert (back.template_s, back.tokenize_s, back.reuse_s, back.prepared_s) == (0.004, 0.003, 0.001, 0.010)
    assert (back.end_s, back.stop_reason) == (t.end_s, t.stop_reason)


def test_the_stored_form_costs_about_eleven_bytes_per_token_plus_its_text() -> None:
    n = 1000
    rec = TimelineRecorder()
    rec.on_prompt(prompt())
    for i in range(n):
        rec.on_token(token(i, 0.5 + i * 0.01, ""))
    d = rec.snapshot().to_dict()
    per_token = (len(d["steps_ms_f32"]) + len(d["ids_i32"])) / n
    assert per_token == pytest.approx(8 * 4 / 3, rel=0.01)  # two 4-byte values per token, base64


@pytest.mark.parametrize(
    "damage",
    [
        {"format": 99},
        {"steps_ms_f32": "not base64!"},
        {"ids_i32": "AAAA"},  # one id for seven tokens
        {"pieces": ["only one"]},
        {"slices": [[0.0, "x", 1, 0]]},
    ],
)
def test_a_damaged_stored_timeline_reads_as_none(damage: dict) -> None:
    d = recorded().to_dict()
    d.update(damage)
    assert TurnTimeline.from_dict(d) is None


def test_a_reply_meta_keeps_its_timeline_and_old_metas_read_without_one() -> None:
    t = recorded()
    meta = MessageMeta(model_name="m", chat_template="{{ x }}", timeline=t)
    back = MessageMeta.from_dict(json.loads(json.dumps(meta.to_dict())))
    assert back.timeline is not None and back.timeline.token_ids == t.token_ids
    assert back.chat_template == "{{ x }}"
    old = meta.to_dict()
    del old["timeline"], old["chat_template"]  # a reply stored before timelines were kept
    back = MessageMeta.from_dict(old)
    assert back.timeline is None and back.chat_template is None
