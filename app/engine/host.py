"""Start, talk to, and end the engine process (plain Python, no Qt).

:class:`EngineHost` is what the Qt :class:`app.ui.engine.client.EngineClient`
wraps, and what engine tests and benchmarks use directly.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import multiprocessing as mp
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from app.core import protocol as P
from app.core.exitinfo import describe_exit


class EngineDied(RuntimeError):
    """The engine process ended unexpectedly.

    Attributes:
        exitcode: the process exit code (negative: killed by that signal, POSIX).
        description: what it means, for the person.
    """

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode
        self.description = describe_exit(exitcode)
        super().__init__(self.description)


class EngineHost:
    """One engine child process.

    Args:
        log_path: the engine's log file (None: stderr).

    Thread-safety: :meth:`send`, :meth:`cancel` and :meth:`kill` may be called from
    any thread; :meth:`recv` from one reader thread.
    """

    def __init__(self, log_path: str | None = None) -> None:
        self._ctx = mp.get_context("spawn")
        self.log_path = log_path
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self.process: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self.cancel_event = self._ctx.Event()
        self._queued: collections.deque[P.TokenEvent] = collections.deque()

    def next_id(self) -> int:
        """A fresh request id."""
        return next(self._ids)

    def start(self) -> None:
        """Start the child process (returns at once; it sends EngineReady when ready)."""
        from app.engine.process import engine_main

        parent, child = self._ctx.Pipe(duplex=True)
        self.cancel_event.clear()
        proc = self._ctx.Process(
            target=engine_main, args=(child, self.cancel_event, self.log_path), name="glassbox-engine", daemon=True
        )
        proc.start()
        child.close()
        self.process = proc
        self._conn = parent

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def send(self, request: Any) -> None:
        """Send a request.

        Raises:
            EngineDied: the process is gone.
        """
        if self._conn is None:
            raise EngineDied(self._wait_exitcode())
        with self._send_lock:
            try:
                self._conn.send(request)
            except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
                raise EngineDied(self._wait_exitcode()) from None

    def cancel(self) -> None:
        """Ask the current request to stop (checked between prefill slices and decode steps)."""
        self.cancel_event.set()

    def clear_cancel(self) -> None:
        """Reset the cancel flag; call before sending the next Generate."""
        self.cancel_event.clear()

    def recv(self, timeout: float | None = None) -> Any:
        """The next event, or None after ``timeout`` seconds.

        A :class:`~app.core.protocol.TokenBatch` is handed out one TokenEvent at a time.

        Raises:
            EngineDied: the process ended (its exit code says how).
        """
        if self._queued:
            return self._queued.popleft()
        ev = self.recv_raw(timeout)
        if isinstance(ev, P.TokenBatch):
            self._queued.extend(ev.tokens[1:])
            return ev.tokens[0] if ev.tokens else self.recv(timeout)
        return ev

    def recv_raw(self, timeout: float | None = None) -> Any:
        """Like :meth:`recv`, but a TokenBatch comes whole (the UI's reader thread uses this)."""
        conn = self._conn
        if conn is None:
            raise EngineDied(self._wait_exitcode())
        try:
            if timeout is not None and not conn.poll(timeout):
                return None
            return conn.recv()
        except (EOFError, OSError, ConnectionResetError):
            raise EngineDied(self._wait_exitcode()) from None

    def _wait_exitcode(self) -> int | None:
        proc = self.process  # may be cleared by stop() on another thread
        if proc is None:
            return None
        try:
            proc.join(2.0)
            return proc.exitcode
        except ValueError:  # closed by stop() meanwhile
            return None

    def request(self, request: Any, timeout: float = 120.0, on_event: Callable[[Any], None] | None = None) -> Any:
        """Send ``request`` and return its terminal event (blocking; for tests and benchmarks).

        Non-terminal events for it go to ``on_event``.

        Raises:
            TimeoutError: no terminal event within ``timeout`` seconds of silence.
            EngineDied: the process ended.
        """
        self.send(request)
        rid = getattr(request, "request_id", None)
        while True:
            ev = self.recv(timeout)
            if ev is None:
                raise TimeoutError(f"no answer to {type(request).__name__} within {timeout} s")
            if isinstance(ev, P.TERMINAL_EVENTS) and getattr(ev, "request_id", None) == rid:
                return ev
            if on_event is not None:
                on_event(ev)

    def stop(self, timeout: float = 5.0) -> None:
        """End the process: Shutdown, then terminate, then kill. Idempotent."""
        proc = self.process
        if proc is not None and proc.is_alive():
            with contextlib.suppress(EngineDied):
                self.send(P.Shutdown())
            proc.join(timeout)
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
        self._close()

    def kill(self) -> None:
        """End the process at once (it did not answer Stop in time)."""
        proc = self.process
        if proc is not None and proc.is_alive():
            proc.kill()
            proc.join(5.0)

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
        if self.process is not None:
            with contextlib.suppress(ValueError):  # still running: close() refuses; the daemon flag ends it with us
                self.process.close()
            self.process = None
