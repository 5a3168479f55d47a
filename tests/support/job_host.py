"""A scripted job host for :class:`app.ui.jobs.runner.JobRunner` tests: the engine's interface, no model.

``ScriptedJobHost(script)`` answers ``start`` with ``EngineReady`` and runs ``script(request, emit,
cancelled)`` on a thread for the request it is sent: ``emit`` sends an event to the runner, ``cancelled()``
says whether the cancel flag is set. ``hang=True`` in :class:`JobScripts` makes a job that never
looks at the flag (like ``llama_model_quantize``), so only a kill ends it. A kill or a stop ends the
host: ``recv_raw`` raises :class:`~app.engine.host.EngineDied` (exit -9 for a kill, 0 for a stop).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from app.core import protocol as P
from app.engine.host import EngineDied

Emit = Callable[[object], None]
Script = Callable[[Any, Emit, Callable[[], bool]], None]

_DEAD = object()


class ScriptedJobHost:
    """One scripted job process (see the module docstring)."""

    def __init__(self, script: Script) -> None:
        self._script = script
        self._events: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._cancel = threading.Event()
        self._alive = False
        self._exitcode: int | None = None
        self.requests: list[object] = []
        self.killed = False

    @property
    def process(self) -> None:
        return None

    @property
    def alive(self) -> bool:
        return self._alive

    def start(self) -> None:
        self._alive = True
        self._events.put(P.EngineReady("0.0.0-job", "scripted", False, (), rpc=False))

    def send(self, request: Any) -> None:
        if not self._alive:
            raise EngineDied(self._exitcode)
        self.requests.append(request)
        threading.Thread(target=self._run, args=(request,), daemon=True).start()

    def _run(self, request: Any) -> None:
        self._script(request, self._emit, self._cancel.is_set)

    def _emit(self, event: object) -> None:
        if self._alive:
            self._events.put(event)

    def recv_raw(self, timeout: float | None = None) -> Any:
        ev = self._events.get(timeout=timeout)
        if ev is _DEAD:
            raise EngineDied(self._exitcode)
        return ev

    def cancel(self) -> None:
        self._cancel.set()

    def clear_cancel(self) -> None:
        self._cancel.clear()

    def _end(self, exitcode: int) -> None:
        if self._alive:
            self._alive = False
            self._exitcode = exitcode
            self._events.put(_DEAD)

    def stop(self, timeout: float = 5.0) -> None:
        self._end(0)

    def kill(self) -> None:
        self.killed = True
        self._end(-9)

    def die(self) -> None:
        """The process dies on its own (a crash in llama.cpp)."""
        self._end(-11)
