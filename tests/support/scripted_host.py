"""A scripted engine host: the third host beside the engine process and the remote server.

:class:`ScriptedHost` has :class:`app.engine.host.EngineHost`'s interface (``start``, ``alive``,
``process``, ``send``, ``recv_raw``, ``cancel``, ``clear_cancel``, ``stop``, ``kill``), so the real
:class:`app.ui.engine.client.EngineClient` drives it as it drives its engine process: its request
table, the API queue, model switches (a fresh host per load), Stop and crash detection all run.
Plain Python, no Qt: a worker thread plays the engine's main loop (loads, replies, counts, context
resets in the order they were sent, one event every :attr:`ScriptBook.tick_s`, and, when
:attr:`ScriptBook.paced`, no faster than the client handles them), and ComputeFunnel,
RenderPrompt and InspectToken are answered at once, as the engine answers a funnel or an
inspection while a reply streams.

What it does not pretend: it runs no model. Token texts come from the :class:`ScriptBook`'s scripts,
or, when none is queued, from :func:`echo_reply`. Prompt "tokens" are whitespace-separated words of
the messages, so prompt_tokens / cached_tokens follow the conversation the window sent (a KV cache
of words, emptied by a load or ResetContext, kept across an external request). Engine times are
:attr:`ScriptBook.ttft_s` and :attr:`ScriptBook.token_s` (seconds), not measured.

Scripts (what the next Generate does):
    :class:`Reply` pieces, then Finished (``stop_reason`` EOS, or MAX_TOKENS when
    the sampler's max_tokens cuts it, or CONTEXT_FULL with ``context_full=True``);
    :class:`Endless` tokens until Stop (then Finished with CANCELLED);
    :class:`CrashMidReply` some pieces, then the engine dies (the host's reader gets EngineDied);
    :class:`Refuse` Failed before any token (e.g. ``context_overflow``).
Loads: :meth:`ScriptBook.fail_next_load`, :meth:`ScriptBook.crash_next_load`.
Depth sweeps (SweepDepth): one DepthMeasured per depth with made-up figures that fall with depth
(:func:`tests.support.scripted_answers.sweep_point`), one per tick, Stop read between depths.

Speculation: a model loaded with ``LoadSettings.speculation`` on reports it (and a draft model's
:class:`DraftInfo`) in ModelLoaded, and each reply not asked ``speculate=False`` gets made-up
:class:`SpeculationStats` (:func:`tests.support.scripted_answers.speculation`) in its Finished, its
decode time one ``token_s`` per round instead of per token. A refused draft:
``fail_next_load(reason, P.FailureKind.INCOMPATIBLE)``.

Alternatives (``Generate.alternatives``): token ``100 + i`` at step i, its candidates
``100 + i + k`` with logits ``10 - k`` (k = 0: the token drawn, its piece; ``alt<k>`` the
others), entropy ``0.1 x i`` bits (or the reply's ``entropy_bits``). A ``reply_prefix`` starts the
reply with those tokens' texts (every token id the fake ever named keeps its text).
"""

from __future__ import annotations

import collections
import itertools
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.core import protocol as P
from app.core.chat.context import ChatMessage, FlashAttention, GenerationStats, LoadSettings, StopReason
from app.core.gguf.gguf_info import read_gguf_info
from app.core.hardware.memory import kv_cache_layout, n_ubatch_for
from app.core.remote import RemoteEndpoint
from app.core.sampling.alternatives import ReplyAlternatives
from app.core.sampling.params import SamplerSettings
from app.engine.host import EngineDied
from app.remote.host import RemoteHost
from tests.support import scripted_answers as answers
from tests.support.inspection import synthetic_inspection

FAKE_LLAMA_CPP_VERSION = "0.0.0-fake"
TICK_S = 0.002  # one event of the main loop per tick: streaming is visible to the window, and fast


# ------------------------------------------------------------------------------------------ scripts
@dataclass(frozen=True)
class Reply:
    """A reply made of ``pieces`` (one token each). ``context_full``: it ends because n_ctx is full.
    ``entropy_bits``: its steps' entropies in its alternatives (bits; a step beyond them: 0.1 x i)."""

    pieces: tuple[str, ...]
    context_full: bool = False
    entropy_bits: tuple[float, ...] = ()


@dataclass(frozen=True)
class Endless:
    """A reply that never ends until Stop: ``piece`` again and again."""

    piece: str = "and on "


@dataclass(frozen=True)
class CrashMidReply:
    """``pieces`` stream, then the engine dies with ``description`` (as EngineDied would say)."""

    pieces: tuple[str, ...]
    description: str = "The engine process was killed (SIGKILL)."


@dataclass(frozen=True)
class Refuse:
    """The request fails before any token: Failed(kind, message)."""

    kind: P.FailureKind
    message: str


Script = Reply | Endless | CrashMidReply | Refuse


def reply(*pieces: str, context_full: bool = False, entropy_bits: tuple[float, ...] = ()) -> Reply:
    return Reply(tuple(pieces), context_full, entropy_bits)


def echo_reply(messages: tuple[ChatMessage, ...]) -> Reply:
    """The default reply: the words of the last user message, said back."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    return Reply(("You ", "said: ", *(w + " " for w in last.split())))


def prompt_words(messages: tuple[ChatMessage, ...]) -> list[str]:
    """The fake tokenizer: ``<role>`` then the words of each message."""
    out: list[str] = []
    for m in messages:
        out.append(f"<{m.role}>")
        out.extend(m.content.split())
    return out


# ------------------------------------------------------------------------------------------ the book
class ScriptBook:
    """What the scripted engine does next and how fast; shared by every host it makes.

    Attributes:
        ttft_s: engine time from a request to its first token, seconds.
        token_s: engine time per decoded token, seconds (1 / tok/s).
        seed_when_random: the seed reported when the sampler asks for a random one.
        vocab: every token id the fake named, with its text.
        tick_s: wall time between two events of the main loop, seconds (:data:`TICK_S`; a benchmark
            sets its token rate with it).

    Thread-safety: the test sets it up from the UI thread; the hosts' worker threads read it.
    """

    def __init__(self) -> None:
        self.ttft_s = 0.05
        self.token_s = 0.02
        self.seed_when_random = 1234
        self.vocab: dict[int, str] = {}
        self.tick_s = TICK_S
        self._scripts: collections.deque[Script] = collections.deque()
        # ("fail", message, kind) / ("crash", description, "")
        self._load_faults: collections.deque[tuple[str, str, str]] = collections.deque()
        self._paused = False
        self._loads_held = False
        self._cv = threading.Condition()
        self.paced = False  # the main loop waits for the client to handle its events (:meth:`handled`)
        self._watched: set[int] = set()  # ids of events sent and not handled yet

    def host(self, remote: RemoteEndpoint | None) -> ScriptedHost | RemoteHost:
        """The :data:`~app.ui.engine.host_link.HostFactory`: a scripted host, or the real remote one for a server."""
        return RemoteHost(remote) if remote is not None else ScriptedHost(self)

    def script(self, *scripts: Script) -> None:
        """Queue what the next Generates do, in order."""
        self._scripts.extend(scripts)

    def next_script(self, messages: tuple[ChatMessage, ...]) -> Script:
        return self._scripts.popleft() if self._scripts else echo_reply(messages)

    def fail_next_load(self, message: str, kind: P.FailureKind = P.FailureKind.LOAD) -> None:
        """The next load ends with Failed(kind, message)."""
        self._load_faults.append(("fail", message, kind))

    def crash_next_load(self, description: str = "The engine process was killed (SIGKILL).") -> None:
        """The engine dies during the next load."""
        self._load_faults.append(("crash", description, ""))

    def next_load_fault(self) -> tuple[str, str, str] | None:
        return self._load_faults.popleft() if self._load_faults else None

    def pause(self) -> None:
        """Hold every host's main loop where it is (no more events of a reply, no count answered) until :meth:`resume`."""
        with self._cv:
            self._paused = True

    def resume(self) -> None:
        with self._cv:
            self._paused = False
            self._cv.notify_all()

    def hold_loads(self) -> None:
        """Loads are answered only after :meth:`release_loads` (replies and the rest go on)."""
        with self._cv:
            self._loads_held = True

    def release_loads(self) -> None:
        with self._cv:
            self._loads_held = False
            self._cv.notify_all()

    def wait_while_loads_held(self, closed: threading.Event) -> bool:
        """Block while loads are held; False when ``closed`` was set meanwhile."""
        with self._cv:
            while self._loads_held and not closed.is_set():
                self._cv.wait(0.05)
        return not closed.is_set()

    def watch(self, event: object) -> None:
        """``event`` is about to be sent: :meth:`wait_handled` can wait for it."""
        if self.paced:
            with self._cv:
                self._watched.add(id(event))

    def handled(self, event: object) -> None:
        """The client handled ``event`` (FakeEngine connects its host link's ``event_received`` here)."""
        with self._cv:
            self._watched.discard(id(event))
            self._cv.notify_all()

    def wait_handled(self, event: object, closed: threading.Event) -> None:
        """When :attr:`paced`: block until the client handled ``event``; at most 1 s, in case it never reaches it.

        So the main loop runs no faster than the window takes its events, and what the window does
        on one event (a Stop right after a Send) happens before the loop goes two events further,
        as when the fake ran on the Qt event loop.
        """
        deadline = time.monotonic() + 1.0
        with self._cv:
            while id(event) in self._watched and not closed.is_set() and time.monotonic() < deadline:
                self._cv.wait(0.05)
            self._watched.discard(id(event))

    def wait_while_paused(self, closed: threading.Event) -> bool:
        """Block while paused; False when ``closed`` was set meanwhile."""
        with self._cv:
            while self._paused and not closed.is_set():
                self._cv.wait(0.05)
        return not closed.is_set()


# ------------------------------------------------------------------------------------------ the host
@dataclass(frozen=True)
class _Crash:
    description: str


class ScriptedDeath(EngineDied):
    """The scripted engine died: EngineDied with the script's description."""

    def __init__(self, description: str) -> None:
        RuntimeError.__init__(self, description)
        self.exitcode = None
        self.description = description


_CLOSED = object()


class ScriptedHost:
    """An engine host with no process (see the module docstring).

    Thread-safety: :meth:`send`, :meth:`cancel`, :meth:`stop` from the UI thread (``stop`` from any);
    :meth:`recv_raw` from one reader thread.
    """

    process = None  # no child process: EngineClient.pid is None

    def __init__(self, book: ScriptBook) -> None:
        self._book = book
        self._out: queue.Queue[object] = queue.Queue()
        self._jobs: collections.deque[Iterator[object]] = collections.deque()
        self._cv = threading.Condition()
        self._closed = threading.Event()
        self._cancel = threading.Event()
        self._alive = False
        self._thread: threading.Thread | None = None
        self._model: P.ModelLoaded | None = None
        self._kv: list[str] = []  # the KV cache, in words
        self._kept: tuple[int, SamplerSettings, list[tuple[int, str]]] | None = None  # the reply keeping logits
        self._sent: collections.deque[object] = collections.deque()  # main-loop events maybe not handled yet
        self._handlers: dict[type, Callable[[Any], None]] = {
            P.LoadModel: lambda r: self._queue(self._load_events(r)),
            P.Generate: self._generate,
            P.CountPrompt: lambda r: self._queue(self._count_events(r)),
            P.ResetContext: lambda r: self._queue(self._reset_events(r)),
            P.ComputeFunnel: self._funnel,
            P.RenderPrompt: self._render,
            P.InspectToken: self._inspect,
            P.PrepareInspect: lambda r: None,
            P.Shutdown: lambda r: self.stop(),
            P.SweepDepth: lambda r: self._queue(self._sweep_events(r)),
            # The local API's parallel sequences (issue 23 §4), played one at a time as external replies.
            P.GenerateParallel: lambda r: self._generate(replace(r.generate, request_id=r.request_id, external=True)),
            P.CancelSequence: lambda r: self._cancelled_ids.add(r.request_id),
            P.CheckConstraint: lambda r: self._out.put(answers.check_constraint(r)),
        }
        self._cancelled_ids: set[int] = set()  # parallel requests cancelled (CancelSequence)

    # ------------------------------------------------------------------ the host interface
    def start(self) -> None:
        """Ready at once: EngineReady, and the main loop's thread."""
        self._alive = True
        self._out.put(P.EngineReady(FAKE_LLAMA_CPP_VERSION, "fake engine: no CPU features used", False))
        self._thread = threading.Thread(target=self._main_loop, name="glassbox-scripted-engine", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._alive

    def send(self, request: Any) -> None:
        """Take a request (never blocks).

        Raises:
            ScriptedDeath: the scripted engine died (a crash script).
        """
        if not self._alive:
            raise ScriptedDeath("The engine stopped answering.")
        handler = self._handlers.get(type(request))
        if handler is None:
            rid = getattr(request, "request_id", -1)
            self._out.put(P.Failed(rid, P.FailureKind.INTERNAL, f"The engine does not know {type(request).__name__}."))
            return
        handler(request)

    def cancel(self) -> None:
        self._cancel.set()

    def clear_cancel(self) -> None:
        self._cancel.clear()

    def recv_raw(self, timeout: float | None = None) -> Any:
        """The next event (a TokenBatch whole), or None after ``timeout`` seconds.

        Raises:
            ScriptedDeath: the scripted engine died; EngineDied: the host was stopped.
        """
        try:
            ev = self._out.get(timeout=timeout)
        except queue.Empty:
            return None
        if ev is _CLOSED or isinstance(ev, _Crash):
            self._out.put(ev)  # every later call sees it too
            raise ScriptedDeath(ev.description) if isinstance(ev, _Crash) else EngineDied(None)
        return ev

    def stop(self, timeout: float = 5.0) -> None:
        """End the main loop and close the event queue. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._alive = False
        with self._cv:
            self._cv.notify_all()
        self._out.put(_CLOSED)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def kill(self) -> None:
        self.stop()

    # ------------------------------------------------------------------ the main loop
    def _queue(self, job: Iterator[object]) -> None:
        with self._cv:
            self._jobs.append(job)
            self._cv.notify_all()

    def _main_loop(self) -> None:
        """Play the jobs in order, one event per tick; a crash ends the host."""
        while True:
            with self._cv:
                while not self._jobs and not self._closed.is_set():
                    self._cv.wait()
                if self._closed.is_set():
                    return
                job = self._jobs.popleft()
            for ev in self._paced(job):
                time.sleep(self._book.tick_s)
                if self._closed.is_set():
                    return
                if isinstance(ev, _Crash):
                    self._alive = False
                    self._out.put(ev)
                    return
                self._book.watch(ev)
                self._out.put(ev)
                self._sent.append(ev)

    def _paced(self, job: Iterator[object]) -> Iterator[object]:
        """``job``'s events, each made only once the one sent two before it was handled (and not while paused)."""
        while True:
            while len(self._sent) >= 2:
                self._book.wait_handled(self._sent.popleft(), self._closed)
            if not self._book.wait_while_paused(self._closed):
                return
            ev = next(job, None)
            if ev is None:
                return
            yield ev

    def _load_events(self, req: P.LoadModel) -> Iterator[object]:
        rid, path, settings = req.request_id, req.path, req.settings
        if not self._book.wait_while_loads_held(self._closed):
            return
        fault = self._book.next_load_fault()
        if fault is not None and fault[0] == "crash":
            yield _Crash(fault[1])
            return
        if fault is not None:
            yield P.Failed(rid, P.FailureKind(fault[2]), fault[1])
            return
        if settings.v_cache_conflict:  # as the real engine: refused before llama.cpp sees it
            yield P.Failed(rid, P.FailureKind.LOAD, f"{Path(path).name} was not loaded. {settings.v_cache_conflict}")
            return
        loaded = _model_loaded(rid, path, settings)
        self._model, self._kv, self._kept = loaded, [], None
        yield loaded

    def _generate(self, req: P.Generate) -> None:
        script = self._book.next_script(req.messages)
        if req.keep_logits or req.alternatives:  # as the engine: alternatives come from the kept logits
            self._kept = (req.request_id, req.sampler, [])
        self._queue(self._reply_events(req, script))

    def _reset_events(self, req: P.ResetContext) -> Iterator[object]:
        self._kv = []
        yield P.ContextReset(req.request_id)

    def _sweep_events(self, req: P.SweepDepth) -> Iterator[object]:
        """A depth sweep: made-up figures per depth (:func:`answers.sweep_point`), Stop-able between depths;
        the KV cache of words is kept, as the engine puts the chat's back."""
        assert self._model is not None
        failed = answers.sweep_refusal(req, self._model)
        if failed is not None:
            yield failed
            return
        points = []
        for i, depth in enumerate(req.depths):
            if self._cancel.is_set():
                break
            points.append(answers.sweep_point(depth))
            yield P.DepthMeasured(req.request_id, i, len(req.depths), points[-1], 0.01 * (i + 1), answers.SWEEP_ROOF)
        cancelled = len(points) < len(req.depths)
        yield P.DepthSwept(
            req.request_id,
            tuple(points),
            cancelled,
            0.01 * len(points),
            1,
            1,
            self._model.n_batch,
            512,
            kv_restored_tokens=len(self._kv),
            matmul_flop_s=answers.SWEEP_ROOF,
        )

    def _count_events(self, req: P.CountPrompt) -> Iterator[object]:
        assert self._model is not None
        yield answers.count(req, self._model)

    def _reply_events(self, req: P.Generate, script: Script) -> Iterator[object]:
        rid, model = req.request_id, self._model
        assert model is not None  # the client sends a Generate only with a model loaded
        if isinstance(script, Refuse):
            yield P.Failed(rid, P.FailureKind(script.kind), script.message)
            return
        person_kv = list(self._kv) if req.external else None  # the engine keeps the person's KV cache
        words = prompt_words(req.messages)
        cached = 0
        while cached < min(len(words) - 1, len(self._kv)) and words[cached] == self._kv[cached]:
            cached += 1
        to_eval = len(words) - cached
        book = self._book
        prefill_s = book.ttft_s / 2
        yield P.PromptPrepared(
            rid,
            0.001,
            len(words),
            cached,
            to_eval,
            0,
            tuple(enumerate(words[cached:]))[:4096],
            " ".join(words),
            template_s=0.0004,
            tokenize_s=0.0003,
            reuse_s=0.0001,
        )
        yield P.PrefillProgress(rid, to_eval, to_eval, prefill_s, slice_tokens=to_eval)
        self._kv = list(words)
        n_ctx = model.n_ctx
        max_tokens = req.sampler.max_tokens
        stop = StopReason.EOS
        n = 0
        head = "".join(book.vocab.get(t, "") for t in req.reply_prefix)
        text = head
        for piece in _pieces(script):
            if isinstance(script, CrashMidReply) and n == len(script.pieces):
                yield _Crash(script.description)
                return
            if self._cancel.is_set() or rid in self._cancelled_ids:
                stop = StopReason.CANCELLED
                break
            if max_tokens >= 0 and n >= max_tokens:
                stop = StopReason.MAX_TOKENS
                break
            if len(self._kv) >= n_ctx:
                stop = StopReason.CONTEXT_FULL
                break
            self._kv.append(piece)
            text += piece
            ev = self._token(req, piece, n)
            if n == 0 and head:
                ev = P.TokenEvent(**{**ev.__dict__, "text": head + ev.text})
            yield P.TokenBatch(rid, (ev,))
            n += 1
        else:
            if isinstance(script, Reply) and script.context_full:
                stop = StopReason.CONTEXT_FULL
        seed = req.sampler.seed if req.sampler.seed is not None else book.seed_when_random
        t_end = book.ttft_s + max(n - 1, 0) * book.token_s + book.token_s / 2
        spec = None
        if model.speculation.enabled and req.speculate is not False and n:
            pieces = self._kv[len(self._kv) - n :]
            spec = answers.speculation(n, model.speculation, pieces, model.info.tensor_bytes, book.token_s)
        decode_s = book.token_s * max((spec.rounds if spec is not None else n) - 1, 0)
        finished = P.Finished(
            rid,
            text,
            GenerationStats(
                prompt_tokens=len(words),
                cached_tokens=cached,
                evaluated_tokens=to_eval,
                prefill_s=prefill_s,
                ttft_s=book.ttft_s,
                generated_tokens=n,
                decode_s=decode_s,
                n_ctx=n_ctx,
                context_used=len(self._kv),
                kv_used_bytes=model.kv_allocated_bytes * len(self._kv) // n_ctx,
                kv_allocated_bytes=model.kv_allocated_bytes,
                stop_reason=stop.value,
                seed=seed,
                speculation=spec,
            ),
            elapsed_s=t_end,
            alternatives=self._alternatives(req, n, script.entropy_bits if isinstance(script, Reply) else ())
            if req.alternatives > 0
            else None,
        )
        if person_kv is not None:
            self._kv = person_kv
        yield finished

    def _token(self, req: P.Generate, piece: str, index: int) -> P.TokenEvent:
        self._book.vocab[100 + index] = piece
        if self._kept is not None and self._kept[0] == req.request_id:
            self._kept[2].append((100 + index, piece))
        t_s = self._book.ttft_s + index * self._book.token_s
        if req.top_candidates <= 0:
            return P.TokenEvent(req.request_id, piece, 100 + index, piece, index, t_s, len(self._kv))
        # Candidates: the sampled piece first, then others with falling logits (1 apart).
        cands = tuple((100 + index + k, piece if k == 0 else f"alt{k}", 10.0 - k) for k in range(req.top_candidates))
        lse = math.log(sum(math.exp(c[2]) for c in cands))
        p = math.exp(cands[0][2] - lse)
        return P.TokenEvent(req.request_id, piece, 100 + index, piece, index, t_s, len(self._kv), p, cands, lse)

    def _alternatives(self, req: P.Generate, n: int, entropy_bits: tuple[float, ...] = ()) -> ReplyAlternatives:
        """The made-up alternatives of the ``n`` tokens just streamed (see the module docstring); the
        first steps' entropies are ``entropy_bits`` when given."""
        k = req.alternatives
        vocab = self._book.vocab
        pieces = [vocab.get(100 + i, "") for i in range(n)]
        ids = [100 + i + j for i in range(n) for j in range(k)]
        texts = {100 + i + j: pieces[i] if j == 0 else f"alt{j}" for i in range(n) for j in range(k)}
        for t, piece in texts.items():
            vocab.setdefault(t, piece)
        lse = math.log(sum(math.exp(10.0 - j) for j in range(k))) + 0.01
        return ReplyAlternatives(
            k,
            tuple(100 + i for i in range(n)),
            (lse,) * n,
            tuple(entropy_bits[i] if i < len(entropy_bits) else 0.1 * i for i in range(n)),
            tuple(ids),
            tuple(10.0 - j for _ in range(n) for j in range(k)),
            (),
            texts,
        )

    # ------------------------------------------------------------------ answered at once
    def _funnel(self, req: P.ComputeFunnel) -> None:
        if req.stored is not None:
            self._out.put(P.FunnelComputed(req.request_id, answers.stored_funnel(req.stored, req.sampler)))
        else:
            self._out.put(answers.funnel(req, self._kept))

    def _render(self, req: P.RenderPrompt) -> None:
        assert self._model is not None
        self._out.put(answers.render(req, self._model))

    def _inspect(self, req: P.InspectToken) -> None:
        rid = req.request_id
        if req.position < 0:
            msg = "Position -1 of the context does not hold that token."
            self._out.put(P.Failed(rid, P.FailureKind.NOT_IN_CONTEXT, msg))
            return
        self._out.put(P.TokenInspected(rid, synthetic_inspection(req.position, req.token_id)))


def _pieces(script: Script) -> Iterator[str]:
    if isinstance(script, Endless):
        return itertools.repeat(script.piece)
    assert isinstance(script, Reply | CrashMidReply)
    # One more step after a crash script's pieces, where the crash happens.
    return itertools.chain(script.pieces, [""] if isinstance(script, CrashMidReply) else [])


def _model_loaded(rid: int, path: str, settings: LoadSettings) -> P.ModelLoaded:
    """What the engine reports for ``path`` (its real GGUF facts, the KV cache layout for ``settings``)."""
    info = read_gguf_info(path)
    n_ctx = settings.n_ctx or int(info.arch_key("context_length", 4096))
    n_ctx = -(-n_ctx // 256) * 256  # llama.cpp pads n_ctx to 256
    layout = kv_cache_layout(
        info,
        n_ctx,
        n_ubatch=n_ubatch_for(settings.n_batch, n_ctx),
        swa_full=settings.swa_full,
        type_k=settings.type_k,
        type_v=settings.type_v,
    )
    return P.ModelLoaded(
        request_id=rid,
        info=info,
        settings=settings,
        n_ctx=n_ctx,
        n_batch=settings.n_batch,
        n_threads=settings.n_threads or 1,
        n_threads_batch=settings.n_threads or 1,
        gpu_offload=False,
        load_s=0.01,
        kv_allocated_bytes=layout.allocated_bytes,
        kv_reported_bytes=layout.allocated_bytes,
        kv_layout=layout,
        compute_reported_bytes=0,
        # llama.cpp's CPU backend settles auto as on, and a quantized V cache forces it on.
        flash_attn_active=settings.flash_attn is not FlashAttention.OFF,
        chat_template=info.metadata.get("tokenizer.chat_template"),
        bos_text="<s>",
        eos_text="</s>",
        eog_token_ids=(2,),
        add_bos=True,
        speculation=settings.speculation,
        draft=answers.draft_info(settings, layout.allocated_bytes),
    )
