"""The engine's model session: owns llama_cpp.Llama and runs one turn at a time.

One turn, step by step (each step measured with ``time.perf_counter_ns``):

1. Render the chat template and tokenize (:mod:`app.engine.prompt`).
2. Fit the context (policy STOP: refuse with both numbers; ROLLING: drop the
   oldest turns).
3. Keep the longest common token prefix with what the KV cache holds
   (``llama_memory_seq_rm`` of the rest) so turn N+1 evaluates only what is new.
4. Prefill the rest in fixed slices, Stop-able (:mod:`app.engine.prefill`).
5. Decode loop (:mod:`app.engine.decode`): sample with llama.cpp's own sampler
   chain, detokenize without splitting UTF-8 characters, stop at
   end-of-generation tokens, stop strings, max_tokens, the context limit or
   the cancel flag.

llama.cpp's own counters (``llama_perf_context``) are reported next to ours
as a cross-check.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.core import protocol as P
from app.core.chat.chat_template import SAMPLE_CONVERSATION
from app.core.chat.context import (
    ROLLING_RESERVE_FRACTION,
    ChatMessage,
    ContextPolicy,
    FlashAttention,
    GenerationStats,
    LoadSettings,
    StopReason,
)
from app.core.chat.textstream import TextStream
from app.core.gguf.gguf_info import GGUFError, GGUFInfo, check_loadable
from app.core.hardware.memory import KVCacheLayout, KVCacheType, kv_cache_layout, n_ubatch_for
from app.core.rpc import RpcError
from app.core.sampling.alternatives import ReplyAlternatives, StoredStep
from app.engine import kv_snapshot, rpc
from app.engine.alternative import no_alternatives, prefix_text, prefixed_tokens, reply_alternatives
from app.engine.decode import DecodeResult, TurnStats, decode_loop, make_sampler
from app.engine.devices import local_gpu_offload
from app.engine.errors import CancelFlag, EngineError
from app.engine.forced import forced_from_env
from app.engine.funnel import run_funnel
from app.engine.funnel_store import ReplyLogits
from app.engine.inspect_token import TokenInspector, take_chat_cache
from app.engine.inspector import Inspector
from app.engine.kv_reuse import CachedTurn
from app.engine.llama_context import GlassboxLlama
from app.engine.llama_log import LlamaLog
from app.engine.prefill import Prefiller, rewind_to_prefix
from app.engine.prompt import FittedPrompt, PromptBuilder
from app.engine.threads import auto_threads, auto_threads_batch
from app.engine.vocab import Vocab

__all__ = ["CancelFlag", "EngineError", "Session"]

log = logging.getLogger(__name__)

MAX_REPORTED_PROMPT_TOKENS = 4096


@dataclass
class _Loaded:
    """What exists only while a model is loaded (built together in :meth:`Session.load`)."""

    llm: Any  # llama_cpp.Llama
    info: GGUFInfo
    layout: KVCacheLayout
    vocab: Vocab
    prompt: PromptBuilder
    prefiller: Prefiller
    inspector: Inspector
    funnel_vocab: Vocab  # the funnel thread's own (Vocab keeps a text buffer)
    token_inspector: TokenInspector  # "Inspect a token": its own context, built on first use


class Session:
    """Owns one loaded model and its context. Not thread-safe: one request at a time.

    Args:
        emit: called with each event (the process loop sends it to the UI).
        cancel: the shared cancel flag (``multiprocessing.Event``).
        llama_log: the process's llama.cpp log capture.
    """

    def __init__(self, emit: Callable[[object], None], cancel: CancelFlag, llama_log: LlamaLog) -> None:
        self.emit = emit
        self.cancel = cancel
        self.llama_log = llama_log
        self.settings = LoadSettings()
        self.n_ctx = 0
        self._m: _Loaded | None = None
        self._cache_from_api = False  # the KV cache holds what an external request left, nothing of the person's
        self._store: ReplyLogits | None = None  # the latest reply's logits, kept with keep_logits
        self._rpc = rpc.NO_RPC  # the loaded model's RPC servers (app.engine.rpc), their devices and bytes
        # Held while the funnel runs (on the pipe reader's thread) and while a model is freed or
        # set, so a funnel never uses a model being unloaded; generation does not take it.
        self._model_lock = threading.Lock()
        # Held while an inspection runs (on the inspect thread) and while a model is freed (taken
        # before the model lock): the model lock is held only while the inspection starts, so a
        # funnel, asked for on the reader thread, never waits seconds behind an inspection.
        self._inspect_lock = threading.Lock()
        # Held while the chat context's KV cache changes (a turn, a reset); an inspection copies
        # the cache only when it can take this at once, and re-evaluates otherwise.
        self._chat_lock = threading.Lock()

    # ------------------------------------------------------------------------ loaded state
    @property
    def llm(self) -> Any:
        """The ``llama_cpp.Llama``, or None with no model loaded."""
        return self._m.llm if self._m else None

    @property
    def info(self) -> GGUFInfo | None:
        """The loaded model's GGUF facts."""
        return self._m.info if self._m else None

    @property
    def layout(self) -> KVCacheLayout | None:
        """The loaded model's KV cache layout at the settings in effect."""
        return self._m.layout if self._m else None

    @property
    def vocab(self) -> Vocab:
        """The loaded model's vocabulary.

        Raises:
            EngineError: ``no_model``.
        """
        return self._require().vocab

    def _require(self) -> _Loaded:
        if self._m is None:
            raise EngineError(
                P.FailureKind.NO_MODEL, "No model is loaded. Open a GGUF model first (File → Open model)."
            )
        return self._m

    # ----------------------------------------------------------------------------------- load
    def load(self, req: P.LoadModel) -> P.ModelLoaded:
        """Load ``req.path``; the previous model (if any) is freed first.

        Raises:
            EngineError: ``bad_model`` (the file fails validation; llama.cpp never sees it),
                ``rpc`` (an RPC server cannot be used: unreachable, busy, another llama.cpp version)
                or ``load`` (llama.cpp refused it; its error lines are quoted).
        """
        t0 = time.perf_counter()
        try:
            info = check_loadable(req.path)
        except GGUFError as exc:
            raise EngineError(P.FailureKind.BAD_MODEL, exc.message) from None
        self.unload()
        s = req.settings
        link = self._connect_rpc(s.rpc_servers)  # after unload: the previous model's connections are closed
        gpu = link.active or local_gpu_offload()
        n_threads = s.n_threads or auto_threads()
        n_threads_batch = s.n_threads or auto_threads_batch()
        n_ctx_req = s.n_ctx or info.context_length or 4096
        n_batch = max(16, s.n_batch)
        n_ubatch = n_ubatch_for(n_batch, n_ctx_req)  # what llama.cpp will run (it applies the same caps)
        if s.v_cache_conflict:  # llama.cpp would refuse it with one log line; say why and what to do
            raise EngineError(P.FailureKind.LOAD, f"{Path(req.path).name} was not loaded. {s.v_cache_conflict}")
        self.llama_log.mark()
        restore = link.use_devices()  # the Llama below loads onto the RPC devices (then this machine's GPUs)
        try:
            llm = GlassboxLlama(
                model_path=req.path,
                n_ctx=n_ctx_req,
                n_batch=n_batch,
                n_ubatch=n_ubatch,
                n_threads=n_threads,
                n_threads_batch=n_threads_batch,
                n_gpu_layers=s.n_gpu_layers if gpu else 0,
                swa_full=s.swa_full,
                flash_attn=s.flash_attn,
                type_k=s.type_k,
                type_v=s.type_v,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            details = self.llama_log.errors_since_mark()
            why = "; ".join(details) if details else str(exc)
            cache = ""
            if (s.type_k, s.type_v) != (KVCacheType.F16, KVCacheType.F16):
                cache = f" or the KV cache types ({s.type_k} K, {s.type_v} V: try f16)"
            raise EngineError(
                P.FailureKind.LOAD,
                f"llama.cpp could not load {Path(req.path).name}: {why}. "
                "The file passed Glassbox's checks, so this llama.cpp build may not support this "
                f"architecture ({info.architecture}) or quantization ({info.quant_type}){cache}, or memory ran out.",
            ) from None
        finally:
            restore()
        self._rpc = link
        flash_attn_active = self.llama_log.flash_attn_resolved()
        if flash_attn_active is None:
            flash_attn_active = s.flash_attn is not FlashAttention.OFF
        self.settings = replace(s, n_threads=n_threads, n_batch=n_batch, n_gpu_layers=s.n_gpu_layers if gpu else 0)
        self.n_ctx = n_ctx = llm.n_ctx()
        vocab = Vocab(llm.model)
        bos_text = vocab.text(vocab.bos) if vocab.bos >= 0 else ""
        eos_text = vocab.text(vocab.eos) if vocab.eos >= 0 else ""
        layout = kv_cache_layout(info, n_ctx, n_ubatch=n_ubatch, swa_full=s.swa_full, type_k=s.type_k, type_v=s.type_v)
        formatter: Any = None
        template_stop: tuple[str, ...] = ()
        template = info.chat_template
        if template:
            try:
                formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)
                template_stop = (eos_text,) if eos_text else ()
            except Exception as exc:  # a template jinja2 cannot compile: fall back, say so
                log.warning("chat template of %s does not compile (%s); using a plain transcript", req.path, exc)
                self.emit(
                    P.LogLine(
                        "warning", f"The model's chat template does not compile ({exc}); using a plain transcript."
                    )
                )
                template = None
        # Nodes of one ubatch's graph, for progress inside a prefill slice (refined by the
        # first full slice): the reserve graph llama.cpp logs at load has the same shape.
        nodes_per_ubatch = self.llama_log.graph_nodes()
        loaded = _Loaded(
            llm=llm,
            info=info,
            layout=layout,
            vocab=vocab,
            prompt=PromptBuilder(
                llm, vocab, formatter, template_stop, n_ctx, info.context_length, bos_text=bos_text, eos_text=eos_text
            ),
            prefiller=Prefiller(llm, n_batch, n_ubatch, self.cancel, self.emit, nodes_per_ubatch),
            inspector=Inspector(llm, vocab),
            funnel_vocab=Vocab(llm.model),
            token_inspector=TokenInspector(llm, info, Vocab(llm.model), n_threads_batch),
        )
        with self._model_lock:
            self._m = loaded
        return P.ModelLoaded(
            request_id=req.request_id,
            info=info,
            settings=self.settings,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            gpu_offload=gpu,
            load_s=time.perf_counter() - t0,
            kv_allocated_bytes=layout.allocated_bytes,
            kv_layout=layout,
            kv_reported_bytes=self.llama_log.kv_buffer_bytes(),
            compute_reported_bytes=self.llama_log.compute_buffer_bytes(),
            flash_attn_active=flash_attn_active,
            chat_template=template,
            bos_text=bos_text,
            eos_text=eos_text,
            eog_token_ids=tuple(sorted({t for t in (vocab.eos, vocab.eot) if t >= 0})),
            add_bos=vocab.add_bos,
            placement=link.placement([line for _, line in self.llama_log.since_mark()], info.n_layer),
            rpc_load_sent_bytes=link.sample()[0],
        )

    def unload(self) -> None:
        """Free the model and its context (memory the C heap keeps is freed only with the process).

        An inspection in progress is stopped first (llama.cpp's abort callback), then waited for.
        """
        m = self._m
        if m is not None:
            m.token_inspector.request_stop()
        with self._inspect_lock, self._model_lock:
            self._store = None
            if self._m is not None:
                self._m.token_inspector.close()  # its context uses the model: freed first
                self._m.llm.close()
            self._m = None
            self._rpc = rpc.NO_RPC

    def _connect_rpc(self, servers: Sequence[str]) -> rpc.RpcLink:
        """The RPC link for a load on ``servers`` (:func:`app.engine.rpc.connect`).

        Raises:
            EngineError: ``rpc``, with the server and what to do.
        """
        try:
            return rpc.connect(servers)
        except RpcError as exc:
            raise EngineError(P.FailureKind.RPC, exc.message) from None

    def reset(self) -> None:
        """Empty the KV cache ("New chat")."""
        with self._chat_lock:
            self._reset()

    def _reset(self) -> None:
        if self._m is not None:
            llm = self._m.llm
            mem = llama_cpp.llama_get_memory(llm.ctx)
            if mem is not None:
                llama_cpp.llama_memory_clear(mem, True)
            llm.n_tokens = 0
            self._m.prompt.cached_turn = None
            self._cache_from_api = False

    # ----------------------------------------------------------------------------- tokens
    def token_piece_text(self, token: int) -> str:
        """Text of one token for display, special tokens included (``<|im_start|>``)."""
        return self.vocab.display(token)

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """Token ids of ``text`` (no BOS added).

        Raises:
            EngineError: ``no_model``.
        """
        return self._require().prompt.tokenize(text, special)

    def stream_pieces(self, tokens: Sequence[int]) -> list[str]:
        """Text each token makes visible when streamed in order (see :meth:`Vocab.stream_pieces`)."""
        return self.vocab.stream_pieces(tokens)

    def render(self, messages: Sequence[ChatMessage], continue_last: bool = False) -> str:
        """The prompt text for ``messages`` with the model's chat template.

        Raises:
            EngineError: ``no_model``; ``template`` when the template rejects the conversation.
        """
        return self._require().prompt.render(messages, continue_last)

    def render_prompt(self, req: P.RenderPrompt) -> P.PromptRendered:
        """The prompt ``req.messages`` (or the sample conversation) renders to, and its tokens.

        With ``req.chat_template`` this validates an override: it must compile, render the
        conversation without an exception and produce text. The template in use for
        replies is left as it was.

        Raises:
            EngineError: ``no_model``; ``template`` (a syntax error or an exception, its line
                named; or no text).
        """
        m = self._require()
        b = m.prompt
        sample = not req.messages
        messages = SAMPLE_CONVERSATION if sample else req.messages
        with b.template_for_now(req.chat_template):
            text = b.render(messages, req.continue_last)
            plain = not b.has_template
        if not text.strip():
            raise EngineError(
                P.FailureKind.TEMPLATE,
                "The chat template renders no text for "
                + ("a conversation with system, user and assistant turns." if sample else "this conversation."),
            )
        toks = b.prompt_tokens(text)
        vocab = m.vocab
        pieces = tuple(P.PromptPiece(t, vocab.display(t), vocab.is_special(t)) for t in toks[: P.MAX_RENDERED_PIECES])
        if req.chat_template is not None:
            source, template = P.TemplateSource.OVERRIDE, req.chat_template
        elif plain:
            source, template = P.TemplateSource.PLAIN, None
        else:
            source, template = P.TemplateSource.GGUF, m.info.chat_template
        return P.PromptRendered(
            request_id=req.request_id,
            text=text,
            pieces=pieces,
            n_tokens=len(toks),
            source=source,
            template=template,
            gguf_template=m.info.chat_template or None,
            sample=sample,
        )

    def count_prompt(self, req: P.CountPrompt) -> P.PromptCounted:
        """How many tokens ``req.messages`` make as a prompt (rendered as a reply would render them),
        how many the last message's text makes alone, and, over n_ctx, what fitting by ``req.policy``
        does to it (:meth:`PromptBuilder.fit`, the same call a reply makes).

        Raises:
            EngineError: ``no_model``; ``template`` (the template rejects the conversation).
        """
        m = self._require()
        b = m.prompt
        with b.template_for_now(req.chat_template):
            n_tokens = len(b.prompt_tokens(b.render(req.messages)))
            dropped, fitted = 0, n_tokens
            if n_tokens >= b.n_ctx:
                try:
                    fit = b.fit(list(req.messages), False, req.policy)
                    dropped, fitted = fit.dropped, len(fit.tokens)
                except EngineError as exc:
                    if exc.kind is not P.FailureKind.CONTEXT_OVERFLOW:
                        raise
                    dropped, fitted = -1, 0
        last = b.tokenize(req.messages[-1].content, special=False) if req.messages else []
        return P.PromptCounted(req.request_id, n_tokens, len(last), self.n_ctx, dropped, fitted)

    # ------------------------------------------------------------------------- generation
    def generate(self, req: P.Generate) -> P.Finished:
        """Run one turn, emitting PromptPrepared, PrefillProgress and TokenEvent events.

        Returns:
            The terminal :class:`Finished` event (the caller emits it).

        Raises:
            EngineError: no model, a sampler value out of range, context overflow (STOP
                policy, or nothing left to drop), or a template error; nothing is generated then.
        """
        with self._chat_lock:
            return self._turn(req)

    def _turn(self, req: P.Generate) -> P.Finished:
        """:meth:`generate` with the chat lock held."""
        t0 = time.perf_counter_ns()
        m = self._require()
        try:
            req.sampler.validated()
        except ValueError as exc:
            raise EngineError(P.FailureKind.BAD_SETTINGS, f"The sampler settings cannot be used: {exc}.") from None
        policy = ContextPolicy(req.context_policy or self.settings.context_policy)
        person_turn = m.prompt.cached_turn  # an external request leaves it as it was (see P.Generate)
        m.prompt.use_template(req.chat_template)
        m.prompt.timing.render_ns = m.prompt.timing.tokenize_ns = 0
        if req.raw_prompt is not None:
            prompt = m.prompt.fit_raw(req.raw_prompt)
        else:
            prompt = m.prompt.fit(list(req.messages), req.continue_last, policy)
        messages = prompt.messages  # what the context holds; a context shift drops from these
        m.prompt.cached_turn = None  # the cache changes from here; set again when the turn ends
        if req.external:  # the person's cache is copied out and back (app.engine.kv_snapshot)
            snap = None if self._cache_from_api else kv_snapshot.take(m.llm, m.layout.used_bytes(m.llm.n_tokens))
            try:
                return self._generate(req, m, prompt, messages, policy, t0)
            finally:
                if snap is not None and not kv_snapshot.restore(m.llm, snap):
                    person_turn = None
                # Nothing of the person's to keep (an empty cache, or one too large to copy): the
                # request's tokens stay, and the next request may reuse their common prefix.
                self._cache_from_api = self._cache_from_api or snap is None
                m.prompt.cached_turn = person_turn
        self._cache_from_api = False
        return self._generate(req, m, prompt, messages, policy, t0)

    def _generate(
        self,
        req: P.Generate,
        m: _Loaded,
        prompt: FittedPrompt,
        messages: list[ChatMessage],
        policy: ContextPolicy,
        t0: int,
    ) -> P.Finished:
        """Prefill and decode the fitted ``prompt`` (the rest of :meth:`generate`)."""
        llm = m.llm
        llama_cpp.llama_perf_context_reset(llm.ctx)
        self._rpc.turn_started()
        prefix = list(req.reply_prefix)
        # A branch from an alternative ending with an end-of-generation token: it is the reply's last
        # token, sampled but never evaluated (as in any reply), so the reply ends with no decoding.
        ends_at_prefix = bool(prefix) and m.vocab.is_eog(prefix[-1])
        if prefix:
            full = prefixed_tokens(prompt.tokens, prefix, m.vocab, self.n_ctx)
            prompt = replace(prompt, tokens=full[:-1] if ends_at_prefix else full)

        t_reuse = time.perf_counter_ns()
        cached = rewind_to_prefix(llm, prompt.tokens)
        reuse_ns = time.perf_counter_ns() - t_reuse
        new = prompt.tokens[cached:]
        self.emit(
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
        self._rpc.prefill_done()
        if done < len(new):  # cancelled during prefill
            return self._finish(req, stats, DecodeResult("", StopReason.CANCELLED, 0, 0, 0, 0), t0)
        if ends_at_prefix:
            text = TextStream()
            shown = prefix_text(text, prefix, m.vocab) + text.finish().text
            m.prompt.cached_turn = self._cached_turn(prompt.text, prompt.tokens[: len(prompt.tokens) - len(prefix) + 1])
            none = no_alternatives(req.alternatives, prompt.tokens) if req.alternatives > 0 else None
            return self._finish(req, stats, DecodeResult(shown, StopReason.EOS, 0, 0, 0, 0), t0, none)

        chain = make_sampler(req.sampler, seed, prompt.tokens, m.vocab, self.n_ctx)
        keep = req.keep_logits or req.alternatives > 0
        store = ReplyLogits(req.request_id, req.sampler, seed, prompt.tokens, m.vocab.n_tokens) if keep else None
        if store is not None:
            self._store = store
        try:
            result = decode_loop(
                llm=llm,
                chain=chain,
                vocab=m.vocab,
                inspector=m.inspector,
                req=req,
                stop_strings=tuple(req.stop_strings) + m.prompt.stop_strings,
                n_ctx=self.n_ctx,
                policy=policy,
                cancel=self.cancel,
                emit=self.emit,
                t0=t0,
                shift_context=lambda generated: self._shift_context(req, messages, [*prefix, *generated], stats, t0),
                store=store,
                forced=forced_from_env(lambda text: m.prompt.tokenize(text, False), m.vocab.eos),
                prefix=prefix,
            )
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
        return self._finish(req, stats, result, t0, alts)

    def funnel(self, req: P.ComputeFunnel) -> P.FunnelComputed:
        """The sampler funnel of one stored step (:mod:`app.engine.funnel`); safe during a reply.

        Raises:
            EngineError: ``no_model``; ``no_logits`` (no reply kept its logits, another reply's
                id, or a step not stored); ``bad_settings`` (a value out of range).
        """
        if req.stored is not None:
            return self._stored_funnel(req, req.stored)
        with self._model_lock:
            m = self._require()
            store = self._store
            if store is None or (req.reply_id >= 0 and req.reply_id != store.reply_id):
                raise EngineError(
                    P.FailureKind.NO_LOGITS,
                    "The funnel needs a reply generated with the funnel on; this one's logits were not kept.",
                )
            settings = req.sampler if req.sampler is not None else store.settings
            try:
                settings.validated()
            except ValueError as exc:
                raise EngineError(P.FailureKind.BAD_SETTINGS, f"The sampler settings cannot be used: {exc}.") from None
            step = req.step if req.step >= 0 else store.n_steps - 1
            data = store.step(step)
            if data is None:
                raise EngineError(P.FailureKind.NO_LOGITS, f"Token {step + 1} of the reply has no stored logits.")
            funnel = run_funnel(
                ids=data.ids,
                logits=data.logits,
                logsumexp=data.logsumexp,
                settings=settings,
                seed=store.seed,
                history=data.history,
                vocab=m.funnel_vocab,
                n_ctx=self.n_ctx,
                drawn=data.drawn,
                reply_id=store.reply_id,
                step=step,
                exact=data.exact,
                n_rows=max(1, min(req.rows, 50)),
            )
        return P.FunnelComputed(req.request_id, funnel)

    def prepare_inspect(self) -> None:
        """Build the inspector's tables and context now (:class:`~app.core.protocol.PrepareInspect`);
        nothing with no model. A failure is logged: the inspection that follows meets it again and reports it."""
        with self._inspect_lock:
            with self._model_lock:
                m = self._m
                if m is None:
                    return
                n_tokens = int(m.llm.n_tokens)
            t0 = time.perf_counter()
            try:
                m.token_inspector.prepare(n_tokens)
            except EngineError as exc:  # the inspection that follows meets it again and reports it
                log.warning("preparing the inspector failed: %s", exc)
                return
            log.info("inspector prepared in %.2f s", time.perf_counter() - t0)

    def inspect_token(self, req: P.InspectToken) -> P.TokenInspected:
        """Inspect one context position (:mod:`app.engine.inspect_token`); safe during a reply.

        The chat's KV cache is copied when no turn is running; during one, the inspection
        re-evaluates from the start in its own context (the result says which path ran).

        Raises:
            EngineError: ``no_model``; ``not_in_context``; ``internal`` (an evaluation or the callback failed).
        """
        with self._inspect_lock:
            with self._model_lock:
                m = self._require()
                idle = self._chat_lock.acquire(blocking=False)
                try:
                    chat = take_chat_cache(m.llm, m.info, busy=not idle)
                finally:
                    if idle:
                        self._chat_lock.release()
            return P.TokenInspected(req.request_id, m.token_inspector.inspect(req, chat))

    def _stored_funnel(self, req: P.ComputeFunnel, stored: StoredStep) -> P.FunnelComputed:
        """The funnel of a step kept with a stored reply (its top-N, :mod:`app.core.sampling.alternatives`):
        llama.cpp's samplers on those N logits, not exact beyond them (``Funnel.exact`` False).

        Raises:
            EngineError: ``no_model`` (the samplers need a loaded vocabulary); ``no_logits`` (no
                candidates stored); ``bad_settings`` (a value out of range).
        """
        settings = req.sampler if req.sampler is not None else stored.settings
        try:
            settings.validated()
        except ValueError as exc:
            raise EngineError(P.FailureKind.BAD_SETTINGS, f"The sampler settings cannot be used: {exc}.") from None
        if not stored.ids:
            raise EngineError(
                P.FailureKind.NO_LOGITS, f"Token {stored.step + 1} of the reply has no stored candidates."
            )
        with self._model_lock:
            m = self._require()
            funnel = run_funnel(
                ids=np.asarray(stored.ids, dtype=np.int32),
                logits=np.asarray(stored.logits, dtype=np.float32),
                logsumexp=stored.logsumexp,
                settings=settings,
                seed=stored.seed,
                history=stored.history,
                vocab=m.funnel_vocab,
                n_ctx=self.n_ctx,
                drawn=stored.drawn,
                reply_id=stored.reply_id,
                step=stored.step,
                exact=False,
                n_rows=max(1, min(req.rows, 50)),
                texts=stored.texts,
            )
        return P.FunnelComputed(req.request_id, funnel)

    def _cached_turn(self, prompt_text: str, prompt_tokens: list[int]) -> CachedTurn | None:
        """What the KV cache holds after a turn on ``prompt_tokens``: the prompt, then the evaluated reply tokens.

        Read from the cache's own token list (``llm.input_ids``), so it is exactly what is
        there: the end-of-generation token was sampled but never evaluated, and a token
        sampled when Stop or a stop string ended the reply neither. None when the cache
        does not start with the prompt.
        """
        llm = self._require().llm
        held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
        n = len(prompt_tokens)
        if held[:n] != prompt_tokens:
            return None
        return CachedTurn(prompt_text, tuple(prompt_tokens), tuple(held[n:]))

    def _shift_context(
        self, req: P.Generate, messages: list[ChatMessage], generated: list[int], stats: TurnStats, t0: int
    ) -> bool:
        """Rolling policy: make room by dropping the oldest turns, then the oldest half of the reply.

        The KV cache is rebuilt as prompt(kept messages) + kept reply tokens; the
        screen keeps everything. Returns False when nothing could be freed or Stop
        was pressed during the rebuild.

        Args:
            messages: the messages the context holds (updated in place to the kept ones).
        """
        m = self._require()
        reply = generated[:-1]  # the last token is sampled but not yet evaluated
        budget = int(self.n_ctx * (1 - ROLLING_RESERVE_FRACTION))
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
        if len(seq) >= self.n_ctx:
            return False
        t_rebuild = time.perf_counter_ns()
        keep = rewind_to_prefix(m.llm, [*seq, generated[-1]])
        if m.prefiller.run(req.request_id, seq[keep:], t0, rebuild=True) < len(seq) - keep:
            return False
        messages[:] = kept
        stats.dropped_messages += dropped
        self.emit(
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
        self,
        req: P.Generate,
        stats: TurnStats,
        result: DecodeResult,
        t0: int,
        alternatives: ReplyAlternatives | None = None,
    ) -> P.Finished:
        """The turn's :class:`Finished` event: ``stats`` and ``result`` with llama.cpp's own counters.

        Args:
            t0: when the request arrived (perf_counter_ns); TTFT counts from it.
            alternatives: the reply's kept alternatives (sent with the event).
        """
        m = self._require()
        llm = m.llm
        perf = llama_cpp.llama_perf_context(llm.ctx)
        t_first, t_last, n_gen = result.t_first_ns, result.t_last_ns, result.generated
        rpc_bytes = self._rpc.turn_bytes()
        final = GenerationStats(
            prompt_tokens=stats.prompt_tokens,
            cached_tokens=stats.cached_tokens,
            evaluated_tokens=stats.evaluated_tokens,
            prefill_s=stats.prefill_s,
            ttft_s=(t_first - t0) / 1e9 if t_first else 0.0,
            generated_tokens=n_gen,
            decode_s=(t_last - t_first) / 1e9 if n_gen > 1 else 0.0,
            n_ctx=self.n_ctx,
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
        )
        return P.Finished(
            req.request_id,
            result.text,
            final,
            elapsed_s=(time.perf_counter_ns() - t0) / 1e9,
            alternatives=alternatives,
        )
