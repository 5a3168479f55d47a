"""The sampler funnel against llama.cpp's own chain, on real SmolLM2 and Gemma 3 logits.

For random settings, the funnel (each stage applied alone, read back after each) must end
where the chain ends when it samples the same logits with the same seed: the same drawn
token, and the same survivors with the same probabilities as the chain's cur_p after apply.
"""

from __future__ import annotations

import ctypes
import random
import time
from dataclasses import replace

import llama_cpp
import numpy as np
import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage
from app.core.sampling.funnel import FunnelStageKind
from app.core.sampling.params import DEFAULT_ORDER, SamplerSettings
from app.engine.funnel import as_cur_p, make_chain, read_cur_p, run_funnel, token_array
from app.engine.funnel_store import TOP_M, reduce_logits
from app.engine.vocab import Vocab
from tests.support.engine import SYSTEM, start_engine

PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"


def random_settings(rng: random.Random) -> SamplerSettings:
    s = SamplerSettings(
        temperature=rng.choice([0.0, 0.3, 0.8, 1.0, 1.5, 3.0]),
        top_k=rng.choice([0, 1, 5, 40, 100]),
        top_p=rng.choice([1.0, 0.5, 0.9, 0.95]),
        min_p=rng.choice([0.0, 0.02, 0.05, 0.2]),
        typical_p=rng.choice([1.0, 1.0, 0.7]),
        repeat_penalty=rng.choice([1.0, 1.1, 1.5]),
        repeat_last_n=rng.choice([0, 64, -1]),
        presence_penalty=rng.choice([0.0, 0.5]),
        frequency_penalty=rng.choice([0.0, 0.3]),
        dry_multiplier=rng.choice([0.0, 0.0, 0.8]),
        top_n_sigma=rng.choice([-1.0, -1.0, 1.0, 2.0]),
        xtc_probability=rng.choice([0.0, 0.0, 0.5, 1.0]),
        xtc_threshold=rng.choice([0.1, 0.2]),
        dynatemp_range=rng.choice([0.0, 0.0, 0.5]),
        mirostat=rng.choice([0, 0, 0, 0, 1, 2]),
        logit_bias=rng.choice([(), ((13, -float("inf")),), ((100, 5.0), (13, -2.0))]),
    )
    order = list(DEFAULT_ORDER)
    if rng.random() < 0.5:
        rng.shuffle(order)
    return replace(s, order=tuple(order)).validated()


@pytest.fixture(scope="module", params=["smollm2", "gemma"])
def model_logits(request):
    """(vocab, n_ctx, prompt tokens, full logits) after evaluating PROMPT."""
    path = request.getfixturevalue(request.param)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_batch=128, verbose=False)
    tokens = llm.tokenize(PROMPT.encode(), add_bos=True)
    llm.eval(tokens)
    n_vocab = llm.n_vocab()
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,)).copy()
    yield Vocab(llm.model), llm.n_ctx(), tokens, logits
    llm.close()


def test_funnel_ends_where_the_chain_samples(model_logits):
    vocab, n_ctx, history, logits = model_logits
    n = logits.shape[0]
    ids = np.arange(n, dtype=np.int32)
    lse = float(np.log(np.exp(logits.astype(np.float64) - logits.max()).sum()) + logits.max())
    rng = random.Random(1234)
    for trial in range(40):
        s = random_settings(rng)
        seed = rng.randint(0, 2**31)
        chain = make_chain(s, seed, history, vocab, n_ctx)
        arr = token_array(ids, logits)
        cur = as_cur_p(arr)
        try:
            llama_cpp.llama_sampler_apply(chain, ctypes.byref(cur))
        finally:
            llama_cpp.llama_sampler_free(chain)
        after = read_cur_p(cur)
        chain_token = int(after["id"][cur.selected])
        funnel = run_funnel(
            ids=ids,
            logits=logits,
            logsumexp=lse,
            settings=s,
            seed=seed,
            history=history,
            vocab=vocab,
            n_ctx=n_ctx,
            drawn=chain_token,
            reply_id=1,
            step=0,
            exact=True,
        )
        why = f"trial {trial}: {s}"
        assert funnel.picked == chain_token, why
        final = funnel.stages[-1]
        assert final.kind.is_draw, why
        # The chain's cur_p after apply: its survivors (finite logits) and their probabilities.
        finite = np.isfinite(after["logit"])
        assert final.survivors == int(finite.sum()), why
        chain_p = {int(t): float(p) for t, p in zip(after["id"][finite], after["p"][finite], strict=True)}
        for (tok, _text), p in zip(funnel.rows, final.probs, strict=True):
            if final.kind == FunnelStageKind.GREEDY:
                assert p == (1.0 if tok == chain_token else 0.0), why
            else:
                assert p == pytest.approx(chain_p.get(tok, 0.0), abs=2e-5), (why, tok)
        # The model column is the raw softmax over the whole vocabulary.
        for (tok, _text), p in zip(funnel.rows, funnel.stages[0].probs, strict=True):
            assert p == pytest.approx(float(np.exp(np.float64(logits[tok]) - lse)), rel=1e-5), why


def test_stages_are_those_that_ran_in_their_order(model_logits):
    vocab, n_ctx, history, logits = model_logits
    ids = np.arange(logits.shape[0], dtype=np.int32)
    s = SamplerSettings(
        temperature=1.5,
        top_k=0,
        top_p=0.9,
        min_p=0.05,
        repeat_penalty=1.0,
        order=(
            DEFAULT_ORDER[-1],  # temperature first: it now flattens before top_p and min_p cut
            *DEFAULT_ORDER[:-1],
        ),
    )
    f = run_funnel(
        ids=ids,
        logits=logits,
        logsumexp=0.0,
        settings=s,
        seed=3,
        history=history,
        vocab=vocab,
        n_ctx=n_ctx,
        drawn=-1,
        reply_id=1,
        step=0,
        exact=True,
    )
    kinds = [st.kind for st in f.stages]
    assert kinds == [
        FunnelStageKind.MODEL,
        FunnelStageKind.TEMPERATURE,
        FunnelStageKind.TOP_P,
        FunnelStageKind.MIN_P,
        FunnelStageKind.DIST,
    ]
    survivors = [st.survivors for st in f.stages]
    assert survivors[0] == logits.shape[0] and survivors[1] == logits.shape[0]
    assert survivors[2] < survivors[1] and survivors[3] <= survivors[2] and survivors[4] == survivors[3]
    for st in f.stages[1:]:
        assert sum(st.probs) + st.outside == pytest.approx(1.0, abs=1e-4)


@pytest.fixture(scope="module")
def engine_keep(smollm2):
    eng = start_engine(smollm2, n_ctx=2048)
    yield eng
    eng.host.stop()


def test_engine_funnel_on_stored_steps(engine_keep):
    eng = engine_keep
    host = eng.host
    s = SamplerSettings(temperature=0.9, top_k=40, top_p=0.95, min_p=0.05, seed=77, max_tokens=24)
    events: list = []
    messages = (ChatMessage(*SYSTEM), ChatMessage("user", "Tell me a story."))
    req = P.Generate(host.next_id(), messages, s, keep_logits=True)
    fin = host.request(req, timeout=120, on_event=events.append)
    assert isinstance(fin, P.Finished), fin
    tokens = [e.token_id for e in events if isinstance(e, P.TokenEvent)]
    assert tokens
    # Step 0 with the reply's own settings: the same RNG state as the reply, so the same token.
    first = host.request(P.ComputeFunnel(host.next_id(), req.request_id, 0), timeout=30)
    assert isinstance(first, P.FunnelComputed), first
    assert first.funnel.drawn == tokens[0] and first.funnel.picked == tokens[0]
    # an old step kept only its top 64: evaluated again, so its funnel is exact as the newest steps' are
    # (review of issue 20: the "most uncertain" jump opened on an approximation)
    assert first.funnel.exact and first.funnel.recomputed and first.funnel.n_logits == 49152
    newest = host.request(P.ComputeFunnel(host.next_id()), timeout=30)
    assert isinstance(newest, P.FunnelComputed)
    assert newest.funnel.step == len(tokens) - 1 and newest.funnel.exact
    assert newest.funnel.drawn == tokens[-1]
    # A slider move: the same step with other settings, no new generation; greedy picks the top row.
    t = time.perf_counter()
    greedy = host.request(P.ComputeFunnel(host.next_id(), -1, 3, replace(s, temperature=0.0)), timeout=30)
    round_trip = time.perf_counter() - t
    assert isinstance(greedy, P.FunnelComputed)
    assert greedy.funnel.picked == greedy.funnel.rows[0][0]
    assert greedy.funnel.stages[-1].kind == FunnelStageKind.GREEDY
    print(f"funnel round trip (SmolLM2, stored step): {round_trip * 1000:.1f} ms")
    bad = host.request(P.ComputeFunnel(host.next_id(), -1, 3, replace(s, top_p=7.0)), timeout=30)
    assert isinstance(bad, P.Failed) and bad.kind is P.FailureKind.BAD_SETTINGS and "top_p" in bad.message
    missing = host.request(P.ComputeFunnel(host.next_id(), -1, 10_000), timeout=30)
    assert isinstance(missing, P.Failed) and missing.kind is P.FailureKind.NO_LOGITS


def test_stored_top_m_and_logsumexp_are_exact(model_logits):
    _vocab, _n_ctx, _history, logits = model_logits
    ids, top, lse = reduce_logits(logits, np.empty_like(logits))
    best = np.argsort(-logits.astype(np.float64), kind="stable")[:TOP_M]
    assert set(ids.tolist()) == set(best.tolist()) and list(top) == sorted(top, reverse=True)
    assert np.array_equal(top, logits[ids])
    exact = float(np.log(np.exp(logits.astype(np.float64) - logits.max()).sum()) + logits.max())
    assert lse == pytest.approx(exact, abs=1e-5)
    flat = np.zeros_like(logits)  # nothing stands out: the top-M comes from the whole vocabulary
    ids, _top, lse = reduce_logits(flat, np.empty_like(flat))
    assert ids.shape[0] == TOP_M and lse == pytest.approx(np.log(flat.shape[0]), abs=1e-4)


def test_dry_is_made_once_per_vocabulary_and_settings_and_cloned_as_llama_cpp_makes_it(model_logits):
    """DRY's sampler scans the whole vocabulary when made (38 ms on Gemma 3): a slider move that
    leaves DRY's values alone clones the one made before, and the clone cuts as a fresh one does."""
    from app.engine.funnel import DRY_SEQ_BREAKERS, DRY_TEMPLATES

    vocab, n_ctx, tokens, logits = model_logits
    history = list(tokens) + list(tokens[-6:]) * 3  # a repeated run: DRY penalises its continuation
    s = SamplerSettings(dry_multiplier=0.8, dry_allowed_length=2, top_k=0, top_p=1.0, min_p=0.0).validated()
    ids = np.arange(logits.shape[0], dtype=np.int32)
    made = DRY_TEMPLATES.made
    funnels = [
        run_funnel(
            ids=ids,
            logits=logits,
            logsumexp=float(np.log(np.exp(logits - logits.max()).sum()) + logits.max()),
            settings=replace(s, temperature=t),
            seed=3,
            history=history,
            vocab=vocab,
            n_ctx=n_ctx,
            drawn=-1,
            reply_id=1,
            step=0,
            exact=True,
        )
        for t in (0.5, 0.9, 1.3)
    ]
    assert DRY_TEMPLATES.made - made <= 1  # one scan of the vocabulary for the three slider moves
    # The clone applies as a DRY sampler made fresh by llama.cpp, fed the same history.
    breakers = (ctypes.c_char_p * len(DRY_SEQ_BREAKERS))(*(b.encode() for b in DRY_SEQ_BREAKERS))
    fresh = llama_cpp.llama_sampler_init_dry(vocab.ptr, 0.8, s.dry_base, 2, n_ctx, breakers, len(DRY_SEQ_BREAKERS))
    clone = DRY_TEMPLATES.sampler(vocab, 0.8, s.dry_base, 2, n_ctx)
    try:
        out = []
        for smpl in (fresh, clone):
            for t in history:
                llama_cpp.llama_sampler_accept(smpl, t)
            arr = token_array(ids, logits.copy())
            cur = as_cur_p(arr)
            llama_cpp.llama_sampler_apply(smpl, ctypes.byref(cur))
            out.append(read_cur_p(cur)["logit"])
    finally:
        llama_cpp.llama_sampler_free(fresh)
        llama_cpp.llama_sampler_free(clone)
    assert np.array_equal(out[0], out[1])
    assert (out[0] < logits).sum() >= 1  # DRY did penalise something: the comparison means something
    dry_cols = [next(st for st in f.stages if st.kind == FunnelStageKind.DRY) for f in funnels]
    assert all(c.probs == dry_cols[0].probs for c in dry_cols)  # DRY's column does not depend on temperature


def test_a_top_n_funnel_shows_as_the_chains_only_what_the_chain_did(model_logits):
    """Issue 20 review, M1: a stored reply keeps its top 10 and every stage renormalised over them
    ("top_k 24 %" where the chain gave 14 %, "left 10 -> 9" for 49k -> 34). On the top-N, only the model
    column and the stages after a cut that left only kept tokens are the chain's (``known``); each such
    column must equal the full vocabulary's, and a drawn token outside the N is named, not "cut"."""
    vocab, n_ctx, history, logits = model_logits
    n_vocab = logits.shape[0]
    ids_all = np.arange(n_vocab, dtype=np.int32)
    lse = float(np.log(np.exp(logits.astype(np.float64) - logits.max()).sum()) + logits.max())
    top_ids, top_logits, _lse = reduce_logits(logits, np.empty_like(logits))
    outsider = int(top_ids[-1])  # ranked 64th: outside a stored top 10, drawn by a (what-if) chain
    rng = random.Random(2020)
    cases = [SamplerSettings(), SamplerSettings(top_k=5), SamplerSettings(top_k=0, top_p=1.0, min_p=0.3)]
    cases += [random_settings(rng) for _ in range(24)]
    seen_known = seen_unknown = 0
    for trial, s in enumerate(cases):
        for n in (10, TOP_M):
            common = dict(settings=s, seed=7, history=history, vocab=vocab, n_ctx=n_ctx, reply_id=1, step=0)
            full = run_funnel(ids=ids_all, logits=logits, logsumexp=lse, drawn=outsider, exact=True, **common)
            part = run_funnel(
                ids=top_ids[:n], logits=top_logits[:n], logsumexp=lse, drawn=outsider, exact=False, **common
            )
            why = f"trial {trial}, top {n}: {s}"
            assert [st.kind for st in part.stages] == [st.kind for st in full.stages], why
            assert part.stages[0].known and part.stages[0].survivors == n_vocab, why
            assert part.unkept == ((outsider,) if n == 10 else ()), why
            full_p = {tok: [st.probs[r] for st in full.stages] for r, (tok, _t) in enumerate(full.rows)}
            for c, (st, ref) in enumerate(zip(part.stages, full.stages, strict=True)):
                if c == 0 or not st.known:
                    seen_unknown += c > 0
                    continue
                seen_known += 1
                assert st.survivors == ref.survivors, (why, st.kind)
                assert st.entropy_bits == pytest.approx(ref.entropy_bits, abs=1e-3), (why, st.kind)
                for r, (tok, _text) in enumerate(part.rows):
                    if tok in full_p:
                        assert st.probs[r] == pytest.approx(full_p[tok][c], abs=2e-5), (why, st.kind, tok)
            for r, (tok, _text) in enumerate(part.rows):  # the model column: true probabilities of the kept ones
                if tok not in part.unkept:
                    assert part.stages[0].probs[r] == pytest.approx(full_p[tok][0], rel=1e-5), why
            kinds = [st.kind for st in part.stages]
            if trial == 0 and n == 10:  # the defaults: top_k 40, then top_p on 10 tokens: only the model is known
                assert not any(st.known for st in part.stages[1:]), why
            if trial == 1:  # top_k 5 within the kept ones: every column from it on is the chain's, not before
                k = kinds.index(FunnelStageKind.TOP_K)
                assert all(st.known for st in part.stages[k:]) and not part.stages[k - 1].known, why
    assert seen_known > 20 and seen_unknown > 20
