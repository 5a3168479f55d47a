"""Driving a :class:`~app.remote.host.RemoteHost` without the window, as the window's reader does."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.core import protocol as P
from app.core.chat.context import ChatMessage, LoadSettings, Role
from app.core.remote import RemoteEndpoint
from app.core.sampling.params import SamplerSettings
from app.remote.host import RemoteHost

SYSTEM = "You are a helpful assistant."
GREEDY = SamplerSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=48, seed=42)


@dataclass
class Outcome:
    """A request's events: the terminal one and everything before it (TokenBatches opened up)."""

    terminal: object
    events: list[object] = field(default_factory=list)

    @property
    def tokens(self) -> list[P.TokenEvent]:
        return [e for e in self.events if isinstance(e, P.TokenEvent)]

    @property
    def prompt(self) -> P.PromptPrepared:
        (p,) = [e for e in self.events if isinstance(e, P.PromptPrepared)]
        return p


def connect(endpoint: RemoteEndpoint) -> tuple[RemoteHost, P.ModelLoaded]:
    """A started host with the connection test passed (its ModelLoaded)."""
    host = RemoteHost(endpoint)
    host.start()
    assert isinstance(host.recv_raw(10), P.EngineReady)
    out = request(host, P.LoadModel(1, endpoint.model, LoadSettings()))
    assert isinstance(out.terminal, P.ModelLoaded), out.terminal
    return host, out.terminal


def request(host: RemoteHost, req: object, timeout_s: float = 120.0, cancel_after_tokens: int = 0) -> Outcome:
    """Send ``req`` and read events until its terminal one; ``cancel_after_tokens``: Stop after that many tokens."""
    if isinstance(req, P.Generate):
        host.clear_cancel()  # as EngineClient does before each Generate (the flag stays set after a Stop)
    host.send(req)
    rid = getattr(req, "request_id", None)
    out = Outcome(None)
    deadline = time.monotonic() + timeout_s
    cancelled = False
    while time.monotonic() < deadline:
        ev = host.recv_raw(1.0)
        if ev is None:
            continue
        if isinstance(ev, P.TERMINAL_EVENTS) and getattr(ev, "request_id", None) == rid:
            out.terminal = ev
            return out
        out.events.extend(ev.tokens if isinstance(ev, P.TokenBatch) else [ev])
        if cancel_after_tokens and not cancelled and len(out.tokens) >= cancel_after_tokens:
            cancelled = True
            out.events.append(("cancel", time.monotonic()))
            host.cancel()
    raise TimeoutError(f"no answer to {req!r} in {timeout_s} s")


def chat(text: str, request_id: int = 2, sampler: SamplerSettings = GREEDY, top_candidates: int = 0) -> P.Generate:
    messages = (ChatMessage(Role.SYSTEM, SYSTEM), ChatMessage(Role.USER, text))
    return P.Generate(request_id, messages, sampler, top_candidates=top_candidates)


def openai_messages(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
