"""The decode loop: sample with llama.cpp's sampler chain, stream text, stop, batch tokens to the UI.

Each step: (optionally) read the raw logits for the inspector, sample,
detokenize without splitting UTF-8 characters, check end-of-generation
tokens, stop strings, max_tokens, the context limit and the cancel flag,
then evaluate the token. Tokens go to the UI in batches
(:class:`~app.core.protocol.TokenBatch`, :mod:`app.engine.token_sink`): the
first token at once (TTFT), then at most every ``TOKEN_FLUSH_S``, so the UI
process wakes ~30 times a second instead of once per token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, StopReason
from app.core.sampling.params import SamplerSettings
from app.core.speculative.stats import SpeculationStats
from app.engine.constraint.sampler import draw_for
from app.engine.errors import CancelFlag
from app.engine.forced import ForcedTokens
from app.engine.funnel import make_chain
from app.engine.funnel_store import ReplyLogits
from app.engine.inspector import Inspector, Logits
from app.engine.token_sink import TokenSink
from app.engine.vocab import Vocab


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
        speculation: the speculative loop's counts (:mod:`app.engine.speculative.loop`); None: not speculated.
    """

    text: str
    reason: StopReason
    generated: int
    t_first_ns: int
    t_last_ns: int
    context_shifts: int
    speculation: SpeculationStats | None = None


def make_sampler(
    s: SamplerSettings, seed: int, prompt_tokens: Sequence[int], vocab: Vocab, n_ctx: int, grammar: Any = None
) -> Any:
    """llama.cpp's sampler chain for ``s`` (:func:`app.engine.funnel.make_chain`, the stages the
    funnel runs one by one); free it with llama_sampler_free.

    Args:
        s: the sampler settings.
        seed: the resolved seed (for the dist sampler).
        prompt_tokens: the prompt, fed to the penalties' and DRY's history (as llama.cpp's
            main example does).
        vocab: the model's vocabulary.
        n_ctx: the context, tokens (the look-back when ``repeat_last_n`` is -1).
        grammar: the output constraint's grammar sampler (:mod:`app.engine.constraint`), first in the
            chain, which then owns it; None: no constraint.
    """
    return make_chain(s, seed, prompt_tokens, vocab, n_ctx, grammar)


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
    sink = TokenSink(
        vocab=vocab, inspector=inspector, req=req, stop_strings=stop_strings, emit=emit, t0=t0, prefix=prefix
    )
    generated = sink.generated
    max_tokens = req.sampler.max_tokens
    shifts = 0
    reason = StopReason.EOS
    logits: Logits | None = None
    lse = 0.0
    cands: tuple[tuple[int, str, float], ...] = ()
    draw = draw_for(req, vocab.n_tokens)  # llama_sampler_sample, checked under an output constraint
    while True:
        if cancel.is_set():
            reason = StopReason.CANCELLED
            break
        if 0 <= max_tokens <= len(generated):
            reason = StopReason.MAX_TOKENS
            break
        if sink.wants_logits:
            logits = inspector.logits()
            lse, cands = sink.look(logits)
        token = draw(chain, llm.ctx, -1)
        if forced is not None:
            token = forced.next(token)
        if store is not None:
            store.record(logits if logits is not None else inspector.logits(), token)
        # A token sampled at a full context waits for room; an end-of-generation token is never evaluated.
        used = llm.n_tokens if vocab.is_eog(token) else min(llm.n_tokens + 1, n_ctx)
        ended = sink.take(token, used, logits, lse, cands)
        if ended is not None:
            reason = ended
            break
        if llm.n_tokens >= n_ctx:
            if policy == ContextPolicy.STOP:
                reason = StopReason.CONTEXT_FULL
                break
            sink.flush()
            if not shift_context(generated):
                reason = StopReason.CANCELLED if cancel.is_set() else StopReason.CONTEXT_FULL
                break
            shifts += 1
        llm.eval([token])
    text = sink.finish()
    return DecodeResult(text, reason, len(generated), sink.t_first, sink.t_last, shifts)
