"""The engine's model session: owns the loaded model and the locks, and hands each request to its part.

The parts, one job each: :mod:`app.engine.loader` (load a model), :mod:`app.engine.turn` (one
turn in the chat context), :mod:`app.engine.funnel_request` (the funnel of a live or stored step),
:mod:`app.engine.prompt_requests` (render and count a prompt), :mod:`app.engine.depth_sweep` (tok/s
against context length) and :mod:`app.engine.inspection` (inspect a token in a second context). The session decides which lock each takes:

- the **chat lock** while the chat context's KV cache changes (a turn, a reset, a depth sweep);
- the **model lock** while the funnel runs (on the pipe reader's thread) and while a model is
  freed or set, so a funnel never uses a model being unloaded; generation does not take it;
- the **inspect lock** while an inspection runs (on the inspect thread) and while a model is freed
  (taken before the model lock): the model lock is held only while the inspection starts, so a
  funnel never waits seconds behind an inspection;
- the **embed lock** while embeddings run (:mod:`app.engine.embeddings`, on the embed thread, in a
  context of their own) and while a model is freed (taken first);
- the **person-first gate** (:class:`~app.engine.parallel.gate.PersonFirst`) around the person's turn, a
  depth sweep and each prompt render or count: the local API's parallel sequences
  (:mod:`app.engine.parallel`, a context of their own on their own thread) pause meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.core.chat.context import ChatMessage
from app.core.gguf.gguf_info import GGUFInfo
from app.core.hardware.memory import KVCacheLayout
from app.core.sampling.alternatives import StoredStep
from app.engine.constraint.grammar import constraint_gbnf
from app.engine.constraint.sampler import grammar_sampler
from app.engine.depth_sweep import sweep_depth
from app.engine.embeddings import Embedder
from app.engine.errors import CancelFlag, EngineError
from app.engine.funnel_request import (
    KeptStep,
    checked_sampler,
    exact_step,
    live_reply,
    live_step,
    recomputed_step,
    same_model_file,
    step_funnel,
    stored_step,
)
from app.engine.inspection.chat_cache import take_chat_cache
from app.engine.llama_log import LlamaLog
from app.engine.loader import LoadedModel, check_model, load_model
from app.engine.parallel.gate import PersonFirst
from app.engine.parallel.loop import ParallelRunner
from app.engine.prompt_requests import count_prompt, render_prompt
from app.engine.turn import Turn, clear_chat
from app.engine.vocab import Vocab

__all__ = ["CancelFlag", "EngineError", "Session"]

log = logging.getLogger(__name__)


class Session:
    """Owns one loaded model and its context. One request of each kind at a time (see the module docstring).

    Args:
        emit: called with each event (the process loop sends it to the UI).
        cancel: the shared cancel flag (``multiprocessing.Event``).
        llama_log: the process's llama.cpp log capture.
    """

    def __init__(self, emit: Callable[[object], None], cancel: CancelFlag, llama_log: LlamaLog) -> None:
        self.emit = emit
        self.cancel = cancel
        self.llama_log = llama_log
        self._m: LoadedModel | None = None
        self._model_lock = threading.Lock()
        self._inspect_lock = threading.Lock()
        self._chat_lock = threading.Lock()
        self._embed_lock = threading.Lock()
        self._embedder: Embedder | None = None  # the loaded model's embeddings context, made on first use
        self._embed_cancels: set[int] = set()  # Embed request ids cancelled (CancelEmbed), until they end
        self._gate = PersonFirst()  # the person's work first, the API's parallel sequences after
        self._parallel: ParallelRunner | None = None  # the API's parallel sequences, made on first use
        # The last stored step recomputed: (its tokens, their logits), so a slider move on it evaluates nothing.
        self._recomputed_last: tuple[tuple[int, ...], npt.NDArray[np.float32]] | None = None

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
    def n_ctx(self) -> int:
        """The loaded context, tokens (0 with no model)."""
        return self._m.n_ctx if self._m else 0

    @property
    def vocab(self) -> Vocab:
        """The loaded model's vocabulary.

        Raises:
            EngineError: ``no_model``.
        """
        return self._require().vocab

    def _require(self) -> LoadedModel:
        if self._m is None:
            raise EngineError(
                P.FailureKind.NO_MODEL, "No model is loaded. Open a GGUF model first (File → Open model)."
            )
        return self._m

    # ----------------------------------------------------------------------------------- load
    def load(self, req: P.LoadModel) -> P.ModelLoaded:
        """Load ``req.path`` (:func:`app.engine.loader.load_model`); the previous model (if any) is freed first.

        Raises:
            EngineError: ``bad_model`` (the file fails validation; llama.cpp never sees it),
                ``rpc`` (an RPC server cannot be used: unreachable, busy, another llama.cpp version)
                or ``load`` (llama.cpp refused it; its error lines are quoted).
        """
        t0 = time.perf_counter()
        info = check_model(req.path)
        self.unload()
        loaded, event = load_model(req, info, emit=self.emit, cancel=self.cancel, llama_log=self.llama_log, t0=t0)
        with self._model_lock:
            self._m = loaded
        return event

    def unload(self) -> None:
        """Free the model and its context (memory the C heap keeps is freed only with the process).

        An inspection in progress is stopped first (llama.cpp's abort callback), then waited for.
        """
        m = self._m
        if m is not None:
            m.token_inspector.request_stop()
        if self._embedder is not None:
            self._embedder.request_stop()
        with self._model_lock:
            runner, self._parallel = self._parallel, None
        if runner is not None:
            runner.close()  # its context uses the model: freed first (its requests end with Failed)
        with self._embed_lock, self._inspect_lock, self._model_lock:
            if self._embedder is not None:
                self._embedder.close()  # its context uses the model: freed first
                self._embedder = None
            self._recomputed_last = None  # the model's logits
            if self._m is not None:
                self._m.store = None
                self._m.token_inspector.close()  # its context uses the model: freed first
                if self._m.speculator is not None:
                    self._m.speculator.close()
                self._m.llm.close()
            self._m = None

    def reset(self) -> None:
        """Empty the KV cache ("New chat")."""
        with self._chat_lock:
            if self._m is not None:
                clear_chat(self._m)

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

    # ----------------------------------------------------------------------------- requests
    def render_prompt(self, req: P.RenderPrompt) -> P.PromptRendered:
        """:func:`app.engine.prompt_requests.render_prompt` on the loaded model.

        Raises:
            EngineError: ``no_model``; ``template``.
        """
        with self._gate.person():
            return render_prompt(self._require(), req)

    def count_prompt(self, req: P.CountPrompt) -> P.PromptCounted:
        """:func:`app.engine.prompt_requests.count_prompt` on the loaded model.

        Raises:
            EngineError: ``no_model``; ``template``.
        """
        with self._gate.person():
            return count_prompt(self._require(), req)

    def generate(self, req: P.Generate) -> P.Finished:
        """Run one turn (:class:`app.engine.turn.Turn`), emitting PromptPrepared, PrefillProgress and TokenEvent events.

        Returns:
            The terminal :class:`Finished` event (the caller emits it).

        Raises:
            EngineError: no model, a sampler value out of range, context overflow (STOP
                policy, or nothing left to drop), or a template error; nothing is generated then.
        """
        with self._gate.person(), self._chat_lock:
            return Turn(self._require(), req, self.emit, self.cancel, self.llama_log).run()

    def check_constraint(self, req: P.CheckConstraint) -> P.ConstraintChecked:
        """Convert ``req.constraint`` to GBNF and parse it with llama.cpp's grammar sampler on the loaded
        vocabulary (then freed); safe during a reply (the reader lane).

        Raises:
            EngineError: ``no_model``; ``constraint`` (the schema's part or the grammar's line named).
        """
        gbnf = constraint_gbnf(req.constraint)
        if gbnf is None:
            return P.ConstraintChecked(req.request_id, "", 0)
        with self._model_lock:
            smpl = grammar_sampler(self._require().funnel_vocab.ptr, gbnf, self.llama_log)
            llama_cpp.llama_sampler_free(smpl)
        n_rules = sum(1 for line in gbnf.splitlines() if "::=" in line)
        return P.ConstraintChecked(req.request_id, gbnf, n_rules)

    def sweep_depth(self, req: P.SweepDepth) -> P.DepthSwept:
        """Measure tok/s against depth in the chat context (:mod:`app.engine.depth_sweep`), under the
        chat lock: no turn runs meanwhile, and the chat's KV cache is put back after.

        Raises:
            EngineError: ``no_model``; ``bad_settings`` (a depth that does not fit n_ctx); ``internal``.
        """
        with self._gate.person(), self._chat_lock:
            return sweep_depth(self._require(), req, self.emit, self.cancel)

    def funnel(self, req: P.ComputeFunnel) -> P.FunnelComputed:
        """The sampler funnel of one kept step (:mod:`app.engine.funnel_request`); safe during a reply.

        A stored step (``req.stored``) is checked before the model is needed, and recomputed whole when the
        model that wrote it is loaded (:meth:`_recomputed`, on the inspect thread); a live one reads the loaded
        model's kept logits under the model lock.

        Raises:
            EngineError: ``no_model``; ``no_logits`` (no reply kept its logits, another reply's
                id, or a step not stored); ``bad_settings`` (a value out of range).
        """
        if req.stored is not None:
            settings = checked_sampler(req.sampler, req.stored.settings)
            kept = self._recomputed(req.stored) or stored_step(req.stored)
            with self._model_lock:
                m = self._require()
                return step_funnel(req, kept, settings, m.funnel_vocab, m.n_ctx)
        with self._model_lock:
            m = self._require()
            store = live_reply(m.store, req.reply_id)
            settings = checked_sampler(req.sampler, store.settings)
            kept = live_step(store, req.step)
            if kept.exact or len(kept.history) >= m.n_ctx:  # newest steps; or past a context shift
                return step_funnel(req, kept, settings, m.funnel_vocab, m.n_ctx)
        # An older step of the live reply kept only its top-M: evaluated again, as a stored reply's is, so
        # the funnel is exact there too (review of issue 20: "most uncertain" opened on an approximation).
        kept = self._recomputed_live(kept)
        with self._model_lock:
            m = self._require()
            return step_funnel(req, kept, settings, m.funnel_vocab, m.n_ctx)

    def _recomputed_live(self, kept: KeptStep) -> KeptStep:
        """The live reply's older step ``kept`` (its top-M) with all its logits (:meth:`_logits_after`);
        ``kept`` itself when that fails."""
        with self._inspect_lock:
            logits = self._logits_after(kept.history, kept.step)
        return kept if logits is None else exact_step(kept, logits)

    def _recomputed(self, stored: StoredStep) -> KeptStep | None:
        """``stored``'s step with all its logits when the model that wrote it is loaded (its ``model_path``,
        the same file; :meth:`_logits_after`). None: no path, another model, or the evaluation failed: the
        stored top-N serve."""
        if not stored.model_path:
            return None
        with self._inspect_lock:
            with self._model_lock:
                if not same_model_file(stored.model_path, self._require().llm.model_path):
                    return None
            logits = self._logits_after(stored.history, stored.step)
        return None if logits is None else recomputed_step(stored, logits)

    def _logits_after(self, history: tuple[int, ...], step: int) -> npt.NDArray[np.float32] | None:
        """The loaded model's logits after ``history`` (a reply's prompt and its first ``step`` tokens),
        evaluated again in the inspect context (what that context kept of them from the last time is
        reused: the next token of the same reply, or a slider move, costs a position or none). None when
        the evaluation failed (logged). Call with the inspect lock held."""
        with self._model_lock:
            m = self._require()
        last = self._recomputed_last
        if last is not None and last[0] == history:
            return last[1]
        try:
            logits = m.token_inspector.reply_logits(history, step)
        except EngineError as exc:
            log.warning("recomputing a reply's logits failed: %s", exc)
            return None
        self._recomputed_last = (history, logits)
        return logits

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
        """Inspect one context position (:mod:`app.engine.inspection`); safe during a reply.

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

    def embed(self, req: P.Embed) -> P.Embedded:
        """Embed ``req.inputs`` in the model's embeddings context (:mod:`app.engine.embeddings`); safe
        during a reply (the chat's context and KV cache are not touched).

        Raises:
            EngineError: ``no_model``; ``context_overflow``, ``bad_settings``, ``cancelled``, ``internal``
                (:meth:`app.engine.embeddings.Embedder.embed`).
        """
        with self._embed_lock:
            with self._model_lock:
                m = self._require()
                if self._embedder is None:
                    self._embedder = Embedder(m.llm, m.info, self._embed_cancels)
                embedder = self._embedder
            return embedder.embed(req)

    def cancel_embed(self, req: P.CancelEmbed) -> None:
        """Mark the Embed ``req.request_id`` cancelled (any thread): it ends with Failed ``cancelled``
        (:meth:`app.engine.embeddings.Embedder.embed`). No answer."""
        self._embed_cancels.add(req.request_id)

    # ------------------------------------------------------------- parallel API sequences (issue 23 §4)
    def generate_parallel(self, req: P.GenerateParallel) -> None:
        """Hand ``req`` to the parallel loop (:mod:`app.engine.parallel.loop`, made on first use); its
        events and its terminal Finished or Failed come from the loop's thread. No answer here.

        Raises:
            EngineError: ``no_model``; ``bad_settings`` (a number of sequences out of range).
        """
        with self._model_lock:
            m = self._require()
            if self._parallel is not None and not self._parallel.alive:  # a bug ended its loop
                self._parallel.close()
                self._parallel = None
            if self._parallel is None:
                self._parallel = ParallelRunner(m, self.emit, self._gate, self.llama_log)
            self._parallel.submit(req)

    def cancel_sequence(self, req: P.CancelSequence) -> None:
        """Stop the parallel request ``req.request_id`` (any thread; nothing when it has ended). No answer."""
        with self._model_lock:
            runner = self._parallel
        if runner is not None:
            runner.cancel(req.request_id)
