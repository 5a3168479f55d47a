"""The sampler funnel: llama.cpp's own samplers run one stage at a time on a step's logits.

:func:`build_stages` is the one place that turns :class:`~app.core.sampling.params.SamplerSettings`
into llama.cpp sampler objects (``llama_sampler_init_*`` of the llama-cpp-python 0.3.36
bindings, checked against the vendored llama.h): :func:`make_chain` puts them in a
``llama_sampler_chain`` for generation, and :func:`run_funnel` applies them one by one
with ``llama_sampler_apply`` to a ``llama_token_data_array`` built from stored logits,
reading the array back after each stage. So the funnel and the reply's chain are the same
code in llama.cpp, not a copy (tests/engine/test_funnel.py holds one against the other).

What each stage does to the array (llama.cpp src/llama-sampler.cpp): logit bias,
penalties, DRY and temperature change logits; top_k, typical_p, top_p, min_p,
top-n-sigma and XTC drop entries (``size`` shrinks; some sort); temperature 0 sets every
logit but the top one to -inf; the draw (dist, greedy, mirostat) sets ``selected``.
After each stage the funnel renormalises: probabilities are the softmax of the surviving
finite logits, which is what the next stage sees.

The output constraint (a grammar, :mod:`app.engine.constraint`) is the first stage when there is one.
llama.cpp's own ``common_sampler_sample`` (common/sampling.cpp) keeps the grammar outside the chain: it
samples with the chain first, checks the drawn token against the grammar, and only when it is rejected
applies the grammar to the whole array and then the chain again ("grammar-based rejection sampling"; with
``grammar_first`` it applies the grammar first). Glassbox always runs it first (``grammar_first``): one
chain, the same stages in the reply and in the funnel, and the distribution the person sees is the one
drawn from. The chain's ``llama_sampler_accept`` feeds the grammar each drawn token, so its state is the
reply so far; history (the prompt) is fed to the penalties and DRY only, never to the grammar.

History: penalties and DRY look at the tokens before the step (the prompt and the reply
so far); the funnel feeds them with ``llama_sampler_accept`` as the chain was fed. The
stages with random numbers (XTC, dist, mirostat) are created fresh with the reply's
seed, so on a step other than the reply's first they show one possible outcome rather
than the reply's own RNG state; mirostat's running mu likewise starts from 2 x tau.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core.sampling.funnel import Funnel, FunnelStage, FunnelStageKind
from app.core.sampling.params import Mirostat, SamplerSettings, SamplerStage
from app.engine.funnel_known import known_columns
from app.engine.funnel_store import TOP_M
from app.engine.vocab import Vocab

# llama_token_data as numpy sees it: {int32 id; float logit; float p;}, 12 bytes.
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
assert TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)

# llama.cpp's default DRY sequence breakers (common.h, dry_sequence_breakers).
DRY_SEQ_BREAKERS: tuple[str, ...] = ("\n", ":", '"', "*")
MIROSTAT_M = 100  # llama.cpp's common_sampler_init passes m = 100 to Mirostat 1
FUNNEL_ROWS = 12  # tokens a funnel shows by default

_STAGE_KIND: dict[SamplerStage, FunnelStageKind] = {
    SamplerStage.PENALTIES: FunnelStageKind.PENALTIES,
    SamplerStage.DRY: FunnelStageKind.DRY,
    SamplerStage.TOP_N_SIGMA: FunnelStageKind.TOP_N_SIGMA,
    SamplerStage.TOP_K: FunnelStageKind.TOP_K,
    SamplerStage.TYPICAL_P: FunnelStageKind.TYPICAL_P,
    SamplerStage.TOP_P: FunnelStageKind.TOP_P,
    SamplerStage.MIN_P: FunnelStageKind.MIN_P,
    SamplerStage.XTC: FunnelStageKind.XTC,
    SamplerStage.TEMPERATURE: FunnelStageKind.TEMPERATURE,
}

# Stages that change logits but never drop a token: they run under greedy too (they can change the argmax).
_GREEDY_STAGES = (SamplerStage.PENALTIES, SamplerStage.DRY)

Stages = list[tuple[FunnelStageKind, Any]]


def _window(n: int, n_ctx: int) -> int:
    """A look-back of ``n`` tokens with llama.cpp's -1 = the whole context."""
    return n_ctx if n < 0 else n


def history_window(s: SamplerSettings, n_ctx: int) -> int:
    """How many of the latest tokens the penalties and DRY look back over (0: neither is on)."""
    n = 0
    if s.stage_on(SamplerStage.PENALTIES):
        n = max(n, _window(s.repeat_last_n, n_ctx))
    if s.stage_on(SamplerStage.DRY):
        n = max(n, _window(s.dry_penalty_last_n, n_ctx))
    return n


def build_stages(s: SamplerSettings, seed: int, vocab: Vocab, n_ctx: int, grammar: Any = None) -> Stages:
    """llama.cpp sampler objects for ``s``, in the order they run; the last one draws.

    Follows llama.cpp's ``common_sampler_init``: the grammar (when given: a sampler from
    :func:`app.engine.constraint.sampler.grammar_sampler`, fed the reply's tokens so far; its
    ownership passes to the caller of this function with the others), then logit bias; then the stages of
    ``s.order`` that are on; then dist(seed). With mirostat on: logit bias, temperature,
    mirostat (which draws). At temperature 0 (greedy): logit bias, penalties and DRY (the
    stages that can move the argmax), then greedy. The caller owns the objects (free each
    with ``llama_sampler_free``, or hand them to a chain).

    Args:
        s: the settings (validated by the caller).
        seed: the resolved seed (dist, XTC, mirostat).
        vocab: the model's vocabulary (DRY tokenizes its sequence breakers with it).
        n_ctx: the context, tokens (the look-back when a window is -1).
    """
    n_vocab = vocab.n_tokens
    out: Stages = [] if grammar is None else [(FunnelStageKind.GRAMMAR, grammar)]
    if s.logit_bias:
        arr = (llama_cpp.llama_logit_bias * len(s.logit_bias))()
        for i, (tok, bias) in enumerate(s.logit_bias):
            arr[i] = llama_cpp.llama_logit_bias(tok, bias)
        out.append((FunnelStageKind.LOGIT_BIAS, llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(arr), arr)))
    if s.mirostat != Mirostat.OFF:
        out.append((FunnelStageKind.TEMPERATURE, llama_cpp.llama_sampler_init_temp(s.temperature)))
        if s.mirostat == Mirostat.V1:
            smpl = llama_cpp.llama_sampler_init_mirostat(n_vocab, seed, s.mirostat_tau, s.mirostat_eta, MIROSTAT_M)
            out.append((FunnelStageKind.MIROSTAT, smpl))
        else:
            smpl = llama_cpp.llama_sampler_init_mirostat_v2(seed, s.mirostat_tau, s.mirostat_eta)
            out.append((FunnelStageKind.MIROSTAT_V2, smpl))
        return out
    for stage in s.order:
        if not s.stage_on(stage) or (s.is_greedy and stage not in _GREEDY_STAGES):
            continue
        out.append((_STAGE_KIND[stage], _init_stage(stage, s, seed, vocab, n_ctx)))
    if s.is_greedy:
        out.append((FunnelStageKind.GREEDY, llama_cpp.llama_sampler_init_greedy()))
    else:
        out.append((FunnelStageKind.DIST, llama_cpp.llama_sampler_init_dist(seed)))
    return out


DRY_TEMPLATES_PER_VOCAB = 16  # DRY samplers kept per vocabulary (distinct DRY settings), oldest freed first


class DryTemplates:
    """DRY samplers made once per vocabulary and DRY settings, cloned for each chain.

    ``llama_sampler_init_dry`` turns the sequence breakers into token sequences by scanning the
    whole vocabulary (``get_overlapping_token_sequences``, once per breaker): 38 ms on Gemma 3's
    262,144 tokens, 7 ms on SmolLM2's 49,152, on every funnel (a slider move) and every reply.
    ``llama_sampler_clone`` of a DRY sampler copies its processed breakers and runs no scan, so
    the scan runs once per (vocabulary, multiplier, base, allowed length, window). The templates
    are never fed tokens; they are freed with their vocabulary (or when more than
    :data:`DRY_TEMPLATES_PER_VOCAB` distinct settings were asked for, the oldest first).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_vocab: weakref.WeakKeyDictionary[Vocab, OrderedDict[tuple[float, float, int, int], Any]] = (
            weakref.WeakKeyDictionary()
        )
        self.made = 0  # templates made (llama_sampler_init_dry calls): tests and the bench read it

    def sampler(self, vocab: Vocab, multiplier: float, base: float, allowed_length: int, window: int) -> Any:
        """A new DRY sampler with these values (the caller frees it, or a chain that owns it does)."""
        key = (multiplier, base, allowed_length, window)
        with self._lock:
            kept = self._by_vocab.get(vocab)
            if kept is None:
                kept = OrderedDict()
                self._by_vocab[vocab] = kept
                weakref.finalize(vocab, _free_all, kept)
            template = kept.get(key)
            if template is None:
                breakers = (ctypes.c_char_p * len(DRY_SEQ_BREAKERS))(*(b.encode() for b in DRY_SEQ_BREAKERS))
                template = llama_cpp.llama_sampler_init_dry(
                    vocab.ptr, multiplier, base, allowed_length, window, breakers, len(DRY_SEQ_BREAKERS)
                )
                self.made += 1
                kept[key] = template
                while len(kept) > DRY_TEMPLATES_PER_VOCAB:
                    llama_cpp.llama_sampler_free(kept.popitem(last=False)[1])
            else:
                kept.move_to_end(key)
            return llama_cpp.llama_sampler_clone(template)


def _free_all(kept: OrderedDict[tuple[float, float, int, int], Any]) -> None:
    for smpl in kept.values():
        llama_cpp.llama_sampler_free(smpl)
    kept.clear()


DRY_TEMPLATES = DryTemplates()


def _init_stage(stage: SamplerStage, s: SamplerSettings, seed: int, vocab: Vocab, n_ctx: int) -> Any:
    if stage == SamplerStage.PENALTIES:
        return llama_cpp.llama_sampler_init_penalties(
            vocab.n_tokens, _window(s.repeat_last_n, n_ctx), s.repeat_penalty, s.frequency_penalty, s.presence_penalty
        )
    if stage == SamplerStage.DRY:
        # llama.cpp clamps a negative window to 0 (off): -1 means the context, so pass n_ctx.
        window = _window(s.dry_penalty_last_n, n_ctx)
        return DRY_TEMPLATES.sampler(vocab, s.dry_multiplier, s.dry_base, s.dry_allowed_length, window)
    if stage == SamplerStage.TOP_N_SIGMA:
        return llama_cpp.llama_sampler_init_top_n_sigma(s.top_n_sigma)
    if stage == SamplerStage.TOP_K:
        return llama_cpp.llama_sampler_init_top_k(s.top_k)
    if stage == SamplerStage.TYPICAL_P:
        return llama_cpp.llama_sampler_init_typical(s.typical_p, 1)
    if stage == SamplerStage.TOP_P:
        return llama_cpp.llama_sampler_init_top_p(s.top_p, 1)
    if stage == SamplerStage.MIN_P:
        return llama_cpp.llama_sampler_init_min_p(s.min_p, 1)
    if stage == SamplerStage.XTC:
        return llama_cpp.llama_sampler_init_xtc(s.xtc_probability, s.xtc_threshold, 1, seed)
    return llama_cpp.llama_sampler_init_temp_ext(s.temperature, s.dynatemp_range, s.dynatemp_exponent)


def make_chain(
    s: SamplerSettings, seed: int, history: Sequence[int], vocab: Vocab, n_ctx: int, grammar: Any = None
) -> Any:
    """llama.cpp's sampler chain for ``s`` (:func:`build_stages` in a ``llama_sampler_chain``),
    fed the last tokens of ``history`` for the penalties and DRY (never the grammar: its state is the
    reply's tokens only); the chain owns ``grammar``. Free it with llama_sampler_free."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    n = history_window(s, n_ctx)
    for kind, smpl in build_stages(s, seed, vocab, n_ctx, grammar):
        if n > 0 and kind != FunnelStageKind.GRAMMAR:
            for t in history[-n:]:
                llama_cpp.llama_sampler_accept(smpl, t)
        llama_cpp.llama_sampler_chain_add(chain, smpl)
    return chain


def token_array(ids: npt.NDArray[np.int32], logits: npt.NDArray[np.float32]) -> npt.NDArray[np.void]:
    """A ``llama_token_data`` buffer (numpy, :data:`TOKEN_DATA`) holding ``ids`` and ``logits``, p = 0."""
    arr = np.empty(ids.shape[0], dtype=TOKEN_DATA)
    arr["id"] = ids
    arr["logit"] = logits
    arr["p"] = 0.0
    return arr


def as_cur_p(arr: npt.NDArray[np.void]) -> Any:
    """A ``llama_token_data_array`` over ``arr`` (which must outlive it)."""
    return llama_cpp.llama_token_data_array(
        data=arr.ctypes.data_as(llama_cpp.llama_token_data_p), size=arr.shape[0], selected=-1, sorted=False
    )


def read_cur_p(cur: Any) -> npt.NDArray[np.void]:
    """A copy of the entries a sampler left in ``cur`` (it may move ``data`` or shrink ``size``)."""
    n = int(cur.size)
    if n == 0:
        return np.empty(0, dtype=TOKEN_DATA)
    addr = ctypes.cast(cur.data, ctypes.c_void_p).value or 0
    raw = (ctypes.c_char * (n * TOKEN_DATA.itemsize)).from_address(addr)
    out: npt.NDArray[np.void] = np.frombuffer(memoryview(raw), dtype=TOKEN_DATA).copy()
    return out


def _summary(
    kind: FunnelStageKind, entries: npt.NDArray[np.void], row_ids: npt.NDArray[np.int32], picked: int
) -> FunnelStage:
    """One column: each row's renormalised probability, survivors, entropy (bits), mass outside the rows.

    ``entries`` may be a view of the sampler's buffer (read before the next stage runs).
    """
    lg = entries["logit"]
    ids = entries["id"]
    finite = np.isfinite(lg)
    if not finite.all():
        lg, ids = lg[finite], ids[finite]
    n = int(lg.shape[0])
    if n == 0:
        return FunnelStage(kind, tuple(0.0 for _ in row_ids), 0, 0.0, 0.0, picked)
    if kind == FunnelStageKind.GREEDY:
        probs = tuple(1.0 if int(t) == picked else 0.0 for t in row_ids)
        return FunnelStage(kind, probs, n, 0.0, 0.0 if picked in row_ids else 1.0, picked)
    m = float(lg.max())
    shifted = lg - np.float32(m)  # float32 throughout: 262k-token vocabularies make this the cost
    z = np.exp(shifted)
    total = float(z.sum(dtype=np.float64))
    # H = -sum p log2 p with p = z / total:  H = log2(total) - sum(z * shifted) / (total ln 2)
    entropy = max(0.0, math.log2(total) - float(np.dot(z, shifted)) / (total * math.log(2)))
    where = np.flatnonzero(np.isin(ids, row_ids, assume_unique=True)) if n > 256 else np.arange(n)
    by_id = {int(t): float(z[i]) / total for t, i in zip(ids[where].tolist(), where.tolist(), strict=True)}
    probs = tuple(by_id.get(int(t), 0.0) for t in row_ids)
    return FunnelStage(kind, probs, n, entropy, max(0.0, 1.0 - sum(probs)), picked)


def run_funnel(
    *,
    ids: npt.NDArray[np.int32],
    logits: npt.NDArray[np.float32],
    logsumexp: float,
    settings: SamplerSettings,
    seed: int,
    history: Sequence[int],
    vocab: Vocab,
    n_ctx: int,
    drawn: int,
    reply_id: int,
    step: int,
    exact: bool,
    n_rows: int = FUNNEL_ROWS,
    texts: dict[int, str] | None = None,
    grammar: Any = None,
    entropy_bits: float = math.nan,
    stored: bool = False,
    recomputed: bool = False,
) -> Funnel:
    """The funnel of one step: ``settings``' stages applied one by one with llama.cpp's samplers.

    Args:
        ids, logits: the step's candidates (the whole vocabulary, or its stored top-M).
        logsumexp: log-sum-exp over the whole vocabulary's logits, so the model column's
            probabilities are the true ones even from the top-M.
        settings: the settings to run (validated by the caller).
        seed: the seed for dist, XTC and mirostat.
        history: the tokens before the step (prompt, then the reply so far), for penalties and DRY.
        vocab: a vocabulary this thread may use (:class:`Vocab` keeps a text buffer).
        drawn: the token the reply drew at this step (-1: unknown), always shown.
        exact: whether ``ids`` is the whole vocabulary.
        n_rows: tokens to show (the most likely under the raw model, the final top ones, the drawn one).
        texts: the rows' texts when they are known already (a stored reply's, which another model
            may have written); else the vocabulary's.
        grammar: the reply's grammar sampler fed the reply's tokens before this step (the column
            :data:`FunnelStageKind.GRAMMAR` first); freed here with the other stages.
        entropy_bits: the raw model's entropy over the whole vocabulary, bits, when known (not ``exact``:
            the model column's; NaN: not known, and not computed from the top-M).
        stored: the candidates are a stored reply's top-N (said on the funnel).
        recomputed: a stored reply's logits computed again (said on the funnel).

    Not ``exact``, ``ids`` are the top-M best first (a token appended after them, a grammar's drawn one,
    is below them): each column says whether its figures are the chain's
    (:func:`app.engine.funnel_known.known_columns`), and the rows outside ``ids`` are named (``unkept``).

    Returns:
        The :class:`~app.core.sampling.funnel.Funnel`: the model column, one column per stage, the draw last.
    """
    t0 = time.perf_counter()
    k = min(n_rows, ids.shape[0])
    top = np.argpartition(logits, -k)[-k:] if k < ids.shape[0] else np.arange(ids.shape[0])
    top = top[np.argsort(-logits[top], kind="stable")]
    row_list = [int(ids[i]) for i in top]
    if drawn >= 0 and drawn not in row_list:
        row_list.append(drawn)
    arr = token_array(ids, logits)
    cur = as_cur_p(arr)
    stages = build_stages(settings, seed, vocab, n_ctx, grammar)
    columns: list[tuple[FunnelStageKind, npt.NDArray[np.void], int]] = []  # (stage, its survivors, picked)
    try:
        n_hist = history_window(settings, n_ctx)
        for kind, smpl in stages:
            if n_hist > 0 and kind in (FunnelStageKind.PENALTIES, FunnelStageKind.DRY):
                for t in history[-n_hist:]:
                    llama_cpp.llama_sampler_accept(smpl, t)
            llama_cpp.llama_sampler_apply(smpl, ctypes.byref(cur))
            entries = read_cur_p(cur)
            picked = -1
            if kind.is_draw and 0 <= cur.selected < entries.shape[0]:
                picked = int(entries["id"][cur.selected])
            columns.append((kind, entries, picked))
    finally:
        for _kind, smpl in stages:
            llama_cpp.llama_sampler_free(smpl)
    # Rows: the raw model's most likely, the drawn token, then what the draw's input favours.
    if len(columns) >= 2:
        before_draw = columns[-2][1]
        fin = before_draw[np.isfinite(before_draw["logit"])]
        best = fin[np.argpartition(-fin["logit"], 3)[:3]] if fin.shape[0] > 3 else fin
        for t in best["id"][np.argsort(-best["logit"], kind="stable")].tolist():
            if t not in row_list:
                row_list.append(int(t))
    row_ids = np.asarray(row_list, dtype=np.int32)
    if exact:  # ids[i] == i
        model_logits = logits[row_ids].astype(np.float64)
    else:
        pos = {t: i for i, t in enumerate(ids.tolist())}
        model_logits = np.asarray([logits[pos[t]] if t in pos else -np.inf for t in row_list], dtype=np.float64)
    model_p = np.exp(model_logits - logsumexp)
    # Entropy of the raw model, -sum p log2 p with p = exp(l - lse), in float32 (over the top-M when not exact).
    centred = logits - np.float32(logsumexp)
    p_all = np.exp(centred)
    if exact:
        model_h = max(0.0, -float(np.dot(p_all, centred)) / math.log(2))
    else:  # over the top-M it would be too low: the whole vocabulary's, when the step kept it
        model_h = entropy_bits
    model = FunnelStage(
        FunnelStageKind.MODEL,
        tuple(float(x) for x in model_p),
        int(ids.shape[0]) if exact else (-1 if stored else vocab.n_tokens),  # stored: maybe another model's
        model_h,
        max(0.0, 1.0 - float(model_p.sum())),
    )
    out = [model] + [_summary(kind, entries, row_ids, picked) for kind, entries, picked in columns]
    unkept: tuple[int, ...] = ()
    if not exact:
        kept = set(ids.tolist())
        unkept = tuple(t for t in row_list if t not in kept)
        floor = float(logits[: min(ids.shape[0], TOP_M)].min()) if ids.shape[0] else math.inf
        known = known_columns(columns, settings, kept, floor)
        out = [out[0]] + [replace(st, known=k) for st, k in zip(out[1:], known, strict=True)]
    return Funnel(
        reply_id=reply_id,
        step=step,
        rows=tuple((t, texts[t] if texts is not None and t in texts else vocab.display(t)) for t in row_list),
        stages=tuple(out),
        drawn=drawn,
        settings=settings,
        seed=seed,
        n_logits=int(ids.shape[0]),
        exact=exact,
        compute_s=time.perf_counter() - t0,
        unkept=unkept,
        stored=stored,
        recomputed=recomputed,
    )
