"""One inspection of a context position: the span, the path, the evaluation, then the views.

The span is the inspected position and ``radius`` neighbours each side (the lens grid's
columns); for a mixture-of-experts model it starts at the turn's first position (at most
:data:`~app.core.inspection.token_inspection.MAX_EXPERT_SPAN` back), for the expert load over the
turn. The chat's cache is copied by :mod:`app.engine.inspection.chat_cache`, evaluated in the
inspect context by :mod:`app.engine.inspection.evaluation`, and read by the pure views of
:mod:`app.engine.inspection.views`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFInfo
from app.core.inspection.token_inspection import MAX_EXPERT_SPAN, InspectPath, TokenInspection
from app.engine.errors import EngineError
from app.engine.inspection.chat_cache import ChatCache
from app.engine.inspection.eval_callback import TensorCapture
from app.engine.inspection.evaluation import InspectContext
from app.engine.inspection.model_tables import ModelTables, load_tables
from app.engine.inspection.views import attention_maps, embedding_view, experts_view, logit_lens
from app.engine.vocab import Vocab


class TokenInspector:
    """The inspect context of one loaded model, and its dequantized tables (both built on first use).

    Not thread-safe: one inspection at a time (the session's inspect lock).

    Args:
        llm: the chat's ``llama_cpp.Llama`` (its model is shared, read-only).
        info: the model's GGUF facts.
        vocab: a vocabulary this thread may use (token texts).
        n_threads: threads for the inspect context's evaluations.
    """

    def __init__(self, llm: Any, info: GGUFInfo, vocab: Vocab, n_threads: int) -> None:
        self.info = info
        self._vocab = vocab
        self._n_threads = n_threads
        self._tables: ModelTables | None = None
        self._context = InspectContext(llm, info, vocab.n_tokens, n_threads)

    @property
    def capture(self) -> TensorCapture:
        """The eval callback's capture (what the last evaluation copied, until the inspection ends)."""
        return self._context.capture

    def request_stop(self) -> None:
        """Stop the inspection in progress (any thread; llama.cpp checks it during each graph
        computation) and refuse further ones: the model is about to be freed."""
        self._context.request_stop()

    def close(self) -> None:
        """Free the inspect context (before the model is freed) and the tables."""
        self._context.close()
        self._tables = None

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
        self._context.open(n_tokens + 1)

    def reply_logits(self, tokens: tuple[int, ...], n_reply: int) -> npt.NDArray[np.float32]:
        """The logits [n_vocab] after ``tokens`` (a stored reply's prompt, then its first ``n_reply`` tokens),
        from position 0 in the inspect context (:meth:`InspectContext.last_logits`).

        Raises:
            EngineError: ``cancelled`` (:meth:`request_stop`); ``internal`` (llama.cpp refused the evaluation).
        """
        if self._context.stopped:
            raise EngineError(P.FailureKind.CANCELLED, "The evaluation was stopped: the model is being unloaded.")
        return self._context.last_logits(tokens, n_reply)

    def inspect(self, req: P.InspectToken, chat: ChatCache) -> TokenInspection:
        """Inspect ``req.position`` of what ``chat`` holds.

        Raises:
            EngineError: ``not_in_context`` (the position is not in the chat's KV cache, or holds
                another token now); ``cancelled`` (:meth:`request_stop`); ``internal`` (llama.cpp
                refused an evaluation, the callback failed).
        """
        t0 = time.perf_counter()
        if self._context.stopped:
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
        info = self.info
        n_expert = int(info.arch_key("expert_count", 0) or 0)
        radius = max(0, req.radius)
        c0, c1 = max(0, pos - radius), min(len(tokens) - 1, pos + radius)
        p0 = c0  # the first position evaluated with the callback on
        if n_expert and req.turn_start >= 0:
            p0 = max(min(c0, req.turn_start), pos - MAX_EXPERT_SPAN, 0)
        ctx = self._context
        ctx.open(len(tokens) + 1)
        # The chat's logits of its last position are compared with this evaluation's. When the chat
        # decoded that position alone (a reply's tokens), it is evaluated alone here too, on the chat's
        # own keys and values of every earlier position (see GlassboxLlama.logits_batch); dense models,
        # cache path only (the expert load needs the turn's positions evaluated as a batch).
        compare = chat.logits is not None and chat.logits_position == pos
        alone = compare and chat.logits_batch == 1 and pos == c1 and not n_expert and chat.state is not None
        path, reason, start = ctx.fill(chat, pos if alone else p0, force_re_eval=req.force_re_eval)
        if alone and path is InspectPath.CACHE_REUSE:
            evaluated, llama_logits = ctx.evaluate_alone(tokens, c0, pos)
            load = np.zeros((info.n_layer, 1), dtype=np.float32)  # a dense model: no expert load
            att_c0 = pos
        else:
            evaluated, load = ctx.evaluate(tokens, start, p0, c0, c1, n_expert)
            llama_logits = ctx.logits(pos - c0)
            att_c0 = c0
        cap = self.capture.tensors
        seen = tuple(sorted({_kind(n) for n in cap}))
        n_layer = info.n_layer
        missing = [f"l_out-{il}" for il in range(n_layer) if f"l_out-{il}" not in cap]
        if missing:
            raise EngineError(
                P.FailureKind.INTERNAL,
                f"The evaluation did not produce {missing[0]} (this architecture names it otherwise).",
            )
        display = self._vocab.display
        tables = self.tables()
        lens, hidden_cos, emb_cos = logit_lens(
            cap,
            tables,
            tokens=tokens,
            pos=pos,
            c0=c0,
            c1=c1,
            n_layer=n_layer,
            n_embd=info.n_embd,
            top_k=req.top_k,
            llama_logits=llama_logits,
            chat_logits=chat.logits if compare else None,
            display=display,
        )
        attention = attention_maps(
            cap,
            tokens=tokens,
            pos=pos,
            c0=att_c0,
            n_layer=n_layer,
            n_head=info.n_head,
            n_head_kv=info.n_head_kv_layer(0),
            sliding=info.swa_layers(),
            sliding_window=info.sliding_window,
            display=display,
        )
        embedding = embedding_view(tables, req.token_id, emb_cos, hidden_cos, req.neighbours, display)
        experts = None
        if n_expert:
            experts = experts_view(
                cap,
                n_layer=n_layer,
                n_expert=n_expert,
                n_expert_used=int(info.arch_key("expert_used_count", 0) or 0),
                row=pos - c0,  # the inspected position's row in the span's tensors
                counts=load,
                n_tokens=c1 + 1 - p0,
            )
        extra = ctx.context_bytes + tables.n_bytes + chat.n_bytes
        extra += chat.logits.nbytes if chat.logits is not None else 0
        extra += sum(a.nbytes for a in cap.values())
        self.capture.tensors = {}  # the copied tensors are not kept between inspections
        return TokenInspection(
            position=pos,
            token_id=req.token_id,
            text=display(req.token_id),
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


def _kind(name: str) -> str:
    """``l_out-12`` → ``l_out-N`` (for the log of which tensors were copied)."""
    head, _, tail = name.rpartition("-")
    return f"{head}-N" if head and tail.isdigit() else name
