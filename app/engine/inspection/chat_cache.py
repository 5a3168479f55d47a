"""Copy what the chat context holds for an inspection: its tokens, its whole KV cache state and its last logits.

The inspect context starts from this copy (the cache-reuse path,
:class:`~app.core.inspection.token_inspection.InspectPath`) when the chat's cache can serve, and
re-evaluates otherwise; :attr:`ChatCache.reason` says why it cannot.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, replace
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core.gguf.gguf_info import GGUFInfo
from app.engine import kv_snapshot
from app.engine.llama_context import GlassboxLlama

F32 = npt.NDArray[np.float32]


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
