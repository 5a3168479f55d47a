"""The engine process dies: the host says which signal and what it usually means."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from app.core import protocol as P
from app.engine.host import EngineDied, EngineHost
from tests.support.engine import SYSTEM, start_engine


def test_sigill_at_start_is_named_and_explained(monkeypatch):
    monkeypatch.setenv("GLASSBOX_ENGINE_CRASH_ON_START", "SIGILL")
    host = EngineHost()
    host.start()
    try:
        with pytest.raises(EngineDied) as e:
            host.recv(30)
        assert e.value.exitcode == -signal.SIGILL
        assert "SIGILL" in e.value.description and "CPU instructions" in e.value.description
    finally:
        host.stop()


def test_killed_mid_reply_reports_sigkill_and_keeps_the_partial_text(smollm2):
    eng = start_engine(smollm2, n_ctx=2048)
    got: list[str] = []
    streaming = threading.Event()

    def on_event(ev) -> None:
        if isinstance(ev, P.TokenEvent):
            got.append(ev.text)
            if len(got) >= 8:
                streaming.set()

    def killer():
        streaming.wait(60)  # mid-reply: a few tokens have streamed
        os.kill(eng.host.process.pid, signal.SIGKILL)

    t = threading.Thread(target=killer)
    t.start()
    try:
        with pytest.raises(EngineDied) as e:
            eng.generate(
                [SYSTEM, ("user", "Count to one thousand.")],
                temperature=0.0,
                max_tokens=-1,
                on_event=on_event,
            )
        assert "SIGKILL" in e.value.description and "memory" in e.value.description
        assert "".join(got), "tokens streamed before the kill are kept by the caller"
    finally:
        t.join()
        eng.host.stop()
