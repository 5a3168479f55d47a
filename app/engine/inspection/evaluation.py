"""The inspect context: a second llama.cpp context on the loaded model, and evaluating a span in it with the eval callback.

Two paths to the keys and values of the positions before the inspected span
(:class:`~app.core.inspection.token_inspection.InspectPath`):

- **cache reuse**: the chat context's whole KV cache, copied out
  (:func:`~app.engine.inspection.chat_cache.take_chat_cache`), is set into the inspect context
  (``llama_state_set_data``), the span's positions are removed (``llama_memory_seq_rm``) and only
  the span is evaluated;
- **re-evaluation**, where the cache cannot serve: the chat context is busy with a reply (its
  cache cannot be copied while llama_decode writes it), its flash attention is on (its V cache
  is not transposed; llama.cpp refuses the copy: "incompatible V transposition"), its
  sliding-window cache is not full size (swa_full off: only the last window, cells reused
  out of position order), or llama.cpp refuses the copy for another reason (cache types).
  Everything up to the span is evaluated then, in n_batch slices, without copying any tensor,
  from the first position the inspect context does not already hold from the previous
  inspection of the same conversation.

The context has flash attention off (``kq_soft_max-N``, the attention probabilities, exists only
without it: src/llama-graph.cpp ``build_attn_mha``), ``swa_full`` on (a sliding-window layer keeps
every cell in position order) and the chat's K/V cache types. Every position of the span asks for
logits, so the last layer keeps all rows (``inp_out_ids``) and llama.cpp's logits of the inspected
position are there for the lens self-check.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import gguf
import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFInfo
from app.core.hardware.memory import compute_buffer_estimate, kv_cache_layout, pad
from app.core.inspection.token_inspection import InspectPath
from app.engine.batch import fill_batch
from app.engine.errors import EngineError
from app.engine.inspection.chat_cache import ChatCache
from app.engine.inspection.eval_callback import TensorCapture
from app.engine.inspection.views import add_expert_load

log = logging.getLogger(__name__)

# The inspect context's n_batch = n_ubatch, tokens. Its compute buffer holds one ubatch's logits
# (n_vocab x n_ubatch x 4 bytes: 134 MB for Gemma 3's 262k vocabulary at 128, 537 MB at 512).
INSPECT_N_BATCH = 128
CTX_GROWTH = 1024  # the inspect context's n_ctx is the conversation's length rounded up to this, tokens
_WANTED = re.compile(r"(l_out|kq_soft_max|ffn_moe_topk|ffn_moe_weights(_scaled|_norm|_softmax)?)-\d+")
F32 = npt.NDArray[np.float32]


def wanted_tensor(name: str) -> bool:
    """The graph nodes an inspection copies (names as ``llama_context::graph_get_cb`` sets them;
    views of them, ``ffn_moe_weights-0 (reshaped)``, are left out)."""
    return name == "result_norm" or _WANTED.fullmatch(name) is not None


class InspectContext:
    """The inspect context of one loaded model (created on first use, grown as the conversation grows).

    Not thread-safe: one inspection at a time (the session's inspect lock).

    Args:
        llm: the chat's ``llama_cpp.Llama`` (its model is shared, read-only; its context
            parameters give the cache types).
        info: the model's GGUF facts.
        n_vocab: the vocabulary's size, tokens (the logits' length).
        n_threads: threads for the evaluations before the span.
    """

    def __init__(self, llm: Any, info: GGUFInfo, n_vocab: int, n_threads: int) -> None:
        self._llm = llm
        self.info = info
        self._n_vocab = n_vocab
        self._n_threads = n_threads
        self._ctx: Any = None
        self._n_ctx = 0
        self._held: tuple[int, ...] = ()  # the tokens whose keys and values the inspect context holds, in order
        self.capture = TensorCapture(wanted_tensor)
        self._stop = threading.Event()
        self._abort = llama_cpp.ggml_abort_callback(self._should_abort)

    def _should_abort(self, _data: int | None) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Stop the evaluation in progress (any thread; llama.cpp checks it during each graph
        computation) and refuse further ones: the model is about to be freed."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        """:meth:`request_stop` was called."""
        return self._stop.is_set()

    @property
    def context_bytes(self) -> int:
        """The context's KV cache and (estimated) compute buffer, bytes (0 before the first use)."""
        if self._ctx is None:
            return 0
        p = self._llm.context_params
        layout = kv_cache_layout(
            self.info,
            self._n_ctx,
            n_ubatch=INSPECT_N_BATCH,
            swa_full=True,
            type_k=_type_name(p.type_k),
            type_v=_type_name(p.type_v),
        )
        return layout.allocated_bytes + compute_buffer_estimate(self.info, self._n_ctx, n_ubatch=INSPECT_N_BATCH)

    def open(self, n_needed: int) -> None:
        """Make sure the context exists with at least ``n_needed`` cells ((re)created when it holds fewer).

        Raises:
            EngineError: ``internal`` when llama.cpp cannot create it.
        """
        if self._ctx is not None and self._n_ctx >= n_needed:
            return
        self.close()
        chat = self._llm.context_params
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = pad(max(n_needed, INSPECT_N_BATCH), CTX_GROWTH)
        params.n_batch = params.n_ubatch = INSPECT_N_BATCH
        params.n_seq_max = 1
        params.n_threads = params.n_threads_batch = self._n_threads
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.swa_full = True
        # The chat's cache types when its cache can be copied in (flash attention off there too);
        # else f16: a quantized V cache needs flash attention, which attention probabilities cannot have.
        copyable = int(chat.flash_attn_type) == llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.type_k = chat.type_k if copyable else llama_cpp.GGML_TYPE_F16
        params.type_v = chat.type_v if copyable else llama_cpp.GGML_TYPE_F16
        params.offload_kqv = chat.offload_kqv
        params.no_perf = True
        params.cb_eval = self.capture.callback
        params.cb_eval_user_data = None
        params.abort_callback = self._abort
        params.abort_callback_data = None
        ctx = llama_cpp.llama_init_from_model(self._llm.model, params)
        if not ctx:
            raise EngineError(P.FailureKind.INTERNAL, "llama.cpp could not create the inspect context (memory?).")
        self._ctx = ctx
        self._n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        log.info("inspect context: n_ctx %d, flash attention off, swa_full on", self._n_ctx)

    def close(self) -> None:
        """Free the context (before the model is freed)."""
        self._held = ()
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
            self._n_ctx = 0

    # ------------------------------------------------------------------------------- filling
    def fill(self, chat: ChatCache, p0: int, *, force_re_eval: bool) -> tuple[InspectPath, str, int]:
        """Fill the context's cache with what it can of positions ``[0, p0)`` (after :meth:`open`).

        Returns:
            ``(path, fallback reason, first position still to evaluate)``: ``p0`` on the cache
            path; on re-evaluation, what the inspect context still holds of this conversation from
            the previous inspection (0 when asked to re-evaluate).
        """
        ctx = self._ctx
        mem = llama_cpp.llama_get_memory(ctx)
        held, self._held = self._held, ()
        if force_re_eval:
            llama_cpp.llama_memory_clear(mem, True)
            return InspectPath.RE_EVAL, "re-evaluation was asked for", 0
        reason = chat.reason
        if chat.state is not None and p0 > 0:
            llama_cpp.llama_memory_clear(mem, True)
            if int(llama_cpp.llama_state_set_data(ctx, chat.state, chat.n_bytes)) <= 0:
                reason = "llama.cpp refused the chat cache's copy (cache types or layout differ)"
            else:
                swa_min = int(llama_cpp.llama_memory_seq_pos_min(mem, 0))
                n_swa = self.info.sliding_window if any(self.info.swa_layers()) else 0
                if n_swa and swa_min > max(0, p0 - n_swa):
                    reason = (
                        f"the chat's sliding-window cache starts at position {swa_min}; "
                        f"position {p0} needs the {n_swa} before it"
                    )
                elif not llama_cpp.llama_memory_seq_rm(mem, 0, p0, -1):
                    reason = "llama.cpp could not remove the span from the copied cache"
                else:
                    # A whole-cache restore puts the chat's cells at the same indices (from 0), and the
                    # chat's cache holds positions in cell order (prefill and rewinds append and cut the
                    # tail; Glassbox never shifts positions): KV cell i is position i. The attention
                    # view checks it (no weight after the inspected position's cell).
                    return InspectPath.CACHE_REUSE, "", p0
            held = ()  # the restore replaced what the inspect context held
        elif p0 == 0:
            reason = "the span starts at the first position (nothing before it to reuse)"
        keep = min(common_prefix(held, chat.tokens), p0)
        if keep > 0 and llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
            return InspectPath.RE_EVAL, f"{reason}; {keep:,} positions kept from the previous inspection", keep
        llama_cpp.llama_memory_clear(mem, True)
        return InspectPath.RE_EVAL, reason, 0

    # ---------------------------------------------------------------------------- evaluating
    def evaluate(
        self, tokens: tuple[int, ...], start: int, p0: int, c0: int, c1: int, n_expert: int
    ) -> tuple[int, F32]:
        """Evaluate ``[start, p0)`` copying nothing, ``[p0, c0)`` copying only the router's choices
        (``ffn_moe_topk-N``, for the expert load), then ``[c0, c1]`` copying every tensor the views read.

        Slices are cut at multiples of :data:`INSPECT_N_BATCH` from position 0, the same way every time.

        Returns:
            ``(positions evaluated, expert load counts [n_layer, n_expert] over [p0, c1])``.

        Raises:
            EngineError: llama_decode failed or the callback raised (its error is logged).
        """
        cap = self.capture
        cap.reset()
        counts = np.zeros((self.info.n_layer, max(n_expert, 1)), dtype=np.float32)
        if c1 - c0 + 1 > INSPECT_N_BATCH:
            raise EngineError(P.FailureKind.INTERNAL, f"the inspected span is longer than {INSPECT_N_BATCH} tokens")

        def run(s0: int, s1: int, *, all_logits: bool) -> None:
            while s0 < s1:
                e = min(s1, (s0 // INSPECT_N_BATCH + 1) * INSPECT_N_BATCH)
                self._decode(tokens, s0, e, all_logits=all_logits)
                if n_expert:
                    add_expert_load(cap.tensors, counts)
                s0 = e

        ctx = self._ctx
        # The prefix on every thread; the span, a few tokens cut into many small computations by
        # the callback (one per copied tensor), on one: no thread barriers to wait on per piece.
        llama_cpp.llama_set_n_threads(ctx, self._n_threads, self._n_threads)
        cap.enabled = False
        try:
            run(start, p0, all_logits=False)
        finally:
            cap.enabled = True
        llama_cpp.llama_set_n_threads(ctx, 1, 1)
        wants = cap.wants
        cap.wants = _router_choice
        try:  # every row an output: the last layer keeps only output rows (inp_out_ids), experts included
            run(p0, c0, all_logits=True)
        finally:
            cap.wants = wants
        cap.reset()
        self._decode(tokens, c0, c1 + 1, all_logits=True)
        if n_expert:
            add_expert_load(cap.tensors, counts)
        self._held = tokens[: c1 + 1]
        return c1 + 1 - start, counts

    def evaluate_alone(self, tokens: tuple[int, ...], c0: int, pos: int) -> tuple[int, F32]:
        """The chat's last position as the chat decoded it: alone, on the chat's own keys and values of
        ``[0, pos)`` (the cache path with the span starting at ``pos``), copying every tensor the views
        read; then its neighbours ``[c0, pos)`` evaluated again (a batch over the chat's keys and values
        of ``[0, c0)``) for their lens columns only (``l_out-N``, ``result_norm``), joined row by row.

        Returns:
            ``(positions evaluated, llama.cpp's logits of pos (a copy))``.

        Raises:
            EngineError: as :meth:`evaluate`.
        """
        cap = self.capture
        cap.reset()
        llama_cpp.llama_set_n_threads(self._ctx, 1, 1)
        self._decode(tokens, pos, pos + 1, all_logits=True)
        logits = self.logits(0)
        mine, cap.tensors = cap.tensors, {}
        self._held = tokens[:pos]
        if c0 < pos:
            if not llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self._ctx), 0, c0, -1):
                raise EngineError(P.FailureKind.INTERNAL, "llama.cpp could not remove the span from the copied cache.")
            self._held = tokens[:c0]
            wants = cap.wants
            cap.wants = _lens_rows
            try:
                self._decode(tokens, c0, pos, all_logits=True)
            finally:
                cap.wants = wants
            self._held = tokens[:pos]
        cap.tensors = joined(cap.tensors, mine, pos - c0)
        return pos + 1 - c0, logits

    def last_logits(self, tokens: tuple[int, ...], n_single: int) -> F32:
        """llama.cpp's logits after ``tokens`` at positions ``0...`` (a stored reply's step recomputed for the
        funnel), evaluated as the chat evaluated them: the prompt in :data:`INSPECT_N_BATCH` slices, its last
        token and the last ``n_single`` (the reply's tokens) one at a time, as prefill and decode did (a batch
        of several tokens gives logits a few percent apart in probability on SmolLM2 Q4_1). What the context
        holds of ``tokens`` from its previous evaluation is kept; logits for the last token only (one row of
        n_vocab, never one per position); the eval callback copies nothing.

        Raises:
            EngineError: as :meth:`evaluate`; ``internal`` when the context cannot be created.
        """
        self.open(len(tokens) + 1)
        mem = llama_cpp.llama_get_memory(self._ctx)
        keep = min(common_prefix(self._held, tokens), len(tokens) - 1)
        if keep <= 0 or not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
            llama_cpp.llama_memory_clear(mem, True)
            keep = 0
        self._held = ()
        llama_cpp.llama_set_n_threads(self._ctx, self._n_threads, self._n_threads)
        self.capture.enabled = False
        try:
            s0 = keep
            batched = len(tokens) - n_single - 1  # the prompt's tokens but its last
            while s0 < len(tokens):
                e = min(batched, (s0 // INSPECT_N_BATCH + 1) * INSPECT_N_BATCH) if s0 < batched else s0 + 1
                self._decode(tokens, s0, e, all_logits=False)
                self._held = tokens[:e]
                s0 = e
        finally:
            self.capture.enabled = True
        return self.logits(-1)

    def logits(self, row: int) -> F32:
        """A copy of the logits [n_vocab] of batch row ``row`` of the last evaluation."""
        out: F32 = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx, row), shape=(self._n_vocab,)).copy()
        return out

    def _decode(self, tokens: tuple[int, ...], s0: int, s1: int, *, all_logits: bool) -> None:
        """Evaluate ``tokens[s0:s1]`` at positions ``s0...`` (logits for all of them, or the last).

        Raises:
            EngineError: ``cancelled`` (:meth:`request_stop`), ``internal`` (llama_decode failed or
                the eval callback raised).
        """
        n = s1 - s0
        batch = llama_cpp.llama_batch_init(n, 0, 1)
        try:
            fill_batch(batch, tokens[s0:s1], s0, logits=lambda pos: all_logits or pos == s1 - 1)
            rc = int(llama_cpp.llama_decode(self._ctx, batch))
        finally:
            llama_cpp.llama_batch_free(batch)
        if self._stop.is_set():  # llama_decode returns 2 when the abort callback stopped it
            raise EngineError(P.FailureKind.CANCELLED, "The inspection was stopped: the model is being unloaded.")
        if rc != 0 or self.capture.error is not None:
            why = (
                f"the eval callback failed: {self.capture.error!r}"
                if self.capture.error
                else f"llama_decode returned {rc}"
            )
            raise EngineError(P.FailureKind.INTERNAL, f"The inspection's evaluation failed ({why}).")


def joined(first: dict[str, npt.NDArray[Any]], last: dict[str, npt.NDArray[Any]], n_first: int) -> dict[str, Any]:
    """Two evaluations' copies as one: ``first``'s ``n_first`` token rows then ``last``'s one row, for
    every tensor whose outermost dimension is the token (``l_out``, ``result_norm``, the router's);
    the attention probabilities (``kq_soft_max-N``: heads outermost) are ``last``'s."""
    out = dict(last)
    for name, b in last.items():
        a = first.get(name)
        if a is not None and not name.startswith("kq_soft_max"):
            out[name] = np.concatenate([a.reshape(n_first, -1), b.reshape(1, -1)])
    return out


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _lens_rows(name: str) -> bool:
    """Only what the lens's columns read: each layer's residual stream and the final norm."""
    return name.startswith("l_out-") or name == "result_norm"


def _router_choice(name: str) -> bool:
    """Only the router's choices: what the turn's positions before the span contribute (the expert load)."""
    return name.startswith("ffn_moe_topk-")


def _type_name(t: int) -> str:
    """A ggml type's name (``F16``, ``Q8_0``) for :func:`app.core.hardware.memory.kv_cache_layout`."""
    return gguf.GGMLQuantizationType(int(t)).name
