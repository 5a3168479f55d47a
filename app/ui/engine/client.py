"""The engine as a QObject: requests in, Qt signals out, crash detection.

A reader thread blocks on the engine pipe and hands each event to the UI
thread through a queued signal; the UI thread never waits on the engine.

Every model load after the first in an engine process goes to a fresh engine
process (the old one ends): llama.cpp and the C heap do not give all of a
freed model's memory back to the system (SmolLM2 → Gemma 3 → SmolLM2 five
times grew one process from 206 to 241 MB for the same SmolLM2; in fresh
processes it stays at 206 MB: bench/model_switch.py), and whatever state a
model left in llama.cpp goes with its process. This holds for the same model
with new settings too (a new n_ctx, n_batch, threads): that reload frees and
allocates the same way, and one rule is simpler to trust than two. The cost
is the process start (spawn, import llama_cpp, backend init): a switch took
0.6-1.1 s instead of 0.3 s (median of 10, two runs, 2 busy CPUs), once per
load the person asked for. The switch is invisible in the signals: the state goes LOADING → READY
(never DEAD or STARTING), and the new process's EngineReady is not emitted again.

External requests (the local API, :mod:`app.ui.server`) share the one engine through this
client too: :meth:`submit_external` queues a request, and it is sent only when nothing else is
in the engine, so exactly one Generate is ever in flight and Stop (the one shared cancel flag)
always means that one. The person's path is unchanged: an external request leaves the state
READY and emits none of the person's signals (its events go to the request's own sink). When
the person sends while an external request is in flight, their Generate waits for it (it goes
first, ahead of queued external requests); Stop before it was sent ends it at once in the
engine (Finished, CANCELLED, nothing evaluated). The engine keeps the person's KV cache across
an external request (``Generate.external``: :mod:`app.engine.kv_snapshot`).

The engine can also be a remote server (:meth:`load_model` with ``remote``): a
:class:`~app.remote.host.RemoteHost` then stands where the engine process stood, with the same
interface and the same events, so everything above holds for it (a switch between the local engine
and a server, or between servers, goes to a fresh host like a model switch).
"""

from __future__ import annotations

import collections
import enum
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.core import protocol as P
from app.core.chat.context import ChatMessage, ContextPolicy, LoadSettings
from app.core.remote import RemoteEndpoint
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.params import SamplerSettings
from app.engine.host import EngineDied, EngineHost
from app.remote.host import RemoteClosed, RemoteHost

log = logging.getLogger(__name__)

STOP_GRACE_MS = 3000


class EngineState(str, enum.Enum):
    STARTING = "starting"
    NO_MODEL = "no model"
    LOADING = "loading"
    READY = "ready"
    GENERATING = "generating"
    DEAD = "stopped"


ExternalSink = Callable[[object], None]


@dataclass(frozen=True)
class ExternalTicket:
    """One external request: its ticket number (unique per client), what to send, where events go.

    Attributes:
        ticket: the number :meth:`EngineClient.submit_external` returned.
        request: the Generate to send (its ``request_id`` is replaced when it is sent).
        sink: called in the UI thread with each event of the request (PromptPrepared,
            PrefillProgress, TokenEvent one at a time, ContextShifted) and exactly once with its
            terminal Finished or Failed (Failed kind ``cancelled`` when it was cancelled before
            it was sent, ``engine`` when the engine stopped or the model was replaced).
    """

    ticket: int
    request: P.Generate
    sink: ExternalSink


class EngineClient(QObject):
    """Owns the engine process for the window.

    A reply is in flight from :meth:`generate` until :attr:`generation_ended`; this
    client is the one owner of that fact (:attr:`generating`), because it is the only
    place that sees every way a reply ends: Finished, Failed, the engine dying, Stop
    timing out, shutdown, restart and unload. The chat, the composer's Send/Stop
    button and the Stop action follow :attr:`generation_started` / :attr:`generation_ended`.

    Signals:
        state_changed(object): the new :class:`EngineState`.
        engine_ready(object): :class:`~app.core.protocol.EngineReady`.
        model_loaded(object): :class:`~app.core.protocol.ModelLoaded`.
        model_load_failed(object): :class:`~app.core.protocol.Failed` for a load.
        prompt_prepared(object), prefill_progressed(object), token_received(object),
        context_shifted(object): events of the reply in flight.
        generation_finished(object): :class:`~app.core.protocol.Finished`.
        generation_failed(object): :class:`~app.core.protocol.Failed` for a reply.
        generation_started(int): a reply was requested (its request id); a reply is in flight.
        generation_ended(int): the reply with that request id is over, however it ended (emitted
            after generation_finished / generation_failed, before engine_crashed).
        engine_crashed(str): the engine died; the text says why and what to do.
        log_line(object): a llama.cpp warning or error.
        funnel_computed(object): :class:`~app.core.protocol.FunnelComputed` for :meth:`compute_funnel`.
        funnel_failed(object): :class:`~app.core.protocol.Failed` for :meth:`compute_funnel`.
        prompt_rendered(object): :class:`~app.core.protocol.PromptRendered` for :meth:`render_prompt`.
        prompt_render_failed(object): :class:`~app.core.protocol.Failed` for :meth:`render_prompt`.
        prompt_counted(object): :class:`~app.core.protocol.PromptCounted` for :meth:`count_prompt`.
        prompt_count_failed(object): :class:`~app.core.protocol.Failed` for :meth:`count_prompt`.
        token_inspected(object): :class:`~app.core.protocol.TokenInspected` for :meth:`inspect_token`.
        inspection_failed(object): :class:`~app.core.protocol.Failed` for :meth:`inspect_token`.
        request_sent(object): a request (:class:`~app.core.protocol.LoadModel`,
            :class:`~app.core.protocol.Generate`, :class:`~app.core.protocol.ResetContext`)
            was sent to the engine; emitted with every one, just before it goes down the pipe.
        external_queue_changed(): an external request was queued, sent, or ended
            (:attr:`external_queue`, :attr:`external_in_flight`).
    """

    state_changed = Signal(object)
    engine_ready = Signal(object)
    model_loaded = Signal(object)
    model_load_failed = Signal(object)
    prompt_prepared = Signal(object)
    prefill_progressed = Signal(object)
    token_received = Signal(object)
    context_shifted = Signal(object)
    generation_finished = Signal(object)
    generation_failed = Signal(object)
    generation_started = Signal(int)
    generation_ended = Signal(int)
    engine_crashed = Signal(str)
    log_line = Signal(object)
    funnel_computed = Signal(object)
    funnel_failed = Signal(object)
    prompt_rendered = Signal(object)
    prompt_render_failed = Signal(object)
    prompt_counted = Signal(object)
    prompt_count_failed = Signal(object)
    token_inspected = Signal(object)
    inspection_failed = Signal(object)
    request_sent = Signal(object)
    external_queue_changed = Signal()

    # Internal: from the reader thread to the UI thread (queued).
    _event = Signal(object, object)
    _died = Signal(object, object)

    def __init__(self, log_path: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._log_path = log_path
        self._host: EngineHost | RemoteHost | None = None
        self._remote: RemoteEndpoint | None = None  # the server the engine is, None: the local process
        self._reader: threading.Thread | None = None
        self._state = EngineState.DEAD
        self._load_id: int | None = None
        self._gen_id: int | None = None
        self._ids = itertools.count(1)  # request ids, unique across engine processes
        self._host_used = False  # a LoadModel went to the current engine process
        self._pending_load: P.LoadModel | None = None  # sent once the reply in flight has ended
        self._funnel_ids: set[int] = set()  # ComputeFunnel requests not answered yet
        self._render_ids: set[int] = set()  # RenderPrompt requests not answered yet
        self._count_ids: set[int] = set()  # CountPrompt requests not answered yet
        self._inspect_ids: set[int] = set()  # InspectToken requests not answered yet
        self._prepared_for: P.ModelLoaded | None = None  # the model PrepareInspect was sent for
        self._quiet_ready = False  # the next EngineReady comes from a switch: not emitted again
        self.ready_info: P.EngineReady | None = None
        self._tickets = itertools.count(1)
        self._ext_queue: collections.deque[ExternalTicket] = collections.deque()
        self._ext: tuple[int, ExternalTicket] | None = None  # (request id, ticket) in the engine
        self._held_gen: P.Generate | None = None  # the person's reply, waiting for the external one
        self._held_cancelled = False  # Stop was pressed before the held reply was sent
        self.model: P.ModelLoaded | None = None
        self._stop_timer = QTimer(self)
        self._stop_timer.setSingleShot(True)
        self._stop_timer.timeout.connect(self._stop_timed_out)
        self._event.connect(self._on_event)
        self._died.connect(self._on_died)

    # ------------------------------------------------------------------ lifecycle
    @property
    def state(self) -> EngineState:
        return self._state

    @property
    def pid(self) -> int | None:
        """The engine process id, or None when no engine process is running."""
        host = self._host
        proc = host.process if host is not None else None
        if proc is None or not host.alive:
            return None
        return proc.pid

    def _set_state(self, state: EngineState) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    def start(self) -> None:
        """Start the engine process (no-op when running)."""
        if self._host is not None and self._host.alive:
            return
        self._start_host()
        self._set_state(EngineState.STARTING)

    def _start_host(self) -> None:
        """A new engine process and its reader thread (the state is the caller's)."""
        host: EngineHost | RemoteHost = (
            RemoteHost(self._remote) if self._remote is not None else EngineHost(self._log_path)
        )
        host.start()
        self._host = host
        self._host_used = False
        reader = threading.Thread(target=self._read_loop, args=(host,), name="glassbox-engine-reader", daemon=True)
        self._reader = reader
        reader.start()

    def _switch_host(self) -> None:
        """End the engine process in the background and start a fresh one (a model switch).

        The old process gets Shutdown and ends on its own (terminated after 5 s); its
        reader thread sees the pipe close and reports to a host no longer held, so
        nothing of it reaches the signals.
        """
        old, self._host = self._host, None
        self._reader = None
        if old is not None:
            threading.Thread(target=old.stop, name="glassbox-engine-stop", daemon=True).start()
        self._quiet_ready = self.ready_info is not None
        self._start_host()

    def shutdown(self) -> None:
        """End the engine process and the reader thread (blocks up to a few seconds)."""
        self._drop_engine()

    def _drop_engine(self, *, kill: bool = False, stop_timeout_s: float = 5.0) -> None:
        """Forget the engine process: the one reset behind shutdown, a death and a Stop that timed out.

        Stops (or first kills) the process, waits up to 5 s for the reader thread, clears the
        load and reply request ids and the model, and sets :attr:`EngineState.DEAD`; a reply in
        flight ends with :attr:`generation_ended`.
        """
        self._stop_timer.stop()
        host, self._host = self._host, None
        if host is not None:
            if kill:
                host.kill()
            host.stop(timeout=stop_timeout_s)
        reader, self._reader = self._reader, None
        if reader is not None and reader is not threading.current_thread():
            reader.join(5.0)
        gen_id = self._gen_id
        self._gen_id = None
        self._held_gen = None
        self._load_id = None
        self._pending_load = None
        self._funnel_ids.clear()
        self._render_ids.clear()
        self._count_ids.clear()
        self._inspect_ids.clear()
        self._quiet_ready = False
        self.model = None
        self._set_state(EngineState.DEAD)
        if gen_id is not None:
            self.generation_ended.emit(gen_id)
        self._fail_externals("The engine stopped; nothing more can be generated until it is restarted.")

    def _read_loop(self, host: EngineHost | RemoteHost) -> None:
        while True:
            try:
                ev = host.recv_raw()
            except (EngineDied, RemoteClosed) as died:
                self._died.emit(host, died)
                return
            self._event.emit(host, ev)

    # ------------------------------------------------------------------ commands
    @property
    def remote(self) -> RemoteEndpoint | None:
        """The remote server the engine is (set by :meth:`load_model`), None for the local engine."""
        return self._remote

    def _host_mismatch(self) -> bool:
        """The running host is not the kind (local process or this server) the next load wants."""
        host = self._host
        if isinstance(host, RemoteHost):
            return host.endpoint != self._remote
        return self._remote is not None

    def load_model(self, path: str, settings: LoadSettings, *, remote: RemoteEndpoint | None = None) -> int:
        """Load a model, or connect to a remote engine. Returns the request id.

        ``remote``: the engine becomes that server (``path`` is then the model id shown); None: the
        local engine process. The first load goes to the running engine process; any later one to a
        fresh process or host (see the module docstring), and so does a switch to or from a server.
        A reply in flight is stopped first and the load is sent once it has ended (its Finished
        arrives as usual); the state is LOADING from now until model_loaded or model_load_failed.
        """
        self._remote = remote
        if self._host is None or not self._host.alive:
            self.start()
        rid = next(self._ids)
        self._load_id = rid
        self.model = None
        self._set_state(EngineState.LOADING)
        self._pending_load = P.LoadModel(rid, path, settings)
        if self._ext is not None:  # the model goes away under it: stop it (it ends with what it has)
            self._cancel_in_flight()
        if self._gen_id is not None:
            self.cancel()  # the load is sent when the reply has ended (_send_pending_load)
        elif self._ext is None:
            self._send_pending_load()
        return rid

    def _send_pending_load(self) -> None:
        """Send the load waiting for a reply to end, to a fresh process if this one loaded a model before."""
        if self._ext is not None or self._gen_id is not None:
            return  # sent when what is in the engine has ended
        req, self._pending_load = self._pending_load, None
        if req is None:
            return
        if self._host_used or self._host_mismatch():
            self._switch_host()
        self._host_used = True
        self._send(req)

    def generate(
        self,
        messages: tuple[ChatMessage, ...],
        sampler: SamplerSettings,
        *,
        stop_strings: tuple[str, ...] = (),
        top_candidates: int = 0,
        continue_last: bool = False,
        context_policy: str | None = None,
        keep_logits: bool = False,
        chat_template: str | None = None,
        alternatives: int = 0,
        reply_prefix: tuple[int, ...] = (),
    ) -> int | None:
        """Start a reply. Returns the request id, or None when not ready (nothing is sent).

        ``keep_logits``: the engine keeps the reply's logits per step for :meth:`compute_funnel`.
        ``chat_template``: the person's template for this model (None: the GGUF's).
        ``alternatives``: top candidates per token sent back with Finished; ``reply_prefix``: the
        tokens the reply starts with (a branch from an alternative); see :class:`P.Generate`.
        """
        if self._host is None or self._state != EngineState.READY:
            return None
        rid = next(self._ids)
        self._gen_id = rid
        self._set_state(EngineState.GENERATING)
        self.generation_started.emit(rid)
        req = P.Generate(
            rid,
            tuple(messages),
            sampler,
            tuple(stop_strings),
            top_candidates,
            continue_last,
            context_policy,
            keep_logits=keep_logits,
            chat_template=chat_template,
            alternatives=alternatives,
            reply_prefix=tuple(reply_prefix),
        )
        if self._ext is not None:  # an external request is in the engine: this reply goes next
            self._held_gen = req
            self._held_cancelled = False
            return rid
        self._host.clear_cancel()
        self._send(req)
        return rid

    def compute_funnel(
        self,
        reply_id: int,
        step: int,
        sampler: SamplerSettings | None,
        rows: int = 12,
        stored: StoredStep | None = None,
    ) -> int | None:
        """Ask for the sampler funnel of a stored step (answered while a reply streams too).

        Args:
            reply_id: the reply's request id (-1: the latest kept); step: token index (-1: newest);
            sampler: settings to run (None: the reply's own); rows: tokens to show;
            stored: a stored reply's step to run on instead (:class:`P.ComputeFunnel`).

        Returns:
            The request id (answered by :attr:`funnel_computed` or :attr:`funnel_failed`), or
            None with no model (nothing is sent).
        """
        if self._host is None or self.model is None:
            return None
        rid = next(self._ids)
        self._funnel_ids.add(rid)
        self._send(P.ComputeFunnel(rid, reply_id, step, sampler, rows, stored))
        return rid

    def render_prompt(
        self, messages: tuple[ChatMessage, ...], chat_template: str | None = None, continue_last: bool = False
    ) -> int | None:
        """Ask how ``messages`` render for the loaded model (empty: a sample conversation), with
        ``chat_template`` instead of the GGUF's when given (validating an override).

        Returns:
            The request id (answered by :attr:`prompt_rendered` or :attr:`prompt_render_failed`,
            after any reply in flight), or None with no model (nothing is sent).
        """
        if self._host is None or self.model is None:
            return None
        rid = next(self._ids)
        self._render_ids.add(rid)
        self._send(P.RenderPrompt(rid, tuple(messages), chat_template, continue_last))
        return rid

    def count_prompt(
        self,
        messages: tuple[ChatMessage, ...],
        chat_template: str | None = None,
        policy: ContextPolicy = ContextPolicy.STOP,
    ) -> int | None:
        """Ask how many tokens ``messages`` make as a prompt, their last message alone, and what
        ``policy`` would do over n_ctx.

        Returns:
            The request id (answered by :attr:`prompt_counted` or :attr:`prompt_count_failed`, after
            any reply in flight), or None with no model or a remote engine (a server renders its own
            prompt; nothing is sent).
        """
        if self._host is None or self.model is None or self.remote is not None:
            return None
        rid = next(self._ids)
        self._count_ids.add(rid)
        self._send(P.CountPrompt(rid, tuple(messages), chat_template, policy))
        return rid

    def inspect_token(self, position: int, token_id: int, turn_start: int = -1) -> int | None:
        """Ask the engine to inspect one context position (answered while a reply streams too).

        Args:
            position: the position in the chat's context; token_id: the token expected there;
            turn_start: the turn's first position (for the expert load), -1: unknown.

        Returns:
            The request id (answered by :attr:`token_inspected` or :attr:`inspection_failed`), or
            None with no model (nothing is sent).
        """
        if self._host is None or self.model is None:
            return None
        rid = next(self._ids)
        self._inspect_ids.add(rid)
        self._send(P.InspectToken(rid, position, token_id, turn_start))
        return rid

    def prepare_inspect(self) -> bool:
        """Have the engine build what the first inspection needs (its tables, its context) now,
        once per loaded model; nothing for a remote engine or with no model.

        Returns:
            True when the request was sent (the first time for this model).
        """
        model = self.model
        if self._host is None or model is None or self.remote is not None or self._prepared_for is model:
            return False
        self._prepared_for = model
        self._send(P.PrepareInspect())
        return True

    def cancel(self) -> None:
        """Stop the reply in flight; if the engine does not answer in 3 s it is restarted."""
        if self._host is None or self._gen_id is None:
            return
        if self._held_gen is not None:  # not sent yet: it ends as soon as it is (nothing evaluated)
            self._held_cancelled = True
            return
        self._cancel_in_flight()

    def _cancel_in_flight(self) -> None:
        """Set the cancel flag for the one Generate in the engine; restart the engine if it does not answer in 3 s."""
        assert self._host is not None
        self._host.cancel()
        self._stop_timer.start(STOP_GRACE_MS)

    # ------------------------------------------------------------------ external requests
    def submit_external(self, request: P.Generate, sink: ExternalSink) -> int:
        """Queue an external request (the local API); returns its ticket number.

        It is sent when no other Generate is in the engine, no load is pending and a model is
        READY; the person's reply goes before queued external requests. ``request.request_id``
        is replaced. ``sink`` gets the request's events (see :class:`ExternalTicket`).
        """
        ticket = ExternalTicket(next(self._tickets), request, sink)
        self._ext_queue.append(ticket)
        self.external_queue_changed.emit()
        self._pump_external()
        return ticket.ticket

    def cancel_external(self, ticket: int) -> bool:
        """Cancel an external request: a queued one ends at once (Failed ``cancelled``), the one in
        flight is stopped like Stop (it ends with Finished, CANCELLED). False when it has ended."""
        for queued in self._ext_queue:
            if queued.ticket == ticket:
                self._ext_queue.remove(queued)
                self.external_queue_changed.emit()
                queued.sink(P.Failed(0, P.FailureKind.CANCELLED, "The request was cancelled before it started."))
                return True
        if self._ext is not None and self._ext[1].ticket == ticket and self._host is not None:
            self._cancel_in_flight()
            return True
        return False

    @property
    def external_queue(self) -> tuple[int, ...]:
        """Tickets of the external requests waiting, first to go first."""
        return tuple(t.ticket for t in self._ext_queue)

    @property
    def external_in_flight(self) -> int | None:
        """The ticket of the external request in the engine, or None."""
        return self._ext[1].ticket if self._ext is not None else None

    def _pump_external(self) -> None:
        """Send the next queued external request when the engine is free."""
        if (
            not self._ext_queue
            or self._ext is not None
            or self._gen_id is not None
            or self._pending_load is not None
            or self._load_id is not None
            or self._state != EngineState.READY
            or self._host is None
        ):
            return
        ticket = self._ext_queue.popleft()
        rid = next(self._ids)
        self._ext = (rid, ticket)
        self.external_queue_changed.emit()
        self._host.clear_cancel()
        self._send(replace(ticket.request, request_id=rid))

    def _external_ended(self, ev: P.Finished | P.Failed) -> None:
        """The external request in flight ended: hand the event over, then the next in line goes."""
        assert self._ext is not None
        _rid, ticket = self._ext
        self._ext = None
        self._stop_timer.stop()
        self.external_queue_changed.emit()
        ticket.sink(ev)
        held, self._held_gen = self._held_gen, None
        if held is not None and self._host is not None:
            self._host.clear_cancel()
            self._send(held)
            if self._held_cancelled:
                self._cancel_in_flight()
            return
        self._send_pending_load()
        self._pump_external()

    def _fail_externals(self, message: str) -> None:
        """End every external request, in flight and queued, with Failed ``engine``."""
        ended: list[tuple[int, ExternalTicket]] = []
        if self._ext is not None:
            ended.append(self._ext)
            self._ext = None
        ended.extend((0, t) for t in self._ext_queue)
        self._ext_queue.clear()
        if ended:
            self.external_queue_changed.emit()
        for rid, ticket in ended:
            ticket.sink(P.Failed(rid, P.FailureKind.ENGINE, message))

    def reset_context(self) -> None:
        """Empty the KV cache (New chat)."""
        if self._host is not None and self.model is not None:
            self._send(P.ResetContext(next(self._ids)))

    @property
    def generating(self) -> bool:
        """True while a reply is in flight (between generation_started and generation_ended)."""
        return self._gen_id is not None

    def _send(self, req: object) -> None:
        assert self._host is not None
        self.request_sent.emit(req)
        try:
            self._host.send(req)
        except EngineDied as died:
            self._on_died(self._host, died)

    # ------------------------------------------------------------------ events
    @Slot(object, object)
    def _on_event(self, host: EngineHost, ev: object) -> None:
        if host is not self._host:
            return  # a late event from an engine we already replaced
        ext = self._ext
        if ext is not None and getattr(ev, "request_id", None) == ext[0]:
            if isinstance(ev, P.Finished | P.Failed):
                self._external_ended(ev)
            elif isinstance(ev, P.TokenBatch):
                for tok in ev.tokens:
                    ext[1].sink(tok)
            else:
                ext[1].sink(ev)
            return
        if isinstance(ev, P.TokenBatch):
            if ev.request_id == self._gen_id:
                for tok in ev.tokens:
                    self.token_received.emit(tok)
        elif isinstance(ev, P.PrefillProgress):
            if ev.request_id == self._gen_id:
                self.prefill_progressed.emit(ev)
        elif isinstance(ev, P.PromptPrepared):
            if ev.request_id == self._gen_id:
                self.prompt_prepared.emit(ev)
        elif isinstance(ev, P.ContextShifted):
            if ev.request_id == self._gen_id:
                self.context_shifted.emit(ev)
        elif isinstance(ev, P.Finished):
            if ev.request_id == self._gen_id:
                self._gen_id = None
                self._stop_timer.stop()
                self._set_state(self._state_after_reply())
                self.generation_finished.emit(ev)
                self.generation_ended.emit(ev.request_id)
                self._send_pending_load()
                self._pump_external()
        elif isinstance(ev, P.ModelLoaded):
            if ev.request_id == self._load_id:
                self._load_id = None
                self.model = ev
                self._set_state(EngineState.READY)
                self.model_loaded.emit(ev)
                self._pump_external()
        elif isinstance(ev, P.FunnelComputed):
            if ev.request_id in self._funnel_ids:
                self._funnel_ids.discard(ev.request_id)
                self.funnel_computed.emit(ev)
        elif isinstance(ev, P.Failed) and ev.request_id in self._funnel_ids:
            self._funnel_ids.discard(ev.request_id)
            self.funnel_failed.emit(ev)
        elif isinstance(ev, P.PromptRendered):
            if ev.request_id in self._render_ids:
                self._render_ids.discard(ev.request_id)
                self.prompt_rendered.emit(ev)
        elif isinstance(ev, P.Failed) and ev.request_id in self._render_ids:
            self._render_ids.discard(ev.request_id)
            self.prompt_render_failed.emit(ev)
        elif isinstance(ev, P.PromptCounted):
            if ev.request_id in self._count_ids:
                self._count_ids.discard(ev.request_id)
                self.prompt_counted.emit(ev)
        elif isinstance(ev, P.Failed) and ev.request_id in self._count_ids:
            self._count_ids.discard(ev.request_id)
            self.prompt_count_failed.emit(ev)
        elif isinstance(ev, P.TokenInspected):
            if ev.request_id in self._inspect_ids:
                self._inspect_ids.discard(ev.request_id)
                self.token_inspected.emit(ev)
        elif isinstance(ev, P.Failed) and ev.request_id in self._inspect_ids:
            self._inspect_ids.discard(ev.request_id)
            self.inspection_failed.emit(ev)
        elif isinstance(ev, P.Failed):
            if ev.request_id == self._load_id:
                self._load_id = None
                self.model = None
                self._set_state(EngineState.NO_MODEL)
                self.model_load_failed.emit(ev)
                self._fail_externals(f"The model could not be loaded: {ev.message}")
            elif ev.request_id == self._gen_id:
                self._gen_id = None
                self._stop_timer.stop()
                self._set_state(self._state_after_reply())
                self.generation_failed.emit(ev)
                self.generation_ended.emit(ev.request_id)
                self._send_pending_load()
                self._pump_external()
        elif isinstance(ev, P.EngineReady):
            self.ready_info = ev
            if self._quiet_ready:  # a fresh process for a model switch: the window knows the engine
                self._quiet_ready = False
                return
            if self._state == EngineState.STARTING:
                self._set_state(EngineState.NO_MODEL)
            self.engine_ready.emit(ev)
        elif isinstance(ev, P.LogLine):
            self.log_line.emit(ev)

    def _state_after_reply(self) -> EngineState:
        """The state when a reply ends: LOADING when a load was asked during it (a model switch
        cancels the reply first), else READY with a model, NO_MODEL without."""
        if self._load_id is not None:
            return EngineState.LOADING
        return EngineState.READY if self.model else EngineState.NO_MODEL

    @Slot(object, object)
    def _on_died(self, host: EngineHost, died: EngineDied) -> None:
        if host is not self._host:
            return
        log.error("engine died: %s", died.description)
        description = died.description
        servers = self.model.settings.rpc_servers if self.model is not None else ()
        if servers:  # llama.cpp aborts when an RPC server goes away: that is the likeliest cause
            description = (
                f"{description} The model had layers on the RPC server(s) {', '.join(servers)}: llama.cpp "
                "stops the engine when one of them goes away or its connection breaks. Check that they run, "
                "or load without them."
            )
        self._drop_engine(stop_timeout_s=1.0)
        self.engine_crashed.emit(description)

    @Slot()
    def _stop_timed_out(self) -> None:
        host = self._host
        if host is None or (self._gen_id is None and self._ext is None):
            return
        log.error("engine did not stop within %d ms; killing it", STOP_GRACE_MS)
        # The reader thread sees the pipe close and reports the death to a host we no longer hold.
        self._drop_engine(kill=True, stop_timeout_s=1.0)
        self.engine_crashed.emit(
            f"The engine did not stop within {STOP_GRACE_MS / 1000:.0f} s of pressing Stop, so Glassbox ended it. "
            "Your conversation is kept; restart the engine to go on."
        )
