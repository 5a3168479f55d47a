"""Run the Starlette app on uvicorn in a thread of its own (its own asyncio event loop).

The socket is bound here, before uvicorn starts, so a port in use or an address that cannot
be bound is an :class:`OSError` with a clear message at :meth:`ServerThread.start`, not a log
line in a thread.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import uvicorn

from app.server.app import build_app
from app.server.gateway import EngineGateway

log = logging.getLogger(__name__)


class ServerThread:
    """One running server.

    Args:
        gateway: the engine's owner.
        api_key: the key clients must send.
        host: the address to listen on (127.0.0.1, or 0.0.0.0 for the network).
        port: TCP port (0: any free port; :attr:`port` then says which).
        cors_origins: origins allowed by CORS (empty: off).
    """

    def __init__(
        self, gateway: EngineGateway, api_key: str, host: str, port: int, cors_origins: tuple[str, ...] = ()
    ) -> None:
        self.host = host
        self.port = port
        app = build_app(gateway, api_key, cors_origins)
        self._api = app.state.api
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def url(self) -> str:
        """The base URL clients use (``http://127.0.0.1:8765/v1``)."""
        shown = "127.0.0.1" if self.host == "0.0.0.0" else self.host
        return f"http://{shown}:{self.port}/v1"

    def start(self, timeout_s: float = 10.0) -> None:
        """Bind and start serving; returns once uvicorn accepts connections.

        Raises:
            OSError: the address cannot be bound (the port is in use, say); the message says which.
            RuntimeError: uvicorn did not start within ``timeout_s`` seconds.
        """
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from None
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="glassbox-api-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self._server.started:
            self.stop()
            raise RuntimeError(f"the API server did not start on {self.host}:{self.port}")
        log.info("local API listening on %s:%d", self.host, self.port)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving, the thread joined. Idempotent.

        Open requests are answered first (503, "the server is stopping"; a stream gets that
        error event and ends), then uvicorn shuts down gracefully; connections still open after
        ``timeout_s`` / 2 seconds are cut.
        """
        if self._thread is not None and self._thread.is_alive():
            self._api.end_open_jobs("The Glassbox API server was switched off.")
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s / 2)
            self._server.force_exit = True
            self._thread.join(timeout_s / 2)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
