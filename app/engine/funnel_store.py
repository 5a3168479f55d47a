"""One reply's logits, kept per decode step so the funnel can re-run on any token without generating.

Bounded: for every step, the top ``TOP_M`` logits (ids, float32) and the log-sum-exp over
the whole vocabulary (so each kept token's true probability is exact); for the latest
``FULL_STEPS`` steps, the whole vocabulary's logits as well. Per generated token that is
``TOP_M x 8 + 8 + 4`` = 524 bytes (64 ids and logits, the log-sum-exp, the token), plus
the latest steps' ``FULL_STEPS x n_vocab x 4`` bytes (3.1 MB for SmolLM2's 49k
vocabulary, 16.8 MB for Gemma 3's 262k).

How exact the funnel is on the top-M: the model column is exact (true probabilities);
the stages see only the M most likely tokens, so a stage that renormalises (top_p, typical_p,
the draw) renormalises over them: the mass outside the top 64 (usually well under 1 % after a
sentence has started, more on a flat distribution) is missing, and a stage keeping more than
64 tokens is shown keeping 64. The newest steps run on the full vocabulary and are exact; an older
step asked for by the funnel is evaluated again in the inspect context (``Session._recomputed_live``),
exact too, and these top-M serve only when that fails.

Cost on the decode thread: one copy of the logits into a ring slot per step (19-23 us for
262k logits), and every ``REDUCE_EVERY`` steps a wake-up of the worker thread. The reduction
to the top-M, the log-sum-exp and the entropy (:func:`reduce_step`) runs on that thread, in
numpy calls that release the GIL for large arrays, so it overlaps the next steps' llama_decode
when a core is free (bench/funnel_cost.py measures what it costs when none is). The same
store gives every token's alternatives (:mod:`app.engine.alternative`).
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.core.sampling.params import SamplerSettings

TOP_M = 64  # logits kept per step
FULL_STEPS = 16  # latest steps whose full-vocabulary logits are kept (ring slots)
REDUCE_EVERY = 4  # the reducing thread is woken every this many steps (fewer wake-ups and GIL hand-overs)
WORKER_NICE = 10  # the reducing thread's nice value
MAX_STEPS = 32768  # steps kept per reply (max_tokens' upper bound)
BYTES_PER_STEP = TOP_M * 8 + 8 + 4
LSE_SPAN = 25.0  # nats below the best: the second net for the top-M (reduce_step)
TOP_SPAN = 10.0  # nats below the best: the first net for the top-M (reduce_step)


def reduce_logits(
    logits: npt.NDArray[np.float32], buf: npt.NDArray[np.float32]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], float]:
    """The top ``TOP_M`` of ``logits`` (ids and logits, best first) and the log-sum-exp over all of them
    (see :func:`reduce_step`). ``buf`` is scratch of the same shape."""
    ids, top, lse, _h = reduce_step(logits, buf)
    return ids, top, lse


def reduce_step(
    logits: npt.NDArray[np.float32],
    buf: npt.NDArray[np.float32],
    ebuf: npt.NDArray[np.float32] | None = None,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], float, float]:
    """The top ``TOP_M`` of ``logits`` (ids and logits, best first), the log-sum-exp over all of
    them, and the entropy of their softmax, bits.

    In place, over the whole vocabulary, float32: the logits less the best one (``buf``), their
    exponentials (``ebuf``), a pairwise sum (relative error ~1e-7 x log2(n_vocab): the
    log-sum-exp is off by under 4e-6), and one dot product for the entropy
    (``H = ln(total) - sum(z x shifted) / total`` nats). Then the top-M from the tokens within
    ``TOP_SPAN`` of the best (within ``LSE_SPAN`` when fewer, the whole vocabulary when even
    those are fewer). Gemma 3 keeps ~120k of its 262k logits within 25 nats of the best, so a
    filter before the sums saves nothing there: this is twice as fast as filtering first
    (345 us against 645 us per step on Gemma 3, 91 against 158 on SmolLM2, one busy core).
    ``buf`` and ``ebuf`` are scratch of the same shape (``ebuf`` allocated when None).
    """
    if ebuf is None:
        ebuf = np.empty_like(buf)
    m = float(logits.max())
    np.subtract(logits, np.float32(m), out=buf)
    np.exp(buf, out=ebuf)
    total = float(ebuf.sum())
    lse = m + math.log(total)
    entropy_bits = max(0.0, (math.log(total) - float(np.dot(ebuf, buf)) / total) / math.log(2))
    n = logits.shape[0]
    for span in (TOP_SPAN, LSE_SPAN):
        near = np.flatnonzero(buf > -span)
        if near.shape[0] >= TOP_M:
            top = near[np.argpartition(buf[near], -TOP_M)[-TOP_M:]]
            break
    else:
        top = np.argpartition(buf, -TOP_M)[-TOP_M:] if n > TOP_M else np.arange(n)
    top = top[np.argsort(-logits[top], kind="stable")]
    return top.astype(np.int32), logits[top].astype(np.float32), lse, entropy_bits


@dataclass(frozen=True)
class StepLogits:
    """What the store holds for one step.

    Attributes:
        ids, logits: candidates (the whole vocabulary when ``exact``, else the top-M, best first).
        logsumexp: log-sum-exp over the whole vocabulary.
        exact: whether ``ids`` is the whole vocabulary.
        drawn: the token the reply drew.
        history: the tokens before the step (prompt, then the reply so far).
        entropy_bits: the raw model's entropy over the whole vocabulary, bits (NaN: not reduced yet).
    """

    ids: npt.NDArray[np.int32]
    logits: npt.NDArray[np.float32]
    logsumexp: float
    exact: bool
    drawn: int
    history: tuple[int, ...]
    entropy_bits: float = math.nan


class ReplyLogits:
    """The per-step logits of one reply (see the module docstring).

    The decode thread calls :meth:`record` once per step and :meth:`close` at the end;
    any thread may call :meth:`step` (the funnel's thread does).

    Args:
        reply_id: the Generate request id.
        settings: the reply's sampler settings; seed: the seed it used.
        prompt: the prompt's tokens (the history before the first step).
        n_vocab: the vocabulary's size.
        gbnf: the reply's output constraint as GBNF (the funnel's grammar column); None: none.
        reply_start: where the reply's tokens start in a step's history (the prompt's length, less a
            branch's prefix, which the grammar was fed too); -1: the prompt's length.
    """

    def __init__(
        self,
        reply_id: int,
        settings: SamplerSettings,
        seed: int,
        prompt: Sequence[int],
        n_vocab: int,
        gbnf: str | None = None,
        reply_start: int = -1,
    ) -> None:
        self.gbnf = gbnf
        self.reply_start = len(prompt) if reply_start < 0 else reply_start
        self.reply_id = reply_id
        self.settings = settings
        self.seed = seed
        self.prompt = tuple(prompt)
        self.n_vocab = n_vocab
        self.tokens: list[int] = []
        self._ids: list[npt.NDArray[np.int32]] = []
        self._logits: list[npt.NDArray[np.float32]] = []
        self._lse: list[float] = []
        self._entropy: list[float] = []  # bits, per step
        self._ring = np.empty((FULL_STEPS, n_vocab), dtype=np.float32)
        self._ring_step = [-1] * FULL_STEPS
        self._lock = threading.Lock()
        self._reduced = threading.Condition(self._lock)
        self._jobs: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._reduce_loop, name="glassbox-logits", daemon=True)
        self._worker.start()

    # --------------------------------------------------------------------- decode thread
    def record(self, logits: npt.NDArray[np.float32], token: int) -> None:
        """Keep this step's logits (copied: the view is valid only until the next eval) and drawn token."""
        step = len(self.tokens)
        if step >= MAX_STEPS:
            return
        slot = step % FULL_STEPS
        with self._lock:
            # The slot's previous step must be reduced before it is overwritten (the worker is
            # normally a step behind at most; this waits only when it falls FULL_STEPS behind).
            while len(self._lse) < step - FULL_STEPS + 1:
                self._reduced.wait()
            np.copyto(self._ring[slot], logits)
            self._ring_step[slot] = step
            self.tokens.append(token)
        if step % REDUCE_EVERY == REDUCE_EVERY - 1:
            self._jobs.put(step)

    def close(self) -> None:
        """Finish reducing the recorded steps and end the worker thread (blocks until it has)."""
        if self.tokens:
            self._jobs.put(len(self.tokens) - 1)
        self._jobs.put(None)
        self._worker.join()

    # ------------------------------------------------------------------------- worker
    def _reduce_loop(self) -> None:
        # Below the decode thread's priority (Linux: a thread is a task with its own nice value), so
        # on a busy machine the reduction takes idle CPU; the ring absorbs the delay.
        if hasattr(os, "setpriority"):
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICE)
        buf = np.empty(self.n_vocab, dtype=np.float32)
        ebuf = np.empty(self.n_vocab, dtype=np.float32)
        done = 0  # steps reduced
        while True:
            last = self._jobs.get()
            if last is None:
                return
            while done <= last:
                self._reduce_one(done, buf, ebuf)
                done += 1

    def _reduce_one(self, step: int, buf: npt.NDArray[np.float32], ebuf: npt.NDArray[np.float32]) -> None:
        """Reduce ``step`` (in its ring slot) and append it to the reduced steps."""
        row = self._ring[step % FULL_STEPS]
        ids, logits, lse, entropy = reduce_step(row, buf, ebuf)
        drawn = self.tokens[step]
        if self.gbnf is not None and drawn not in ids:
            # Under a grammar the drawn token can rank below the raw model's top-M: kept too (last, as its
            # logit is below all of theirs), so the funnel's grammar column shows it surviving.
            ids = np.append(ids, np.int32(drawn))
            logits = np.append(logits, row[drawn])
        with self._lock:
            self._ids.append(ids)
            self._logits.append(logits)
            self._lse.append(lse)
            self._entropy.append(entropy)
            self._reduced.notify_all()

    # ---------------------------------------------------------------------- any thread
    @property
    def n_steps(self) -> int:
        """Steps recorded so far."""
        return len(self.tokens)

    def step(self, step: int) -> StepLogits | None:
        """The stored logits of ``step`` (-1: the newest), full when still in the ring; None when not stored."""
        with self._lock:
            n = len(self.tokens)
            if step < 0:
                step = n - 1
            if not 0 <= step < n:
                return None
            history = self.prompt + tuple(self.tokens[:step])
            drawn = self.tokens[step]
            slot = step % FULL_STEPS
            if self._ring_step[slot] == step:
                full = self._ring[slot].copy()
            else:
                full = None
            reduced = step < len(self._lse)
            lse = self._lse[step] if reduced else None
            top = (self._ids[step], self._logits[step]) if reduced else None
            entropy = self._entropy[step] if reduced else math.nan
        if full is not None:
            m = float(full.max())
            lse = m + math.log(float(np.exp(full.astype(np.float64) - m).sum())) if lse is None else lse
            return StepLogits(np.arange(self.n_vocab, dtype=np.int32), full, lse, True, drawn, history)
        if top is None or lse is None:
            return None
        return StepLogits(top[0], top[1], lse, False, drawn, history, entropy)

    def reduced(self) -> tuple[list[npt.NDArray[np.int32]], list[npt.NDArray[np.float32]], list[float], list[float]]:
        """Every reduced step's top-M ids and logits, log-sum-exp and entropy (bits), in step order
        (after :meth:`close`, every recorded step)."""
        with self._lock:
            return list(self._ids), list(self._logits), list(self._lse), list(self._entropy)
