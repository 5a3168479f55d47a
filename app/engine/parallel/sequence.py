"""One local API request as one sequence of the parallel context (:mod:`app.engine.parallel.loop`).

A :class:`Sequence` holds what llama-server's slot holds: the prompt's tokens and how many are
evaluated, the token sampled last and not yet evaluated, its own llama.cpp sampler chain
(:func:`app.engine.funnel.make_chain`, the same chain a reply in the window gets, with the output
constraint's grammar sampler first when the request has one, drawn as :mod:`app.engine.constraint` draws), and its
:class:`~app.engine.token_sink.TokenSink` (events, text, stop strings). The loop puts its tokens in the
shared ``llama_batch`` and calls :meth:`Sequence.sample` with the batch index of its logits.

What differs from a turn in the chat context (:mod:`app.engine.turn`): the KV cache reused is what its
sequence held from the request before it (the common prefix of the two, as llama-server's slots keep
their prompt cache; ``cached_tokens``), a full context ends the reply
(``context_full``; the rolling policy does not apply here), and llama.cpp's own perf counters are
per context, not per sequence, so they are not reported (``GenerationStats.unreported``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import llama_cpp
import numpy as np

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, GenerationStats, StopReason
from app.engine.constraint.grammar import constraint_gbnf
from app.engine.constraint.sampler import draw_for, grammar_sampler
from app.engine.errors import EngineError
from app.engine.funnel import make_chain
from app.engine.inspector import Inspector, Logits
from app.engine.llama_log import LlamaLog
from app.engine.loader import LoadedModel
from app.engine.token_sink import TokenSink

#: llama.cpp's perf counters are per context: a sequence's own are not measured.
UNREPORTED = ("llama_prefill_ms", "llama_decode_ms", "llama_n_prefill", "llama_n_decode")


def prompt_tokens(m: LoadedModel, req: P.Generate) -> tuple[list[int], str]:
    """The request's prompt tokens and text, as a turn in the chat context renders them (the request's
    chat template, the context policy's fitting); call it only while no turn uses the prompt builder
    (inside :meth:`~app.engine.parallel.gate.PersonFirst.api_step`). The request's ``tools`` are offered
    to the template as :mod:`app.engine.turn` offers them.

    Raises:
        EngineError: ``bad_settings`` (sampler values out of range), ``template``, ``context_overflow``.
    """
    try:
        req.sampler.validated()
    except ValueError as exc:
        raise EngineError(P.FailureKind.BAD_SETTINGS, f"The sampler settings cannot be used: {exc}.") from None
    b = m.prompt
    with b.template_for_now(req.chat_template):
        if req.raw_prompt is not None:
            fitted = b.fit_raw(req.raw_prompt)
        else:
            policy = ContextPolicy(req.context_policy or m.settings.context_policy)
            forced = req.tool_choice is not None and req.tool_choice.forced
            with b.tools_offered(req.tools, forced):  # the request's tools, as a turn offers them
                fitted = b.fit(list(req.messages), req.continue_last, policy)
        return fitted.tokens, fitted.text


class Sequence:
    """One request decoding in the parallel context (see the module docstring).

    Args:
        request_id: the id its events carry.
        req: the request.
        seq_id: its llama.cpp sequence id.
        tokens: its prompt (:func:`prompt_tokens`).
        m: the loaded model (vocabulary, KV layout; read only).
        inspector: the loop's own :class:`Inspector` (log-sum-exp and top candidates for logprobs).
        emit: sends an event to the window.
        n_ctx_seq: the sequence's context, tokens.
        stop_strings: every stop string (the request's and the prompt format's).
        cached: the prompt's first tokens its cells hold already (from the request before; fewer than the prompt's).
        llama_log: the process's llama.cpp log (a constraint's grammar error is read from it).

    Raises:
        EngineError: ``constraint`` (the request's output constraint does not convert or parse).

    Attributes:
        prefilled: prompt tokens put in a batch so far; n_past: tokens in its KV cache.
        pending: the token sampled last, evaluated in the next batch (None: none).
        reason: why it ended (None: it goes on).
    """

    def __init__(
        self,
        request_id: int,
        req: P.Generate,
        seq_id: int,
        tokens: list[int],
        m: LoadedModel,
        inspector: Inspector,
        emit: Any,
        n_ctx_seq: int,
        stop_strings: tuple[str, ...],
        cached: int = 0,
        llama_log: LlamaLog | None = None,
    ) -> None:
        self.t0 = time.perf_counter_ns()
        self.request_id = request_id
        self.req = req
        self.seq_id = seq_id
        self.tokens = tokens
        self._m = m
        self._inspector = inspector
        self._n_vocab = m.vocab.n_tokens
        self.n_ctx_seq = n_ctx_seq
        self.seed = req.sampler.resolved_seed()
        gbnf = constraint_gbnf(req.constraint)
        grammar = grammar_sampler(m.vocab.ptr, gbnf, llama_log) if gbnf is not None else None
        self.chain = make_chain(req.sampler, self.seed, tokens, m.vocab, n_ctx_seq, grammar)  # it owns the grammar
        self._draw = draw_for(req, self._n_vocab)
        self.failure: EngineError | None = None  # the constraint allowed no token: it ends with Failed
        self.sink = TokenSink(
            vocab=m.vocab,
            inspector=inspector,
            req=replace(req, request_id=request_id),
            stop_strings=stop_strings,
            emit=emit,
            t0=self.t0,
        )
        self.cached = cached
        self.prefilled = cached
        self.n_past = cached
        self.pending: int | None = None
        self.reason: StopReason | None = None
        self.t_prefilled = 0
        self.paused_ns = 0  # time paused for the person's reply after its first token, ns (not decode time)
        self._paused_at: int | None = None

    @property
    def prefilling(self) -> bool:
        return self.prefilled < len(self.tokens)

    @property
    def generated(self) -> int:
        return len(self.sink.generated)

    def pause(self, since_ns: int) -> None:
        """The loop stopped stepping it at ``since_ns`` (``time.perf_counter_ns``) for the person's reply;
        counted once it has a first token (a pause before it is prefill's, not decode's)."""
        if self._paused_at is None and self.sink.t_first:
            self._paused_at = since_ns

    def resume(self, now_ns: int) -> None:
        """The loop steps it again: the pause since :meth:`pause` is left out of its decode time."""
        if self._paused_at is not None:
            self.paused_ns += now_ns - self._paused_at
            self._paused_at = None

    def decode_s(self) -> float:
        """Seconds it was decoding: from its first token to its last, less the time paused for the
        person's reply meanwhile (:meth:`pause`); 0.0 before its second token."""
        if self.generated < 2:
            return 0.0
        return max(0, self.sink.t_last - self.sink.t_first - self.paused_ns) / 1e9

    def figures(self, paused: bool) -> P.SequenceFigures:
        """What the Server panel shows of it; its decode tok/s counts decoding time only (:meth:`decode_s`)."""
        n = self.generated
        span = self.decode_s()
        state = P.SequenceState.PREFILL if self.prefilling else P.SequenceState.DECODING
        return P.SequenceFigures(
            self.request_id,
            self.seq_id,
            P.SequenceState.PAUSED if paused else state,
            len(self.tokens),
            self.prefilled,
            n,
            (n - 1) / span if n > 1 and span > 0 else 0.0,
        )

    def sample(self, ctx: Any, index: int, cancelled: bool) -> None:
        """Sample its next token from the batch entry ``index``'s logits (its last token just evaluated),
        or end it: cancelled, max_tokens, an end-of-generation token, a stop string, a full context.
        Sets :attr:`pending` (the token to evaluate next) or :attr:`reason`."""
        self.pending = None
        if not self.t_prefilled:
            self.t_prefilled = time.perf_counter_ns()
        if cancelled:
            self.reason = StopReason.CANCELLED
            return
        max_tokens = self.req.sampler.max_tokens
        if 0 <= max_tokens <= self.generated:
            self.reason = StopReason.MAX_TOKENS
            return
        logits: Logits | None = None
        lse = 0.0
        cands: tuple[tuple[int, str, float], ...] = ()
        if self.sink.wants_logits:
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, index), shape=(self._n_vocab,))
            lse, cands = self.sink.look(logits)
        try:
            token = int(self._draw(self.chain, ctx, index))
        except EngineError as exc:  # the output constraint allows no token here
            self.failure = exc
            self.reason = StopReason.CANCELLED
            return
        eog = self._m.vocab.is_eog(token)
        used = self.n_past if eog else min(self.n_past + 1, self.n_ctx_seq)
        ended = self.sink.take(token, used, logits, lse, cands)
        if ended is not None:
            self.reason = ended
        elif self.n_past >= self.n_ctx_seq:
            self.reason = StopReason.CONTEXT_FULL
        else:
            self.pending = token

    def held(self) -> list[int]:
        """The tokens its cells hold: the prompt as far as evaluated, then the reply's evaluated tokens (the
        token sampled last, which ended it, never is)."""
        return (self.tokens + self.sink.generated)[: self.n_past]

    def finished(self) -> P.Finished | P.Failed:
        """Its terminal event (sends what the sink holds first): Finished, or Failed when its output
        constraint allowed no token; frees its sampler chain."""
        text = self.sink.finish()
        llama_cpp.llama_sampler_free(self.chain)
        self.chain = None
        if self.failure is not None:
            return P.Failed(self.request_id, self.failure.kind, self.failure.message)
        sink, layout = self.sink, self._m.layout
        n = self.generated
        t_pre = self.t_prefilled or time.perf_counter_ns()
        stats = GenerationStats(
            prompt_tokens=len(self.tokens),
            cached_tokens=self.cached,
            evaluated_tokens=self.prefilled - self.cached,
            prefill_s=(t_pre - self.t0) / 1e9 if self.prefilled > self.cached else 0.0,
            ttft_s=(sink.t_first - self.t0) / 1e9 if sink.t_first else 0.0,
            generated_tokens=n,
            decode_s=self.decode_s(),  # the time paused for the person's reply left out
            n_ctx=self.n_ctx_seq,
            context_used=self.n_past,
            kv_used_bytes=layout.used_bytes(self.n_past),
            kv_allocated_bytes=layout.allocated_bytes,
            stop_reason=self.reason or StopReason.CANCELLED,
            seed=self.seed,
            unreported=UNREPORTED,
        )
        return P.Finished(self.request_id, text, stats, elapsed_s=(time.perf_counter_ns() - self.t0) / 1e9)
