"""The engine host the client talks to: start, switch, stop, its reader thread, crash detection.

A host is the engine's far end with one interface (:class:`Host`): the local engine process
(:class:`app.engine.host.EngineHost`), a remote server (:class:`app.remote.host.RemoteHost`), or in
the UI tests a scripted one (``tests/support/fake_engine.py``). :class:`HostLink` makes them with a
:data:`HostFactory`, runs one reader thread per host that blocks on :meth:`Host.recv_raw` and hands
each event to the UI thread through a queued signal (the UI thread never waits on the engine), and
drops what a host already replaced still sends. It also keeps the Stop watchdog: a host that does
not answer Stop within :data:`STOP_GRACE_MS` is reported (:attr:`HostLink.stop_timed_out`).

Every model load after the first in an engine process goes to a fresh engine process
(:meth:`HostLink.take_load`; the old one ends): llama.cpp and the C heap do not give all of a
freed model's memory back to the system (SmolLM2 → Gemma 3 → SmolLM2 five times grew one process
from 206 to 241 MB for the same SmolLM2; in fresh processes it stays at 206 MB:
bench/model_switch.py), and whatever state a model left in llama.cpp goes with its process. This
holds for the same model with new settings too (a new n_ctx, n_batch, threads): that reload frees
and allocates the same way, and one rule is simpler to trust than two. The cost is the process
start (spawn, import llama_cpp, backend init): a switch took 0.6-1.1 s instead of 0.3 s (median of
10, two runs, 2 busy CPUs), once per load the person asked for. A switch between the local engine
and a server, or between servers, goes to a fresh host the same way.

What a death means for the person (:func:`crash_description`) is written here too, so the client
only decides what to reset.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.core.remote import RemoteEndpoint
from app.engine.host import EngineDied, EngineHost
from app.remote.host import RemoteClosed, RemoteHost

log = logging.getLogger(__name__)

STOP_GRACE_MS = 3000
HOST_ENDED = (EngineDied, RemoteClosed)  # what recv_raw raises when the host is gone (``.description``)


class Host(Protocol):
    """What :class:`HostLink` needs of a host (see :class:`app.engine.host.EngineHost`)."""

    @property
    def process(self) -> Any: ...  # the child process (``.pid``), None without one

    @property
    def alive(self) -> bool: ...

    def start(self) -> None: ...

    def send(self, request: Any) -> None: ...

    def recv_raw(self, timeout: float | None = None) -> Any: ...

    def cancel(self) -> None: ...

    def clear_cancel(self) -> None: ...

    def stop(self, timeout: float = 5.0) -> None: ...

    def kill(self) -> None: ...


HostFactory = Callable[[RemoteEndpoint | None], Host]
"""Makes the host for the local engine (None) or for a remote server; not started."""


def default_hosts(log_path: str | None) -> HostFactory:
    """The app's hosts: an engine process writing its log to ``log_path``, or a :class:`RemoteHost`."""

    def make(remote: RemoteEndpoint | None) -> Host:
        return RemoteHost(remote) if remote is not None else EngineHost(log_path)

    return make


def crash_description(died: BaseException, rpc_servers: tuple[str, ...]) -> str:
    """What the person reads when the engine died: the exit's meaning, and the likeliest cause.

    Args:
        died: what :meth:`Host.recv_raw` raised (its ``description``).
        rpc_servers: the RPC servers (``host:port``) the loaded model had layers on; named as the
            likeliest cause (llama.cpp aborts when an RPC server goes away).

    Which file was loading, if any, is the model loader's to add (:mod:`app.ui.window.model_loader`).
    """
    description = str(getattr(died, "description", died))
    if rpc_servers:
        description = (
            f"{description} The model had layers on the RPC server(s) {', '.join(rpc_servers)}: llama.cpp "
            "stops the engine when one of them goes away or its connection breaks. Check that they run, "
            "or load without them."
        )
    return description


class _Relay(QObject):
    """From a reader thread to the UI thread (queued), with the host it read from (see :class:`HostLink`)."""

    received = Signal(object, object)  # (the host it came from, an event of app.core.protocol)
    ended = Signal(object, object)  # (the host, EngineDied | BaseException)


class HostLink(QObject):
    """The one host in use, its reader thread and the Stop watchdog.

    Args:
        factory: makes each host (:data:`HostFactory`).

    Signals:
        event_received(object): an event of the current host, in the UI thread (a host already
            replaced or dropped is never heard from again).
        host_died(object): the current host ended on its own (the exception :meth:`Host.recv_raw` or
            :meth:`Host.send` raised; ``.description`` says why), in the UI thread.
        stop_timed_out(): :meth:`watch_stop` ran out before :meth:`unwatch_stop`.
    """

    event_received = Signal(object)  # any event of app.core.protocol
    host_died = Signal(object)  # EngineDied | BaseException (what recv_raw raised)
    stop_timed_out = Signal()

    def __init__(self, factory: HostFactory, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._factory = factory
        self._host: Host | None = None
        self._made_for: RemoteEndpoint | None = None  # the server the host is, None: the local engine
        self._reader: threading.Thread | None = None
        self._used = False  # a LoadModel went to the current host
        self._stop_timer = QTimer(self)
        self._stop_timer.setSingleShot(True)
        self._stop_timer.timeout.connect(self.stop_timed_out)
        # The reader threads emit on a relay with no parent, which they keep alive: when this link is
        # deleted with its owner (a job's dialog closed) while a host still speaks, Qt has cut the
        # relay's connections and the emit reaches nobody (emitting on the deleted link itself could crash).
        self._relay = _Relay()
        self._relay.received.connect(self._forward_event)
        self._relay.ended.connect(self._forward_death)

    @property
    def host(self) -> Host | None:
        """The host in use (None: none started, or it was dropped)."""
        return self._host

    @property
    def alive(self) -> bool:
        return self._host is not None and self._host.alive

    @property
    def pid(self) -> int | None:
        """The engine process id, or None when no engine process is running (a server, a scripted host)."""
        host = self._host
        proc = host.process if host is not None else None
        if host is None or proc is None or not host.alive:
            return None
        return int(proc.pid)

    def take_load(self, remote: RemoteEndpoint | None) -> bool:
        """Make the host ready for a LoadModel for ``remote``: a fresh one (:meth:`switch`) when this
        one loaded a model before or is the wrong kind (another server, local vs server).

        Returns:
            True when it switched (the fresh host sends EngineReady again).
        """
        switched = self._used or self._made_for != remote
        if switched:
            self.switch(remote)
        self._used = True
        return switched

    # ------------------------------------------------------------------ lifecycle
    def start(self, remote: RemoteEndpoint | None) -> None:
        """A new host for ``remote`` (None: the local engine) and its reader thread."""
        host = self._factory(remote)
        host.start()
        self._host = host
        self._made_for = remote
        self._used = False
        reader = threading.Thread(
            target=self._read_loop, args=(self._relay, host), name="glassbox-engine-reader", daemon=True
        )
        self._reader = reader
        reader.start()

    def switch(self, remote: RemoteEndpoint | None) -> None:
        """End the host in the background and start a fresh one (a model switch).

        The old host gets Shutdown and ends on its own (terminated after 5 s); its reader thread
        sees the pipe close and reports to a host no longer held, so nothing of it is emitted.
        """
        self.release()
        self.start(remote)

    def release(self, *, kill: bool = False) -> None:
        """Forget the host and end it in the background (killed at once with ``kill``, else Shutdown and
        terminated after 5 s), never waiting on the UI thread; nothing of it is emitted after."""
        self._stop_timer.stop()
        old, self._host = self._host, None
        self._reader = None
        if old is None:
            return
        if kill:
            old.kill()
        else:
            threading.Thread(target=old.stop, name="glassbox-engine-stop", daemon=True).start()

    def drop(self, *, kill: bool = False, stop_timeout_s: float = 5.0) -> None:
        """Stop (or first kill) the host and wait up to 5 s for its reader thread; nothing of it is emitted after.

        The request in flight is cancelled first: the engine reads Shutdown only between requests, so a
        reply still decoding held a window close for the whole ``stop_timeout_s`` before the terminate."""
        self._stop_timer.stop()
        host, self._host = self._host, None
        if host is not None:
            if kill:
                host.kill()
            else:
                host.cancel()
            host.stop(timeout=stop_timeout_s)
        reader, self._reader = self._reader, None
        if reader is not None and reader is not threading.current_thread():
            reader.join(5.0)

    # ------------------------------------------------------------------ talking
    def send(self, request: object) -> None:
        """Send ``request`` to the host; a host found dead is reported on :attr:`host_died` before this returns."""
        host = self._host
        assert host is not None
        try:
            host.send(request)
        except HOST_ENDED as died:
            self._forward_death(host, died)

    def cancel(self) -> None:
        """Set the host's cancel flag (the request in flight stops between prefill slices or decode steps)."""
        if self._host is not None:
            self._host.cancel()

    def clear_cancel(self) -> None:
        """Reset the cancel flag; before each Generate."""
        if self._host is not None:
            self._host.clear_cancel()

    def watch_stop(self) -> None:
        """Start the Stop watchdog: :attr:`stop_timed_out` in :data:`STOP_GRACE_MS` unless unwatched."""
        self._stop_timer.start(STOP_GRACE_MS)

    def unwatch_stop(self) -> None:
        self._stop_timer.stop()

    # ------------------------------------------------------------------ the reader thread
    @staticmethod
    def _read_loop(relay: _Relay, host: Host) -> None:
        while True:
            try:
                ev = host.recv_raw()
            except HOST_ENDED as died:
                relay.ended.emit(host, died)
                return
            relay.received.emit(host, ev)

    @Slot(object, object)
    def _forward_event(self, host: Host, ev: object) -> None:
        if host is self._host:  # else a late event from a host already replaced
            self.event_received.emit(ev)

    @Slot(object, object)
    def _forward_death(self, host: Host, died: BaseException) -> None:
        if host is self._host:
            log.error("engine died: %s", getattr(died, "description", died))
            self.host_died.emit(died)
