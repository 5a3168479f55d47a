"""`JobRunner`: one long job in its own engine process: start it, send one request, relay its events.

A job (``llama_model_quantize`` over a whole file, two models scored over a text) runs in a fresh
:class:`app.engine.host.EngineHost` running the engine's usual request loop (``app/engine/child.py``),
not in the chat's engine: the chat keeps its model and its KV cache and can reply meanwhile (the CPU
is shared, so more slowly), a crash in the job leaves the chat's engine alone, and a job llama.cpp
cannot interrupt is ended by killing its process. The process ends after the request's terminal
event (Shutdown, terminated after 5 s), or at once when the job is cancelled.

Lifecycle: :meth:`start` starts the process and returns; on its ``EngineReady`` the runner sends the
request; every event carrying the request's id but the terminal one goes to :attr:`progressed`; the
terminal event goes to :attr:`finished` (or :attr:`failed` for a ``Failed``); then :attr:`ended`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.core import protocol as P
from app.core.remote import RemoteEndpoint
from app.paths import default_paths
from app.ui.engine.host_link import Host, HostLink, default_hosts

log = logging.getLogger(__name__)

KILL_AFTER_MS = 3000
"""How long :meth:`JobRunner.cancel` waits for the job to end on its cancel flag before killing it."""

_ids = itertools.count(1)


def job_hosts(log_path: str | None = None) -> Callable[[], Host]:
    """Makes a job's engine process, writing its log to ``log_path`` (None: ``jobs.log`` in the log folder)."""
    path = log_path if log_path is not None else str(default_paths().logs_dir / "jobs.log")
    make = default_hosts(path)
    return lambda: make(None)


def _end_orphan(host: Host | None) -> None:
    """Kill a job's process whose runner was deleted (nobody can hear it any more)."""
    if host is not None and host.alive:
        log.info("a job's runner was deleted while its process ran: killed")
        host.kill()


class JobRunner(QObject):
    """One job in its own engine process.

    Args:
        hosts: makes the host (None: :func:`job_hosts`; tests pass a scripted one).

    Signals:
        progressed(object): an event of the request that is not its terminal one.
        finished(object): the terminal event, when it is not a ``P.Failed``.
        failed(object): a ``P.Failed``: from the engine, or made here when the process died
            (kind ``ENGINE``, the exit's meaning as message).
        cancelled(): :meth:`cancel` took effect: the job ended on its flag without an answer, or was killed.
        ended(): after any of the three above; the runner may be started again.
    """

    progressed = Signal(object)  # an event of app.core.protocol with the request's id
    finished = Signal(object)  # the request's terminal event (not Failed)
    failed = Signal(object)  # P.Failed
    cancelled = Signal()
    ended = Signal()

    def __init__(self, hosts: Callable[[], Host] | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._link = HostLink(self._make_host, self)
        self._hosts = hosts or job_hosts()
        self._link.event_received.connect(self._on_event)
        self._link.host_died.connect(self._on_died)
        self._request: Callable[[int], object] | None = None
        self._rid = 0
        self._sent = False
        self._cancelling = False
        self._kill_timer = QTimer(self)
        self._kill_timer.setSingleShot(True)
        self._kill_timer.timeout.connect(self._kill)

    def _make_host(self, _remote: RemoteEndpoint | None) -> Host:
        return self._hosts()

    @property
    def running(self) -> bool:
        """A job was started and has not ended."""
        return self._request is not None

    @property
    def pid(self) -> int | None:
        """The job's process id while it runs (None: none, or a scripted host)."""
        return self._link.pid if self.running else None

    def start(self, request: Callable[[int], object]) -> None:
        """Start a process and send it ``request(request_id)`` once it is ready.

        Raises:
            RuntimeError: a job is running (one at a time per runner).
        """
        if self.running:
            raise RuntimeError("a job is already running")
        self._request = request
        self._rid = next(_ids)
        self._sent = False
        self._cancelling = False
        self._link.start(None)
        host = self._link.host
        # Deleted with its owner (a dialog closed) while the job runs: its process must not outlive it.
        self.destroyed.connect(lambda *_: _end_orphan(host))

    def cancel(self, kill_after_ms: int = KILL_AFTER_MS) -> None:
        """Stop the job: its cancel flag now, its process killed after ``kill_after_ms`` (0: at once) unless
        it ended first. Nothing to do when no job runs."""
        if not self.running:
            return
        self._cancelling = True
        self._link.cancel()
        if kill_after_ms <= 0:
            self._kill()
        else:
            self._kill_timer.start(kill_after_ms)

    @Slot()
    def _kill(self) -> None:
        if self.running:
            log.info("job %d killed after cancel", self._rid)
            self._link.release(kill=True)
            self._end(self.cancelled.emit)

    @Slot(object)
    def _on_event(self, ev: object) -> None:
        if not self.running:
            return
        if isinstance(ev, P.EngineReady):
            if not self._sent and self._request is not None:
                self._sent = True
                self._link.send(self._request(self._rid))
            return
        if getattr(ev, "request_id", None) != self._rid:
            return
        if not isinstance(ev, P.TERMINAL_EVENTS):
            self.progressed.emit(ev)
            return
        self._link.release()
        if self._cancelling:
            self._end(self.cancelled.emit)
        elif isinstance(ev, P.Failed):
            self._end(lambda: self.failed.emit(ev))
        else:
            self._end(lambda: self.finished.emit(ev))

    @Slot(object)
    def _on_died(self, died: BaseException) -> None:
        if not self.running:
            return
        self._link.release()
        if self._cancelling:
            self._end(self.cancelled.emit)
            return
        why = str(getattr(died, "description", died))
        self._end(
            lambda: self.failed.emit(P.Failed(self._rid, P.FailureKind.ENGINE, f"The job's engine stopped: {why}"))
        )

    def _end(self, emit: Callable[[], None]) -> None:
        self._kill_timer.stop()
        self._request = None
        emit()
        self.ended.emit()

    def shutdown(self) -> None:
        """End a running job's process at once (the window closes); emits nothing.

        It returns once the process is gone and the job's reader thread has heard of it and ended
        (``HostLink.drop``: a killed process's pipe closes at once, a few ms; 5 s at most), so nothing of
        the job outlives a runner deleted right after (a quantize dialog closed within a second of Start)."""
        self._kill_timer.stop()
        self._request = None
        self._link.drop(kill=True)


def running_jobs(root: QObject) -> tuple[str, ...]:
    """What the jobs running under ``root`` (its :class:`JobRunner` descendants) are, each named once by the
    runner's ``objectName`` ("a quantization", "a comparison"; "a job" when unnamed), for a speed figure
    taken meanwhile to say it shared the CPUs."""
    names = (r.objectName() or "a job" for r in root.findChildren(JobRunner) if r.running)
    return tuple(dict.fromkeys(names))
