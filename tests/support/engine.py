"""Driving the real engine process in tests: one :class:`Engine` (a host with a model loaded) and one turn at a time.

Used by tests/engine (its conftest's ``engine`` and ``fresh_engine`` fixtures) and any test that needs
an engine process without the window.
"""

from __future__ import annotations

from pathlib import Path

from app.core import protocol as P
from app.core.chat.context import ChatMessage, ContextPolicy, LoadSettings
from app.core.sampling.params import SamplerSettings
from app.engine.host import EngineHost

SYSTEM = ("system", "You are a helpful assistant.")
STOP_POLICY = ContextPolicy.STOP.value
ROLLING_POLICY = ContextPolicy.ROLLING.value


class Engine:
    """An engine process with a model loaded, and helpers for one turn."""

    def __init__(self, host: EngineHost, loaded: P.ModelLoaded) -> None:
        self.host = host
        self.loaded = loaded

    def load(self, path: Path | str, **settings) -> P.ModelLoaded | P.Failed:
        ev = self.host.request(P.LoadModel(self.host.next_id(), str(path), LoadSettings(**settings)))
        if isinstance(ev, P.ModelLoaded):
            self.loaded = ev
        return ev

    def generate(
        self,
        messages,
        *,
        events: list | None = None,
        on_event=None,
        timeout: float = 120.0,
        stop_strings=(),
        top_candidates=0,
        continue_last=False,
        chat_template=None,
        **sampler,
    ):
        """One turn; returns the terminal event (Finished or Failed)."""
        msgs = tuple(m if isinstance(m, ChatMessage) else ChatMessage(*m) for m in messages)
        self.host.clear_cancel()
        seen = events if events is not None else []

        def handle(ev):
            seen.append(ev)
            if on_event:
                on_event(ev)

        req = P.Generate(
            self.host.next_id(),
            msgs,
            SamplerSettings(**sampler),
            tuple(stop_strings),
            top_candidates,
            continue_last,
            chat_template=chat_template,
        )
        return self.host.request(req, timeout=timeout, on_event=handle)

    def render(self, messages=(), chat_template=None, continue_last=False, timeout: float = 30.0):
        """RenderPrompt; returns PromptRendered or Failed."""
        msgs = tuple(m if isinstance(m, ChatMessage) else ChatMessage(*m) for m in messages)
        req = P.RenderPrompt(self.host.next_id(), msgs, chat_template, continue_last)
        return self.host.request(req, timeout=timeout)


def start_engine(model: Path, **settings) -> Engine:
    host = EngineHost()
    host.start()
    ready = host.recv(60)
    assert isinstance(ready, P.EngineReady), ready
    loaded = host.request(P.LoadModel(host.next_id(), str(model), LoadSettings(**settings)))
    assert isinstance(loaded, P.ModelLoaded), getattr(loaded, "message", loaded)
    return Engine(host, loaded)
