"""The window's speculation figures in plain Python (app/ui/speculative/figures.py, measure.py's requests,
draft_memory.py): marks by token step, the hover, the bars, round ends, the roofline sentence, the
speed-up sentence, the advice for a reply not speculated, the draft's memory for a bad file."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage, GenerationStats, LoadSettings, Role
from app.core.sampling.params import Mirostat, SamplerSettings
from app.core.speculative.settings import Drafter, SpeculationSettings
from app.core.speculative.stats import RoundEnd, SpeculationStats
from app.ui.speculative import figures as F
from app.ui.speculative.draft_memory import draft_memory
from app.ui.speculative.measure import (
    MAX_TOKENS,
    PAIRS,
    MeasureSource,
    greedy_requests,
    paired_requests,
    speedup_of,
)

STATS = SpeculationStats(
    drafter=Drafter.PROMPT_LOOKUP,
    draft_max=4,
    rounds=5,
    drafted=10,
    accepted=6,
    accepted_at=(4, 2, 0, 0),
    drafted_at=(5, 3, 2, 0),
    round_ends=((RoundEnd.MISMATCH, 3), (RoundEnd.NO_DRAFT, 1), (RoundEnd.STOPPED, 1)),
    draft_s=0.01,
    verify_s=0.3,
    sample_s=0.02,
    accepted_tokens=(0, 1, 4, 5, 6, 9),
    rejected=((2, " foo"), (7, "bar")),
    weight_bytes_per_token=50e6,
)


def test_marks_count_the_reply_steps_after_an_earlier_part():
    m = F.DraftMarks.of(STATS, offset=10)  # a continued reply: 10 tokens before Continue
    assert m.accepted == frozenset({10, 11, 14, 15, 16, 19})
    assert m.rejected_at(12) == " foo" and m.rejected_at(2) is None
    assert "proposed “·foo”" in m.hover(12) and "accepted" in m.hover(10) and m.hover(13) == ""
    assert m.legend(20) == (
        "Underlined: drafted by the prompt lookup and accepted (6 of the 10 tokens of the last request; the 10 "
        "before it were written by an earlier request and are not marked). "
        "▾: a rejected draft (2), hover it for what was proposed."
    )


def test_a_rejected_draft_shows_its_newlines_and_invisible_characters():
    """Review of issue 22: the hover read "proposed '`: def total(items):'", the newline shown as a space."""
    stats = replace(STATS, rejected=((2, "`:\ndef total(items):\r\u200b\t"),))
    hover = F.DraftMarks.of(stats).hover(2)
    assert "proposed “`:⏎def·total(items):⟨U+000D⟩⟨U+200B⟩→”" in hover
    assert "\n" not in hover and "\u200b" not in hover
    assert F.visible_draft("") == "∅" and F.visible_draft("ok") == "ok"


def test_the_bars_by_position_leave_out_positions_never_drafted():
    bars = F.position_bars(STATS)
    assert [(b.position, b.accepted, b.drafted) for b in bars] == [(1, 4, 5), (2, 2, 3), (3, 0, 2)]
    assert [round(b.rate, 3) for b in bars] == [0.8, 0.667, 0.0]


def test_round_ends_every_way_with_its_share():
    rows = {end: (n, share) for end, _w, n, share in F.round_end_rows(STATS)}
    assert rows[RoundEnd.MISMATCH] == (3, 0.6) and rows[RoundEnd.DRAFT_MAX] == (0, 0.0)
    assert set(rows) == set(RoundEnd)


def test_footer_and_details():
    assert F.footer_part(STATS) == "drafts 6/10 accepted (60%)"
    lines = F.detail_lines(STATS, 31.25)
    assert lines[0] == "speculative decoding: prompt lookup, draft_max 4"
    assert lines[1] == "drafted 10 · accepted 6 (60%) · 5 rounds · 1.20 accepted per round · decode 31.2 tok/s"


def test_the_roofline_sentence():
    assert F.WeightReads(100e6, 50e6).sentence() == "47.7 MiB speculated, 95.4 MiB plain (÷2.00)."
    with_bw = F.WeightReads(100e6, 50e6, 10e9).sentence()
    assert with_bw.endswith("At 10.0 GB/s: at most 200 tok/s, 100 plain.")
    assert F.WeightReads(0, 50e6).sentence() == "Not known for this reply."


def test_the_roofline_counts_the_draft_models_reads():
    # The reviewer's case: the model's reads alone looked like a saving (÷1.50); the draft model's own
    # reads (its weights once per llama_decode) make it more than plain.
    reads = F.WeightReads(143e6, 95.3e6, 10e9, draft=80e6)
    assert reads.total == 175.3e6 and reads.saving == 143e6 / 175.3e6
    assert reads.sentence().startswith(
        "167.2 MiB speculated (model 90.9 MiB + draft model 76.3 MiB), 136.4 MiB plain (×1.23: more than plain)."
    )
    assert "at most 57 tok/s, 70 plain" in reads.sentence()
    spec = replace(STATS, weight_bytes_per_token=50e6, draft_weight_bytes_per_token=20e6)
    assert spec.total_weight_bytes_per_token == 70e6


def test_the_speed_up_sentence_says_where_greedy_texts_part():
    same = F.Speedup(20.0, 30.0, 100, 100, F.parted_at("abc", "abc"), STATS)
    assert same.ratio == 1.5
    assert same.sentence() == (
        "Speed-up ×1.50 (faster): 30.0 tok/s speculated (100 tokens), 20.0 plain (100), greedy · 60% of drafts accepted"
    )
    assert F.parted_at("abcd", "abxd") == 2 and F.parted_at("ab", "abc") == 2
    differ = F.Speedup(20.0, 10.0, 100, 90, F.parted_at("abcd", "abxd"))
    assert "(slower)" in differ.sentence() and differ.sentence().endswith("the two texts part at character 2")


def test_pairs_give_a_median_and_a_range_and_say_within_noise():
    # The reviewer's four presses (×1.80, ×1.12, ×0.82, ×1.06): one pair's verdict was chance.
    noisy = F.Speedup(20.0, 21.2, 100, 100, -1, STATS, (1.80, 0.82, 1.06))
    assert noisy.ratio == 1.06 and noisy.verdict == "within noise"
    assert noisy.sentence().startswith("Speed-up ×1.06 (within noise, median of 3 pairs, range ×0.82–×1.80): ")
    steady = F.Speedup(20.0, 30.0, 100, 100, -1, STATS, (1.45, 1.50, 1.62))
    assert steady.verdict == "faster" and "(faster, median of 3 pairs, range ×1.45–×1.62)" in steady.sentence()
    assert F.Speedup(20.0, 15.0, 100, 100, -1, None, (0.7, 0.75, 0.9)).verdict == "slower"


def test_the_measurement_alternates_the_order_of_its_pairs():
    src = MeasureSource((ChatMessage(Role.USER, "hi"),), SamplerSettings(temperature=0.7, max_tokens=-1))
    sent = paired_requests(src)
    assert [r.speculate for r in sent] == [False, True, True, False, False, True]
    assert len(sent) == 2 * PAIRS and all(r.sampler.temperature == 0.0 and r.external for r in sent)

    def fin(text: str, tok_s: float, spec: bool) -> P.Finished:
        stats = GenerationStats(generated_tokens=11, decode_s=10 / tok_s, speculation=STATS if spec else None)
        return P.Finished(0, text, stats)

    ends = [fin("a", 10.0, False), fin("a", 15.0, True), fin("a", 8.0, True), fin("a", 10.0, False)]
    ends += [fin("a", 10.0, False), fin("ab", 12.0, True)]
    result = speedup_of(ends, sent)
    assert result.ratios == pytest.approx((1.5, 0.8, 1.2))  # each pair speculated / plain, whatever its order
    assert result.ratio == pytest.approx(1.2) and result.verdict == "within noise"
    assert result.plain_tok_s == pytest.approx(10.0) and result.speculated_tok_s == pytest.approx(12.0)
    assert result.parted_at == -1 and result.spec == STATS


def test_what_to_do_when_a_reply_was_not_speculated():
    assert "Load one" in F.not_speculated_advice(None)
    assert "Turn on “Speculative decoding”" in F.not_speculated_advice(SpeculationSettings())
    assert "Regenerate it" in F.not_speculated_advice(SpeculationSettings(enabled=True))


def test_measure_speed_up_asks_greedy_both_ways_capped():
    src = MeasureSource(
        (ChatMessage(Role.USER, "hi"),), SamplerSettings(temperature=0.9, mirostat=Mirostat.V2, max_tokens=-1), ("END",)
    )
    plain, spec = greedy_requests(src)
    assert (plain.speculate, spec.speculate) == (False, True) and plain.external and spec.external
    assert plain.sampler.temperature == 0.0 and plain.sampler.mirostat is Mirostat.OFF
    assert plain.sampler.max_tokens == MAX_TOKENS and plain.stop_strings == ("END",)
    assert isinstance(plain, P.Generate) and plain.messages == spec.messages == src.messages


def test_a_draft_model_that_cannot_be_read_is_named(tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"hello")
    s = LoadSettings(speculation=SpeculationSettings(enabled=True, drafter=Drafter.DRAFT_MODEL, draft_model=str(bad)))
    text, n = draft_memory(s, None, 4096)
    assert n == 0 and text.startswith(f"The draft model {bad} cannot be read") and "Choose another" in text
    off = LoadSettings(speculation=SpeculationSettings(enabled=True, drafter=Drafter.DRAFT_MODEL))
    assert draft_memory(off, None, 4096)[0].startswith("Choose a draft model")
    assert draft_memory(LoadSettings(), None, 4096) == ("", 0)


def test_what_a_round_costs_in_words():
    spec = replace(STATS, adaptive=True, verify_steps=(1.0, 1.22, 1.8, 0.0, 2.59))
    assert F.cost_sentence(spec) == (
        "Verifying 2 / 3 / 5 tokens costs 1.22 / 1.80 / 2.59 one-token steps on this machine. "
        "Drafts of 2.0 tokens on average, the length that pays here (at most draft_max 4)."
    )
    fixed = replace(STATS, adaptive=False)
    assert F.cost_sentence(fixed) == "Drafts of 2.0 tokens on average (fixed: up to draft_max 4)."
    assert F.cost_sentence(replace(STATS, drafted=0, drafted_at=())) == ""
    assert F.ROUND_END_WORDS[RoundEnd.SKIPPED] == "did not pay" and "pay" in F.ROUND_END_MEANING[RoundEnd.SKIPPED]
    many = replace(STATS, verify_steps=tuple(1.0 + 0.1 * i for i in range(17)))
    assert F.cost_sentence(many).startswith(
        "Verifying 2 / 6 / 10 / 13 / 17 tokens costs 1.10 / 1.50 / 1.90 / 2.20 / 2.60 "
    )


def test_the_speeds_shown_are_the_median_pairs_so_they_give_the_ratio_shown():
    """Review of issue 22: "×0.95 (slower…): 19.2 tok/s speculated, 24.0 plain" (19.2 / 24.0 = 0.80): the
    medians of each speed came from different pairs."""
    src = MeasureSource((ChatMessage(Role.USER, "hi"),), SamplerSettings(temperature=0.7, max_tokens=-1))
    sent = paired_requests(src)

    def fin(tok_s: float, drafted: bool) -> P.Finished:
        spec = STATS if drafted else None
        return P.Finished(0, "a", GenerationStats(generated_tokens=11, decode_s=10 / tok_s, speculation=spec))

    # pairs (plain, speculated): (10, 15) x1.5, (20, 16) x0.8, (10, 12) x1.2, in the sent order P S, S P, P S
    ends = [fin(10.0, False), fin(15.0, True), fin(16.0, True), fin(20.0, False), fin(10.0, False), fin(12.0, True)]
    result = speedup_of(ends, sent)
    assert result.ratio == pytest.approx(1.2)
    assert result.speculated_tok_s / result.plain_tok_s == pytest.approx(result.ratio)  # was 15 / 10
    nothing = F.Speedup(20.0, 20.0, 100, 100, -1, replace(STATS, drafted=0, accepted=0), (1.0,))
    assert "nothing drafted" in nothing.sentence() and "0% of drafts" not in nothing.sentence()
