"""Speculative decoding on real models: the reply is the model's own (greedy and seeded), both drafters,
an incompatible draft refused with its reason, Stop, and stats that add up."""

from __future__ import annotations

import time

import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage, StopReason
from app.core.sampling.params import SamplerSettings
from app.core.speculative.settings import Drafter, SpeculationSettings
from app.core.speculative.stats import RoundEnd, SpeculationStats
from app.engine.speculative.drafters import PromptLookup
from tests.support.engine import start_engine
from tests.support.speculation import (
    COPY_DOCUMENT,
    GEMMA_BATCH_KERNEL_MARGIN,
    REPEAT_PROMPT,
    same_or_near_tie,
    token_events,
    turn,
)

LOOKUP = SpeculationSettings(enabled=True, drafter=Drafter.PROMPT_LOOKUP, draft_max=8, ngram=3)
#: Every round drafts what prompt lookup has, up to draft_max: the longest batches, the most kernel differences.
LOOKUP_FIXED = SpeculationSettings(enabled=True, drafter=Drafter.PROMPT_LOOKUP, draft_max=8, ngram=3, adaptive=False)


def check_adds_up(s: SpeculationStats, generated: int) -> None:
    assert 0 <= s.accepted <= s.drafted
    assert sum(s.accepted_at) == s.accepted and sum(s.drafted_at) == s.drafted
    assert all(a >= b for a, b in zip(s.accepted_at, s.accepted_at[1:], strict=False))
    assert all(a <= d for a, d in zip(s.accepted_at, s.drafted_at, strict=False))
    assert sum(n for _, n in s.round_ends) == s.rounds
    assert len(s.accepted_tokens) == s.accepted and len(set(s.accepted_tokens)) == s.accepted
    assert all(0 < i < generated for i in s.accepted_tokens)
    # every round makes one token of its own, plus what it accepted; the first token comes from prefill
    assert generated <= 1 + s.rounds + s.accepted
    assert s.ended(RoundEnd.MISMATCH) == len(s.rejected)


def test_prompt_lookup_drafts_what_followed_the_latest_match_of_the_whole_ngram():
    lookup = PromptLookup(3)
    assert lookup.draft([1, 2, 3, 4, 5, 6, 1, 2, 3], 4) == ([4, 5, 6, 1], RoundEnd.DRAFT_MAX)
    assert lookup.draft([1, 2, 3, 4, 5, 1, 2, 3, 9, 1, 2, 3], 3) == ([9, 1, 2], RoundEnd.DRAFT_MAX)  # the latest
    assert lookup.draft([7, 2, 3, 4, 1, 2, 3], 3) == ([], RoundEnd.NO_DRAFT)  # no shorter n-gram fallback
    assert lookup.draft([1, 2, 3], 3) == ([], RoundEnd.NO_DRAFT)


@pytest.fixture(scope="module")
def smol_lookup(smollm2):
    # Fixed lengths: these tests need drafts whatever the machine's load (the budget's lengths follow
    # timings); the budget's own path: test_the_draft_length_budget_keeps_the_reply_the_models_own.
    eng = start_engine(smollm2, n_ctx=1024, n_threads=1, speculation=LOOKUP_FIXED)
    yield eng
    eng.host.stop()


def test_prompt_lookup_greedy_reply_is_the_models_own(smol_lookup):
    assert smol_lookup.loaded.speculation == LOOKUP_FIXED and smol_lookup.loaded.draft is None
    plain_ev: list = []
    spec_ev: list = []
    plain = turn(smol_lookup, REPEAT_PROMPT, speculate=False, events=plain_ev, temperature=0.0, max_tokens=64)
    spec = turn(smol_lookup, REPEAT_PROMPT, speculate=None, events=spec_ev, temperature=0.0, max_tokens=64)
    assert plain.stats.speculation is None
    s = spec.stats.speculation
    assert s is not None and s.drafter is Drafter.PROMPT_LOOKUP
    assert s.accepted > 10, s  # repeating the listing: most drafts are taken
    check_adds_up(s, spec.stats.generated_tokens)
    verdict = same_or_near_tie(token_events(plain_ev), token_events(spec_ev), greedy=True)
    print("prompt lookup, greedy:", verdict)
    if verdict == "same":
        assert spec.text == plain.text
    # fewer model evaluations than tokens: llama.cpp's own decode counter
    assert spec.stats.llama_n_decode < plain.stats.llama_n_decode
    # every event is the model's: indices in order, each with the model's probability
    evs = token_events(spec_ev)
    assert [e.index for e in evs] == list(range(len(evs)))
    assert all(e.p is not None and 0 < e.p <= 1 for e in evs)


def test_the_draft_length_budget_keeps_the_reply_the_models_own(smollm2):
    """The default, adaptive lengths: whatever lengths the timings chose, the greedy reply is the model's."""
    eng = start_engine(smollm2, n_ctx=1024, n_threads=1, speculation=LOOKUP)
    try:
        plain_ev: list = []
        spec_ev: list = []
        turn(eng, REPEAT_PROMPT, speculate=False, events=plain_ev, temperature=0.0, max_tokens=48)
        spec = turn(eng, REPEAT_PROMPT, speculate=None, events=spec_ev, temperature=0.0, max_tokens=48)
        s = spec.stats.speculation
        assert s is not None and s.adaptive
        check_adds_up(s, spec.stats.generated_tokens)
        # the budget timed a one-token step first, and its costs rise with the batch
        assert len(s.verify_steps) == LOOKUP.draft_max + 1 and s.verify_steps[0] == 1.0, s
        timed = [x for x in s.verify_steps if x > 0]
        assert timed == sorted(timed)
        assert s.chosen_mean <= LOOKUP.draft_max
        print("budget, greedy:", same_or_near_tie(token_events(plain_ev), token_events(spec_ev), greedy=True))
    finally:
        eng.host.stop()


def test_prompt_lookup_seeded_reply_is_the_models_own(smol_lookup):
    plain_ev: list = []
    spec_ev: list = []
    kw = {"temperature": 0.8, "seed": 1234, "max_tokens": 48}
    turn(smol_lookup, REPEAT_PROMPT, speculate=False, events=plain_ev, **kw)
    spec = turn(smol_lookup, REPEAT_PROMPT, speculate=True, events=spec_ev, **kw)
    assert spec.stats.speculation is not None and spec.stats.speculation.accepted > 0
    print("prompt lookup, seeded:", same_or_near_tie(token_events(plain_ev), token_events(spec_ev), greedy=False))


@pytest.mark.timing
def test_stop_mid_reply_with_speculation_ends_promptly(smol_lookup):
    events: list = []
    pressed: list[float] = []

    def on_event(_ev) -> None:
        if not pressed and len(token_events(events)) >= 5:
            pressed.append(time.monotonic())
            smol_lookup.host.cancel()

    fin = turn(smol_lookup, REPEAT_PROMPT, speculate=None, events=events, on_event=on_event, max_tokens=2000)
    assert fin.stats.stop_reason == StopReason.CANCELLED
    assert pressed and time.monotonic() - pressed[0] < 2.0
    assert fin.stats.generated_tokens < 400
    # the next reply starts cleanly from the same cache
    again = turn(smol_lookup, "Say hi.", speculate=None, temperature=0.0, max_tokens=8)
    assert again.stats.stop_reason in (StopReason.MAX_TOKENS, StopReason.EOS)


def test_a_branch_and_a_local_api_request_speculate_too(smol_lookup):
    events: list = []
    full = turn(smol_lookup, REPEAT_PROMPT, speculate=None, events=events, temperature=0.0, max_tokens=40)
    tokens = [e.token_id for e in token_events(events)]
    prefix_text = "".join(e.text for e in token_events(events)[:10])
    msgs = (ChatMessage("system", "You are a helpful assistant."), ChatMessage("user", REPEAT_PROMPT))
    sampler = SamplerSettings(temperature=0.0, max_tokens=30)
    host = smol_lookup.host
    host.clear_cancel()
    branch = host.request(P.Generate(host.next_id(), msgs, sampler, reply_prefix=tuple(tokens[:10])), timeout=120)
    assert isinstance(branch, P.Finished), getattr(branch, "message", branch)
    assert branch.text.startswith(prefix_text) and len(branch.text) > len(prefix_text)
    assert branch.stats.speculation is not None and branch.stats.speculation.rounds > 0
    api = host.request(P.Generate(host.next_id(), msgs, sampler, external=True), timeout=120)
    assert isinstance(api, P.Finished), getattr(api, "message", api)
    assert api.stats.speculation is not None and api.stats.speculation.accepted > 0
    assert full.text.startswith(api.text[:20])


def test_max_tokens_and_stop_strings_end_a_speculated_reply(smol_lookup):
    fin = turn(smol_lookup, REPEAT_PROMPT, speculate=None, temperature=0.0, max_tokens=37)
    assert fin.stats.stop_reason == StopReason.MAX_TOKENS and fin.stats.generated_tokens == 37
    plain = turn(smol_lookup, REPEAT_PROMPT, speculate=False, temperature=0.0, max_tokens=37)
    assert fin.text == plain.text


def test_a_full_context_stops_or_rolls_with_speculation_on(smollm2):
    eng = start_engine(smollm2, n_ctx=256, n_threads=1, speculation=LOOKUP_FIXED)
    story, count = "Tell me a very long story about a dragon and a knight.", "Count from 1 to 400, separated by commas."
    kw = {"speculate": None, "temperature": 0.0, "repeat_penalty": 1.0}
    try:
        stop = turn(eng, story, max_tokens=-1, context_policy="stop", **kw)
        assert stop.stats.stop_reason == StopReason.CONTEXT_FULL
        assert stop.stats.context_used <= stop.stats.n_ctx
        rolled = turn(eng, count, max_tokens=300, context_policy="rolling", **kw)
        assert rolled.stats.context_shifts >= 1 and rolled.stats.stop_reason == StopReason.MAX_TOKENS
        assert rolled.stats.generated_tokens == 300
        s = rolled.stats.speculation
        assert s is not None and s.accepted > 0  # speculated until the shift, one token a round after it
        check_adds_up(s, rolled.stats.generated_tokens)
    finally:
        eng.host.stop()


def test_draft_model_reply_is_the_models_own(smollm2, smollm2_q8_0):
    spec_settings = SpeculationSettings(
        enabled=True, drafter=Drafter.DRAFT_MODEL, draft_max=6, p_min=0.5, draft_model=str(smollm2), adaptive=False
    )  # fixed lengths: on a CPU the budget soon stops drafting with a draft model as large as the model
    eng = start_engine(smollm2_q8_0, n_ctx=1024, n_threads=1, speculation=spec_settings)
    try:
        draft = eng.loaded.draft
        assert draft is not None and draft.path == str(smollm2)
        assert draft.weights_bytes > 50_000_000 and draft.kv_bytes > 0 and draft.n_params > 100_000_000
        prompt = "Write three sentences about the sea."
        for kw, greedy in (({"temperature": 0.0}, True), ({"temperature": 0.8, "seed": 7}, False)):
            plain_ev: list = []
            spec_ev: list = []
            turn(eng, prompt, speculate=False, events=plain_ev, max_tokens=40, **kw)
            spec = turn(eng, prompt, speculate=None, events=spec_ev, max_tokens=40, **kw)
            s = spec.stats.speculation
            assert s is not None and s.drafter is Drafter.DRAFT_MODEL
            assert s.acceptance_rate > 0.4, s  # Q4_1 drafting for its own Q8_0: mostly agrees
            check_adds_up(s, spec.stats.generated_tokens)
            # The draft model's reads: its weights once per llama_decode, at least one per drafted token.
            least = draft.weights_bytes * s.drafted / spec.stats.generated_tokens
            assert least > 0 and s.draft_weight_bytes_per_token >= least, s
            verdict = same_or_near_tie(token_events(plain_ev), token_events(spec_ev), greedy=greedy)
            print("draft model", kw, verdict, f"acceptance {s.acceptance_rate:.2f}")
    finally:
        eng.host.stop()


def test_gemma_prompt_lookup_greedy_reply_is_the_models_own(gemma):
    eng = start_engine(gemma, n_ctx=1024, n_threads=1, speculation=LOOKUP_FIXED)
    try:
        prompt = COPY_DOCUMENT
        plain_ev: list = []
        spec_ev: list = []
        turn(eng, prompt, speculate=False, events=plain_ev, temperature=0.0, max_tokens=40, system="")
        spec = turn(eng, prompt, speculate=None, events=spec_ev, temperature=0.0, max_tokens=40, system="")
        s = spec.stats.speculation
        assert s is not None and s.accepted > 20, s
        assert s.draft_weight_bytes_per_token == 0.0  # prompt lookup: no second model, nothing read
        check_adds_up(s, spec.stats.generated_tokens)
        verdict = same_or_near_tie(
            token_events(plain_ev), token_events(spec_ev), greedy=True, margin=GEMMA_BATCH_KERNEL_MARGIN
        )
        print("gemma prompt lookup, greedy:", verdict)
    finally:
        eng.host.stop()


def test_an_incompatible_draft_model_is_refused_with_its_reason(smollm2, gemma):
    eng = start_engine(smollm2, n_ctx=512, n_threads=1)
    try:
        bad = SpeculationSettings(enabled=True, drafter=Drafter.DRAFT_MODEL, draft_model=str(gemma))
        ev = eng.load(smollm2, n_ctx=512, n_threads=1, speculation=bad)
        assert isinstance(ev, P.Failed) and ev.kind is P.FailureKind.INCOMPATIBLE, ev
        assert gemma.name in ev.message and "cannot be the draft model" in ev.message
        assert "different tokenizers" in ev.message or "different vocabulary" in ev.message, ev.message
    finally:
        eng.host.stop()
