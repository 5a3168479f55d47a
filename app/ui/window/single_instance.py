"""One Glassbox window per data folder: a second start hands its arguments to the running one.

Desktop apps do this (a second launch raises the running window and passes on
the file it was asked to open), and it keeps one owner of the settings file and
of the open chats. How:

* The first process takes a :class:`~PySide6.QtCore.QLockFile` in the data
  folder (``instance.lock``; it holds the process id, so a lock left by a
  crashed Glassbox is taken over) and listens on a :class:`QLocalServer`
  whose name is made from the data folder and the user, so two data folders
  (``GLASSBOX_HOME``) or two users never meet. A socket file left by a crashed
  instance is removed first: only the lock holder listens, so it can never be
  a live one.
* A later process sees the lock held, connects, sends one JSON line
  ``{"argv": [...], "cwd": "..."}`` (its command-line arguments and working
  folder, so a relative ``--model`` path means what it meant there) and waits
  for ``ok``; it then exits 0 without opening a window or the history.
* The running process emits :attr:`SingleInstance.arguments_received`;
  :func:`app.ui.window.compose.receive_second_start` loads the model and brings the window forward.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import time
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

LOCK_FILE_NAME = "instance.lock"
ACK = b"ok\n"
MAX_MESSAGE_BYTES = 1 << 20  # a command line, not a file: more is not one of ours
CONNECT_TIMEOUT_S = 10.0  # how long a second start waits for the running one (it may still be starting)


def server_name(data_dir: Path) -> str:
    """The local server name for a data folder (short: Unix socket paths are limited to ~100 bytes)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (containers)
        user = ""
    key = f"{user}\0{Path(data_dir).resolve()}".encode()
    return "glassbox-" + hashlib.sha256(key).hexdigest()[:24]


class SingleInstance(QObject):
    """The single-instance guard of one data folder (see the module docstring).

    Signals:
        arguments_received(list, str): a second start's command-line arguments
            (``list[str]``, without the program name) and its working folder.
    """

    arguments_received = Signal(list, str)

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = server_name(data_dir)
        self._lock = QLockFile(str(Path(data_dir) / LOCK_FILE_NAME))
        self._lock.setStaleLockTime(0)  # held for the whole session: stale only when its process is gone
        self._server: QLocalServer | None = None

    @property
    def listening(self) -> bool:
        """True when this process is the running instance and second starts can reach it."""
        return self._server is not None and self._server.isListening()

    def claim(self) -> bool:
        """Become the running instance, or find that another one is.

        Returns:
            True: this process runs the window (it now listens for second starts,
            unless the local server could not listen, which is logged). False:
            another live process holds the data folder; call :meth:`send`.
        """
        if not self._lock.tryLock(0):
            if self._lock.error() == QLockFile.LockError.LockFailedError:
                return False
            # No lock possible (read-only folder...): run, without second-start hand-over.
            log.warning("single-instance lock %s unusable (%s)", self._lock.fileName(), self._lock.error())
            return True
        QLocalServer.removeServer(self.name)  # a socket left by a crashed instance (we hold the lock)
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            log.warning("cannot listen for second starts on %s: %s", self.name, server.errorString())
            return True
        server.newConnection.connect(self._accept)
        self._server = server
        return True

    def release(self) -> None:
        """Stop listening and give the data folder up (at quit). Safe to call twice."""
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._lock.isLocked():
            self._lock.unlock()

    def send(self, argv: list[str], cwd: str, timeout: float = CONNECT_TIMEOUT_S) -> bool:
        """Hand ``argv`` and ``cwd`` to the running instance (blocking; a second start, before any window).

        Args:
            argv: command-line arguments, without the program name.
            cwd: the working folder they are relative to.
            timeout: seconds to keep trying (the running instance may still be starting).

        Returns:
            True when the running instance acknowledged them.
        """
        message = json.dumps({"argv": list(argv), "cwd": cwd}).encode() + b"\n"
        deadline = time.monotonic() + timeout
        while True:
            socket = QLocalSocket()
            socket.connectToServer(self.name)
            if socket.waitForConnected(500):
                socket.write(message)
                socket.flush()
                reply = b""
                while ACK not in reply and time.monotonic() < deadline:
                    if socket.bytesAvailable() or socket.waitForReadyRead(200):
                        reply += bytes(socket.readAll().data())
                    elif socket.state() != QLocalSocket.LocalSocketState.ConnectedState:
                        break
                socket.abort()
                if ACK in reply:
                    return True
            else:
                socket.abort()
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def _accept(self) -> None:
        server = self._server
        while server is not None and server.hasPendingConnections():
            socket = server.nextPendingConnection()  # a child of the server; Qt deletes it once disconnected
            socket.readyRead.connect(self._read)
            socket.disconnected.connect(socket.deleteLater)

    def _read(self) -> None:
        socket = self.sender()
        if not isinstance(socket, QLocalSocket):
            return
        if not socket.canReadLine():  # Qt keeps what came so far until the line is complete
            if socket.bytesAvailable() > MAX_MESSAGE_BYTES:
                socket.abort()
            return
        line = bytes(socket.readLine().data())
        try:
            message = json.loads(line)
            argv = [str(a) for a in message["argv"]]
            cwd = str(message["cwd"])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignored a malformed second-start message: %s", exc)
            socket.abort()
            return
        socket.write(ACK)
        socket.flush()
        log.info("a second start handed over %s (from %s)", argv, cwd)
        self.arguments_received.emit(argv, cwd)
