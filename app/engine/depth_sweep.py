"""Speed against context length: prefill and decode tok/s at each depth, llama-bench's ``-d`` in the chat context.

llama-bench's method (tools/llama-bench/llama-bench.cpp, ``test_prompt`` / ``test_gen`` and its
main loop), followed here on the loaded model and its load settings:

- a warm-up first: one prefill of ``n_prompt`` tokens and one decoded token, then the cache cleared;
- the KV cache filled to the depth with random token ids (``rand() % n_vocab``, BOS first when the
  vocabulary adds one) in ``n_batch`` slices: not timed;
- prefill ("pp"): ``n_prompt`` random tokens in ``n_batch`` slices, then ``llama_synchronize``;
  tok/s = n_prompt / seconds;
- decode ("tg"): ``n_gen`` tokens, one ``llama_decode`` each followed by ``llama_synchronize``;
  tok/s = n_gen / seconds;
- ``repetitions`` of each at every depth, the cache put back to the depth between them; the figure
  is the mean of the repetitions' tok/s with its standard deviation (llama-bench's avg_ts, stdev_ts).

Two differences, neither in what is timed: llama-bench refills each depth from an empty cache (or a
saved copy of it), here the depths are ascending and each is filled from the one before (the timed
tokens are removed with ``llama_memory_seq_rm`` after each run; a cache that cannot remove a partial
range, an SWA cache without swa_full, is put back from a copy of its state, as llama-bench does);
and the context is the loaded one (its n_ctx) where llama-bench makes one of
``n_prompt + n_gen + depth`` tokens per test. The calls are llama.cpp's own (``llama_decode`` of a
``llama_batch_get_one``), without llama-cpp-python's ``Llama.eval`` bookkeeping.

Stop (the chat's cancel flag) is read between runs and tokens, and through llama.cpp's abort
callback between graph nodes while filling and during prefill (not during the timed decode, where a
Python call per graph node would slow the figure it measures). The sweep then ends with the depths
measured so far (``DepthSwept.cancelled``).

The chat's KV cache: the person's tokens are copied out before (:mod:`app.engine.kv_snapshot`) and put
back after, so their next turn reuses its prefix as if no sweep had run. A cache over the copy's cap
(:data:`app.engine.kv_snapshot.MAX_SNAPSHOT_BYTES`) or one llama.cpp refuses to take back is left
empty instead (``DepthSwept.kv_reset``): the next turn evaluates the conversation again, which is
slower but always right.
"""

from __future__ import annotations

import ctypes
import random
import time
from collections.abc import Callable
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.core.depth_sweep.plan import DepthPoint, check_plan, mean_std
from app.engine import kv_snapshot
from app.engine.errors import CancelFlag, EngineError
from app.engine.loader import LoadedModel
from app.engine.matmul_roof import matmul_flop_s
from app.engine.turn import clear_chat

LLAMA_DECODE_ABORTED = 2  # llama_decode's return when the abort callback said stop (include/llama.h)


class _Stopped(Exception):
    """Stop was pressed: the sweep ends with what it measured."""


class _Context:
    """The chat context's raw calls for the sweep: evaluate token ids, cut the cache back to a depth."""

    def __init__(self, llm: Any, n_batch: int, cancel: CancelFlag, seed: int, n_vocab: int, bos: int | None) -> None:
        self.ctx = llm.ctx
        self.mem = llama_cpp.llama_get_memory(llm.ctx)
        self.n_batch = max(1, n_batch)
        self.cancel = cancel
        self.rng = random.Random(seed)
        self.n_vocab = n_vocab
        self.bos = bos
        self.n = 0  # tokens in the cache
        self._depth = 0  # the marked depth (:meth:`mark`)
        self._saved: tuple[int, Any, int] | None = None  # (depth, state, bytes) when seq_rm cannot cut
        self._abort = llama_cpp.ggml_abort_callback(lambda _data: bool(cancel.is_set()))

    def tokens(self, count: int) -> list[int]:
        """``count`` random ids, BOS first at position 0 when the vocabulary adds it (as llama-bench)."""
        ids = [self.rng.randrange(self.n_vocab) for _ in range(count)]
        if ids and self.n == 0 and self.bos is not None:
            ids[0] = self.bos
        return ids

    def abortable(self, on: bool) -> None:
        """Let Stop abort a llama_decode between graph nodes (on) or not (off: decode timing)."""
        cb = self._abort if on else llama_cpp.ggml_abort_callback()
        llama_cpp.llama_set_abort_callback(self.ctx, cb, None)

    def decode(self, ids: list[int]) -> None:
        """Evaluate ``ids`` after the cache's tokens, in ``n_batch`` slices (Raises: _Stopped; EngineError)."""
        done = 0
        while done < len(ids):
            if self.cancel.is_set():
                raise _Stopped
            part = ids[done : done + self.n_batch]
            arr = (llama_cpp.llama_token * len(part))(*part)
            rc = int(llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(arr, len(part))))
            if rc == LLAMA_DECODE_ABORTED or (rc != 0 and self.cancel.is_set()):
                raise _Stopped
            if rc != 0:
                raise EngineError(
                    P.FailureKind.INTERNAL,
                    f"llama_decode returned {rc} at {self.n + done:,} tokens in the KV cache during the depth sweep.",
                )
            done += len(part)
            self.n += len(part)
        llama_cpp.llama_synchronize(self.ctx)

    def mark(self, depth: int) -> None:
        """The cache is filled to ``depth``: later :meth:`back_to_mark` calls return here."""
        self._saved = None
        self._depth = depth

    def back_to_mark(self) -> None:
        """Remove the tokens after the marked depth (``llama_memory_seq_rm``; or put the saved state back)."""
        depth = self._depth
        if self.n == depth:
            return
        if self._saved is None and llama_cpp.llama_memory_seq_rm(self.mem, 0, depth, -1):
            self.n = depth
            return
        # A cache that cannot remove a partial range (SWA without swa_full): copy the depth's state
        # once (refilled from empty) and set it back each time, as llama-bench does for every depth.
        if self._saved is None:
            self.clear()
            self.decode(self.tokens(depth))
            size = int(llama_cpp.llama_state_seq_get_size(self.ctx, 0))
            buf = (ctypes.c_uint8 * max(size, 1))()
            got = int(llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, 0))
            self._saved = (depth, buf, got)
            return
        _, buf, got = self._saved
        llama_cpp.llama_memory_clear(self.mem, True)
        if depth and int(llama_cpp.llama_state_seq_set_data(self.ctx, buf, got, 0)) <= 0:
            raise EngineError(P.FailureKind.INTERNAL, "llama.cpp refused to restore the KV cache at the sweep's depth.")
        self.n = depth

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.mem, True)
        self.n = 0


def best_rates(a: tuple[tuple[str, float], ...], b: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    """Per weight type, the faster of two timings of its rate (FLOP/s); a type timed once keeps that one."""
    best = dict(a)
    for name, rate in b:
        best[name] = max(rate, best.get(name, 0.0))
    return tuple(best.items())


def _time_prefill(c: _Context, n_prompt: int) -> float:
    """Seconds to evaluate ``n_prompt`` random tokens after the cache's (llama-bench's test_prompt)."""
    ids = c.tokens(n_prompt)
    t0 = time.perf_counter_ns()
    c.decode(ids)
    return (time.perf_counter_ns() - t0) / 1e9


def _time_decode(c: _Context, n_gen: int) -> float:
    """Seconds to decode ``n_gen`` tokens one at a time (llama-bench's test_gen); Stop read between them."""
    ids = c.tokens(n_gen)
    t0 = time.perf_counter_ns()
    for tok in ids:
        c.decode([tok])
    return (time.perf_counter_ns() - t0) / 1e9


def sweep_depth(m: LoadedModel, req: P.SweepDepth, emit: Callable[[object], None], cancel: CancelFlag) -> P.DepthSwept:
    """Run ``req`` in ``m``'s chat context (the caller holds the session's chat lock); see the module docstring.

    Emits one :class:`~app.core.protocol.DepthMeasured` per depth.

    Returns:
        The terminal :class:`~app.core.protocol.DepthSwept` (also after Stop).

    Raises:
        EngineError: ``bad_settings`` for a plan that does not fit n_ctx (nothing runs then);
            ``internal`` when llama_decode fails.
    """
    t0 = time.perf_counter_ns()
    depths = tuple(int(d) for d in req.depths)
    why = check_plan(depths, req.n_prompt, req.n_gen, req.repetitions, m.n_ctx)
    if why:
        raise EngineError(P.FailureKind.BAD_SETTINGS, f"The depth sweep cannot run: {why}")
    llm = m.llm
    n_batch = int(llama_cpp.llama_n_batch(llm.ctx))
    n_ubatch = int(llama_cpp.llama_n_ubatch(llm.ctx))
    threads = int(llama_cpp.llama_n_threads(llm.ctx)), int(llama_cpp.llama_n_threads_batch(llm.ctx))

    person_turn = m.prompt.cached_turn
    snap = None if m.cache_from_api else kv_snapshot.take(llm, m.layout.used_bytes(llm.n_tokens))
    had_tokens, from_api = int(llm.n_tokens) > 0, m.cache_from_api
    m.prompt.cached_turn = None  # the cache changes from here
    c = _Context(llm, n_batch, cancel, req.seed, m.vocab.n_tokens, m.vocab.bos if m.vocab.add_bos else None)
    points: list[DepthPoint] = []
    cancelled = False
    restored = 0
    reset = False
    # The prefill's compute roof: llama.cpp's matrix multiply on this model's weight types, with the
    # prefill's threads and tokens per graph (min(n_ubatch, n_prompt) columns); not timed with the depths.
    # Layers offloaded (a GPU, RPC servers): the CPU's rate bounds nothing, so none is measured.
    on_cpu = req.n_prompt > 0 and not m.settings.n_gpu_layers
    roof = matmul_flop_s(m.info.tensors, min(n_ubatch, req.n_prompt), threads[1]) if on_cpu else ()
    try:
        c.clear()
        c.abortable(True)
        c.mark(0)
        # Warm-up (llama-bench's): a prefill and one decoded token, not timed.
        if req.n_prompt:
            _time_prefill(c, req.n_prompt)
        if req.n_gen:
            _time_decode(c, 1)
        c.back_to_mark()
        for i, depth in enumerate(depths):
            c.abortable(True)
            t_fill = time.perf_counter_ns()
            c.decode(c.tokens(depth - c.n))
            fill_s = (time.perf_counter_ns() - t_fill) / 1e9
            c.mark(depth)
            pp: list[float] = []
            tg: list[float] = []
            for _ in range(req.repetitions):
                if req.n_prompt:
                    # Timed without the abort callback, as decode is: llama.cpp calls it between graph
                    # nodes, a Python call each, which cost 10 % of prefill tok/s at depth 1k-2k against
                    # llama-bench (bench/context_sweep.py); Stop is read before and after the run.
                    c.abortable(False)
                    pp.append(req.n_prompt / max(_time_prefill(c, req.n_prompt), 1e-9))
                    c.back_to_mark()
                if req.n_gen:
                    c.abortable(False)
                    tg.append(req.n_gen / max(_time_decode(c, req.n_gen), 1e-9))
                    c.back_to_mark()
            point = DepthPoint(depth, *mean_std(pp), *mean_std(tg), fill_s=fill_s)
            points.append(point)
            emit(P.DepthMeasured(req.request_id, i, len(depths), point, (time.perf_counter_ns() - t0) / 1e9, roof))
    except _Stopped:
        cancelled = True
    finally:
        c.abortable(False)
        clear_chat(m)  # empty; llm.n_tokens 0
        if snap is not None and kv_snapshot.restore(llm, snap):
            m.prompt.cached_turn = person_turn
            restored = len(snap.tokens)
        else:
            reset = had_tokens and not from_api  # an API request's tokens were not the person's
    if on_cpu and roof and not cancelled:
        # Timed again after the depths, the faster of the two kept per type: a load spike while the
        # first was timed made it a sixth of the quiet rate and the "bound" 4.6x under the measured
        # prefill (review of issue 21); a rate can be slowed by other work, never sped up.
        roof = best_rates(roof, matmul_flop_s(m.info.tensors, min(n_ubatch, req.n_prompt), threads[1]))
    return P.DepthSwept(
        req.request_id,
        tuple(points),
        cancelled,
        (time.perf_counter_ns() - t0) / 1e9,
        n_threads=threads[0],
        n_threads_batch=threads[1],
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        kv_restored_tokens=restored,
        kv_reset=reset,
        matmul_flop_s=roof,
    )
