"""Keep the person's KV cache across a local API request: copy sequence 0 out, put it back after.

An API request (``Generate.external``) shares the one llama.cpp context with the person's chat.
Without this, it would leave its own tokens in the KV cache and the person's next turn would
evaluate their whole conversation again from the common prefix (80 prompt tokens instead of
14 for a second SmolLM2 turn; a long chat costs seconds to minutes of prefill). With it, the
engine copies the cache's sequence out before the request (``llama_state_seq_get_data``) and
back after it (``llama_state_seq_set_data``): a memory copy of the used KV bytes each way.

The copy lives in the engine's memory for the length of the request, so a cache larger than
:data:`MAX_SNAPSHOT_BYTES` is not copied (the person's next turn then re-evaluates, as without
this). If llama.cpp refuses the restore, the cache is cleared: the next turn evaluates from
the start, which is slower but always right.
"""

from __future__ import annotations

import ctypes
import logging
import time
from dataclasses import dataclass
from typing import Any

import llama_cpp

log = logging.getLogger(__name__)

MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024  # a copy of the person's used KV cache, at most, bytes


@dataclass(frozen=True)
class KVSnapshot:
    """Sequence 0 of a llama.cpp context, copied out.

    Attributes:
        data: llama.cpp's serialized sequence state.
        n_bytes: bytes of it in use.
        tokens: the tokens the cache held (``llm.input_ids[:n_tokens]``).
        copy_s: seconds the copy took.
    """

    data: Any
    n_bytes: int
    tokens: tuple[int, ...]
    copy_s: float


def take(llm: Any, used_bytes: int) -> KVSnapshot | None:
    """Copy the KV cache's sequence 0 out, or None when it is empty or larger than the cap.

    Args:
        llm: the ``llama_cpp.Llama``.
        used_bytes: the KV bytes the cache's tokens take (app.core.hardware.memory), for the cap.
    """
    n = int(llm.n_tokens)
    if n == 0 or used_bytes > MAX_SNAPSHOT_BYTES:
        return None
    t0 = time.perf_counter()
    size = int(llama_cpp.llama_state_seq_get_size(llm.ctx, 0))
    if size <= 0:
        return None
    buf = (ctypes.c_uint8 * size)()
    got = int(llama_cpp.llama_state_seq_get_data(llm.ctx, buf, size, 0))
    if got <= 0:
        return None
    tokens = tuple(int(t) for t in llm.input_ids[:n])
    return KVSnapshot(buf, got, tokens, time.perf_counter() - t0)


def restore(llm: Any, snap: KVSnapshot) -> bool:
    """Put ``snap`` back as the KV cache's sequence 0 (what the cache held is dropped).

    Returns:
        True when restored; False when llama.cpp refused it (the cache is then empty).
    """
    t0 = time.perf_counter()
    mem = llama_cpp.llama_get_memory(llm.ctx)
    llama_cpp.llama_memory_clear(mem, True)
    llm.n_tokens = 0
    if int(llama_cpp.llama_state_seq_set_data(llm.ctx, snap.data, snap.n_bytes, 0)) <= 0:
        llama_cpp.llama_memory_clear(mem, True)
        log.warning("the person's KV cache could not be restored after an API request; it was cleared")
        return False
    n = len(snap.tokens)
    llm.input_ids[:n] = snap.tokens
    llm.n_tokens = n
    log.debug(
        "kept the person's KV cache across an API request: %d tokens, %.1f MB, copy out %.1f ms, back %.1f ms",
        n,
        snap.n_bytes / 1e6,
        snap.copy_s * 1000,
        (time.perf_counter() - t0) * 1000,
    )
    return True
