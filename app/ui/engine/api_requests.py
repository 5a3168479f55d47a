"""The local API's side of the one engine: its Generate queue, parallel sequences and embeddings.

:class:`ApiRequests` is ``EngineClient.api``: the local API server (:mod:`app.ui.server`), the
speed-up measure and the benchmarks send their requests here, and the Server panel and the top bar
read its queue. It owns an :class:`~app.ui.engine.external.ExternalQueue` (the plain-Python line of
tickets, the person's reply held behind it) and the embeddings waiting for their answer, and drives
them through a narrow door to the client (:class:`EngineDoor`: is the engine free, send a request and
expect its answer, the shared Stop flag, an API request left the engine). The client hands it the
answers to its requests (:meth:`ApiRequests.answers`) and calls :meth:`ApiRequests.pump` whenever the
engine may have come free.

Shapes: a Generate request (:class:`~app.core.protocol.Generate`, ``external=True``, its
``request_id`` replaced when it is sent) goes with a sink, ``Callable[[object], None]`` called in the
UI thread with each of its events (PromptPrepared, PrefillProgress, each TokenEvent, ContextShifted)
and exactly once with its Finished or Failed; :meth:`ApiRequests.submit` returns its ticket (an int,
unique per client). An :class:`~app.core.protocol.Embed` goes with a sink called exactly once
(Embedded or Failed); :meth:`ApiRequests.embed` returns its request id.

The rules:

- **One Generate at a time** (N = 1, the Server panel's "parallel sequences" at 1, and every remote
  engine): a queued request is sent only when nothing else is in the engine (no reply, no depth sweep,
  no load asked or waiting, the state READY), so exactly one Generate is ever in flight and Stop (the
  one shared cancel flag) always means that one. An API request leaves the state READY and emits none
  of the person's signals. The engine keeps the person's KV cache across it (``Generate.external``:
  :mod:`app.engine.kv_snapshot`).
- **The person first**: when the person sends while an API request is in the engine, their Generate is
  held (:meth:`ApiRequests.hold_behind`) and goes when that request ends, ahead of the queued API
  requests; Stop before it was sent ends it at once in the engine (Finished, CANCELLED, nothing
  evaluated).
- **Stop**: cancelling a queued request (:meth:`ApiRequests.cancel`) ends it at once (Failed
  ``cancelled``); one in the engine is stopped like Stop and ends with Finished, CANCELLED.
- **N parallel sequences** (:meth:`ApiRequests.set_parallel`, issue 23 §4, the local engine only): up to
  N requests are in the engine at once, each a :class:`~app.core.protocol.GenerateParallel` decoded
  with the others in a context of its own (:mod:`app.engine.parallel`), each stopped by its own
  :class:`~app.core.protocol.CancelSequence`, never by the shared Stop flag. The person's reply is then
  never held: the engine pauses the sequences while it runs. Requests sent keep the N they went with.
- **Switches and deaths**: a model switch stops the requests in the engine (they end with what they
  have; the load goes once they have ended) and fails every embeddings request; a failed load fails the
  queue, and the engine stopping fails everything; each with Failed ``engine`` and a message saying so.
- **Embeddings** (issue 23 §3) need the local engine with a model; the engine runs them in a context
  of their own beside a reply in flight, so they never wait in the queue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.protocol.parallel import MAX_SEQUENCES
from app.core.remote import RemoteEndpoint
from app.ui.engine.external import ExternalQueue, ExternalSink
from app.ui.engine.requests import RequestKind

K = RequestKind

STOPPED = "The engine stopped; nothing more can be generated until it is restarted."
EMBED_STOPPED = "The engine stopped; restart it (or load a model) and send the request again."
EMBED_SWITCHED = "The model was switched in Glassbox while the embeddings were computed; send the request again."


class StopFlag(Protocol):
    """The one shared Stop flag and its watchdog (:class:`~app.ui.engine.host_link.HostLink`): the engine
    stops the plain Generate in it between steps; one that has not ended 3 s after Stop restarts the engine."""

    def cancel(self) -> None: ...  # set the flag

    def clear_cancel(self) -> None: ...  # before each plain Generate

    def watch_stop(self) -> None: ...  # start the 3 s watchdog

    def unwatch_stop(self) -> None: ...  # the Generate ended


@dataclass(frozen=True)
class EngineDoor:
    """What the API side may do with the engine: the client's half of the interface (the client makes it).

    Attributes:
        free: whether the engine can take an API request now; the argument says how: as a parallel
            sequence (True: beside the person's reply) or as the one plain Generate (False: nothing
            else in the engine). Both need a running engine, a model READY and no load asked or waiting.
        running: whether an engine (process or server) runs; nothing may be sent without one.
        model: the loaded model (None: none); remote: the server the engine is (None: the local engine).
        ask: send ``make(request_id)`` with a fresh request id and expect its answer as that kind (the
            answer goes to :meth:`ApiRequests.answers`' handler); returns the id.
        send: send a request as it is: one that gets no answer (CancelSequence, CancelEmbed), or the
            person's held Generate (the client expects its answer already).
        stop: the shared Stop flag (:class:`StopFlag`).
        after: an API request left the engine: what waited for it goes (a load; then :meth:`ApiRequests.pump`).
    """

    free: Callable[[bool], bool]
    running: Callable[[], bool]
    model: Callable[[], P.ModelLoaded | None]
    remote: Callable[[], RemoteEndpoint | None]
    ask: Callable[[RequestKind, Callable[[int], object]], int]
    send: Callable[[object], None]
    stop: StopFlag
    after: Callable[[], None]


class ApiRequests(QObject):
    """The local API's requests on the engine (see the module docstring for the rules).

    Args:
        door: the client's side (:class:`EngineDoor`).

    Signals:
        queue_changed(): an API request was queued, sent, or ended (:attr:`waiting`, :attr:`in_flight`,
            :attr:`in_flight_tickets`); emitted before the ended request's sink hears of it.
        sequences_progressed(object): :class:`~app.core.protocol.SequencesProgressed`, the engine's parallel
            API sequences now (a few times a second while any is in flight).
    """

    queue_changed = Signal()
    sequences_progressed = Signal(P.SequencesProgressed)

    def __init__(self, door: EngineDoor, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._door = door
        self._queue = ExternalQueue(self.queue_changed.emit)
        self._embed_sinks: dict[int, ExternalSink] = {}  # request id -> who waits for the Embedded
        self._parallel = 1  # API requests decoded together at most (set_parallel); 1: one at a time

    def answers(self) -> dict[tuple[RequestKind, type], Callable[[Any], None]]:
        """What each answer to an API request does, for the client's table: (kind, event type) -> handler."""
        table: dict[tuple[RequestKind, type], Callable[[Any], None]] = {
            (K.EXTERNAL, t): self._queue.deliver
            for t in (P.PromptPrepared, P.PrefillProgress, P.TokenBatch, P.ContextShifted)
        }
        table.update({(K.EXTERNAL, t): self._ended for t in (P.Finished, P.Failed)})
        table.update({(K.EMBED, t): self._embed_ended for t in (P.Embedded, P.Failed)})
        return table

    def notices(self) -> dict[type, Callable[[Any], None]]:
        """What each notice of the API side does (events that answer no request): event type -> handler."""
        return {P.SequencesProgressed: self.sequences_progressed.emit}

    # ------------------------------------------------------------------ read-outs
    @property
    def waiting(self) -> tuple[int, ...]:
        """Tickets of the API requests waiting, first to go first."""
        return self._queue.tickets

    @property
    def in_flight(self) -> int | None:
        """The ticket of the (first) API request in the engine, or None."""
        return self._queue.in_flight

    @property
    def in_flight_tickets(self) -> tuple[int, ...]:
        """Tickets of every API request in the engine."""
        return self._queue.in_flight_tickets

    def ticket_of(self, request_id: int) -> int | None:
        """The ticket of the API request in the engine sent as ``request_id`` (the id a
        :class:`~app.core.protocol.SequenceFigures` carries), or None."""
        return self._queue.ticket_of(request_id)

    @property
    def parallel(self) -> int:
        """API requests decoded together at most, as set (:meth:`set_parallel`)."""
        return self._parallel

    @property
    def parallel_in_use(self) -> bool:
        """API requests go to the engine as parallel sequences now (set above 1, the local engine)."""
        return self._parallel > 1 and self._door.remote() is None

    # ------------------------------------------------------------------ Generate requests
    def submit(self, request: P.Generate, sink: ExternalSink) -> int:
        """Queue an API request; returns its ticket. It is sent when the engine is free for it (see the
        module docstring); ``request.request_id`` is replaced, ``sink`` gets its events."""
        ticket = self._queue.submit(request, sink)
        self.pump()
        return ticket

    def cancel(self, ticket: int) -> bool:
        """Cancel an API request: a queued one ends at once (Failed ``cancelled``), one in the engine is
        stopped like Stop (it ends with Finished, CANCELLED; a parallel sequence alone, by
        :class:`~app.core.protocol.CancelSequence`). False when it has ended."""
        if self._queue.cancel_waiting(ticket):
            return True
        found = self._queue.request_id_of(ticket)
        if found is None:
            return False
        if not self._door.running():
            return False
        rid, parallel = found
        if parallel:
            self._door.send(P.CancelSequence(rid))
        else:
            self._stop()
        return True

    def _stop(self) -> None:
        """Stop the plain Generate in the engine (the shared flag, and the watchdog)."""
        self._door.stop.cancel()
        self._door.stop.watch_stop()

    def set_parallel(self, n: int) -> None:
        """Decode up to ``n`` API requests together (1: one at a time, the plain path); requests sent
        already keep the number they were sent with. Used with the local engine only."""
        self._parallel = max(1, min(int(n), MAX_SEQUENCES))
        self.pump()

    def pump(self) -> None:
        """Send the next queued request when the engine is free for it (as many as there are free
        parallel sequences, with N > 1)."""
        if self.parallel_in_use:
            self._pump_parallel()
            return
        if self._queue.in_flight is not None or not self._queue.tickets or not self._door.free(False):
            return
        self._door.stop.clear_cancel()
        self._door.ask(K.EXTERNAL, lambda rid: self._start(rid, 1))

    def _pump_parallel(self) -> None:
        """Send queued requests as parallel sequences while fewer than N are in the engine; the person's
        reply in flight does not hold them (the engine pauses them while it runs)."""
        while (
            self._queue.tickets
            and not self._queue.serial_in_flight
            and len(self._queue.in_flight_tickets) < self._parallel
            and self._door.free(True)
        ):
            self._door.ask(K.EXTERNAL, lambda rid: self._start(rid, self._parallel))

    def _start(self, request_id: int, limit: int) -> P.Generate | P.GenerateParallel:
        """The first waiting request into the engine as ``request_id``: a plain Generate (``limit`` 1) or a
        :class:`~app.core.protocol.GenerateParallel` for ``limit`` sequences."""
        req = self._queue.start_next(request_id, limit=limit)
        assert req is not None  # the caller saw one waiting and room for it
        return req if limit == 1 else P.GenerateParallel(request_id, req, limit)

    def _ended(self, ev: P.Finished | P.Failed) -> None:
        """An API request in the engine ended: its sink hears it, then the person's held reply or what waited."""
        if ev.request_id in self._queue.parallel_ids():  # the shared Stop flag and the held reply are not its
            self._queue.end(ev)
            self._door.after()
            return
        self._door.stop.unwatch_stop()
        self._queue.end(ev)
        held = self._queue.take_held()
        if held is not None and self._door.running():
            request, cancelled = held
            self._door.stop.clear_cancel()
            self._door.send(request)
            if cancelled:
                self._stop()
            return
        self._door.after()

    # ------------------------------------------------------------------ the person's reply and the engine
    def hold_behind(self, request: P.Generate) -> bool:
        """Hold the person's Generate when a plain API Generate is in the engine (it goes first when that
        one ends, ahead of the queue); False when nothing holds it (send it now)."""
        if not self._queue.serial_in_flight:
            return False
        self._queue.hold(request)
        return True

    def cancel_held(self) -> bool:
        """Stop the person's held reply: it is still sent, then stopped at once. False when none is held."""
        return self._queue.cancel_held()

    def model_switching(self) -> None:
        """A model switch was asked: every embeddings request fails, the API requests in the engine are
        stopped (they end with what they have); the queued ones wait for the new model."""
        self._fail_embeds(EMBED_SWITCHED)
        for rid in self._queue.parallel_ids():
            self._door.send(P.CancelSequence(rid))
        if self._queue.serial_in_flight:
            self._stop()

    def fail_generates(self, message: str) -> None:
        """End every API Generate, in the engine and queued, with Failed ``engine`` and ``message``."""
        self._queue.fail_all(message)

    def engine_stopped(self) -> None:
        """The engine went away: the held reply is forgotten, every API request ends with Failed ``engine``."""
        self._queue.drop_held()
        self._queue.fail_all(STOPPED)
        self._fail_embeds(EMBED_STOPPED)

    # ------------------------------------------------------------------ embeddings (issue 23 §3)
    def embed(self, request: P.Embed, sink: ExternalSink) -> int | None:
        """Send an :class:`~app.core.protocol.Embed` (``request_id`` replaced); ``sink`` gets exactly one
        :class:`~app.core.protocol.Embedded` or :class:`~app.core.protocol.Failed` (kind ``engine`` when
        the engine stops or the model is switched first). The engine runs it in a context of its own,
        beside a reply in flight. Returns the request id, or None with no model or a remote engine
        (nothing is sent, ``sink`` is not called)."""
        if not self._door.running() or self._door.model() is None or self._door.remote() is not None:
            return None

        def make(rid: int) -> P.Embed:
            self._embed_sinks[rid] = sink  # before it goes: an engine found dead on send fails it
            return replace(request, request_id=rid)

        return self._door.ask(K.EMBED, make)

    def cancel_embed(self, request_id: int) -> bool:
        """Stop the Embed ``request_id`` (:class:`~app.core.protocol.CancelEmbed`); its sink gets Failed
        ``cancelled``. False when it has been answered already (nothing is sent)."""
        if request_id not in self._embed_sinks or not self._door.running():
            return False
        self._door.send(P.CancelEmbed(request_id))
        return True

    def _embed_ended(self, ev: P.Embedded | P.Failed) -> None:
        sink = self._embed_sinks.pop(ev.request_id, None)
        if sink is not None:
            sink(ev)

    def _fail_embeds(self, message: str) -> None:
        """End every embeddings request waiting for the engine with Failed ``engine``."""
        sinks, self._embed_sinks = self._embed_sinks, {}
        for rid, sink in sinks.items():
            sink(P.Failed(rid, P.FailureKind.ENGINE, message))
