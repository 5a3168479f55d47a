"""Every token's alternatives from the engine, and a reply branched from one of them, on real SmolLM2.

The branch test: after a greedy reply, forcing alternative t at step k must continue exactly as
a greedy continuation of prompt + reply[:k] + t computed independently (a plain llama_cpp.Llama
in this process, evaluating the tokens the way the engine does: prompt slices ending at
multiples of n_batch with the last token alone, then one token per llama_decode), and the
engine must evaluate only t (the KV cache keeps prompt + reply[:k]).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import llama_cpp
import numpy as np
import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage, StopReason
from app.core.hardware.memory import n_ubatch_for
from app.core.sampling.params import SamplerSettings
from tests.support.engine import SYSTEM

N_CTX = 2048
N_BATCH = 512
ASK = "Write three sentences about the sea."
GREEDY = SamplerSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=40)


def _generate(eng, msgs, sampler, **fields):
    events: list = []
    eng.host.clear_cancel()
    req = P.Generate(eng.host.next_id(), msgs, sampler, **fields)
    fin = eng.host.request(req, timeout=180, on_event=events.append)
    return fin, events


def _tokens(events) -> list[P.TokenEvent]:
    out: list[P.TokenEvent] = []
    for e in events:
        if isinstance(e, P.TokenBatch):
            out.extend(e.tokens)
        elif isinstance(e, P.TokenEvent):
            out.append(e)
    return out


@pytest.fixture(scope="module")
def eng(smollm2):
    from tests.support.engine import start_engine

    e = start_engine(smollm2, n_ctx=N_CTX, n_batch=N_BATCH)
    yield e
    e.host.stop()


def test_every_token_keeps_its_top_n_with_true_probabilities(eng) -> None:
    eng.host.request(P.ResetContext(eng.host.next_id()))
    msgs = (ChatMessage(*SYSTEM), ChatMessage("user", ASK))
    fin, events = _generate(eng, msgs, GREEDY, top_candidates=5, alternatives=10, candidates_every_token=True)
    assert isinstance(fin, P.Finished), fin
    alts = fin.alternatives
    toks = _tokens(events)
    assert alts is not None and alts.per_token == 10
    assert alts.n_steps == fin.stats.generated_tokens == len(toks)
    assert list(alts.tokens) == [t.token_id for t in toks]
    assert len(alts.history) == fin.stats.prompt_tokens
    for i, t in enumerate(toks):
        row = alts.ids[i * 10 : (i + 1) * 10]
        assert row[0] == t.token_id  # greedy: the drawn token is the most likely
        if t.candidates:  # every token but an end-of-generation one carries them here
            assert [c[0] for c in t.candidates] == list(row[:5])  # the same top as the inspector's
        assert alts.p(i) == pytest.approx(t.p, rel=1e-4, abs=1e-6)  # the same true probability
        assert 0.0 <= alts.entropy_bits[i] < math.log2(49152)
        assert alts.texts[t.token_id] == t.piece
    # The stored form is compact: report its size per token.
    per_token = len(alts.to_bytes()) / alts.n_steps
    print(f"stored bytes per generated token (N=10, {alts.n_steps} tokens): {per_token:.1f}")
    assert per_token < 12 + 8 * 10 + 40


def _independent_greedy(model, prompt: list[int], prefix: list[int], n: int, loaded: P.ModelLoaded, eog) -> list[int]:
    """Greedy continuation of prompt + prefix, evaluated the way the engine evaluates (see the module docstring)."""
    llm = llama_cpp.Llama(
        model_path=str(model),
        n_ctx=N_CTX,
        n_batch=loaded.n_batch,
        n_ubatch=n_ubatch_for(loaded.n_batch, N_CTX),
        n_threads=loaded.n_threads,
        n_threads_batch=loaded.n_threads_batch,
        verbose=False,
    )
    try:
        done = 0
        total = len(prompt)
        while done < total:
            if done == total - 1:
                size = 1
            else:
                size = min((done // loaded.n_batch + 1) * loaded.n_batch - done, total - 1 - done)
            llm.eval(prompt[done : done + size])
            done += size
        for t in prefix:
            llm.eval([t])
        out: list[int] = []
        while len(out) < n:
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
            tok = int(np.argmax(logits))
            out.append(tok)
            if eog(tok):
                break
            llm.eval([tok])
        return out
    finally:
        llm.close()


def test_branch_from_an_alternative_continues_as_greedy_and_evaluates_only_the_new_token(eng, smollm2) -> None:
    eng.host.request(P.ResetContext(eng.host.next_id()))
    msgs = (ChatMessage(*SYSTEM), ChatMessage("user", ASK))
    first, events = _generate(eng, msgs, GREEDY, alternatives=10)
    assert isinstance(first, P.Finished), first
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    prompt = [t for t, _ in prepared.new_tokens]
    assert prepared.cached_tokens == 0 and len(prompt) == prepared.prompt_tokens
    alts = first.alternatives
    assert alts is not None and alts.n_steps >= 12
    eog = set(eng.loaded.eog_token_ids)
    k = 6
    t = next(c.token_id for c in alts.view(k).candidates[1:] if c.token_id not in eog)
    prefix = [*alts.tokens[:k], t]

    branch, bev = _generate(eng, msgs, GREEDY, alternatives=10, reply_prefix=tuple(prefix))
    assert isinstance(branch, P.Finished), branch
    bprep = next(e for e in bev if isinstance(e, P.PromptPrepared))
    # Only the chosen token is evaluated: the cache kept the prompt and the reply's first k tokens.
    assert (bprep.cached_tokens, bprep.to_evaluate) == (len(prompt) + k, 1)
    assert branch.stats.evaluated_tokens == 1
    generated = [e.token_id for e in _tokens(bev)]
    # The cache holds the prompt, the prefix and each generated token evaluated (an end-of-generation
    # token never is). llama.cpp's own counters: t, then one per generated token it evaluated; they
    # may also count the previous request's last token, which llama.cpp leaves queued until the next
    # synchronisation (llama-context.cpp, n_queued_tokens) -- never the 33 tokens before t again.
    ended_eog = StopReason(branch.stats.stop_reason) is StopReason.EOS
    evaluated = len(generated) - (1 if ended_eog else 0)
    assert branch.stats.context_used == len(prompt) + len(prefix) + evaluated
    assert 1 + evaluated <= branch.stats.llama_n_prefill + branch.stats.llama_n_decode <= 2 + evaluated
    assert branch.alternatives is not None and list(branch.alternatives.tokens) == generated

    expected = _independent_greedy(smollm2, prompt, prefix, len(generated), eng.loaded, lambda x: x in eog)
    assert generated == expected
    # The reply's text starts with the prefix's text and spells prefix + continuation.
    vocab_llm = llama_cpp.Llama(model_path=str(smollm2), n_ctx=64, vocab_only=True, verbose=False)
    try:
        spelled = vocab_llm.detokenize([x for x in prefix + generated if x not in eog]).decode("utf-8", "replace")
    finally:
        vocab_llm.close()
    assert StopReason(branch.stats.stop_reason) is not StopReason.STOP_STRING
    assert branch.text == spelled

    # The next turn reuses the branch's tokens from the KV cache as any reply's.
    follow, _fev = _generate(
        eng,
        (*msgs, ChatMessage("assistant", branch.text), ChatMessage("user", "Thanks.")),
        SamplerSettings(temperature=0.0, max_tokens=2),
    )
    assert isinstance(follow, P.Finished), follow
    assert follow.stats.cached_tokens >= len(prompt) + len(prefix)


def test_the_funnel_runs_on_a_stored_step(eng) -> None:
    eng.host.request(P.ResetContext(eng.host.next_id()))
    msgs = (ChatMessage(*SYSTEM), ChatMessage("user", ASK))
    fin, _ = _generate(eng, msgs, GREEDY, alternatives=10)
    alts = fin.alternatives
    assert alts is not None
    step = 3
    stored = alts.stored_step(step, reply_id=777, settings=GREEDY, seed=fin.stats.seed)
    ev = eng.host.request(P.ComputeFunnel(eng.host.next_id(), stored=stored, rows=8), timeout=30)
    assert isinstance(ev, P.FunnelComputed), ev
    f = ev.funnel
    assert (f.reply_id, f.step, f.drawn, f.exact, f.n_logits) == (777, step, alts.tokens[step], False, 10)
    assert f.picked == alts.tokens[step]  # greedy on the stored top-10 picks what the reply drew
    model = f.stages[0]
    view = alts.view(step)
    by_id = {c.token_id: c.p for c in view.candidates}
    for (tok, text), p in zip(f.rows, model.probs, strict=True):
        assert p == pytest.approx(by_id[tok], rel=1e-5)
        assert text == alts.texts[tok]
    # Other settings on the same stored step: temperature 1, top_k 3 keeps 3 of the 10.
    hot = SamplerSettings(temperature=1.0, top_k=3, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
    ev = eng.host.request(P.ComputeFunnel(eng.host.next_id(), sampler=hot, stored=stored, rows=8), timeout=30)
    assert isinstance(ev, P.FunnelComputed), ev
    kinds = [s.kind.value for s in ev.funnel.stages]
    assert "top_k" in kinds and ev.funnel.stages[kinds.index("top_k")].survivors == 3


def test_a_stored_steps_funnel_never_passes_for_the_chains(eng) -> None:
    """Issue 20 review, M1: with llama.cpp's defaults a stored reply's funnel showed every stage renormalised
    over the 10 stored candidates ("left 10 -> 9") as if drawn, and a drawn token outside them as cut by the
    model. Only the model column is the chain's there; the drawn outsider is named, not cut."""
    eng.host.request(P.ResetContext(eng.host.next_id()))
    msgs = (ChatMessage(*SYSTEM), ChatMessage("user", ASK))
    fin, _ = _generate(eng, msgs, GREEDY, alternatives=10)
    alts = fin.alternatives
    assert alts is not None
    stored = alts.stored_step(3, reply_id=778, settings=SamplerSettings(), seed=fin.stats.seed)
    assert stored.entropy_bits == alts.entropy_bits[3]
    outsider = 12_345  # a branch's drawn token below the 10 kept
    assert outsider not in stored.ids
    ev = eng.host.request(P.ComputeFunnel(eng.host.next_id(), stored=replace(stored, drawn=outsider)), timeout=30)
    assert isinstance(ev, P.FunnelComputed), ev
    f = ev.funnel
    assert f.stored and not f.exact and f.unkept == (outsider,) and not f.all_known
    model = f.stages[0]
    assert model.known and model.survivors == -1  # the vocabulary of the model that wrote it: not "10"
    assert model.entropy_bits == pytest.approx(alts.entropy_bits[3])  # the whole vocabulary's, kept with the reply
    assert [st.known for st in f.stages[1:]] == [False] * (len(f.stages) - 1)  # top_k 40 > 10, then top_p
    # top_k 3 within the 10 (no penalties before it): from it on, the chain's own figures.
    sharp = SamplerSettings(top_k=3, repeat_penalty=1.0)
    ev = eng.host.request(P.ComputeFunnel(eng.host.next_id(), sampler=sharp, stored=stored), timeout=30)
    assert isinstance(ev, P.FunnelComputed) and ev.funnel.all_known and ev.funnel.unkept == ()


def test_a_stored_step_is_recomputed_whole_when_its_model_is_loaded(eng, smollm2) -> None:
    """Issue 20 review, M1 (best): with the model that wrote a stored reply loaded, its step's logits are
    computed again (prompt and tokens before the step, in the inspect context): the funnel is exact, as the
    live reply's newest steps, and says "recomputed"; with another file named, the stored top-10 serve."""
    eng.host.request(P.ResetContext(eng.host.next_id()))
    msgs = (ChatMessage(*SYSTEM), ChatMessage("user", ASK))
    fin, _ = _generate(eng, msgs, GREEDY, alternatives=10, keep_logits=True)
    alts = fin.alternatives
    assert alts is not None and alts.n_steps >= 20
    step = alts.n_steps - 3  # in the live store's full-vocabulary ring: the exact funnel to compare with
    live = eng.host.request(P.ComputeFunnel(eng.host.next_id(), -1, step, SamplerSettings(), rows=8), timeout=30)
    assert isinstance(live, P.FunnelComputed) and live.funnel.exact, live
    stored = alts.stored_step(step, reply_id=779, settings=GREEDY, seed=fin.stats.seed, model_path=str(smollm2))
    asked = P.ComputeFunnel(eng.host.next_id(), sampler=SamplerSettings(), stored=stored, rows=8)
    t0 = time.perf_counter()
    ev = eng.host.request(asked, timeout=60)
    first_s = time.perf_counter() - t0
    assert isinstance(ev, P.FunnelComputed), ev
    f, ref = ev.funnel, live.funnel
    assert f.recomputed and f.exact and f.all_known and f.n_logits == 49_152 and not f.stored
    assert f.rows == tuple((t, alts.texts.get(t, text)) for t, text in ref.rows)
    for st, rst in zip(f.stages, ref.stages, strict=True):  # the chain's own figures, to float rounding
        assert st.kind == rst.kind and st.survivors == rst.survivors
        assert st.probs == pytest.approx(rst.probs, abs=5e-4)  # prefill, then one token at a time, as the chat
    # The next token of the same reply: its prompt is kept in the inspect context, one position evaluated.
    nxt = alts.stored_step(step + 1, reply_id=779, settings=GREEDY, seed=fin.stats.seed, model_path=str(smollm2))
    t0 = time.perf_counter()
    ev = eng.host.request(P.ComputeFunnel(eng.host.next_id(), stored=nxt, rows=8), timeout=60)
    next_s = time.perf_counter() - t0
    assert isinstance(ev, P.FunnelComputed) and ev.funnel.recomputed and ev.funnel.step == step + 1
    hot = SamplerSettings(temperature=1.5, top_k=0)  # a slider move on that token: its logits kept, nothing evaluated
    t0 = time.perf_counter()
    ev = eng.host.request(P.ComputeFunnel(eng.host.next_id(), sampler=hot, stored=nxt, rows=8), timeout=60)
    slider_s = time.perf_counter() - t0
    assert isinstance(ev, P.FunnelComputed) and ev.funnel.recomputed and ev.funnel.settings.temperature == 1.5
    print(
        f"recomputed funnel (SmolLM2, {len(stored.history)} tokens): {first_s * 1000:.0f} ms, "
        f"next token {next_s * 1000:.0f} ms, a slider move {slider_s * 1000:.0f} ms"
    )
    other = replace(stored, model_path=str(smollm2) + ".not-loaded")
    ev = eng.host.request(P.ComputeFunnel(eng.host.next_id(), stored=other, rows=8), timeout=30)
    assert isinstance(ev, P.FunnelComputed) and not ev.funnel.recomputed and ev.funnel.stored, ev
