"""Blocking calls off the UI thread, with results back on it.

:class:`TaskPool` runs callables on a few *Python* threads (named
``glassbox-<name>-<n>``, daemon) and hands each result or exception to the UI
thread through a queued signal. Why not QThreadPool: Python code running on a
Qt-created thread gets a ``threading._DummyThread`` the first time anything
asks for the current thread (logging does), and those never end, which the
test suite's leak checks rightly count as a thread left running. Plain
threads are joined by :meth:`TaskPool.shutdown`; one stuck on a dead network
past the timeout is a daemon, so it cannot keep the app from quitting.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

log = logging.getLogger(__name__)

_STOP = object()


class TaskPool(QObject):
    """A small pool of worker threads whose results arrive on the UI thread.

    Args:
        name: used in the threads' names.
        max_threads: at most this many calls run at once (1 serialises them).
        parent: the owning QObject.

    A call submitted with a ``key`` supersedes earlier calls with the same key:
    their results are dropped (the newest search wins over a slow older one).
    """

    _finished = Signal(int, object, object)  # internal: task id, result, exception

    def __init__(self, name: str, max_threads: int = 2, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.max_threads = max_threads
        self._queue: queue.Queue[Any] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._inflight = 0  # submitted and not finished running
        self._ids = itertools.count(1)
        self._callbacks: dict[
            int, tuple[Callable[[Any], None] | None, Callable[[BaseException], None] | None, str | None]
        ] = {}
        self._latest: dict[str, int] = {}
        self._closed = False
        self._finished.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    @property
    def busy(self) -> bool:
        """Whether a call is queued or running (results not yet delivered included)."""
        return bool(self._callbacks)

    def submit(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        *,
        key: str | None = None,
    ) -> int:
        """Run ``fn()`` on a worker thread; call ``on_done(result)`` or ``on_error(exc)`` on the UI thread.

        Returns:
            The task's id. After :meth:`shutdown` nothing runs and 0 is returned.
        """
        if self._closed:
            return 0
        tid = next(self._ids)
        self._callbacks[tid] = (on_done, on_error, key)
        if key is not None:
            self._latest[key] = tid
        with self._lock:
            self._inflight += 1
            if self._inflight > len(self._threads) and len(self._threads) < self.max_threads:
                t = threading.Thread(target=self._work, name=f"glassbox-{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
            self._queue.put((tid, fn))
        return tid

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            tid, fn = item
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn()
            except BaseException as exc:
                error = exc
            with self._lock:
                self._inflight -= 1
            if self._closed:
                continue
            try:
                self._finished.emit(tid, result, error)
            except RuntimeError:  # the QObject is gone (window destroyed without shutdown)
                return

    def _deliver(self, tid: int, result: Any, error: BaseException | None) -> None:
        entry = self._callbacks.pop(tid, None)
        if entry is None or self._closed:
            return
        on_done, on_error, key = entry
        if key is not None and self._latest.get(key) != tid:
            return  # superseded
        if error is not None:
            if on_error is not None:
                on_error(error)
            else:
                log.error("background task failed", exc_info=(type(error), error, error.__traceback__))
        elif on_done is not None:
            on_done(result)

    def shutdown(self, timeout: float = 5.0) -> bool:
        """Drop queued calls, let running ones finish, and join the threads.

        Args:
            timeout: seconds to wait in all.

        Returns:
            True when every thread ended (a call blocked longer than ``timeout``
            leaves its daemon thread behind, and its result is dropped).
        """
        self._closed = True
        self._callbacks.clear()
        with self._lock:
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
            for _ in self._threads:
                self._queue.put(_STOP)
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        left = [t.name for t in threads if t.is_alive()]
        if left:
            log.warning("background threads still busy at shutdown: %s", ", ".join(left))
        return not left
