"""The local API's requests on the one engine: who waits, who is in, and the person's reply held behind it.

Plain Python (no Qt), driven by :class:`app.ui.engine.api_requests.ApiRequests`. With one sequence (the
Server panel's "parallel sequences" at 1) exactly one Generate is in the engine at a time, so Stop
(the one shared cancel flag) always means that one:

- an external request (:meth:`ExternalQueue.submit`) waits in line until the API side finds the engine
  free and calls :meth:`ExternalQueue.start_next`;
- when the person sends while an external request is in the engine, their Generate is held
  (:meth:`ExternalQueue.hold`) and goes first when that request ends (:meth:`ExternalQueue.take_held`),
  ahead of the external requests still waiting; Stop before it was sent marks it
  (:meth:`ExternalQueue.cancel_held`), and it ends at once when it is sent (nothing evaluated).

With N parallel sequences (issue 23 §4), up to N requests are in the engine at once
(:meth:`ExternalQueue.start_next` with ``limit``), each sent as a
:class:`~app.core.protocol.GenerateParallel` and stopped by its own
:class:`~app.core.protocol.CancelSequence`; the person's reply is never held behind them (the engine
pauses them while it runs). Events are handed to the sink of the request whose id they carry.

Every external request ends exactly once at its sink: with the engine's Finished or Failed, or with a
Failed of kind ``cancelled`` (cancelled while waiting) or ``engine`` (:meth:`ExternalQueue.fail_all`).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

from app.core import protocol as P

ExternalSink = Callable[[object], None]


@dataclass(frozen=True)
class ExternalTicket:
    """One external request: its ticket number (unique per queue), what to send, where events go.

    Attributes:
        ticket: the number :meth:`ExternalQueue.submit` returned.
        request: the Generate to send (its ``request_id`` is replaced when it is sent).
        sink: called in the UI thread with each event of the request (PromptPrepared,
            PrefillProgress, TokenEvent one at a time, ContextShifted) and exactly once with its
            terminal Finished or Failed (Failed kind ``cancelled`` when it was cancelled before
            it was sent, ``engine`` when the engine stopped or the model was replaced).
    """

    ticket: int
    request: P.Generate
    sink: ExternalSink


@dataclass
class _Held:
    request: P.Generate
    cancelled: bool = False


class ExternalQueue:
    """The external requests waiting, the one in the engine, and the person's held reply.

    Args:
        changed: called after a request was queued, sent, or ended (the API side's
            ``queue_changed``), before the ended request's sink hears of it.
    """

    def __init__(self, changed: Callable[[], None] = lambda: None) -> None:
        self._changed = changed
        self._numbers = itertools.count(1)
        self._waiting: collections.deque[ExternalTicket] = collections.deque()
        self._in: dict[int, tuple[ExternalTicket, bool]] = {}  # request id -> (ticket, sent as parallel)
        self._held: _Held | None = None

    # ------------------------------------------------------------------ read-outs
    @property
    def tickets(self) -> tuple[int, ...]:
        """Tickets of the requests waiting, first to go first."""
        return tuple(t.ticket for t in self._waiting)

    @property
    def in_flight(self) -> int | None:
        """The ticket of the (first) request in the engine, or None."""
        return next((t.ticket for t, _par in self._in.values()), None)

    @property
    def in_flight_id(self) -> int | None:
        """The request id the (first) request in the engine was sent with, or None."""
        return next(iter(self._in), None)

    @property
    def in_flight_tickets(self) -> tuple[int, ...]:
        """Tickets of every request in the engine, first sent first."""
        return tuple(t.ticket for t, _par in self._in.values())

    @property
    def serial_in_flight(self) -> bool:
        """A request sent as a plain Generate (one at a time, the shared Stop flag) is in the engine."""
        return any(not par for _t, par in self._in.values())

    def request_id_of(self, ticket: int) -> tuple[int, bool] | None:
        """The request id of the request in the engine with ``ticket`` and whether it was sent as
        parallel; None when it is not in the engine."""
        return next(((rid, par) for rid, (t, par) in self._in.items() if t.ticket == ticket), None)

    def ticket_of(self, request_id: int) -> int | None:
        """The ticket of the request in the engine sent as ``request_id``, or None."""
        found = self._in.get(request_id)
        return found[0].ticket if found is not None else None

    def parallel_ids(self) -> tuple[int, ...]:
        """Request ids of the requests in the engine sent as parallel sequences."""
        return tuple(rid for rid, (_t, par) in self._in.items() if par)

    # ------------------------------------------------------------------ the line
    def submit(self, request: P.Generate, sink: ExternalSink) -> int:
        """Queue ``request`` at the end of the line; returns its ticket number."""
        ticket = ExternalTicket(next(self._numbers), request, sink)
        self._waiting.append(ticket)
        self._changed()
        return ticket.ticket

    def cancel_waiting(self, ticket: int) -> bool:
        """End a waiting request at once (its sink gets Failed ``cancelled``); False when none waits with that ticket."""
        for queued in self._waiting:
            if queued.ticket == ticket:
                self._waiting.remove(queued)
                self._changed()
                queued.sink(P.Failed(0, P.FailureKind.CANCELLED, "The request was cancelled before it started."))
                return True
        return False

    def start_next(self, request_id: int, limit: int = 1) -> P.Generate | None:
        """Take the first waiting request into the engine as ``request_id``; returns the Generate to
        send, or None when none waits or ``limit`` requests are in already (``limit`` > 1: it is
        sent as a parallel sequence)."""
        if not self._waiting or len(self._in) >= limit:
            return None
        ticket = self._waiting.popleft()
        self._in[request_id] = (ticket, limit > 1)
        self._changed()
        return replace(ticket.request, request_id=request_id)

    def deliver(self, event: object) -> None:
        """A non-terminal event of a request in the engine, to its sink (a TokenBatch one TokenEvent at a time)."""
        found = self._in.get(getattr(event, "request_id", -1))
        if found is None:
            return
        sink = found[0].sink
        if isinstance(event, P.TokenBatch):
            for tok in event.tokens:
                sink(tok)
        else:
            sink(event)

    def end(self, event: P.Finished | P.Failed) -> bool:
        """The request in the engine with ``event.request_id`` ended with ``event``: out of the engine,
        then its sink hears it. Returns whether it had been sent as a parallel sequence."""
        found = self._in.pop(event.request_id, None)
        if found is None:
            return False
        self._changed()
        found[0].sink(event)
        return found[1]

    def fail_all(self, message: str) -> None:
        """End every external request, in the engine and waiting, with Failed ``engine`` and ``message``."""
        ended: list[tuple[int, ExternalTicket]] = [(rid, t) for rid, (t, _par) in self._in.items()]
        self._in.clear()
        ended.extend((0, t) for t in self._waiting)
        self._waiting.clear()
        if ended:
            self._changed()
        for rid, ticket in ended:
            ticket.sink(P.Failed(rid, P.FailureKind.ENGINE, message))

    # ------------------------------------------------------------------ the person's reply
    def hold(self, request: P.Generate) -> None:
        """Hold the person's Generate until the request in the engine ends."""
        self._held = _Held(request)

    @property
    def holding(self) -> bool:
        """The person's reply waits behind the external request in the engine."""
        return self._held is not None

    def cancel_held(self) -> bool:
        """Stop the held reply: it is still sent, then stopped at once. False when none is held."""
        if self._held is None:
            return False
        self._held.cancelled = True
        return True

    def take_held(self) -> tuple[P.Generate, bool] | None:
        """The held reply to send now and whether Stop was pressed for it; None when none is held."""
        held, self._held = self._held, None
        return (held.request, held.cancelled) if held is not None else None

    def drop_held(self) -> None:
        """Forget the held reply (the engine went away)."""
        self._held = None
