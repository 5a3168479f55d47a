"""The engine as a QObject: requests in, Qt signals out (the facade over its parts).

:class:`EngineClient` keeps the signals and commands the window, the chat and the panels use, the
engine's state and the person's reply; the work is in its parts:

- :mod:`app.ui.engine.host_link`: the host's lifecycle (start, a fresh host for each switch, stop,
  the reader thread that hands events to the UI thread, the Stop watchdog, what a death means);
- :mod:`app.ui.engine.requests`: which request an event answers (request id -> kind), and here a
  table (kind, event type) -> handler instead of one branch per event;
- :mod:`app.ui.engine.api_requests`: the local API's side, :attr:`EngineClient.api` (its queue, the
  person's reply held behind it, parallel sequences, embeddings), through a narrow door to this
  client (:class:`~app.ui.engine.api_requests.EngineDoor`); its rules are in its docstring.

A model load after the first in an engine goes to a fresh engine process (the rule and its
measured cost: :mod:`app.ui.engine.host_link`). The switch is invisible in the signals: the state
goes LOADING → READY (never DEAD or STARTING), and the new process's EngineReady is not emitted again.

The engine can also be a remote server (:meth:`EngineClient.load_model` with ``remote``): a
:class:`~app.remote.host.RemoteHost` then stands where the engine process stood, with the same
interface and the same events, so everything above holds for it (a switch between the local engine
and a server, or between servers, goes to a fresh host like a model switch). The UI tests put a
scripted host there (``host_factory``), so they run all of this client.
"""

from __future__ import annotations

import enum
import itertools
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.core import protocol as P
from app.core.chat.context import ChatMessage, ContextPolicy, LoadSettings
from app.core.constraint.model import OutputConstraint
from app.core.mcp.offer import ToolOffer
from app.core.remote import RemoteEndpoint
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.params import SamplerSettings
from app.ui.engine.api_requests import ApiRequests, EngineDoor
from app.ui.engine.host_link import STOP_GRACE_MS, HostFactory, HostLink, crash_description, default_hosts
from app.ui.engine.requests import RequestKind, RequestTable

__all__ = ["STOP_GRACE_MS", "EngineClient", "EngineState"]

log = logging.getLogger(__name__)
K = RequestKind


class EngineState(str, enum.Enum):
    STARTING = "starting"
    NO_MODEL = "no model"
    LOADING = "loading"
    READY = "ready"
    GENERATING = "generating"
    MEASURING = "measuring"  # a depth sweep holds the chat context (app.ui.depth_sweep): no reply can start
    DEAD = "stopped"


class EngineClient(QObject):
    """Owns the engine host for the window.

    A reply is in flight from :meth:`generate` until :attr:`generation_ended`; this
    client is the one owner of that fact (:attr:`generating`), because it is the only
    place that sees every way a reply ends: Finished, Failed, the engine dying, Stop
    timing out, shutdown, restart and unload. The chat, the composer's Send/Stop
    button and the Stop action follow :attr:`generation_started` / :attr:`generation_ended`.

    Args:
        log_path: the engine process's log file (None: stderr).
        host_factory: makes each host (None: :func:`~app.ui.engine.host_link.default_hosts`).

    Attributes:
        api: the local API's side of this engine (:class:`~app.ui.engine.api_requests.ApiRequests`).
        model: the loaded model's :class:`~app.core.protocol.ModelLoaded`, None without one.

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
        funnel_computed(object), funnel_failed(object): :class:`~app.core.protocol.FunnelComputed` or
            :class:`~app.core.protocol.Failed` for :meth:`compute_funnel`; so ``prompt_rendered`` /
            ``prompt_render_failed`` for :meth:`render_prompt`, ``prompt_counted`` / ``prompt_count_failed``
            for :meth:`count_prompt`, ``token_inspected`` / ``inspection_failed`` for :meth:`inspect_token`.
        request_sent(object): a request (:class:`~app.core.protocol.LoadModel`,
            :class:`~app.core.protocol.Generate`, :class:`~app.core.protocol.ResetContext`, ...)
            was sent to the engine; emitted with every one, just before it goes to the host.
        constraint_checked(object): :class:`~app.core.protocol.ConstraintChecked` or
            :class:`~app.core.protocol.Failed` for :meth:`check_constraint`.
        sweep_started(int), sweep_progressed(object), sweep_ended(object): a depth sweep
            (:meth:`sweep_depth`) was sent; one :class:`~app.core.protocol.DepthMeasured`; it is over:
            :class:`~app.core.protocol.DepthSwept`, :class:`~app.core.protocol.Failed`, or None when the
            engine went away.
    """

    state_changed = Signal(EngineState)
    engine_ready = Signal(P.EngineReady)
    model_loaded = Signal(P.ModelLoaded)
    model_load_failed = Signal(P.Failed)
    prompt_prepared = Signal(P.PromptPrepared)
    prefill_progressed = Signal(P.PrefillProgress)
    token_received = Signal(P.TokenEvent)
    context_shifted = Signal(P.ContextShifted)
    generation_finished = Signal(P.Finished)
    generation_failed = Signal(P.Failed)
    generation_started = Signal(int)
    generation_ended = Signal(int)
    engine_crashed = Signal(str)
    log_line = Signal(P.LogLine)
    funnel_computed = Signal(P.FunnelComputed)
    funnel_failed = Signal(P.Failed)
    prompt_rendered = Signal(P.PromptRendered)
    prompt_render_failed = Signal(P.Failed)
    prompt_counted = Signal(P.PromptCounted)
    prompt_count_failed = Signal(P.Failed)
    token_inspected = Signal(P.TokenInspected)
    inspection_failed = Signal(P.Failed)
    request_sent = Signal(object)  # any request of app.core.protocol.requests
    sweep_started = Signal(int)
    sweep_progressed = Signal(P.DepthMeasured)
    sweep_ended = Signal(object)  # P.DepthSwept | P.Failed | None
    constraint_checked = Signal(object)  # P.ConstraintChecked | P.Failed

    def __init__(
        self, log_path: str | None = None, parent: QObject | None = None, *, host_factory: HostFactory | None = None
    ) -> None:
        super().__init__(parent)
        self._link = HostLink(host_factory or default_hosts(log_path), self)
        self._link.event_received.connect(self._on_event)
        self._link.host_died.connect(self._on_died)
        self._link.stop_timed_out.connect(self._stop_timed_out)
        self._remote: RemoteEndpoint | None = None  # the server the engine is, None: the local process
        self._state = EngineState.DEAD
        self._requests = RequestTable()
        self._ids = itertools.count(1)  # request ids, unique across engine processes
        self._pending_load: P.LoadModel | None = None  # sent once what is in the engine has ended
        self._prepared_for: P.ModelLoaded | None = None  # the model PrepareInspect was sent for
        self._quiet_ready = False  # the next EngineReady comes from a switch: not emitted again
        self.ready_info: P.EngineReady | None = None
        self.model: P.ModelLoaded | None = None
        door = EngineDoor(
            free=self._free_for_api,
            running=lambda: self._link.host is not None,
            model=lambda: self.model,
            remote=lambda: self._remote,
            ask=self._ask,
            send=self._send,
            stop=self._link,
            after=self._next,
        )
        self.api = ApiRequests(door, self)  # the local API's side: its queue, parallel sequences, embeddings
        # What each answer does: (kind of request, event type) -> handler.
        self._answers: dict[tuple[RequestKind, type], Callable[[Any], None]] = {
            (K.LOAD, P.ModelLoaded): self._model_loaded,
            (K.LOAD, P.Failed): self._load_failed,
            (K.REPLY, P.PromptPrepared): self.prompt_prepared.emit,
            (K.REPLY, P.PrefillProgress): self.prefill_progressed.emit,
            (K.REPLY, P.TokenBatch): self._tokens,
            (K.REPLY, P.ContextShifted): self.context_shifted.emit,
            (K.REPLY, P.Finished): self._reply_ended,
            (K.REPLY, P.Failed): self._reply_ended,
            (K.FUNNEL, P.FunnelComputed): self.funnel_computed.emit,
            (K.FUNNEL, P.Failed): self.funnel_failed.emit,
            (K.RENDER, P.PromptRendered): self.prompt_rendered.emit,
            (K.RENDER, P.Failed): self.prompt_render_failed.emit,
            (K.COUNT, P.PromptCounted): self.prompt_counted.emit,
            (K.COUNT, P.Failed): self.prompt_count_failed.emit,
            (K.INSPECT, P.TokenInspected): self.token_inspected.emit,
            (K.INSPECT, P.Failed): self.inspection_failed.emit,
            (K.SWEEP, P.DepthMeasured): self.sweep_progressed.emit,
            (K.SWEEP, P.DepthSwept): self._sweep_ended,
            (K.SWEEP, P.Failed): self._sweep_ended,
            (K.CHECK, P.ConstraintChecked): self.constraint_checked.emit,
            (K.CHECK, P.Failed): self.constraint_checked.emit,
        }
        # Events that answer no request.
        self._notices: dict[type, Callable[[Any], None]] = {
            P.EngineReady: self._engine_ready,
            P.LogLine: self.log_line.emit,
        }
        self._answers.update(self.api.answers())
        self._notices.update(self.api.notices())

    # ------------------------------------------------------------------ read-outs
    @property
    def state(self) -> EngineState:
        return self._state

    @property
    def pid(self) -> int | None:
        """The engine process id, or None when no engine process is running."""
        return self._link.pid

    @property
    def remote(self) -> RemoteEndpoint | None:
        """The remote server the engine is (set by :meth:`load_model`), None for the local engine."""
        return self._remote

    @property
    def generating(self) -> bool:
        """True while a reply is in flight (between generation_started and generation_ended)."""
        return self._requests.one(K.REPLY) is not None

    @property
    def sweeping(self) -> bool:
        """True while a depth sweep is in the engine (between sweep_started and sweep_ended)."""
        return self._requests.one(K.SWEEP) is not None

    def _set_state(self, state: EngineState) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the engine process (no-op when running)."""
        if self._link.alive:
            return
        self._link.start(self._remote)
        self._set_state(EngineState.STARTING)

    def shutdown(self) -> None:
        """End the engine process and the reader thread (blocks up to a few seconds)."""
        self._drop_engine()

    def _drop_engine(self, *, kill: bool = False, stop_timeout_s: float = 5.0) -> None:
        """Forget the engine: the one reset behind shutdown, a death and a Stop that timed out.

        Stops (or first kills) the host, waits up to 5 s for its reader thread, forgets every
        request waiting for an answer and the model, and sets :attr:`EngineState.DEAD`; a reply in
        flight ends with :attr:`generation_ended`, external requests with Failed ``engine``.
        """
        self._link.drop(kill=kill, stop_timeout_s=stop_timeout_s)
        reply, sweep = self._requests.one(K.REPLY), self._requests.one(K.SWEEP)
        self._requests.clear()
        self._pending_load = None
        self._quiet_ready = False
        self.model = None
        self._set_state(EngineState.DEAD)
        if reply is not None:
            self.generation_ended.emit(reply)
        if sweep is not None:
            self.sweep_ended.emit(None)
        self.api.engine_stopped()

    # ------------------------------------------------------------------ commands
    def load_model(self, path: str, settings: LoadSettings, *, remote: RemoteEndpoint | None = None) -> int:
        """Load a model, or connect to a remote engine. Returns the request id.

        ``remote``: the engine becomes that server (``path`` is then the model id shown); None: the
        local engine process. The first load goes to the running engine process; any later one to a
        fresh process or host (see the module docstring), and so does a switch to or from a server.
        A reply in flight is stopped first and the load is sent once it has ended (its Finished
        arrives as usual); the state is LOADING from now until model_loaded or model_load_failed.
        """
        self._remote = remote
        if not self._link.alive:
            self.start()
        rid = next(self._ids)
        self._requests.forget(K.LOAD)  # a load asked before and not sent or answered yet is replaced
        self._requests.expect(rid, K.LOAD)
        self.model = None
        self._set_state(EngineState.LOADING)
        self._pending_load = P.LoadModel(rid, path, settings)
        self._requests.forget(K.EMBED)
        self.api.model_switching()  # the API requests in the engine are stopped; embeddings fail
        if self.generating or self.sweeping:
            self.cancel()  # the load is sent when the reply (or sweep) has ended (_send_pending_load)
        elif self.api.in_flight is None:
            self._send_pending_load()
        return rid

    def _send_pending_load(self) -> None:
        """Send the load waiting for a reply to end, to a fresh host if this one loaded a model before."""
        if self.api.in_flight is not None or self.generating or self.sweeping:
            return  # sent when what is in the engine has ended
        req, self._pending_load = self._pending_load, None
        if req is None:
            return
        if self._link.take_load(self._remote):
            self._quiet_ready = self.ready_info is not None
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
        constraint: OutputConstraint | None = None,
        tools: ToolOffer | None = None,
    ) -> int | None:
        """Start a reply. Returns the request id, or None when not ready (nothing is sent).

        ``keep_logits``: the engine keeps the reply's logits per step for :meth:`compute_funnel`.
        ``chat_template``: the person's template for this model (None: the GGUF's).
        ``alternatives``: top candidates per token sent back with Finished; ``reply_prefix``: the
        tokens the reply starts with (a branch from an alternative); ``constraint``: the chat's output
        format (None: free text); ``tools``: the tools offered to the model, their choice, and for a
        forced call its constraint (MCP tools in a chat; it replaces ``constraint``); see :class:`P.Generate`.
        """
        if self._link.host is None or self._state != EngineState.READY:
            return None
        rid = next(self._ids)
        self._requests.expect(rid, K.REPLY)
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
            constraint=tools.constraint if tools is not None and tools.constraint is not None else constraint,
            tools=tools.tools if tools is not None else (),
            tool_choice=tools.choice if tools is not None else None,
        )
        if self.api.hold_behind(req):  # an API request is in the engine: this reply goes next
            return rid
        self._link.clear_cancel()
        self._send(req)
        return rid

    def _ask(self, kind: RequestKind, make: Callable[[int], object]) -> int:
        """Send the request ``make(request_id)`` and wait for its answer as ``kind``; returns the id."""
        rid = next(self._ids)
        self._requests.expect(rid, kind)
        self._send(make(rid))
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
        if self._link.host is None or self.model is None:
            return None
        return self._ask(K.FUNNEL, lambda rid: P.ComputeFunnel(rid, reply_id, step, sampler, rows, stored))

    def render_prompt(
        self, messages: tuple[ChatMessage, ...], chat_template: str | None = None, continue_last: bool = False
    ) -> int | None:
        """Ask how ``messages`` render for the loaded model (empty: a sample conversation), with
        ``chat_template`` instead of the GGUF's when given (validating an override).

        Returns:
            The request id (answered by :attr:`prompt_rendered` or :attr:`prompt_render_failed`,
            after any reply in flight), or None with no model (nothing is sent).
        """
        if self._link.host is None or self.model is None:
            return None
        return self._ask(K.RENDER, lambda rid: P.RenderPrompt(rid, tuple(messages), chat_template, continue_last))

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
        if self._link.host is None or self.model is None or self.remote is not None:
            return None
        return self._ask(K.COUNT, lambda rid: P.CountPrompt(rid, tuple(messages), chat_template, policy))

    def check_constraint(self, constraint: OutputConstraint) -> int | None:
        """Ask the engine whether ``constraint`` converts and parses (answered at once, while a reply streams too).

        Returns:
            The request id (answered by :attr:`constraint_checked`), or None with no model or a remote
            engine (nothing is sent).
        """
        if self._link.host is None or self.model is None or self.remote is not None:
            return None
        return self._ask(K.CHECK, lambda rid: P.CheckConstraint(rid, constraint))

    def inspect_token(self, position: int, token_id: int, turn_start: int = -1) -> int | None:
        """Ask the engine to inspect one context position (answered while a reply streams too).

        Args:
            position: the position in the chat's context; token_id: the token expected there;
            turn_start: the turn's first position (for the expert load), -1: unknown.

        Returns:
            The request id (answered by :attr:`token_inspected` or :attr:`inspection_failed`), or
            None with no model (nothing is sent).
        """
        if self._link.host is None or self.model is None:
            return None
        return self._ask(K.INSPECT, lambda rid: P.InspectToken(rid, position, token_id, turn_start))

    def prepare_inspect(self) -> bool:
        """Have the engine build what the first inspection needs (its tables, its context) now,
        once per loaded model; nothing for a remote engine or with no model.

        Returns:
            True when the request was sent (the first time for this model).
        """
        model = self.model
        if self._link.host is None or model is None or self.remote is not None or self._prepared_for is model:
            return False
        self._prepared_for = model
        self._send(P.PrepareInspect())
        return True

    def reset_context(self) -> None:
        """Empty the KV cache (New chat)."""
        if self._link.host is not None and self.model is not None:
            self._send(P.ResetContext(next(self._ids)))

    def sweep_depth(self, depths: tuple[int, ...], n_prompt: int, n_gen: int, repetitions: int) -> int | None:
        """Start a depth sweep (:class:`~app.core.protocol.SweepDepth`) on the loaded model; the state is
        MEASURING until :attr:`sweep_ended`, and :meth:`cancel` stops it. Returns the request id, or None
        when not READY or the engine is a remote server (nothing is sent)."""
        if self._link.host is None or self._state != EngineState.READY or self.remote is not None:
            return None
        self._link.clear_cancel()
        rid = self._ask(K.SWEEP, lambda rid: P.SweepDepth(rid, tuple(depths), n_prompt, n_gen, repetitions))
        self._set_state(EngineState.MEASURING)
        self.sweep_started.emit(rid)
        return rid

    def _sweep_ended(self, ev: P.DepthSwept | P.Failed) -> None:
        self._link.unwatch_stop()
        self._set_state(self._state_after_reply())
        self.sweep_ended.emit(ev)
        self._next()

    def cancel(self) -> None:
        """Stop the reply (or depth sweep) in flight; if the engine does not answer in 3 s it is restarted."""
        if self._link.host is not None and self.sweeping:
            self._cancel_in_flight()
            return
        if self._link.host is None or not self.generating:
            return
        if self.api.cancel_held():  # not sent yet: it ends as soon as it is (nothing evaluated)
            return
        self._cancel_in_flight()

    def _cancel_in_flight(self) -> None:
        """Set the cancel flag for the one Generate in the engine; restart the engine if it does not answer in 3 s."""
        self._link.cancel()
        self._link.watch_stop()

    def _send(self, req: object) -> None:
        self.request_sent.emit(req)
        self._link.send(req)

    # ------------------------------------------------------------------ the API side's door
    def _free_for_api(self, parallel: bool) -> bool:
        """The engine can take an API request now: as a parallel sequence (beside the person's reply) or
        as the one plain Generate (nothing else in the engine); never while a load is asked or waits."""
        if self._pending_load is not None or self._requests.one(K.LOAD) is not None or self._link.host is None:
            return False
        if parallel:
            return self._state in (EngineState.READY, EngineState.GENERATING)
        return self._state == EngineState.READY and not self.generating

    def _next(self) -> None:
        """What the engine is free for now that a reply, a sweep or an API request has ended: a load, then the API's queue."""
        self._send_pending_load()
        self.api.pump()

    # ------------------------------------------------------------------ events
    @Slot(object)
    def _on_event(self, ev: object) -> None:
        kind = self._requests.match(ev)
        if kind is not None:
            handler = self._answers.get((kind, type(ev)))
        else:
            handler = self._notices.get(type(ev))
        if handler is not None:
            handler(ev)

    def _tokens(self, batch: P.TokenBatch) -> None:
        for tok in batch.tokens:
            self.token_received.emit(tok)

    def _reply_ended(self, ev: P.Finished | P.Failed) -> None:
        """The person's reply ended (it is out of the request table): the state, the signals, then what waited."""
        self._link.unwatch_stop()
        self._set_state(self._state_after_reply())
        if isinstance(ev, P.Finished):
            self.generation_finished.emit(ev)
        else:
            self.generation_failed.emit(ev)
        self.generation_ended.emit(ev.request_id)
        self._next()

    def _model_loaded(self, ev: P.ModelLoaded) -> None:
        self.model = ev
        self._set_state(EngineState.READY)
        self.model_loaded.emit(ev)
        self.api.pump()

    def _load_failed(self, ev: P.Failed) -> None:
        self.model = None
        self._set_state(EngineState.NO_MODEL)
        self.model_load_failed.emit(ev)
        self._requests.forget(K.EXTERNAL)
        self.api.fail_generates(f"The model could not be loaded: {ev.message}")

    def _engine_ready(self, ev: P.EngineReady) -> None:
        self.ready_info = ev
        if self._quiet_ready:  # a fresh process for a model switch: the window knows the engine
            self._quiet_ready = False
            return
        if self._state == EngineState.STARTING:
            self._set_state(EngineState.NO_MODEL)
        self.engine_ready.emit(ev)

    def _state_after_reply(self) -> EngineState:
        """The state when a reply ends: LOADING when a load was asked during it (a model switch
        cancels the reply first), else READY with a model, NO_MODEL without."""
        if self._requests.one(K.LOAD) is not None:
            return EngineState.LOADING
        return EngineState.READY if self.model else EngineState.NO_MODEL

    @Slot(object)
    def _on_died(self, died: BaseException) -> None:
        servers = self.model.settings.rpc_servers if self.model is not None else ()
        description = crash_description(died, servers)  # the loader adds which file was loading
        self._drop_engine(stop_timeout_s=1.0)
        self.engine_crashed.emit(description)

    @Slot()
    def _stop_timed_out(self) -> None:
        if self._link.host is None or (not self.generating and not self.sweeping and self.api.in_flight is None):
            return
        log.error("engine did not stop within %d ms; killing it", STOP_GRACE_MS)
        # The reader thread sees the pipe close and reports the death to a host we no longer hold.
        self._drop_engine(kill=True, stop_timeout_s=1.0)
        self.engine_crashed.emit(
            f"The engine did not stop within {STOP_GRACE_MS / 1000:.0f} s of pressing Stop, so Glassbox ended it. "
            "Your conversation is kept; restart the engine to go on."
        )
