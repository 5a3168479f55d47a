"""Which request an engine event answers: request id -> kind, for the requests not answered yet.

Plain Python (no Qt). The engine answers every request with exactly one terminal event
(:data:`app.core.protocol.TERMINAL_EVENTS`), a Generate with events before it
(PromptPrepared, PrefillProgress, TokenBatch, ContextShifted). :class:`RequestTable` keeps the
requests the client waits on; :meth:`RequestTable.match` says which kind of request an event
answers and forgets the request at its terminal event. What the client does with the answer is its
own table, (kind, event type) -> handler (:class:`app.ui.engine.client.EngineClient`).
"""

from __future__ import annotations

import enum

from app.core import protocol as P


class RequestKind(enum.Enum):
    """What a request waiting for its answer was for."""

    LOAD = "load"  # LoadModel (at most one: a new load replaces the one before)
    REPLY = "reply"  # the person's Generate (at most one)
    EXTERNAL = "external"  # a Generate of the local API (one in the engine; up to N as parallel sequences)
    FUNNEL = "funnel"  # ComputeFunnel
    RENDER = "render"  # RenderPrompt
    COUNT = "count"  # CountPrompt
    INSPECT = "inspect"  # InspectToken
    SWEEP = "sweep"  # SweepDepth (at most one; it holds the chat context like a reply)
    EMBED = "embed"  # Embed (the local API's embeddings; several may wait, the engine runs them in turn)
    CHECK = "check"  # CheckConstraint (an output format checked, issue 23 §1)


class RequestTable:
    """The requests sent (or about to be) and not answered yet: request id -> :class:`RequestKind`.

    A request without an entry (ResetContext, PrepareInspect, one already answered, one of an
    engine already replaced) has its events dropped by the client.
    """

    def __init__(self) -> None:
        self._pending: dict[int, RequestKind] = {}

    def expect(self, request_id: int, kind: RequestKind) -> None:
        """Wait for the answer to ``request_id``."""
        self._pending[request_id] = kind

    def match(self, event: object) -> RequestKind | None:
        """The kind of the request ``event`` answers (None: no request waits for it).

        A terminal event (:data:`~app.core.protocol.TERMINAL_EVENTS`) ends the request: it is
        forgotten before this returns.
        """
        rid = getattr(event, "request_id", None)
        if not isinstance(rid, int):
            return None
        kind = self._pending.get(rid)
        if kind is not None and isinstance(event, P.TERMINAL_EVENTS):
            del self._pending[rid]
        return kind

    def one(self, kind: RequestKind) -> int | None:
        """The request id of ``kind`` waiting (the newest when there are several), or None."""
        found = [rid for rid, k in self._pending.items() if k is kind]
        return found[-1] if found else None

    def forget(self, kind: RequestKind) -> tuple[int, ...]:
        """Stop waiting for every request of ``kind``; returns their ids, oldest first."""
        gone = tuple(rid for rid, k in self._pending.items() if k is kind)
        for rid in gone:
            del self._pending[rid]
        return gone

    def clear(self) -> None:
        """Stop waiting for anything (the engine went away)."""
        self._pending.clear()

    def __len__(self) -> int:
        return len(self._pending)
