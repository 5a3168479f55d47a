"""The decode loop: sample with llama.cpp's sampler chain, stream text, stop, batch tokens to the UI.

Each step: (optionally) read the raw logits for the inspector, sample,
detokenize without splitting UTF-8 characters, check end-of-generation
tokens, stop strings, max_tokens, the context limit and the cancel flag,
then evaluate the token. Tokens go to the UI in batches
(:class:`~app.core.protocol.TokenBatch`): the first token at once (TTFT),
then at most every ``TOKEN_FLUSH_S``, so the UI process wakes ~30 times a
second instead of once per token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, StopReason
from app.core.chat.textstream import TextStream
from app.core.sampling.params import SamplerSettings
from app.engine.alternative import prefix_text
from app.engine.errors import CancelFlag
from app.engine.forced import ForcedTokens
from app.engine.funnel import make_chain
from app.engine.funnel_store import ReplyLogits
from app.engine.inspector import Inspector, Logits
from app.engine.vocab import Vocab, display_piece

# Tokens are sent to the UI in batches at most this often, seconds (the first token at once).
TOKEN_FLUSH_S = 0.03
# Top candidates for the Sampler panel at most this often, seconds (it repaints at ~10 Hz).
CANDIDATES_EVERY_S = 0.1


@dataclass
class TurnStats:
    """One turn's counts before the decode loop's timings are added (see GenerationStats).

    Attributes:
        prompt_tokens: tokens of the rendered prompt.
        cached_tokens: prompt tokens reused from the KV cache.
        seed: the sampler seed in effect.
        dropped_messages: oldest messages left out to fit n_ctx (at the start and by context shifts).
        evaluated_tokens: prompt tokens prefill evaluated.
        prefill_s: prefill wall time, seconds.
        context_shifts: times the rolling policy rebuilt the context mid-reply.
    """

    prompt_tokens: int
    cached_tokens: int
    seed: int
    dropped_messages: int = 0
    evaluated_tokens: int = 0
    prefill_s: float = 0.0
    context_shifts: int = 0


@dataclass(frozen=True)
class DecodeResult:
    """How the decode loop ended.

    Attributes:
        text: the whole reply (stop string removed).
        reason: why it ended.
        generated: tokens sampled (an end-of-generation token included).
        t_first_ns, t_last_ns: perf_counter_ns of the first and last sample (0: none).
        context_shifts: times the context was rebuilt to make room.
    """

    text: str
    reason: StopReason
    generated: int
    t_first_ns: int
    t_last_ns: int
    context_shifts: int


def make_sampler(s: SamplerSettings, seed: int, prompt_tokens: Sequence[int], vocab: Vocab, n_ctx: int) -> Any:
    """llama.cpp's sampler chain for ``s`` (:func:`app.engine.funnel.make_chain`, the stages the
    funnel runs one by one); free it with llama_sampler_free.

    Args:
        s: the sampler settings.
        seed: the resolved seed (for the dist sampler).
        prompt_tokens: the prompt, fed to the penalties' and DRY's history (as llama.cpp's
            main example does).
        vocab: the model's vocabulary.
        n_ctx: the context, tokens (the look-back when ``repeat_last_n`` is -1).
    """
    return make_chain(s, seed, prompt_tokens, vocab, n_ctx)


def decode_loop(
    *,
    llm: Any,
    chain: Any,
    vocab: Vocab,
    inspector: Inspector,
    req: P.Generate,
    stop_strings: tuple[str, ...],
    n_ctx: int,
    policy: ContextPolicy,
    cancel: CancelFlag,
    emit: Callable[[object], None],
    t0: int,
    shift_context: Callable[[list[int]], bool],
    store: ReplyLogits | None = None,
    forced: ForcedTokens | None = None,
    prefix: Sequence[int] = (),
) -> DecodeResult:
    """Sample, detokenize, check stops, evaluate the token; repeat (see the module docstring).

    With ``req.top_candidates`` set, each token carries its probability under the raw
    model (one log-sum-exp over the vocabulary) and, at most every
    ``CANDIDATES_EVERY_S``, the top candidates for the Sampler panel.

    Args:
        stop_strings: every stop string (the request's and the prompt format's).
        n_ctx: the context, tokens.
        policy: what to do when the context is full (STOP ends; ROLLING calls ``shift_context``).
        t0: when the request arrived (perf_counter_ns).
        shift_context: makes room in the KV cache given the tokens generated so far (the
            last one not yet evaluated); False when nothing could be freed or Stop was pressed.
        store: keeps each step's logits for the funnel (:class:`ReplyLogits`); None: not kept.
        forced: benchmark/test only (:mod:`app.engine.forced`): keep its tokens instead of the sampled ones.
        prefix: the reply's tokens already in the KV cache before the first step (a branch from an
            alternative, :mod:`app.engine.alternative`): their text starts the reply's, and goes
            out with the first token's event.
    """
    stream = TextStream(stop_strings)
    head = prefix_text(stream, prefix, vocab) if prefix else ""
    max_tokens = req.sampler.max_tokens
    generated: list[int] = []
    t_first = t_last = 0
    shifts = 0
    reason = StopReason.EOS
    want = req.top_candidates
    rid = req.request_id
    pending: list[P.TokenEvent] = []
    last_flush = 0
    last_cands = 0
    flush_ns = int(TOKEN_FLUSH_S * 1e9)
    cands_ns = int(CANDIDATES_EVERY_S * 1e9)
    logits: Logits | None = None
    lse = 0.0
    cands: tuple[tuple[int, str, float], ...] = ()
    while True:
        if cancel.is_set():
            reason = StopReason.CANCELLED
            break
        if 0 <= max_tokens <= len(generated):
            reason = StopReason.MAX_TOKENS
            break
        if want:
            logits = inspector.logits()
            lse = inspector.logsumexp(logits)
            cands = ()
            if req.candidates_every_token or time.perf_counter_ns() - last_cands >= cands_ns:
                cands = inspector.top_candidates(logits, want)
                last_cands = time.perf_counter_ns()
        token = llama_cpp.llama_sampler_sample(chain, llm.ctx, -1)
        if forced is not None:
            token = forced.next(token)
        if store is not None:
            store.record(logits if logits is not None else inspector.logits(), token)
        now = time.perf_counter_ns()
        if not generated:
            t_first = now
        t_last = now
        generated.append(token)
        if vocab.is_eog(token):
            # Shown in the token view (it was sampled), never in the text, never evaluated.
            pending.append(
                P.TokenEvent(
                    rid,
                    head,
                    token,
                    vocab.display(token),
                    len(generated) - 1,
                    (now - t0) / 1e9,
                    llm.n_tokens,
                    p=math.exp(float(logits[token]) - lse) if logits is not None else None,
                )
            )
            reason = StopReason.EOS
            break
        piece = vocab.piece(token)
        res = stream.push(piece)
        pending.append(
            P.TokenEvent(
                rid,
                head + res.text if head else res.text,
                token,
                display_piece(piece),
                len(generated) - 1,
                (now - t0) / 1e9,
                min(llm.n_tokens + 1, n_ctx),  # a token sampled at a full context waits for room
                p=math.exp(float(logits[token]) - lse) if logits is not None else None,
                candidates=cands,  # () unless asked for and due
                logsumexp=lse if cands else None,
            )
        )
        head = ""
        if now - last_flush >= flush_ns:
            emit(P.TokenBatch(rid, tuple(pending)))
            pending.clear()
            last_flush = now
        if res.stopped:
            reason = StopReason.STOP_STRING
            break
        if llm.n_tokens >= n_ctx:
            if policy == ContextPolicy.STOP:
                reason = StopReason.CONTEXT_FULL
                break
            if pending:
                emit(P.TokenBatch(rid, tuple(pending)))
                pending.clear()
            if not shift_context(generated):
                reason = StopReason.CANCELLED if cancel.is_set() else StopReason.CONTEXT_FULL
                break
            shifts += 1
        llm.eval([token])
    if pending:
        emit(P.TokenBatch(rid, tuple(pending)))
    stream.finish()  # flushes held-back text into stream.text
    return DecodeResult(stream.text, reason, len(generated), t_first, t_last, shifts)
