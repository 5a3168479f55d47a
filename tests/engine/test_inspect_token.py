"""Inspect a token on the real llama.cpp: SmolLM2 (llama), Gemma 3 270M (sliding window, 262k vocabulary,
tied embeddings) and a tiny random-weight MoE the test writes itself (tests/support/moe_model.py).

The lens self-check (the last layer's lens against the logits llama.cpp computed in the inspect context)
must pass on all three, attention rows must sum to 1, and the cache-reuse path must agree with
re-evaluation and, at the chat's last evaluated position, with the chat context's own logits.
"""

from __future__ import annotations

import time
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.gguf.gguf_info import check_loadable
from app.core.inspection.token_inspection import InspectPath, TokenInspection
from app.engine.errors import EngineError
from app.engine.inspection.chat_cache import take_chat_cache
from app.engine.inspection.evaluation import wanted_tensor
from app.engine.inspection.token_inspector import TokenInspector
from app.engine.llama_context import GlassboxLlama
from app.engine.prefill import rewind_to_prefix
from app.engine.vocab import Vocab
from tests.support.engine import SYSTEM, start_engine
from tests.support.moe_model import MoEShape, write_moe_gguf

# The lens reads float16 copies of the dequantized tables and rounds its activations the way
# llama.cpp's CPU backend does (8-bit blocks for a Q8_0 table), so what is left is float rounding
# (about 0.01 logit on SmolLM2); without the rounding it is 0.36, and a wrong norm, a missing
# softcap or the wrong table gives differences of whole logits.
SELF_CHECK_MAX = 0.05
# The inspect context's logits against the chat context's own, when the inspect context reused the
# chat's KV cache and evaluated the position as the chat did (measured: 0.0 on SmolLM2).
CHAT_CHECK_MAX = 1e-2

PROMPT = "Name three colours of the rainbow and say which one is in the middle."


def _inspect(eng, position: int, token_id: int, **kw) -> P.TokenInspected | P.Failed:
    return eng.host.request(P.InspectToken(eng.host.next_id(), position, token_id, **kw), timeout=300)


def _context_tokens(_eng, finished: P.Finished, prompt: P.PromptPrepared, reply: list[P.TokenEvent]) -> list[int]:
    """The ids the chat context holds: the prompt's (only the new ones are reported) then the evaluated reply."""
    assert prompt.cached_tokens == 0
    toks = [t for t, _ in prompt.new_tokens]
    return toks + [ev.token_id for ev in reply][: finished.stats.context_used - len(toks)]


def _turn(eng, text: str = PROMPT, max_tokens: int = 12) -> tuple[P.PromptPrepared, list[int]]:
    """One greedy turn on a new chat; its PromptPrepared and the tokens the context holds after it."""
    assert isinstance(eng.host.request(P.ResetContext(eng.host.next_id())), P.ContextReset)
    events: list = []
    fin = eng.generate([SYSTEM, ("user", text)], events=events, max_tokens=max_tokens, temperature=0.0)
    assert isinstance(fin, P.Finished), fin
    prompt = next(e for e in events if isinstance(e, P.PromptPrepared))
    reply = [e for e in events if isinstance(e, P.TokenEvent)]
    return prompt, _context_tokens(eng, fin, prompt, reply)


def _check_common(ins: TokenInspection, tokens: list[int], n_layer: int) -> None:
    assert ins.n_layer == n_layer
    assert len(ins.lens.cells) == n_layer
    assert ins.position in ins.lens.positions
    # The lens's grid and the next tokens come from the context itself.
    for pos, (tid, _text), (nid, _n) in zip(ins.lens.positions, ins.lens.tokens, ins.lens.next_tokens, strict=True):
        assert tid == tokens[pos]
        assert nid == (tokens[pos + 1] if pos + 1 < len(tokens) else -1)
    for line in ins.lens.cells:
        for cell in line:
            probs = [p for _i, _t, p in cell.top]
            assert probs == sorted(probs, reverse=True) and 0.0 < probs[0] <= 1.0
    assert ins.lens.last_layer_max_abs_diff < SELF_CHECK_MAX, ins.lens.last_layer_max_abs_diff
    # The last layer's lens is the model's prediction: its top token is llama.cpp's argmax.
    att = ins.attention
    assert att.key_positions == (0, ins.position + 1)
    assert att.row_sum_max_error < 1e-3, att.row_sum_max_error
    assert len(att.key_texts) == ins.position + 1
    w = np.frombuffer(att.weights, dtype=np.float32).reshape(att.n_layer, att.n_head, -1)
    assert (w >= 0).all()
    assert ins.embedding.norm > 0
    assert len(ins.embedding.vector) > 0
    assert ins.token_id not in [i for i, _t, _c in ins.embedding.neighbours]
    cos = [c for _i, _t, c in ins.embedding.neighbours]
    assert cos == sorted(cos, reverse=True) and all(-1.0001 <= c <= 1.0001 for c in cos)
    assert ins.extra_memory_bytes > 0


@pytest.fixture(scope="module")
def smol(smollm2):
    eng = start_engine(smollm2, n_ctx=2048)
    yield eng
    eng.host.stop()


def test_smollm2_lens_attention_embedding_and_both_paths(smol):
    prompt, tokens = _turn(smol)
    pos = len(prompt.new_tokens) - 6  # inside the prompt, with neighbours each side
    ev = _inspect(smol, pos, tokens[pos])
    assert isinstance(ev, P.TokenInspected), ev
    ins = ev.inspection
    assert ins.path is InspectPath.CACHE_REUSE, ins.fallback_reason
    assert ins.evaluated == 5  # the span only: the position and two neighbours each side
    _check_common(ins, tokens, 30)
    assert ins.experts is None
    assert ins.lens.tied  # SmolLM2 has no output.weight
    assert ins.attention.head_kv == tuple(h // 3 for h in range(9))  # 9 query heads, 3 KV heads
    assert not any(ins.attention.sliding)

    again = _inspect(smol, pos, tokens[pos], force_re_eval=True)
    assert isinstance(again, P.TokenInspected), again
    re = again.inspection
    assert re.path is InspectPath.RE_EVAL and re.fallback_reason
    assert re.evaluated == pos + 3
    _check_common(re, tokens, 30)
    # Same positions, same keys: the two paths agree (up to how llama.cpp batches the prefix).
    a = np.frombuffer(ins.attention.weights, dtype=np.float32)
    b = np.frombuffer(re.attention.weights, dtype=np.float32)
    assert a.shape == b.shape
    assert float(np.abs(a - b).max()) < 0.02
    assert [c.top[0][0] for c in ins.lens.cells[-1]] == [c.top[0][0] for c in re.lens.cells[-1]]


def test_prepare_inspect_builds_the_tables_before_the_first_inspection(smollm2):
    """PrepareInspect (sent when the person hovers a token) builds the tables and the inspect context
    on the inspect thread, ahead of the InspectToken queued after it: the first inspection reads
    no table (``tables_s`` 0) and is as fast as the later ones."""
    eng = start_engine(smollm2, n_ctx=2048)
    try:
        prompt, tokens = _turn(eng)
        eng.host.send(P.PrepareInspect())  # no answer
        pos = len(prompt.new_tokens) - 6
        ev = _inspect(eng, pos, tokens[pos])
        assert isinstance(ev, P.TokenInspected), ev
        assert ev.inspection.tables_s == 0.0 and ev.inspection.path is InspectPath.CACHE_REUSE
        assert ev.inspection.lens.last_layer_max_abs_diff < 0.05
    finally:
        eng.host.stop()


def test_reply_token_and_a_stale_position(smol):
    _prompt, tokens = _turn(smol, "Count from one to five.", max_tokens=8)
    pos = len(tokens) - 1  # the last evaluated reply token: no next token in the context
    ev = _inspect(smol, pos, tokens[pos])
    assert isinstance(ev, P.TokenInspected), ev
    ins = ev.inspection
    assert ins.lens.positions[-1] == pos
    assert ins.lens.next_tokens[-1] == (-1, "")
    assert ins.lens.cells[-1][-1].next_rank == 0
    wrong = _inspect(smol, pos, (tokens[pos] + 1) % 49152)
    assert isinstance(wrong, P.Failed) and wrong.kind is P.FailureKind.NOT_IN_CONTEXT, wrong
    beyond = _inspect(smol, len(tokens) + 10, 1)
    assert isinstance(beyond, P.Failed) and beyond.kind is P.FailureKind.NOT_IN_CONTEXT
    # The engine goes on: a new turn after the failures.
    assert isinstance(smol.generate([SYSTEM, ("user", "Hi")], max_tokens=2), P.Finished)


def test_the_self_check_compares_with_the_inspect_contexts_logits_and_the_chats_own(smol):
    """The lens's last layer against the logits llama.cpp computed in the inspect context for the position
    and, at the chat context's last evaluated position (whose logits it still holds), against those too."""
    _prompt, tokens = _turn(smol, "Count from one to five.", max_tokens=8)
    last = len(tokens) - 1  # a reply token: the chat decoded it alone, and so does the inspection
    ev = _inspect(smol, last, tokens[last])
    assert isinstance(ev, P.TokenInspected), ev
    ins = ev.inspection
    assert ins.path is InspectPath.CACHE_REUSE, ins.fallback_reason
    lens = ins.lens
    assert lens.last_layer_max_abs_diff < SELF_CHECK_MAX, lens.last_layer_max_abs_diff
    # The chat's keys and values copied in and the position evaluated as the chat did: the inspect
    # context redoes the chat's computation, and the lens is as close to the chat's logits as to its own.
    assert lens.chat_max_abs_diff is not None and lens.contexts_max_abs_diff is not None
    assert lens.contexts_max_abs_diff < CHAT_CHECK_MAX, lens.contexts_max_abs_diff
    assert lens.chat_max_abs_diff < SELF_CHECK_MAX, lens.chat_max_abs_diff
    assert ins.lens.positions == (last - 2, last - 1, last)  # the grid keeps its neighbours
    assert ins.attention.row_sum_max_error < 1e-3
    # Re-evaluated from the start (the reply's tokens in slices, not one by one as the chat decoded
    # them): compared too, but the keys differ by llama.cpp's batch rounding, so no bound here.
    again = _inspect(smol, last, tokens[last], force_re_eval=True)
    assert isinstance(again, P.TokenInspected), again
    re = again.inspection
    assert re.path is InspectPath.RE_EVAL
    assert re.lens.last_layer_max_abs_diff < SELF_CHECK_MAX
    assert re.lens.chat_max_abs_diff is not None and re.lens.contexts_max_abs_diff is not None
    # Another position: the chat context holds no logits for it.
    other = _inspect(smol, last - 3, tokens[last - 3])
    assert isinstance(other, P.TokenInspected), other
    assert other.inspection.lens.chat_max_abs_diff is None and other.inspection.lens.contexts_max_abs_diff is None


@pytest.mark.timeout(150)  # 44 s in the suite on this machine (tests/ durations, 2 cores)
def test_chat_goes_on_while_an_inspection_runs(smol):
    long_text = " ".join(f"Item {i} is a word." for i in range(150))
    prompt, tokens = _turn(smol, long_text, max_tokens=2)
    pos = len(prompt.new_tokens) - 3
    host = smol.host
    rid = host.next_id()
    host.send(P.InspectToken(rid, pos, tokens[pos], force_re_eval=True))  # re-evaluates ~1,000 tokens
    time.sleep(0.05)
    order: list[str] = []
    inspected: list[P.TokenInspected] = []

    def seen(ev):
        if isinstance(ev, P.PromptPrepared):
            order.append("prompt")
        elif isinstance(ev, P.TokenInspected) and ev.request_id == rid:
            order.append("inspected")
            inspected.append(ev)

    fin2 = smol.generate([SYSTEM, ("user", "Say yes.")], max_tokens=3, on_event=seen)
    assert isinstance(fin2, P.Finished)
    while not inspected:  # the inspection's answer comes after the turn's
        ev = host.recv(300)
        assert ev is not None, "no answer to the inspection"
        seen(ev)
    # The new message was prepared while the inspection was still running.
    assert order.index("prompt") < order.index("inspected"), order


@pytest.mark.timeout(75)  # 24 s in the suite on this machine (tests/ durations, 2 cores)
def test_a_model_load_stops_an_inspection_in_progress(smollm2):
    eng = start_engine(smollm2, n_ctx=2048)
    try:
        long_text = " ".join(f"Item {i} is a word." for i in range(150))
        _prompt, tokens = _turn(eng, long_text, max_tokens=2)
        host = eng.host
        rid = host.next_id()
        pos = len(tokens) - 3
        host.send(P.InspectToken(rid, pos, tokens[pos], force_re_eval=True))
        time.sleep(0.3)  # the inspection is re-evaluating ~1,000 tokens
        answers: list = []
        loaded = host.request(
            P.LoadModel(host.next_id(), str(smollm2), LoadSettings(n_ctx=1024)), timeout=120, on_event=answers.append
        )
        assert isinstance(loaded, P.ModelLoaded), loaded
        while not any(getattr(a, "request_id", None) == rid for a in answers):
            ev = host.recv(60)
            assert ev is not None, "the inspection was never answered"
            answers.append(ev)
        answer = next(a for a in answers if getattr(a, "request_id", None) == rid)
        # Stopped by the unload (or, on a fast machine, finished before it): never a crash or a hang.
        if isinstance(answer, P.Failed):
            assert answer.kind is P.FailureKind.CANCELLED, answer
        else:
            assert isinstance(answer, P.TokenInspected)
        assert isinstance(eng.generate([SYSTEM, ("user", "Hi")], max_tokens=2), P.Finished)
    finally:
        eng.host.stop()


def test_gemma_sliding_window_layers_and_tied_lens(gemma):
    eng = start_engine(gemma, n_ctx=2048)
    try:
        prompt, tokens = _turn(eng, "The capital of France is", max_tokens=4)
        pos = len(prompt.new_tokens) - 3
        ev = _inspect(eng, pos, tokens[pos])
        assert isinstance(ev, P.TokenInspected), ev
        ins = ev.inspection
        info = check_loadable(gemma)
        assert ins.path is InspectPath.CACHE_REUSE, ins.fallback_reason
        _check_common(ins, tokens, info.n_layer)
        assert ins.attention.sliding == info.swa_layers() and any(ins.attention.sliding)
        assert ins.attention.window == info.sliding_window
        assert ins.lens.tied
        assert ins.embedding.scale == pytest.approx(info.n_embd**0.5)
    finally:
        eng.host.stop()


@pytest.mark.timeout(90)  # 30 s in the suite on this machine (tests/ durations, 2 cores)
def test_gemma_without_swa_full_re_evaluates_and_keeps_what_it_evaluated(gemma):
    eng = start_engine(gemma, n_ctx=2048, swa_full=False)
    try:
        long_text = " ".join(f"Line {i}: the cat sat on the mat." for i in range(70))  # > 512 tokens
        _prompt, tokens = _turn(eng, long_text, max_tokens=2)
        n = len(tokens)
        assert n > 600
        early = 40
        ev = _inspect(eng, early, tokens[early])
        assert isinstance(ev, P.TokenInspected), ev
        ins = ev.inspection
        assert ins.path is InspectPath.RE_EVAL
        assert "swa_full off" in ins.fallback_reason
        assert ins.evaluated == early + 3
        _check_common(ins, tokens, ins.n_layer)
        # A later position of the same conversation: what the first inspection evaluated is kept.
        late = n - 4
        ev = _inspect(eng, late, tokens[late])
        assert isinstance(ev, P.TokenInspected), ev
        assert ev.inspection.path is InspectPath.RE_EVAL
        assert f"{early + 3:,} positions kept from the previous inspection" in ev.inspection.fallback_reason
        assert ev.inspection.evaluated == min(n - 1, late + 2) + 1 - (early + 3)
        _check_common(ev.inspection, tokens, ins.n_layer)
    finally:
        eng.host.stop()


def test_a_chat_with_flash_attention_and_a_quantized_v_cache_is_inspected_by_re_evaluation(smollm2):
    """A q8_0 V cache needs flash attention in the chat; attention probabilities need it off: the
    inspect context then runs f16 K/V and re-evaluates (the chat's cache cannot be copied into it)."""
    eng = start_engine(smollm2, n_ctx=1024, flash_attn="on", type_k="q8_0", type_v="q8_0")
    try:
        _prompt, tokens = _turn(eng)
        pos = len(tokens) - 3
        ev = _inspect(eng, pos, tokens[pos])
        assert isinstance(ev, P.TokenInspected), ev
        ins = ev.inspection
        assert ins.path is InspectPath.RE_EVAL and "flash attention" in ins.fallback_reason
        _check_common(ins, tokens, ins.n_layer)
    finally:
        eng.host.stop()


@pytest.fixture(scope="module")
def moe_model(smollm2, tmp_path_factory) -> Path:
    return write_moe_gguf(tmp_path_factory.mktemp("moe") / "tiny-moe.gguf", smollm2)


def test_tiny_moe_experts_and_lens(moe_model):
    shape = MoEShape()
    eng = start_engine(moe_model, n_ctx=1024)
    try:
        _prompt, tokens = _turn(eng, "Hello there, how are you?", max_tokens=6)
        pos = len(tokens) - 2
        ev = _inspect(eng, pos, tokens[pos], turn_start=0)
        assert isinstance(ev, P.TokenInspected), ev
        ins = ev.inspection
        _check_common(ins, tokens, shape.n_layer)
        assert not ins.lens.tied  # the tiny model has its own output.weight
        ex = ins.experts
        assert ex is not None
        assert (ex.n_expert, ex.n_expert_used) == (shape.n_expert, shape.n_expert_used)
        assert len(ex.chosen) == shape.n_layer
        for ch in ex.chosen:
            assert len(set(ch.experts)) == shape.n_expert_used
            assert all(0 <= e < shape.n_expert for e in ch.experts)
            assert sum(ch.weights) == pytest.approx(1.0, abs=1e-4)  # llama: weights normalised over the chosen
            assert list(ch.weights) == sorted(ch.weights, reverse=True)
        # The load covers the turn from its start: every evaluated token chose n_expert_used experts per layer.
        assert ex.load_tokens == len(tokens)  # from position 0 (turn_start) to the span's end, the last token
        load = np.frombuffer(ex.load, dtype=np.float32).reshape(shape.n_layer, shape.n_expert)
        assert np.allclose(load.sum(axis=1), shape.n_expert_used, atol=1e-5)
    finally:
        eng.host.stop()


# ------------------------------------------------------------------------------- in-process
@pytest.fixture(scope="module")
def inproc(smollm2):
    llm = llama_cpp.Llama(model_path=str(smollm2), n_ctx=512, n_batch=128, verbose=False)
    llm.eval(llm.tokenize(b"The quick brown fox jumps over the lazy dog.", add_bos=False))
    info = check_loadable(smollm2)
    ti = TokenInspector(llm, info, Vocab(llm.model), 2)
    yield llm, info, ti
    ti.close()
    llm.close()


def test_running_build_emits_the_tensor_names_used(inproc):
    llm, info, ti = inproc
    tokens = [int(t) for t in llm.input_ids[: llm.n_tokens]]
    ti.capture.record_names = True
    try:
        chat = take_chat_cache(llm, info, busy=False)
        ins = ti.inspect(P.InspectToken(1, 5, tokens[5]), chat)
    finally:
        ti.capture.record_names = False
    names = set(ti.capture.names_seen)
    for il in range(info.n_layer):
        assert f"l_out-{il}" in names and f"kq_soft_max-{il}" in names
    assert "result_norm" in names and "result_output" in names
    # Exactly those are copied for a dense model (views of them, "... (reshaped)", are not).
    expected = {f"l_out-{il}" for il in range(info.n_layer)} | {f"kq_soft_max-{il}" for il in range(info.n_layer)}
    assert {n for n in names if wanted_tensor(n)} == expected | {"result_norm"}
    assert set(ins.tensors_seen) == {"l_out-N", "kq_soft_max-N", "result_norm"}
    assert ti.capture.tensors == {}  # nothing kept after the inspection


def test_the_chat_logits_are_compared_only_while_the_chat_context_holds_them(smollm2):
    """llama.cpp keeps the last output row's logits through a rewind (``llama_memory_seq_rm``): they are
    the chat's for its last evaluated position only until ``n_tokens`` drops to that position. A position
    the chat decoded alone is evaluated alone: llama.cpp's CPU kernels give a one-token batch other
    logits than a longer one (0.59 logit apart on SmolLM2 Q4_1)."""
    llm = GlassboxLlama(model_path=str(smollm2), n_ctx=512, n_batch=128, verbose=False)
    info = check_loadable(smollm2)
    ti = TokenInspector(llm, info, Vocab(llm.model), 2)
    try:
        toks = llm.tokenize(b"The quick brown fox jumps over the lazy dog.", add_bos=False)
        assert llm.logits_position == -1 and llm.logits_batch == 0
        llm.eval(toks)
        last = len(toks) - 1
        assert (llm.logits_position, llm.logits_batch) == (last, len(toks))
        chat = take_chat_cache(llm, info, busy=False)
        assert chat.logits_position == last and chat.logits is not None and chat.logits.shape == (llm.n_vocab(),)
        assert take_chat_cache(llm, info, busy=True).logits is None  # a reply running: not read
        ins = ti.inspect(P.InspectToken(1, last, toks[last]), chat)
        assert ins.path is InspectPath.CACHE_REUSE, ins.fallback_reason
        assert ins.lens.contexts_max_abs_diff is not None and ins.lens.contexts_max_abs_diff < CHAT_CHECK_MAX
        assert ins.lens.chat_max_abs_diff is not None and ins.lens.chat_max_abs_diff < SELF_CHECK_MAX
        # The next turn keeps a shorter common prefix: the logits llama.cpp still holds are of a position gone.
        kept = rewind_to_prefix(llm, [*toks[:-2], 42, 43])
        assert kept == last - 1 and llm.logits_position == -1
        assert take_chat_cache(llm, info, busy=False).logits is None
        llm.eval([42])  # decoded alone, as a reply's token: current again
        assert (llm.logits_position, llm.logits_batch) == (kept, 1)
        again = take_chat_cache(llm, info, busy=False)
        ins = ti.inspect(P.InspectToken(2, kept, 42), again)
        assert ins.lens.positions == (kept - 2, kept - 1, kept)
        assert ins.lens.contexts_max_abs_diff is not None and ins.lens.contexts_max_abs_diff < CHAT_CHECK_MAX
        assert ins.lens.chat_max_abs_diff is not None and ins.lens.chat_max_abs_diff < SELF_CHECK_MAX
        assert ins.lens.last_layer_max_abs_diff < SELF_CHECK_MAX
        assert ins.attention.row_sum_max_error < 1e-3 and ins.attention.key_positions == (0, kept + 1)
    finally:
        ti.close()
        llm.close()


def test_a_callback_error_fails_the_inspection_not_the_engine(inproc):
    llm, info, ti = inproc
    tokens = [int(t) for t in llm.input_ids[: llm.n_tokens]]
    chat = take_chat_cache(llm, info, busy=False)
    wants = ti.capture.wants

    def broken(name: str) -> bool:
        if name == "l_out-3":
            raise RuntimeError("boom")
        return wants(name)

    ti.capture.wants = broken
    try:
        with pytest.raises(EngineError) as err:
            ti.inspect(P.InspectToken(1, 5, tokens[5]), chat)
        assert "boom" in err.value.message
    finally:
        ti.capture.wants = wants
    ok = ti.inspect(P.InspectToken(2, 5, tokens[5]), chat)
    assert ok.lens.last_layer_max_abs_diff < SELF_CHECK_MAX
    # The chat context itself was never touched: its cache still holds the sentence.
    assert [int(t) for t in llm.input_ids[: llm.n_tokens]] == tokens
