"""One turn in the chat context: fit the prompt, reuse the KV cache's prefix, prefill, decode, final stats.

One turn, step by step (each step measured with ``time.perf_counter_ns``):

1. Render the chat template and tokenize (:mod:`app.engine.prompt`).
2. Fit the context (policy STOP: refuse with both numbers; ROLLING: drop the
   oldest turns).
3. Keep the longest common token prefix with what the KV cache holds
   (``llama_memory_seq_rm`` of the rest) so turn N+1 evaluates only what is new.
4. Prefill the rest in fixed slices, Stop-able (:mod:`app.engine.prefill`).
5. Decode loop (:mod:`app.engine.decode`, or :mod:`app.engine.speculative.loop` with speculation
   loaded and not turned off by the request): sample with llama.cpp's own sampler
   chain, detokenize without splitting UTF-8 characters, stop at
   end-of-generation tokens, stop strings, max_tokens, the context limit or
   the cancel flag.

llama.cpp's own counters (``llama_perf_context``) are reported next to ours
as a cross-check. An external request (the local API, ``P.Generate.external``) runs on a copy
of the person's KV cache and puts it back after (:mod:`app.engine.kv_snapshot`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.core.chat.context import ROLLING_RESERVE_FRACTION, ChatMessage, ContextPolicy, GenerationStats, StopReason
from app.core.chat.textstream import TextStream
from app.core.sampling.alternatives import ReplyAlternatives
from app.engine import kv_snapshot
from app.engine.alternative import no_alternatives, prefix_text, prefixed_tokens, reply_alternatives
from app.engine.constraint.grammar import constraint_gbnf
from app.engine.constraint.sampler import feed, grammar_sampler
from app.engine.decode import DecodeResult, TurnStats, decode_loop, make_sampler
from app.engine.errors import CancelFlag, EngineError
from app.engine.forced import forced_from_env
from app.engine.funnel_store import ReplyLogits
from app.engine.kv_reuse import CachedTurn
from app.engine.llama_log import LlamaLog
from app.engine.loader import LoadedModel
from app.engine.prefill import rewind_to_prefix
from app.engine.prompt import FittedPrompt
from app.engine.speculative.loop import speculative_loop

MAX_REPORTED_PROMPT_TOKENS = 4096


def clear_chat(m: LoadedModel) -> None:
    """Empty the chat context's KV cache ("New chat"); the caller holds the session's chat lock."""
    llm = m.llm
    mem = llama_cpp.llama_get_memory(llm.ctx)
    if mem is not None:
        llama_cpp.llama_memory_clear(mem, True)
    llm.n_tokens = 0
    m.prompt.cached_turn = None
    m.cache_from_api = False


class Turn:
    """One :class:`~app.core.protocol.Generate` request run in ``m``'s chat context.

    Build it and call :meth:`run` with the session's chat lock held (the KV cache changes).

    Args:
        m: the loaded model; the turn writes its KV cache, ``prompt.cached_turn``, ``store`` and
            ``cache_from_api``.
        req: the request.
        emit: sends each event to the UI (PromptPrepared, PrefillProgress, TokenEvent, ContextShifted).
        cancel: the Stop flag.
        llama_log: the process's llama.cpp log (a grammar's parse error is read from it); None: not read.

    An output constraint (``req.constraint``) becomes llama.cpp's grammar sampler before the prompt is
    rendered (a bad one fails with ``constraint`` before anything is evaluated), fed the reply's prefix
    when it has one (checked first: a token it does not allow fails the turn before the KV cache changes) (and the continued message's text with ``continue_last``), and goes first in the chain (:func:`app.engine.funnel.build_stages`). With
    speculation the reply stays exact: the speculative loop draws with the same chain at each position
    and the chain (the grammar with it) accepts only the tokens drawn, never a draft it rejected.
    """

    def __init__(
        self,
        m: LoadedModel,
        req: P.Generate,
        emit: Callable[[object], None],
        cancel: CancelFlag,
        llama_log: LlamaLog | None = None,
    ) -> None:
        self.t0 = time.perf_counter_ns()  # when the request started to run; TTFT counts from it
        self._m = m
        self._req = req
        self._emit = emit
        self._cancel = cancel
        self._llama_log = llama_log
        self._grammar: Any = None  # the constraint's sampler until the chain owns it
        self._gbnf: str | None = None

    def run(self) -> P.Finished:
        """Run the turn, emitting PromptPrepared, PrefillProgress and TokenEvent events.

        Returns:
            The terminal :class:`Finished` event (the caller emits it).

        Raises:
            EngineError: a sampler value out of range, context overflow (STOP policy, or nothing
                left to drop), a template error, or a constraint that does not convert or parse
                (``constraint``); nothing is generated then.
        """
        try:
            self._req.sampler.validated()
        except ValueError as exc:
            raise EngineError(P.FailureKind.BAD_SETTINGS, f"The sampler settings cannot be used: {exc}.") from None
        self._gbnf = constraint_gbnf(self._req.constraint)
        if self._gbnf is not None:
            self._grammar = grammar_sampler(self._m.vocab.ptr, self._gbnf, self._llama_log)
        try:
            if self._grammar is not None and self._req.continue_last and self._req.messages:
                # Continuing a reply: the grammar goes on from the message's text so far (the grammar reads
                # characters, so any tokenization of that text leaves it in the same state).
                feed(self._grammar, self._m.prompt.tokenize(self._req.messages[-1].content, False), self._m.vocab)
            if self._grammar is not None and self._req.reply_prefix:
                self._feed_prefix()
            return self._run()
        finally:
            if self._grammar is not None:  # not handed to a chain (a failure before decoding)
                llama_cpp.llama_sampler_free(self._grammar)
                self._grammar = None

    def _feed_prefix(self) -> None:
        """Feed a branch's prefix to the grammar before anything is rendered or evaluated, so a token the
        output format does not allow is refused with the KV cache and the cached turn as they were.

        Raises:
            EngineError: ``constraint``, naming the token and its place in the reply.
        """
        prefix, vocab = list(self._req.reply_prefix), self._m.vocab
        feed(self._grammar, prefix[:-1], vocab)  # the reply's own tokens (another format's: refused as they are)
        try:
            feed(self._grammar, prefix[-1:], vocab)
        except EngineError:
            raise EngineError(
                P.FailureKind.CONSTRAINT,
                f"The output format does not allow {vocab.display(prefix[-1])!r} as token {len(prefix)} of this "
                "reply: no branch was made. Choose a token the format allows (or turn the format off).",
            ) from None

    def _run(self) -> P.Finished:
        """:meth:`run` once the sampler settings and the constraint are checked."""
        m, req = self._m, self._req
        policy = ContextPolicy(req.context_policy or m.settings.context_policy)
        person_turn = m.prompt.cached_turn  # an external request leaves it as it was (see P.Generate)
        m.prompt.use_template(req.chat_template)
        m.prompt.timing.render_ns = m.prompt.timing.tokenize_ns = 0
        if req.raw_prompt is not None:
            prompt = m.prompt.fit_raw(req.raw_prompt)
        else:
            forced = req.tool_choice is not None and req.tool_choice.forced
            with m.prompt.tools_offered(req.tools, forced):
                prompt = m.prompt.fit(list(req.messages), req.continue_last, policy)
        m.prompt.cached_turn = None  # the cache changes from here; set again when the turn ends
        if req.external:  # the person's cache is copied out and back (app.engine.kv_snapshot)
            snap = None if m.cache_from_api else kv_snapshot.take(m.llm, m.layout.used_bytes(m.llm.n_tokens))
            try:
                return self._generate(prompt, policy)
            finally:
                if snap is not None and not kv_snapshot.restore(m.llm, snap):
                    person_turn = None
                # Nothing of the person's to keep (an empty cache, or one too large to copy): the
                # request's tokens stay, and the next request may reuse their common prefix.
                m.cache_from_api = m.cache_from_api or snap is None
                m.prompt.cached_turn = person_turn
        m.cache_from_api = False
        return self._generate(prompt, policy)

    def _generate(self, prompt: FittedPrompt, policy: ContextPolicy) -> P.Finished:
        """Prefill and decode the fitted ``prompt`` (the rest of :meth:`run`)."""
        m, req, t0 = self._m, self._req, self.t0
        messages = prompt.messages  # what the context holds; a context shift drops from these
        llm = m.llm
        llama_cpp.llama_perf_context_reset(llm.ctx)
        m.rpc.turn_started()
        prefix = list(req.reply_prefix)
        # A branch from an alternative ending with an end-of-generation token: it is the reply's last
        # token, sampled but never evaluated (as in any reply), so the reply ends with no decoding.
        ends_at_prefix = bool(prefix) and m.vocab.is_eog(prefix[-1])
        if prefix:
            full = prefixed_tokens(prompt.tokens, prefix, m.vocab, m.n_ctx)
            prompt = replace(prompt, tokens=full[:-1] if ends_at_prefix else full)

        t_reuse = time.perf_counter_ns()
        cached = rewind_to_prefix(llm, prompt.tokens)
        reuse_ns = time.perf_counter_ns() - t_reuse
        new = prompt.tokens[cached:]
        self._emit(
            P.PromptPrepared(
                request_id=req.request_id,
                elapsed_s=(time.perf_counter_ns() - t0) / 1e9,
                prompt_tokens=len(prompt.tokens),
                cached_tokens=cached,
                to_evaluate=len(new),
                dropped_messages=prompt.dropped,
                new_tokens=tuple((t, m.vocab.display(t)) for t in new[-MAX_REPORTED_PROMPT_TOKENS:]),
                prompt_text=prompt.text,
                template_s=m.prompt.timing.render_ns / 1e9,
                tokenize_s=m.prompt.timing.tokenize_ns / 1e9,
                reuse_s=reuse_ns / 1e9,
            )
        )
        seed = req.sampler.resolved_seed()
        stats = TurnStats(
            prompt_tokens=len(prompt.tokens), cached_tokens=cached, seed=seed, dropped_messages=prompt.dropped
        )
        t_prefill0 = time.perf_counter_ns()
        done = m.prefiller.run(req.request_id, new, t0)
        prefill_ns = time.perf_counter_ns() - t_prefill0
        stats.evaluated_tokens = done
        stats.prefill_s = prefill_ns / 1e9
        m.rpc.prefill_done()
        if done < len(new):  # cancelled during prefill
            return self._finish(stats, DecodeResult("", StopReason.CANCELLED, 0, 0, 0, 0))
        if ends_at_prefix:
            text = TextStream()
            shown = prefix_text(text, prefix, m.vocab) + text.finish().text
            m.prompt.cached_turn = self._cached_turn(prompt.text, prompt.tokens[: len(prompt.tokens) - len(prefix) + 1])
            none = no_alternatives(req.alternatives, prompt.tokens) if req.alternatives > 0 else None
            return self._finish(stats, DecodeResult(shown, StopReason.EOS, 0, 0, 0, 0), none)

        chain = make_sampler(req.sampler, seed, prompt.tokens, m.vocab, m.n_ctx, self._grammar)
        self._grammar = None  # the chain owns it
        keep = req.keep_logits or req.alternatives > 0
        store = None
        if keep:
            gbnf, n_before = self._gbnf, len(prompt.tokens) - len(prefix)  # the grammar reads the reply from here
            if gbnf is not None and req.continue_last and req.messages:  # ... and the continued message's text
                cont = m.prompt.tokenize(req.messages[-1].content, False)
                held = prompt.tokens[n_before - len(cont) : n_before] if len(cont) <= n_before else []
                # The prompt holds the text as other tokens (the template's tokenization): no grammar column.
                gbnf, n_before = (gbnf, n_before - len(cont)) if held == cont else (None, n_before)
            store = ReplyLogits(req.request_id, req.sampler, seed, prompt.tokens, m.vocab.n_tokens, gbnf, n_before)
        if store is not None:
            m.store = store
        common: dict[str, Any] = {
            "llm": llm,
            "chain": chain,
            "vocab": m.vocab,
            "inspector": m.inspector,
            "req": req,
            "stop_strings": tuple(req.stop_strings) + m.prompt.stop_strings,
            "n_ctx": m.n_ctx,
            "policy": policy,
            "cancel": self._cancel,
            "emit": self._emit,
            "t0": t0,
            "shift_context": lambda generated: self._shift_context(messages, [*prefix, *generated], stats),
            "store": store,
            "forced": forced_from_env(lambda text: m.prompt.tokenize(text, False), m.vocab.eos),
            "prefix": prefix,
        }
        spec = m.speculator if req.speculate is not False else None
        try:
            if spec is not None:
                result = speculative_loop(
                    **common,
                    drafter=spec.drafter,
                    settings=spec.settings,
                    history=prompt.tokens,
                    weights_bytes=spec.weights_bytes,
                    cost=spec.cost,
                )
            else:
                result = decode_loop(**common)
        finally:
            llama_cpp.llama_sampler_free(chain)
            if store is not None:
                store.close()
        stats.context_shifts = result.context_shifts
        if not result.context_shifts:
            # The reply's prefix is part of the reply: the next turn's prompt reuses it as reply tokens.
            m.prompt.cached_turn = self._cached_turn(prompt.text, prompt.tokens[: len(prompt.tokens) - len(prefix)])
        alts = None
        if store is not None and req.alternatives > 0:
            alts = reply_alternatives(store, req.alternatives, m.vocab, prompt.tokens).with_packed()
        return self._finish(stats, result, alts)

    def _cached_turn(self, prompt_text: str, prompt_tokens: list[int]) -> CachedTurn | None:
        """What the KV cache holds after a turn on ``prompt_tokens``: the prompt, then the evaluated reply tokens.

        Read from the cache's own token list (``llm.input_ids``), so it is exactly what is
        there: the end-of-generation token was sampled but never evaluated, and a token
        sampled when Stop or a stop string ended the reply neither. None when the cache
        does not start with the prompt.
        """
        llm = self._m.llm
        held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
        n = len(prompt_tokens)
        if held[:n] != prompt_tokens:
            return None
        return CachedTurn(prompt_text, tuple(prompt_tokens), tuple(held[n:]))

    def _shift_context(self, messages: list[ChatMessage], generated: list[int], stats: TurnStats) -> bool:
        """Rolling policy: make room by dropping the oldest turns, then the oldest half of the reply.

        The KV cache is rebuilt as prompt(kept messages) + kept reply tokens; the
        screen keeps everything. Returns False when nothing could be freed or Stop
        was pressed during the rebuild.

        Args:
            messages: the messages the context holds (updated in place to the kept ones).
            generated: the reply's tokens so far (its prefix first); the last one is not yet evaluated.
            stats: the turn's counts (``dropped_messages`` grows).
        """
        m, req = self._m, self._req
        reply = generated[:-1]  # the last token is sampled but not yet evaluated
        budget = int(m.n_ctx * (1 - ROLLING_RESERVE_FRACTION))
        kept, dropped = m.prompt.drop_oldest(messages, max(budget - len(reply), 1), req.continue_last)
        if kept is None:
            kept = [msg for msg in messages[:1] if msg.role == "system"] + messages[-1:]
            dropped = len(messages) - len(kept)
        prompt, _ = m.prompt.tokens_for(kept, req.continue_last)
        room = budget - len(prompt)
        if room <= 0:
            return False
        dropped_reply = max(0, len(reply) - room)
        if dropped_reply:
            dropped_reply = max(dropped_reply, len(reply) // 2)
        seq = prompt + reply[dropped_reply:]
        if len(seq) >= m.n_ctx:
            return False
        t_rebuild = time.perf_counter_ns()
        keep = rewind_to_prefix(m.llm, [*seq, generated[-1]])
        if m.prefiller.run(req.request_id, seq[keep:], self.t0, rebuild=True) < len(seq) - keep:
            return False
        messages[:] = kept
        stats.dropped_messages += dropped
        self._emit(
            P.ContextShifted(
                req.request_id,
                dropped,
                dropped_reply,
                m.llm.n_tokens,
                kept_tokens=keep,
                evaluated_tokens=len(seq) - keep,
                rebuild_s=(time.perf_counter_ns() - t_rebuild) / 1e9,
            )
        )
        return True

    def _finish(
        self, stats: TurnStats, result: DecodeResult, alternatives: ReplyAlternatives | None = None
    ) -> P.Finished:
        """The turn's :class:`Finished` event: ``stats`` and ``result`` with llama.cpp's own counters.

        Args:
            alternatives: the reply's kept alternatives (sent with the event).
        """
        m, t0 = self._m, self.t0
        llm = m.llm
        perf = llama_cpp.llama_perf_context(llm.ctx)
        t_first, t_last, n_gen = result.t_first_ns, result.t_last_ns, result.generated
        rpc_bytes = m.rpc.turn_bytes()
        final = GenerationStats(
            prompt_tokens=stats.prompt_tokens,
            cached_tokens=stats.cached_tokens,
            evaluated_tokens=stats.evaluated_tokens,
            prefill_s=stats.prefill_s,
            ttft_s=(t_first - t0) / 1e9 if t_first else 0.0,
            generated_tokens=n_gen,
            decode_s=(t_last - t_first) / 1e9 if n_gen > 1 else 0.0,
            n_ctx=m.n_ctx,
            context_used=llm.n_tokens,
            kv_used_bytes=m.layout.used_bytes(llm.n_tokens),
            kv_allocated_bytes=m.layout.allocated_bytes,
            stop_reason=result.reason,
            seed=stats.seed,
            dropped_messages=stats.dropped_messages,
            context_shifts=stats.context_shifts,
            llama_prefill_ms=float(perf.t_p_eval_ms),
            llama_decode_ms=float(perf.t_eval_ms),
            llama_n_prefill=int(perf.n_p_eval),
            llama_n_decode=int(perf.n_eval),
            rpc_prefill_sent_bytes=rpc_bytes.get("rpc_prefill_sent_bytes", 0),
            rpc_prefill_received_bytes=rpc_bytes.get("rpc_prefill_received_bytes", 0),
            rpc_decode_sent_bytes=rpc_bytes.get("rpc_decode_sent_bytes", 0),
            rpc_decode_received_bytes=rpc_bytes.get("rpc_decode_received_bytes", 0),
            speculation=result.speculation,
        )
        return P.Finished(
            self._req.request_id,
            result.text,
            final,
            elapsed_s=(time.perf_counter_ns() - t0) / 1e9,
            alternatives=alternatives,
        )
