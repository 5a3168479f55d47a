"""The fake engine for UI tests: the real engine client on a scripted host.

:class:`FakeEngine` is :class:`app.ui.engine.client.EngineClient` with one thing changed: its hosts
are :class:`~tests.support.scripted_host.ScriptedHost` (made by a
:class:`~tests.support.scripted_host.ScriptBook`) instead of engine processes. It overrides none of
the client, so a window test runs the real request table, the API queue, model switches, Stop and
crash detection; only the far end of the pipe is scripted (what it answers:
:mod:`tests.support.scripted_host`).

It adds the test's controls, which go to its book: :meth:`FakeEngine.script` (the scripts ``reply``,
``Endless``, ``CrashMidReply``, ``Refuse``), :meth:`FakeEngine.pause` / :meth:`FakeEngine.resume`,
:meth:`FakeEngine.fail_next_load`, :meth:`FakeEngine.crash_next_load`, the engine times
``ttft_s`` / ``token_s``, ``seed_when_random`` and ``vocab``. Every request the client sends is kept
in :attr:`FakeEngine.requests` (from ``request_sent``); :meth:`FakeEngine.sent` picks one type.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.core import protocol as P
from app.ui.engine.client import EngineClient
from tests.support.scripted_host import (
    FAKE_LLAMA_CPP_VERSION,
    CrashMidReply,
    Endless,
    Refuse,
    Reply,
    Script,
    ScriptBook,
    ScriptedHost,
    echo_reply,
    prompt_words,
    reply,
)

__all__ = [
    "FAKE_LLAMA_CPP_VERSION",
    "CrashMidReply",
    "Endless",
    "FakeEngine",
    "Refuse",
    "Reply",
    "Script",
    "ScriptBook",
    "ScriptedHost",
    "echo_reply",
    "prompt_words",
    "reply",
]


class FakeEngine(EngineClient):
    """An :class:`EngineClient` whose engine is scripted (see the module docstring).

    Attributes:
        book: what the scripted hosts do (shared by every host: a fresh one per model switch).
        requests: every request sent, in order (LoadModel, Generate, ResetContext, ComputeFunnel, ...).
    """

    def __init__(self, log_path: str | None = None, parent: QObject | None = None) -> None:
        book = ScriptBook()
        super().__init__(log_path, parent, host_factory=book.host)
        self.book = book
        book.paced = True  # the scripted engine runs no faster than this client handles its events
        self._link.event_received.connect(book.handled)  # after the client's own handler
        self.requests: list[object] = []
        self.request_sent.connect(self.requests.append)

    # ------------------------------------------------------------------ test controls
    def script(self, *scripts: Script) -> None:
        """Queue what the next replies do, in order (none queued: :func:`echo_reply`)."""
        self.book.script(*scripts)

    def pause(self) -> None:
        """Hold the engine's main loop where it is (no more events of a reply, no count answered) until :meth:`resume`."""
        self.book.pause()

    def resume(self) -> None:
        """Let the engine's main loop go on: the held reply streams on, held counts are answered."""
        self.book.resume()

    def hold_loads(self) -> None:
        """Answer no load until :meth:`release_loads` (a reply and everything else go on)."""
        self.book.hold_loads()

    def release_loads(self) -> None:
        self.book.release_loads()

    def fail_next_load(self, message: str, kind: P.FailureKind = P.FailureKind.LOAD) -> None:
        """The next load ends with Failed(kind, message)."""
        self.book.fail_next_load(message, kind)

    def crash_next_load(self, description: str = "The engine process was killed (SIGKILL).") -> None:
        """The engine dies during the next load."""
        self.book.crash_next_load(description)

    def sent(self, kind: type) -> list:
        """The requests of one type (e.g. ``P.Generate``), in order."""
        return [r for r in self.requests if isinstance(r, kind)]

    # ------------------------------------------------------------------ the engine's clock
    @property
    def ttft_s(self) -> float:
        """Engine time from a request to its first token, seconds."""
        return self.book.ttft_s

    @ttft_s.setter
    def ttft_s(self, value: float) -> None:
        self.book.ttft_s = value

    @property
    def token_s(self) -> float:
        """Engine time per decoded token, seconds (1 / tok/s)."""
        return self.book.token_s

    @token_s.setter
    def token_s(self, value: float) -> None:
        self.book.token_s = value

    @property
    def seed_when_random(self) -> int:
        """The seed reported when the sampler asks for a random one."""
        return self.book.seed_when_random

    @seed_when_random.setter
    def seed_when_random(self, value: int) -> None:
        self.book.seed_when_random = value

    @property
    def vocab(self) -> dict[int, str]:
        """Every token id the fake named, with its text."""
        return self.book.vocab
