"""`ParallelRunner`: the local API's requests decoded together in a second llama.cpp context (issue 23 §4).

What llama-server's slot loop does (``tools/server/server.cpp``, ``update_slots``; and
``examples/parallel/parallel.cpp``), called the same way here:

- a second context on the loaded model (``llama_init_from_model``, the chat context's parameters:
  threads, n_batch, flash attention, K / V types) with ``n_seq_max = N`` and ``n_ctx = N x`` the loaded
  n_ctx, ``kv_unified`` off: llama.cpp gives each sequence its own n_ctx cells (``n_ctx_seq``). The
  person's chat context and its KV cache are never touched. Its memory (KV cache and compute buffers,
  as llama.cpp logs allocating them) is reported with every :class:`~app.core.protocol.SequencesProgressed`;
- each step one ``llama_batch``: one token (the one sampled last) per decoding sequence, then prompt
  tokens of sequences still in prefill, up to n_batch (continuous batching: a request that arrives while
  others decode joins at the next step, its prefill in the same batches as their decode steps); each
  token carries its sequence id, and logits are asked for only where a sequence samples next;
- after ``llama_decode``, each sequence samples from its own entry (``llama_sampler_sample(chain, ctx,
  i)``, which reads ``llama_get_logits_ith``) with its own sampler chain;
- a sequence that ends is free for the next request, its cells kept: the next request given it keeps the
  longest common prefix of the two (``llama_memory_seq_rm(mem, seq, n_keep, -1)``), as llama-server's slots
  keep their prompt cache, and the free sequence whose cells share the most with the new prompt is chosen.

The person's own reply goes first: each step runs inside :meth:`PersonFirst.api_step`, so while a turn,
a depth sweep or a prompt render runs in the chat context, no API sequence advances (their state says
``paused``), and the person's figures are those of a reply alone on the machine.

Threads: the runner has its own thread; :meth:`ParallelRunner.submit` and :meth:`ParallelRunner.cancel`
are called from the pipe reader, :meth:`ParallelRunner.close` from the main loop before the model is freed.
"""

from __future__ import annotations

import collections
import logging
import queue
import re
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.protocol.parallel import MAX_SEQUENCES, PROGRESS_EVERY_S
from app.engine.batch import fill_batch
from app.engine.errors import EngineError, ParentGone
from app.engine.inspector import Inspector
from app.engine.llama_log import LlamaLog
from app.engine.loader import LoadedModel
from app.engine.parallel.gate import PersonFirst
from app.engine.parallel.sequence import Sequence, prompt_tokens

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_KV_RE = re.compile(r"KV buffer size =\s*([0-9.]+) MiB")
_COMPUTE_RE = re.compile(r"compute buffer size =\s*([0-9.]+) MiB")
PAUSE_POLL_S = 0.1  # how often a paused loop looks at its inbox (cancels, new requests), seconds


def _common(a: list[int], b: list[int]) -> int:
    """The length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _last_of(end: int, last: bool) -> Callable[[int], bool]:
    """The logits rule of a prompt slice: only at position ``end``, and only when it is the prompt's last token."""
    return lambda pos: last and pos == end


class _Wake:
    """Put in the inbox to make the loop look at its cancels at once."""


class ParallelRunner:
    """The parallel context of one loaded model and the loop that decodes its sequences.

    Args:
        m: the loaded model (its chat context's parameters; its model is shared, read only).
        emit: sends an event to the window (raises the engine's ParentGone when the pipe is closed).
        gate: the person's work first (:class:`PersonFirst`).
        llama_log: the process's llama.cpp log (the context's buffer sizes are read from it).
    """

    def __init__(self, m: LoadedModel, emit: Any, gate: PersonFirst, llama_log: LlamaLog) -> None:
        self._m = m
        self._emit = emit
        self._gate = gate
        self._llama_log = llama_log
        self._inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._cancels: set[int] = set()
        self._cancel_lock = threading.Lock()
        self._stop = threading.Event()
        self._abort = llama_cpp.ggml_abort_callback(lambda _data: self._stop.is_set())
        self._ctx: Any = None
        self._batch: Any = None
        self._n_batch = 0
        self.n_seq = 0
        self.n_ctx_seq = 0
        self.kv_bytes = 0
        self.compute_bytes = 0
        self._inspector = Inspector(m.llm, m.vocab)
        self._waiting: collections.deque[P.GenerateParallel] = collections.deque()
        self._active: dict[int, Sequence] = {}  # seq id -> sequence
        self._held: dict[int, list[int]] = {}  # seq id -> the tokens its cells hold (free sequences too)
        self._last_progress = 0.0
        self._step_tokens = 0
        self._t_stepped = 0  # the last step's end, time.perf_counter_ns
        self._thread = threading.Thread(target=self._run, name="glassbox-parallel", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ other threads
    @property
    def alive(self) -> bool:
        """The loop runs (False after a bug ended it: the session makes a new runner)."""
        return self._thread.is_alive()

    def submit(self, req: P.GenerateParallel) -> None:
        """Queue ``req`` (the pipe reader's thread).

        Raises:
            EngineError: ``bad_settings`` when ``req.n_seq`` is outside 2 to MAX_SEQUENCES.
        """
        if not 2 <= req.n_seq <= MAX_SEQUENCES:
            raise EngineError(
                P.FailureKind.BAD_SETTINGS,
                f"Parallel sequences must be 2 to {MAX_SEQUENCES}; {req.n_seq} was asked.",
            )
        self._inbox.put(req)

    def cancel(self, request_id: int) -> None:
        """Stop the request ``request_id`` (any thread): it ends at its next step."""
        with self._cancel_lock:
            self._cancels.add(request_id)
        self._inbox.put(_Wake())

    def close(self) -> None:
        """End the loop (every request in it ends with Failed ``engine``) and free the context; the
        model may be freed after this returns."""
        self._stop.set()
        self._inbox.put(None)
        self._thread.join()
        self._free()

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._take_inbox(block=not self._active and not self._waiting)
                if self._stop.is_set():
                    break
                self._drop_cancelled_waiting()
                self._end_cancelled()
                with self._gate.api_step(PAUSE_POLL_S) as ok:
                    self._mark_paused(not ok)
                    if ok:
                        self._admit()
                        if self._active:
                            self._step()
                self._progress(paused=not ok, force=not self._active)
        except ParentGone:
            return
        except Exception as exc:  # a bug: every request ends, the loop too (the next request makes a new runner)
            log.error("the parallel loop crashed:\n%s", traceback.format_exc())
            self._fail_all(P.FailureKind.INTERNAL, f"The engine's parallel loop hit an internal error ({exc}).")
            return
        self._fail_all(P.FailureKind.ENGINE, "The model was unloaded in Glassbox; send the request again.")

    def _mark_paused(self, paused: bool) -> None:
        """The active sequences' pauses for the person's reply, left out of their decode time: a pause
        runs from the end of the last step (when it was seen, up to PAUSE_POLL_S later) to the next step."""
        now = time.perf_counter_ns()
        for seq in self._active.values():
            if paused:
                seq.pause(self._t_stepped or now)
            else:
                seq.resume(now)

    def _send(self, event: object) -> None:
        self._emit(event)

    def _take_inbox(self, *, block: bool) -> None:
        """Move what arrived into the waiting line (blocking for the first when ``block``)."""
        try:
            item = self._inbox.get(block=block)
            while True:
                if item is None:
                    return
                if isinstance(item, P.GenerateParallel):
                    self._waiting.append(item)
                item = self._inbox.get_nowait()
        except queue.Empty:
            return

    def _cancelled(self, request_id: int) -> bool:
        with self._cancel_lock:
            return request_id in self._cancels

    def _forget_cancel(self, request_id: int) -> None:
        with self._cancel_lock:
            self._cancels.discard(request_id)

    def _drop_cancelled_waiting(self) -> None:
        for req in [r for r in self._waiting if self._cancelled(r.request_id)]:
            self._waiting.remove(req)
            self._forget_cancel(req.request_id)
            self._send(
                P.Failed(req.request_id, P.FailureKind.CANCELLED, "The request was cancelled before it started.")
            )

    def _end_cancelled(self) -> None:
        """End the active sequences whose request was cancelled (also while paused: only the parallel
        context's cells are touched)."""
        for seq in [s for s in self._active.values() if self._cancelled(s.request_id)]:
            seq.reason = StopReason.CANCELLED
            self._end(seq)

    def _admit(self) -> None:
        """Give waiting requests a free sequence (remaking the context first when none is in flight
        and the first waiting asks for another number of sequences)."""
        while self._waiting:
            req = self._waiting[0]
            if req.n_seq != self.n_seq:
                if self._active:
                    return  # the context is remade once the sequences in flight have ended
                try:
                    self._open(req.n_seq)
                except EngineError as exc:
                    self._waiting.popleft()
                    self._send(P.Failed(req.request_id, exc.kind, exc.message))
                    continue
            free = [s for s in range(self.n_seq) if s not in self._active]
            if not free:
                return
            self._waiting.popleft()
            try:
                self._start(req, free)
            except EngineError as exc:
                self._send(P.Failed(req.request_id, exc.kind, exc.message))

    def _start(self, req: P.GenerateParallel, free: list[int]) -> None:
        """Start ``req`` in the free sequence whose cells share the longest prefix with its prompt."""
        m, gen = self._m, req.generate
        tokens, text = prompt_tokens(m, gen)
        if len(tokens) >= self.n_ctx_seq:
            raise EngineError(
                P.FailureKind.CONTEXT_OVERFLOW,
                f"The prompt is {len(tokens)} tokens but each parallel sequence holds {self.n_ctx_seq} (n_ctx).",
            )
        seq_id, cached = max(((s, _common(self._held.get(s, []), tokens)) for s in free), key=lambda sc: sc[1])
        cached = min(cached, len(tokens) - 1)  # the prompt's last token is evaluated again: its logits start the reply
        mem = llama_cpp.llama_get_memory(self._ctx)
        if not llama_cpp.llama_memory_seq_rm(mem, seq_id, cached, -1):  # a part cannot go (e.g. sliding window)
            llama_cpp.llama_memory_seq_rm(mem, seq_id, -1, -1)
            cached = 0
        self._held.pop(seq_id, None)
        stops = tuple(gen.stop_strings) + m.prompt.stop_strings
        seq = Sequence(
            req.request_id,
            gen,
            seq_id,
            tokens,
            m,
            self._inspector,
            self._send,
            self.n_ctx_seq,
            stops,
            cached,
            self._llama_log,
        )
        self._active[seq_id] = seq
        self._send(
            P.PromptPrepared(
                request_id=req.request_id,
                elapsed_s=0.0,
                prompt_tokens=len(tokens),
                cached_tokens=cached,
                to_evaluate=len(tokens) - cached,
                dropped_messages=0,
                new_tokens=(),
                prompt_text=text,
            )
        )

    def _step(self) -> None:
        """One ``llama_decode`` of every active sequence's next tokens, then each samples (module docstring)."""
        batch, n = self._batch, 0
        at: dict[int, int] = {}  # seq id -> batch index of its logits
        for seq in self._active.values():
            if self._cancelled(seq.request_id):
                seq.reason = StopReason.CANCELLED
            elif seq.pending is not None:
                fill_batch(batch, [seq.pending], seq.n_past, logits=lambda _p: True, seq=seq.seq_id, start=n)
                at[seq.seq_id] = n
                n += 1
        fed: dict[int, int] = {}
        for seq in self._active.values():
            if seq.reason is None and seq.prefilling and n < self._n_batch:
                take = min(self._n_batch - n, len(seq.tokens) - seq.prefilled)
                last = seq.prefilled + take == len(seq.tokens)
                part = seq.tokens[seq.prefilled : seq.prefilled + take]
                fill_batch(
                    batch, part, seq.prefilled, logits=_last_of(seq.prefilled + take - 1, last), seq=seq.seq_id, start=n
                )
                if last:
                    at[seq.seq_id] = n + take - 1
                fed[seq.seq_id] = take
                n += take
        batch.n_tokens = n
        self._step_tokens = n
        if n:
            rc = int(llama_cpp.llama_decode(self._ctx, batch))
            if rc != 0 and self._stop.is_set():
                return  # aborted for close(): the loop ends every request with the unload's message
            if rc != 0:
                self._fail_all(P.FailureKind.INTERNAL, f"llama_decode failed in the parallel context (code {rc}).")
                return
        for seq in self._active.values():
            if seq.seq_id in fed:
                seq.prefilled += fed[seq.seq_id]
                seq.n_past += fed[seq.seq_id]
            elif seq.seq_id in at:
                seq.n_past += 1
        for seq_id, i in at.items():
            seq = self._active[seq_id]
            seq.sample(self._ctx, i, self._cancelled(seq.request_id))
        self._t_stepped = time.perf_counter_ns()
        for seq in [s for s in self._active.values() if s.reason is not None]:
            self._end(seq)

    def _end(self, seq: Sequence) -> None:
        """``seq`` is over: its sequence is free (its cells kept for the next request's common prefix)."""
        del self._active[seq.seq_id]
        self._held[seq.seq_id] = seq.held()
        self._forget_cancel(seq.request_id)
        self._send(seq.finished())

    def _fail_all(self, kind: P.FailureKind, message: str) -> None:
        """End every request in the runner with Failed ``kind`` (their cells freed)."""
        ended = [s.request_id for s in self._active.values()] + [r.request_id for r in self._waiting]
        for seq in self._active.values():
            if seq.chain is not None:
                llama_cpp.llama_sampler_free(seq.chain)
                seq.chain = None
        if self._ctx is not None:
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)
        self._held.clear()
        self._active.clear()
        self._waiting.clear()
        for rid in ended:
            self._forget_cancel(rid)
            try:
                self._send(P.Failed(rid, kind, message))
            except ParentGone:
                return

    def _progress(self, *, paused: bool, force: bool) -> None:
        """Send :class:`SequencesProgressed` when due (at most every PROGRESS_EVERY_S; ``force``: the last
        sequence just ended, once)."""
        now = time.monotonic()
        if force:
            if self._last_progress == 0.0:
                return  # nothing in flight since the last notice
        elif now - self._last_progress < PROGRESS_EVERY_S:
            return
        figures = tuple(s.figures(paused) for s in sorted(self._active.values(), key=lambda s: s.seq_id))
        waiting = tuple(
            P.SequenceFigures(r.request_id, -1, P.SequenceState.WAITING, 0, 0, 0, 0.0) for r in self._waiting
        )
        self._send(
            P.SequencesProgressed(
                figures + waiting,
                self.n_seq,
                self.n_ctx_seq,
                self.kv_bytes,
                self.compute_bytes,
                self._step_tokens,
                paused,
            )
        )
        self._last_progress = 0.0 if force else now

    # ------------------------------------------------------------------ the context
    def _open(self, n_seq: int) -> None:
        """(Re)make the parallel context with ``n_seq`` sequences of the loaded n_ctx each.

        Raises:
            EngineError: ``internal`` when llama.cpp cannot make it (memory).
        """
        self._free()
        m = self._m
        chat = m.llm.context_params
        params = llama_cpp.llama_context_params.from_buffer_copy(chat)
        params.n_ctx = n_seq * m.n_ctx
        params.n_seq_max = n_seq
        params.kv_unified = False  # each sequence its own n_ctx cells (llama.cpp: n_ctx_seq = n_ctx / n_seq_max)
        params.embeddings = False
        params.no_perf = True
        params.abort_callback = self._abort
        params.abort_callback_data = None  # type: ignore[assignment]
        kv: list[float] = []
        compute: list[float] = []

        def listen(_level: str, line: str) -> None:
            if found := _KV_RE.search(line):
                kv.append(float(found.group(1)))
            if found := _COMPUTE_RE.search(line):
                compute.append(float(found.group(1)))

        with self._llama_log.listening(listen):
            ctx = llama_cpp.llama_init_from_model(m.llm.model, params)
        if not ctx:
            raise EngineError(
                P.FailureKind.INTERNAL,
                f"llama.cpp could not make the parallel context ({n_seq} sequences of {m.n_ctx} tokens; memory?). "
                "Lower the parallel sequences in the Server panel.",
            )
        self._ctx = ctx
        self.n_seq = n_seq
        self.n_ctx_seq = int(llama_cpp.llama_n_ctx_seq(ctx))
        self._n_batch = int(llama_cpp.llama_n_batch(ctx))
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self.kv_bytes = round(sum(kv) * MIB)
        self.compute_bytes = round(sum(compute) * MIB)
        log.info(
            "parallel context: %d sequences x n_ctx %d, n_batch %d, KV %.1f MiB, compute %.1f MiB",
            n_seq,
            self.n_ctx_seq,
            self._n_batch,
            sum(kv),
            sum(compute),
        )

    def _free(self) -> None:
        self._held.clear()
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        self.n_seq = 0
