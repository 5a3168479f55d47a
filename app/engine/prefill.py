"""Prefill: keep the cached prefix in the KV cache, evaluate the rest in fixed slices, Stop-able.

Slices end at absolute positions that are multiples of ``n_batch``, the same
on every machine, and the last token is evaluated on its own. Both matter
for reproducible replies: llama.cpp's results depend slightly on how a
prompt is cut into batches (Gemma 3 270M picks a different greedy token
after 3 tokens when the prompt is cut at 128 instead of 512), and its
single-token path gives logits that differ from the batched path (by up to
0.9). So a prompt is always cut the same way, whatever the speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.engine.errors import CancelFlag

# Progress inside a slice is reported at most this often, nanoseconds (~10 times a second).
PROGRESS_EVERY_NS = 100_000_000


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def rewind_to_prefix(llm: Any, tokens: list[int]) -> int:
    """Keep the longest prefix of ``tokens`` the KV cache already holds; drop the rest.

    At least the last token is left to evaluate (sampling needs its logits). When
    the cache cannot remove a partial range (an SWA cache without swa_full), it is
    cleared.

    Returns:
        Tokens kept (the cached prefix length); ``llm.n_tokens`` is set to it.
    """
    cached_now = llm.input_ids[: llm.n_tokens].tolist()
    keep = common_prefix_len(cached_now, tokens)
    if keep >= len(tokens):
        keep = len(tokens) - 1  # re-evaluate the last token: sampling needs its logits
    keep = max(keep, 0)
    mem = llama_cpp.llama_get_memory(llm.ctx)
    if keep < llm.n_tokens and not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
        # Partial removal unsupported (e.g. SWA cache without swa_full): start over.
        llama_cpp.llama_memory_clear(mem, True)
        keep = 0
    llm.n_tokens = keep
    return keep


@dataclass
class _SliceProgress:
    """What the abort callback knows about the slice being evaluated."""

    nodes: int  # graph nodes computed so far in this slice
    per_ubatch: int  # graph nodes of one full ubatch
    base: int  # tokens evaluated before this slice
    size: int  # tokens in this slice
    last_ns: int  # when progress was last reported (perf_counter_ns)


class Prefiller:
    """Evaluates prompt tokens for one loaded model (see the module docstring for the slicing).

    Args:
        llm: the ``llama_cpp.Llama``.
        n_batch: prompt tokens per ``llama_decode`` call (slice boundaries).
        n_ubatch: physical batch, tokens (how many graphs one slice runs).
        cancel: the Stop flag.
        emit: sends an event to the UI.
        nodes_per_ubatch: graph nodes of one full ubatch, from the reserve graph llama.cpp
            logged at load (0: unknown; then no progress inside a slice); refined by the
            first full slice.
    """

    def __init__(
        self,
        llm: Any,
        n_batch: int,
        n_ubatch: int,
        cancel: CancelFlag,
        emit: Callable[[object], None],
        nodes_per_ubatch: int,
    ) -> None:
        self._llm = llm
        self.n_batch = n_batch
        self.n_ubatch = n_ubatch
        self._cancel = cancel
        self._emit = emit
        self.nodes_per_ubatch = nodes_per_ubatch

    def run(self, request_id: int, tokens: list[int], t0: int, rebuild: bool = False) -> int:
        """Evaluate ``tokens`` (appended after the cached prefix), Stop-able at any moment.

        Stop works inside a slice too: while prefill runs, llama.cpp's abort
        callback (checked between graph nodes, ``llama_set_abort_callback``) reads
        the cancel flag; llama.cpp then drops the unfinished batch from the KV
        cache. The same callback reports progress within a slice about 10 times a
        second. It is removed for decode, where the flag is checked between tokens.

        Args:
            request_id: the Generate request (for PrefillProgress events).
            tokens: token ids to evaluate.
            t0: when the request arrived (perf_counter_ns); event times count from it.
            rebuild: a mid-reply context rebuild (reported as such on PrefillProgress).

        Returns:
            How many were evaluated (less than ``len(tokens)`` when cancelled).

        Raises:
            RuntimeError: llama_decode failed without Stop being pressed.
        """
        llm = self._llm
        n_batch = self.n_batch
        n_ubatch = self.n_ubatch
        total = len(tokens)
        start = llm.n_tokens
        done = 0
        state = _SliceProgress(
            nodes=0, per_ubatch=self.nodes_per_ubatch, base=0, size=0, last_ns=time.perf_counter_ns()
        )
        cancel = self._cancel
        emit = self._emit

        def on_node(_data: object) -> bool:
            if cancel.is_set():
                return True
            state.nodes += 1
            per = state.per_ubatch
            now = time.perf_counter_ns()
            if per and now - state.last_ns >= PROGRESS_EVERY_NS:
                state.last_ns = now
                n_ub = -(-state.size // n_ubatch)
                frac = min(0.99, state.nodes / (per * n_ub))
                done_now = state.base + int(frac * state.size)
                emit(P.PrefillProgress(request_id, done_now, total, (now - t0) / 1e9, rebuild))
            return False

        callback = llama_cpp.ggml_abort_callback(on_node)
        llama_cpp.llama_set_abort_callback(llm.ctx, callback, None)
        try:
            while done < total:
                if cancel.is_set():
                    return done
                pos = start + done
                if done == total - 1:
                    size = 1
                else:
                    size = min((pos // n_batch + 1) * n_batch - pos, total - 1 - done)
                state.nodes, state.base, state.size = 0, done, size
                try:
                    llm.eval(tokens[done : done + size])
                except RuntimeError:
                    if not cancel.is_set():
                        raise
                    # Aborted: llama.cpp removed the unfinished ubatch; drop any finished
                    # ubatches of this slice too, so the cache holds exactly llm.n_tokens tokens.
                    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), 0, llm.n_tokens, -1)
                    return done
                if size >= n_ubatch and state.nodes:
                    state.per_ubatch = self.nodes_per_ubatch = state.nodes // (-(-size // n_ubatch))
                done += size
                emit(
                    P.PrefillProgress(
                        request_id, done, total, (time.perf_counter_ns() - t0) / 1e9, rebuild, slice_tokens=size
                    )
                )
            return done
        finally:
            llama_cpp.llama_set_abort_callback(llm.ctx, llama_cpp.ggml_abort_callback(), None)
