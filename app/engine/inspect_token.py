"""Inspect a token: evaluate a few positions again in a second llama.cpp context, with the eval callback on.

The chat's own context is never touched by an inspection beyond a copy of its KV cache. The
inspect context is created on the same loaded model (read-only, shared), lazily on the first
inspection, with flash attention off (``kq_soft_max-N``, the attention probabilities, exists
only without it: src/llama-graph.cpp ``build_attn_mha``), ``swa_full`` on (so a sliding-window
layer keeps every cell in position order) and the chat's K/V cache types.

Two paths to the keys and values of the positions before the inspected span
(:class:`~app.core.inspection.token_inspection.InspectPath`):

- **cache reuse**: the chat context's whole KV cache is copied out (``llama_state_get_data``;
  see :func:`take_chat_cache` for why not the sequence API) and into the inspect context
  (``llama_state_set_data``), the span's positions are removed (``llama_memory_seq_rm``) and
  only the span is evaluated;
- **re-evaluation**, where the cache cannot serve: the chat context is busy with a reply (its
  cache cannot be copied while llama_decode writes it), its flash attention is on (its V cache
  is not transposed; llama.cpp refuses the copy: "incompatible V transposition"), its
  sliding-window cache is not full size (swa_full off: only the last window, cells reused
  out of position order), or llama.cpp refuses the copy for another reason (cache types).
  Everything up to the span is evaluated then, in n_batch slices, without copying any tensor,
  from the first position the inspect context does not already hold from the previous
  inspection of the same conversation.

The span is the inspected position and ``radius`` neighbours each side (the lens grid's
columns); for a mixture-of-experts model it starts at the turn's first position (at most
:data:`MAX_EXPERT_SPAN` back), for the expert load over the turn. Every position of the span
asks for logits, so the last layer keeps all rows (``inp_out_ids``) and llama.cpp's logits of
the inspected position are there for the lens self-check.
"""

from __future__ import annotations

import ctypes
import logging
import re
import threading
import time
from array import array
from dataclasses import dataclass, replace
from typing import Any

import gguf
import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFInfo
from app.core.hardware.memory import compute_buffer_estimate, kv_cache_layout, pad
from app.core.inspection.token_inspection import (
    MAX_EXPERT_SPAN,
    AttentionMaps,
    EmbeddingView,
    ExpertChoice,
    ExpertsView,
    InspectPath,
    LensCell,
    LogitLens,
    TokenInspection,
)
from app.engine import kv_snapshot
from app.engine.errors import EngineError
from app.engine.eval_callback import TensorCapture
from app.engine.llama_context import GlassboxLlama
from app.engine.model_tables import ModelTables, chunked_matmul, load_tables
from app.engine.vocab import Vocab

log = logging.getLogger(__name__)

# The inspect context's n_batch = n_ubatch, tokens. Its compute buffer holds one ubatch's logits
# (n_vocab x n_ubatch x 4 bytes: 134 MB for Gemma 3's 262k vocabulary at 128, 537 MB at 512).
INSPECT_N_BATCH = 128
CTX_GROWTH = 1024  # the inspect context's n_ctx is the conversation's length rounded up to this, tokens
# The router's weights as the layer mixes them: the last of these the graph names (src/llama-graph.cpp build_moe_ffn).
_WEIGHT_NAMES = ("ffn_moe_weights_scaled", "ffn_moe_weights_norm", "ffn_moe_weights_softmax", "ffn_moe_weights")
_WANTED = re.compile(r"(l_out|kq_soft_max|ffn_moe_topk|ffn_moe_weights(_scaled|_norm|_softmax)?)-\d+")
F32 = npt.NDArray[np.float32]


def wanted_tensor(name: str) -> bool:
    """The graph nodes an inspection copies (names as ``llama_context::graph_get_cb`` sets them;
    views of them, ``ffn_moe_weights-0 (reshaped)``, are left out)."""
    return name == "result_norm" or _WANTED.fullmatch(name) is not None


@dataclass(frozen=True)
class ChatCache:
    """What the chat context held when the inspection started.

    Attributes:
        tokens: the tokens in its KV cache, position order.
        state: its whole KV cache, serialized (``llama_state_get_data``; a ctypes byte array), or
            None when it could not serve (see ``reason``).
        n_bytes: bytes of ``state`` in use.
        reason: why there is no state ("" when there is one).
        copy_s: seconds the copy took.
        logits: a copy of the logits llama.cpp computed in the chat context for position
            ``logits_position`` (n_vocab float32), or None when it holds none that are current (a
            reply running, a rewind since: :attr:`app.engine.llama_context.GlassboxLlama.logits_position`).
        logits_position: the position of ``logits``: the chat's last evaluated one (-1: none).
        logits_batch: tokens in the chat's ``llama_decode`` that computed them (1: the position was
            decoded alone, as a reply's tokens are; the inspection then evaluates it alone too).
    """

    tokens: tuple[int, ...]
    state: Any
    n_bytes: int
    reason: str
    copy_s: float = 0.0
    logits: F32 | None = None
    logits_position: int = -1
    logits_batch: int = 0


def _chat_logits(llm: Any) -> tuple[F32 | None, int, int]:
    """A copy of the chat context's logits of its last evaluated position, that position and the
    batch they were computed in (``(None, -1, 0)`` when the context holds none that are current, or
    ``llm`` does not track them)."""
    pos = llm.logits_position if isinstance(llm, GlassboxLlama) else -1
    if pos < 0 or pos != int(llm.n_tokens) - 1:
        return None, -1, 0
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    if not ptr:
        return None, -1, 0
    out: F32 = np.ctypeslib.as_array(ptr, shape=(int(llm.n_vocab()),)).copy()
    return out, pos, int(llm.logits_batch)


def take_chat_cache(llm: Any, info: GGUFInfo, *, busy: bool) -> ChatCache:
    """Copy the chat context's KV cache and its last logits (call only while nothing decodes in it, unless ``busy``).

    The whole-context state (``llama_state_get_data``) is copied rather than sequence 0's
    (``llama_state_seq_get_data``): the sequence writer leaves out the sliding-window cells the
    last position no longer sees (src/llama-kv-cache.cpp ``state_write``: ``is_masked_swa``), which
    the positions before it still need; the whole-context writer keeps every cell, in cell order.
    The logits of the last evaluated position are copied whatever the path (see :class:`ChatCache`).

    Args:
        llm: the chat's ``llama_cpp.Llama`` (a :class:`~app.engine.llama_context.GlassboxLlama`
            says which position its logits are for; another one gives no logits).
        info: its GGUF facts.
        busy: a reply is being generated: only the evaluated tokens are read, no cache or logits copy.
    """
    n = int(llm.n_tokens)
    tokens = tuple(int(t) for t in llm.input_ids[:n])
    if busy:
        return ChatCache(tokens, None, 0, "a reply is being generated in the chat context")
    logits, logits_pos, logits_batch = _chat_logits(llm)
    cache = _copy_state(llm, info, tokens)
    return replace(cache, logits=logits, logits_position=logits_pos, logits_batch=logits_batch)


def _copy_state(llm: Any, info: GGUFInfo, tokens: tuple[int, ...]) -> ChatCache:
    """The chat context's whole KV cache state, or why it cannot serve (see :func:`take_chat_cache`)."""
    n = len(tokens)
    params = llm.context_params
    if int(params.flash_attn_type) != llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED:  # on, or auto (llama.cpp decides)
        return ChatCache(
            tokens,
            None,
            0,
            "the chat context runs with flash attention on or auto (its V cache is laid out differently)",
        )
    if any(info.swa_layers()) and not bool(params.swa_full):
        return ChatCache(
            tokens,
            None,
            0,
            "the chat's sliding-window cache is not full size (swa_full off): it keeps only the last "
            f"{info.sliding_window} positions, in the order it reuses its cells",
        )
    if n == 0:
        return ChatCache(tokens, None, 0, "the chat's KV cache is empty")
    t0 = time.perf_counter()
    size = int(llama_cpp.llama_state_get_size(llm.ctx))
    if size <= 0 or size > kv_snapshot.MAX_SNAPSHOT_BYTES:
        return ChatCache(tokens, None, 0, f"the chat's KV cache state ({size:,} bytes) is over the copy cap")
    buf = (ctypes.c_uint8 * size)()
    got = int(llama_cpp.llama_state_get_data(llm.ctx, buf, size))
    if got <= 0:
        return ChatCache(tokens, None, 0, "llama.cpp could not copy the chat's KV cache")
    return ChatCache(tokens, buf, got, "", time.perf_counter() - t0)


class TokenInspector:
    """The inspect context of one loaded model, and its dequantized tables (both built on first use).

    Not thread-safe: one inspection at a time (the session's model lock).

    Args:
        llm: the chat's ``llama_cpp.Llama`` (its model is shared, read-only).
        info: the model's GGUF facts.
        vocab: a vocabulary this thread may use (token texts).
        n_threads: threads for the inspect context's evaluations.
    """

    def __init__(self, llm: Any, info: GGUFInfo, vocab: Vocab, n_threads: int) -> None:
        self._llm = llm
        self.info = info
        self._vocab = vocab
        self._n_threads = n_threads
        self._ctx: Any = None
        self._n_ctx = 0
        self._tables: ModelTables | None = None
        self._held: tuple[int, ...] = ()  # the tokens whose keys and values the inspect context holds, in order
        self.capture = TensorCapture(wanted_tensor)
        self._stop = threading.Event()
        self._abort = llama_cpp.ggml_abort_callback(self._should_abort)

    def _should_abort(self, _data: int | None) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Stop the inspection in progress (any thread; llama.cpp checks it during each graph
        computation) and refuse further ones: the model is about to be freed."""
        self._stop.set()

    # ---------------------------------------------------------------------------------- state
    @property
    def context_bytes(self) -> int:
        """The inspect context's KV cache and (estimated) compute buffer, bytes (0 before the first use)."""
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

    def close(self) -> None:
        """Free the inspect context (before the model is freed) and the tables."""
        self.close_context()
        self._tables = None

    def _context(self, n_needed: int) -> Any:
        """The inspect context, (re)created when it holds fewer than ``n_needed`` cells."""
        if self._ctx is not None and self._n_ctx >= n_needed:
            return self._ctx
        self.close_context()
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
        return ctx

    def close_context(self) -> None:
        """Free the inspect context only (the tables stay)."""
        self._held = ()
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
            self._n_ctx = 0

    def tables(self) -> ModelTables:
        """The dequantized tables (built on first use).

        Raises:
            EngineError: ``internal`` when the file's tensors cannot be read.
        """
        if self._tables is None:
            try:
                self._tables = load_tables(self.info, workers=self._n_threads)
            except (ValueError, OSError, NotImplementedError) as exc:
                raise EngineError(P.FailureKind.INTERNAL, f"The model's tables cannot be read: {exc}.") from None
        return self._tables

    def prepare(self, n_tokens: int) -> None:
        """Build the tables and an inspect context for a conversation of ``n_tokens`` now, so that
        the first inspection does not wait for them (:class:`~app.core.protocol.PrepareInspect`).

        Raises:
            EngineError: ``internal`` (the tables cannot be read, the context cannot be created).
        """
        self.tables()
        self._context(n_tokens + 1)

    # -------------------------------------------------------------------------------- inspect
    def inspect(self, req: P.InspectToken, chat: ChatCache) -> TokenInspection:
        """Inspect ``req.position`` of what ``chat`` holds.

        Raises:
            EngineError: ``not_in_context`` (the position is not in the chat's KV cache, or holds
                another token now); ``internal`` (llama.cpp refused an evaluation, the callback failed).
        """
        t0 = time.perf_counter()
        if self._stop.is_set():
            raise EngineError(P.FailureKind.CANCELLED, "The inspection was stopped: the model is being unloaded.")
        tokens = chat.tokens
        pos = req.position
        if not 0 <= pos < len(tokens) or tokens[pos] != req.token_id:
            raise EngineError(
                P.FailureKind.NOT_IN_CONTEXT,
                f"Position {pos} of the context does not hold that token any more "
                "(a new chat, a context shift or a regenerated reply changed it). Inspect a token of the current turn.",
            )
        tables_s = 0.0
        if self._tables is None:
            t_tab = time.perf_counter()
            self.tables()
            tables_s = time.perf_counter() - t_tab
        n_expert = int(self.info.arch_key("expert_count", 0) or 0)
        radius = max(0, req.radius)
        c0, c1 = max(0, pos - radius), min(len(tokens) - 1, pos + radius)
        p0 = c0  # the first position evaluated with the callback on
        if n_expert and req.turn_start >= 0:
            p0 = max(min(c0, req.turn_start), pos - MAX_EXPERT_SPAN, 0)
        ctx = self._context(len(tokens) + 1)
        # The chat's logits of its last position are compared with this evaluation's. When the chat
        # decoded that position alone (a reply's tokens), it is evaluated alone here too, on the chat's
        # own keys and values of every earlier position (see GlassboxLlama.logits_batch); dense models,
        # cache path only (the expert load needs the turn's positions evaluated as a batch).
        compare = chat.logits is not None and chat.logits_position == pos
        alone = compare and chat.logits_batch == 1 and pos == c1 and not n_expert and chat.state is not None
        path, reason, start = self._prepare(ctx, chat, pos if alone else p0, force_re_eval=req.force_re_eval)
        if alone and path is InspectPath.CACHE_REUSE:
            evaluated, llama_logits = self._evaluate_alone(ctx, tokens, c0, pos)
            load = np.zeros((self.info.n_layer, 1), dtype=np.float32)  # a dense model: no expert load
            att_c0 = pos
        else:
            evaluated, load = self._evaluate(ctx, tokens, start, p0, c0, c1, n_expert)
            llama_logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(ctx, pos - c0), shape=(self._vocab.n_tokens,)
            ).copy()
            att_c0 = c0
        cap = self.capture.tensors
        seen = tuple(sorted({_kind(n) for n in cap}))
        n_layer = self.info.n_layer
        missing = [f"l_out-{il}" for il in range(n_layer) if f"l_out-{il}" not in cap]
        if missing:
            raise EngineError(
                P.FailureKind.INTERNAL,
                f"The evaluation did not produce {missing[0]} (this architecture names it otherwise).",
            )
        row = pos - c0  # the inspected position's row in the span's tensors
        chat_logits = chat.logits if compare else None
        lens, hidden_cos, emb_cos = self._lens(tokens, pos, c0, c1, req.top_k, llama_logits, chat_logits)
        attention = self._attention(tokens, pos, att_c0)
        embedding = self._embedding(req.token_id, emb_cos, hidden_cos, req.neighbours)
        experts = self._experts(n_expert, row, load, c1 + 1 - p0) if n_expert else None
        extra = self.context_bytes + self.tables().n_bytes + chat.n_bytes
        extra += chat.logits.nbytes if chat.logits is not None else 0
        extra += sum(a.nbytes for a in cap.values())
        self.capture.tensors = {}  # the copied tensors are not kept between inspections
        return TokenInspection(
            position=pos,
            token_id=req.token_id,
            text=self._vocab.display(req.token_id),
            n_layer=n_layer,
            path=path,
            fallback_reason=reason,
            evaluated=evaluated,
            inspect_s=time.perf_counter() - t0,
            tables_s=tables_s,
            extra_memory_bytes=extra,
            lens=lens,
            attention=attention,
            embedding=embedding,
            experts=experts,
            tensors_seen=seen,
        )

    def _prepare(self, ctx: Any, chat: ChatCache, p0: int, *, force_re_eval: bool) -> tuple[InspectPath, str, int]:
        """Fill the inspect context's cache with what it can of positions ``[0, p0)``.

        Returns:
            ``(path, fallback reason, first position still to evaluate)``: ``p0`` on the cache
            path; on re-evaluation, what the inspect context still holds of this conversation from
            the previous inspection (0 when asked to re-evaluate).
        """
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
        keep = min(_common_prefix(held, chat.tokens), p0)
        if keep > 0 and llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
            return InspectPath.RE_EVAL, f"{reason}; {keep:,} positions kept from the previous inspection", keep
        llama_cpp.llama_memory_clear(mem, True)
        return InspectPath.RE_EVAL, reason, 0

    def _evaluate(
        self,
        ctx: Any,
        tokens: tuple[int, ...],
        start: int,
        p0: int,
        c0: int,
        c1: int,
        n_expert: int,
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
                self._decode(ctx, tokens, s0, e, all_logits=all_logits)
                if n_expert:
                    self._count_experts(counts)
                s0 = e

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
        self._decode(ctx, tokens, c0, c1 + 1, all_logits=True)
        if n_expert:
            self._count_experts(counts)
        self._held = tokens[: c1 + 1]
        return c1 + 1 - start, counts

    def _evaluate_alone(self, ctx: Any, tokens: tuple[int, ...], c0: int, pos: int) -> tuple[int, F32]:
        """The chat's last position as the chat decoded it: alone, on the chat's own keys and values of
        ``[0, pos)`` (the cache path with the span starting at ``pos``), copying every tensor the views
        read; then its neighbours ``[c0, pos)`` evaluated again (a batch over the chat's keys and values
        of ``[0, c0)``) for their lens columns only (``l_out-N``, ``result_norm``), joined row by row.

        Returns:
            ``(positions evaluated, llama.cpp's logits of pos (a copy))``.

        Raises:
            EngineError: as :meth:`_decode`.
        """
        cap = self.capture
        cap.reset()
        llama_cpp.llama_set_n_threads(ctx, 1, 1)
        self._decode(ctx, tokens, pos, pos + 1, all_logits=True)
        logits: F32 = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(ctx, 0), shape=(self._vocab.n_tokens,)
        ).copy()
        mine, cap.tensors = cap.tensors, {}
        self._held = tokens[:pos]
        if c0 < pos:
            if not llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, c0, -1):
                raise EngineError(P.FailureKind.INTERNAL, "llama.cpp could not remove the span from the copied cache.")
            self._held = tokens[:c0]
            wants = cap.wants
            cap.wants = _lens_rows
            try:
                self._decode(ctx, tokens, c0, pos, all_logits=True)
            finally:
                cap.wants = wants
            self._held = tokens[:pos]
        cap.tensors = _joined(cap.tensors, mine, pos - c0)
        return pos + 1 - c0, logits

    def _count_experts(self, counts: F32) -> None:
        """Add the last evaluation's router choices (``ffn_moe_topk-N``) to ``counts`` [n_layer, n_expert]."""
        for il in range(counts.shape[0]):
            topk = self.capture.tensors.get(f"ffn_moe_topk-{il}")
            if topk is not None:
                counts[il] += np.bincount(topk.reshape(-1), minlength=counts.shape[1])[: counts.shape[1]]

    def _decode(self, ctx: Any, tokens: tuple[int, ...], s0: int, s1: int, *, all_logits: bool) -> None:
        """Evaluate ``tokens[s0:s1]`` at positions ``s0...`` (logits for all of them, or the last).

        Raises:
            EngineError: ``cancelled`` (:meth:`request_stop`), ``internal`` (llama_decode failed or
                the eval callback raised).
        """
        n = s1 - s0
        batch = llama_cpp.llama_batch_init(n, 0, 1)
        try:
            batch.n_tokens = n
            for i in range(n):
                batch.token[i] = tokens[s0 + i]
                batch.pos[i] = s0 + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = all_logits or i == n - 1
            rc = int(llama_cpp.llama_decode(ctx, batch))
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

    # ---------------------------------------------------------------------------------- views
    def _lens(
        self,
        tokens: tuple[int, ...],
        pos: int,
        c0: int,
        c1: int,
        top_k: int,
        llama_logits: F32,
        chat_logits: F32 | None = None,
    ) -> tuple[LogitLens, F32, F32]:
        """The logit lens grid and, from the same pass over the tables, the cosines the embedding view needs.

        Args:
            llama_logits: the logits llama.cpp computed in the inspect context for ``pos`` (the self-check's reference).
            chat_logits: the chat context's own logits for ``pos`` when it still holds them (its last
                evaluated position), compared too; None: not compared.
        """
        t = self.tables()
        cap = self.capture.tensors
        n_layer = self.info.n_layer
        cols = list(range(c0, c1 + 1))
        rows = [c - c0 for c in cols]
        states = np.concatenate([cap[f"l_out-{il}"].reshape(-1, self.info.n_embd)[rows] for il in range(n_layer)])
        normed = t.norm(states)
        emb_row = t.embd[tokens[pos]].astype(np.float32)[None, :]
        hidden = (
            cap["result_norm"].reshape(-1, self.info.n_embd)[pos - c0][None, :] if "result_norm" in cap else normed[-1:]
        )
        if t.tied:  # one pass over the one table: lens logits and both cosines
            dots = chunked_matmul(t.embd, np.concatenate([t.act_quant.apply(normed), emb_row, hidden]), t.workers)
            logits = dots[: normed.shape[0]]
            if t.softcap:
                logits = np.tanh(logits / t.softcap) * t.softcap
            cos = dots[normed.shape[0] :] / np.maximum(
                t.embd_norms[None, :] * np.linalg.norm(np.concatenate([emb_row, hidden]), axis=1, keepdims=True), 1e-12
            )
        else:
            logits = t.logits(normed)
            cos = t.cosines(np.concatenate([emb_row, hidden]))
        k = max(1, min(top_k, logits.shape[1]))
        next_ids = [tokens[c + 1] if c + 1 < len(tokens) else -1 for c in cols]
        cells: list[tuple[LensCell, ...]] = []
        for il in range(n_layer):
            line = []
            for j, nxt in enumerate(next_ids):
                lg = logits[il * len(cols) + j]
                m = float(lg.max())
                lse = m + float(np.log(np.exp(lg - m, dtype=np.float32).sum(dtype=np.float64)))
                top = np.argpartition(lg, -k)[-k:]
                top = top[np.argsort(-lg[top])]
                cands = tuple((int(i), self._vocab.display(int(i)), float(np.exp(lg[i] - lse))) for i in top)
                rank = int((lg > lg[nxt]).sum()) + 1 if nxt >= 0 else 0
                line.append(LensCell(cands, rank, float(np.exp(lg[nxt] - lse)) if nxt >= 0 else 0.0))
            cells.append(tuple(line))
        last = logits[(n_layer - 1) * len(cols) + (pos - c0)]
        diff = float(np.abs(last - llama_logits).max())
        chat_diff: float | None = None
        ctx_diff: float | None = None
        if chat_logits is not None and chat_logits.shape == llama_logits.shape:
            chat_diff = float(np.abs(last - chat_logits).max())
            ctx_diff = float(np.abs(llama_logits - chat_logits).max())
        lens = LogitLens(
            positions=tuple(cols),
            tokens=tuple((tokens[c], self._vocab.display(tokens[c])) for c in cols),
            next_tokens=tuple((n, self._vocab.display(n) if n >= 0 else "") for n in next_ids),
            cells=tuple(cells),
            last_layer_max_abs_diff=diff,
            logit_range=float(llama_logits.max() - llama_logits.min()),
            chat_max_abs_diff=chat_diff,
            contexts_max_abs_diff=ctx_diff,
            softcap=t.softcap,
            tied=t.tied,
        )
        return lens, cos[1], cos[0]

    def _attention(self, tokens: tuple[int, ...], pos: int, c0: int) -> AttentionMaps:
        """The inspected row of every layer's ``kq_soft_max-N``: KV cell i is position i (see :meth:`_prepare`).

        ``row_sum_max_error`` is the largest ``|sum over positions [0, pos] - 1|``: a row whose cells
        were not in position order would leave weight on cells after ``pos`` and show here.
        """
        cap = self.capture.tensors
        info = self.info
        n_layer, n_head = info.n_layer, info.n_head
        sliding = info.swa_layers()
        n = pos + 1
        out = np.zeros((n_layer, n_head, n), dtype=np.float32)
        worst = 0.0
        row = pos - c0
        for il in range(n_layer):
            kq = cap.get(f"kq_soft_max-{il}")
            if kq is None:
                raise EngineError(P.FailureKind.INTERNAL, f"The evaluation did not produce kq_soft_max-{il}.")
            w = kq.reshape(-1, kq.shape[-3], kq.shape[-2], kq.shape[-1])[0, :, row, :]  # [n_head, n_kv]
            cells = w[:, :n]
            out[il, : cells.shape[0], : cells.shape[1]] = cells
            worst = max(worst, float(np.abs(out[il].sum(axis=1, dtype=np.float64) - 1.0).max()))
        ratio = max(1, n_head // max(1, info.n_head_kv_layer(0)))
        return AttentionMaps(
            key_positions=(0, n),
            n_layer=n_layer,
            n_head=n_head,
            weights=_as_array(out),
            head_kv=tuple(h // ratio for h in range(n_head)),
            sliding=tuple(sliding),
            window=info.sliding_window if any(sliding) else 0,
            row_sum_max_error=worst,
            key_texts=tuple(self._vocab.display(t) for t in tokens[:n]),
        )

    def _embedding(self, token: int, emb_cos: F32, hidden_cos: F32, n: int) -> EmbeddingView:
        t = self.tables()
        vec = t.embd[token].astype(np.float32)
        emb = emb_cos.copy()
        emb[token] = -np.inf
        return EmbeddingView(
            vector=_as_array(vec),
            norm=float(t.embd_norms[token]),
            scale=t.embd_scale,
            neighbours=self._top(emb, n),
            hidden_neighbours=self._top(hidden_cos, n),
            table_bytes=t.n_bytes,
        )

    def _top(self, scores: F32, n: int) -> tuple[tuple[int, str, float], ...]:
        k = max(1, min(n, scores.shape[0]))
        idx = np.argpartition(scores, -k)[-k:]
        idx = idx[np.argsort(-scores[idx])]
        return tuple((int(i), self._vocab.display(int(i)), float(scores[i])) for i in idx)

    def _experts(self, n_expert: int, row: int, counts: F32, n_tokens: int) -> ExpertsView:
        """The router's choice for the inspected row (batch index ``row`` of the span), and the load
        ``counts`` over ``n_tokens`` positions as shares."""
        cap = self.capture.tensors
        n_used = int(self.info.arch_key("expert_used_count", 0) or 0)
        chosen: list[ExpertChoice] = []
        layers: list[int] = []
        for il in range(self.info.n_layer):
            topk = cap.get(f"ffn_moe_topk-{il}")
            if topk is None:
                continue
            ids = topk.reshape(-1, topk.shape[-1])
            weights = next((cap[f"{w}-{il}"] for w in _WEIGHT_NAMES if f"{w}-{il}" in cap), None)
            wrow = weights.reshape(ids.shape[0], -1)[row] if weights is not None else np.zeros(ids.shape[1])
            order = np.argsort(-wrow, kind="stable")
            chosen.append(ExpertChoice(tuple(int(ids[row][i]) for i in order), tuple(float(wrow[i]) for i in order)))
            layers.append(il)
        load = counts[layers] / max(1, n_tokens)
        return ExpertsView(
            n_expert=n_expert,
            n_expert_used=n_used,
            chosen=tuple(chosen),
            load=_as_array(load),
            load_tokens=n_tokens,
        )


def _joined(first: dict[str, npt.NDArray[Any]], last: dict[str, npt.NDArray[Any]], n_first: int) -> dict[str, Any]:
    """Two evaluations' copies as one: ``first``'s ``n_first`` token rows then ``last``'s one row, for
    every tensor whose outermost dimension is the token (``l_out``, ``result_norm``, the router's);
    the attention probabilities (``kq_soft_max-N``: heads outermost) are ``last``'s."""
    out = dict(last)
    for name, b in last.items():
        a = first.get(name)
        if a is not None and not name.startswith("kq_soft_max"):
            out[name] = np.concatenate([a.reshape(n_first, -1), b.reshape(1, -1)])
    return out


def _lens_rows(name: str) -> bool:
    """Only what the lens's columns read: each layer's residual stream and the final norm."""
    return name.startswith("l_out-") or name == "result_norm"


def _router_choice(name: str) -> bool:
    """Only the router's choices: what the turn's positions before the span contribute (the expert load)."""
    return name.startswith("ffn_moe_topk-")


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _as_array(a: npt.NDArray[Any]) -> array[float]:
    out = array("f")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float32).tobytes())
    return out


def _kind(name: str) -> str:
    """``l_out-12`` → ``l_out-N`` (for the log of which tensors were copied)."""
    head, _, tail = name.rpartition("-")
    return f"{head}-N" if head and tail.isdigit() else name


def _type_name(t: int) -> str:
    """A ggml type's name (``F16``, ``Q8_0``) for :func:`app.core.hardware.memory.kv_cache_layout`."""
    return gguf.GGMLQuantizationType(int(t)).name
