"""HTTP to a remote engine, on the standard library (``http.client``), with each failure named.

One :class:`Call` is one request on its own connection. It can be cancelled from another thread
(:meth:`Call.abort` shuts the socket down, so a read blocked on a stream returns at once), and
every way it can fail becomes a :class:`RemoteError` whose ``kind`` is a
:class:`~app.core.remote.ConnectionFailure` and whose ``message`` says what to do, in words.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from app.core.remote import ConnectionFailure, RemoteEndpoint

CONNECT_TIMEOUT_S = 10.0
TLS_HANDSHAKE_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 300.0  # a stream waits this long for the next line (a long prefill on a slow server)


class RemoteError(Exception):
    """A request to the remote engine failed.

    Attributes:
        kind: a :class:`ConnectionFailure`.
        message: what happened and what to do, for people.
        status: the HTTP status when the server answered (0 when it did not).
    """

    def __init__(self, kind: ConnectionFailure, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def _server_said(body: bytes) -> str:
    """The error text a server put in its body (OpenAI's ``{"error": {"message"}}`` or the raw start)."""
    text = body.decode("utf-8", errors="replace").strip()
    with contextlib.suppress(ValueError):
        data = json.loads(text)
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(data, dict) and isinstance(data.get("detail"), str):
            return str(data["detail"])
    return text[:200]


def failure_for_status(status: int, url: str, body: bytes) -> RemoteError:
    """The :class:`RemoteError` for an HTTP error answer ``status`` to ``url``."""
    said = _server_said(body)
    if status in (401, 403):
        return RemoteError(
            ConnectionFailure.UNAUTHORIZED,
            f"The server refused the API key (HTTP {status}"
            + (f": {said}" if said else "")
            + "). Enter the key the server was started with (llama-server --api-key ...), or none if it has none.",
            status,
        )
    if status in (404, 405):
        return RemoteError(
            ConnectionFailure.WRONG_PATH,
            f"The server answers, but nothing is at {url} (HTTP {status}). The OpenAI API usually lives under /v1: "
            "try http://host:port/v1.",
            status,
        )
    return RemoteError(
        ConnectionFailure.SERVER_ERROR,
        f"The server answered {url} with HTTP {status}" + (f": {said}" if said else "") + ".",
        status,
    )


class Call:
    """One HTTP request to the remote engine (use once; thread-safe :meth:`abort`).

    Args:
        endpoint: the server and its key.
        url: the full URL to ask.
        body: a JSON body (POST), or None (GET).
        read_timeout_s: seconds to wait for each read once connected.
    """

    def __init__(
        self, endpoint: RemoteEndpoint, url: str, body: dict[str, Any] | None, read_timeout_s: float = READ_TIMEOUT_S
    ) -> None:
        self.endpoint = endpoint
        self.url = url
        self.body = body
        self.read_timeout_s = read_timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._aborted = threading.Event()
        self._lock = threading.Lock()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def abort(self) -> None:
        """Cut the connection (from any thread): a read in progress ends, :meth:`lines` stops."""
        self._aborted.set()
        with self._lock:
            conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _open(self) -> http.client.HTTPResponse:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RemoteError(ConnectionFailure.BAD_URL, f"{self.url} is not an http:// or https:// address.")
        conn: http.client.HTTPConnection
        tls = ssl.create_default_context() if parts.scheme == "https" else None
        if tls is not None:
            conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT_S, context=tls)
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT_S)
        with self._lock:
            self._conn = conn
        headers = {"Accept": "application/json, text/event-stream", "User-Agent": "Glassbox"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        data = None
        if self.body is not None:
            data = json.dumps(self.body).encode()
            headers["Content-Type"] = "application/json"
        path = parts.path or "/"
        where = _where(self.url)
        handshaking = False
        try:
            if tls is not None:
                # TCP first, then the handshake with its own limit: a plain-HTTP server that waits for a
                # request line never answers a TLS hello, and that must read as TLS, not as a silent host.
                raw = socket.create_connection((parts.hostname, parts.port or 443), CONNECT_TIMEOUT_S)
                handshaking = True
                raw.settimeout(TLS_HANDSHAKE_TIMEOUT_S)
                try:
                    conn.sock = tls.wrap_socket(raw, server_hostname=parts.hostname)
                except BaseException:
                    raw.close()
                    raise
                handshaking = False
            else:
                conn.connect()
            if conn.sock is not None:
                conn.sock.settimeout(self.read_timeout_s)
            conn.request("POST" if data is not None else "GET", path, body=data, headers=headers)
            return conn.getresponse()
        except ssl.SSLError as exc:
            hint = (
                "the server speaks plain HTTP: use http:// instead of https://"
                if "WRONG_VERSION_NUMBER" in str(exc).upper() or "record layer" in str(exc).lower()
                else "its certificate is not trusted by this computer, or it speaks plain HTTP here (then use http://)"
            )
            raise RemoteError(ConnectionFailure.TLS, f"The TLS connection to {where} failed ({exc}): {hint}.") from None
        except TimeoutError:
            if self.aborted:
                raise RemoteError(ConnectionFailure.UNREACHABLE, "cancelled") from None
            if handshaking:
                raise RemoteError(
                    ConnectionFailure.TLS,
                    f"{where} accepted the connection but did not complete a TLS handshake within "
                    f"{TLS_HANDSHAKE_TIMEOUT_S:.0f} s: the server probably speaks plain HTTP (use http://).",
                ) from None
            raise RemoteError(
                ConnectionFailure.TIMEOUT,
                f"{where} did not answer in time ({CONNECT_TIMEOUT_S:.0f} s to connect, {self.read_timeout_s:.0f} s "
                "to answer): is it the right address, and is the server up (not still loading its model)?",
            ) from None
        except socket.gaierror as exc:
            raise RemoteError(
                ConnectionFailure.UNREACHABLE, f"The host name {parts.hostname} does not resolve ({exc.strerror})."
            ) from None
        except (http.client.BadStatusLine, http.client.RemoteDisconnected) as exc:
            if parts.scheme == "http":
                raise RemoteError(
                    ConnectionFailure.TLS,
                    f"{where} closed the connection without an HTTP answer ({type(exc).__name__}); if the server "
                    "uses TLS, the address must start with https://.",
                ) from None
            raise RemoteError(
                ConnectionFailure.NOT_OPENAI, f"{where} closed the connection without an HTTP answer."
            ) from None
        except OSError as exc:
            if self.aborted:
                raise RemoteError(ConnectionFailure.UNREACHABLE, "cancelled") from None
            if parts.scheme == "https" and isinstance(exc, ConnectionResetError | BrokenPipeError):
                raise RemoteError(
                    ConnectionFailure.TLS,
                    f"{where} cut the TLS handshake ({exc.strerror or exc}): the server may speak plain HTTP "
                    "(use http://), or TLS on another port.",
                ) from None
            raise RemoteError(
                ConnectionFailure.UNREACHABLE,
                f"Nothing answers at {where} ({exc.strerror or exc}): is the server running, and are the host "
                "and port right? (A firewall between the two machines gives this too.)",
            ) from None

    def json(self) -> Any:
        """The answer's JSON (the whole body read).

        Raises:
            RemoteError: connection failures, HTTP errors, a body that is not JSON (``NOT_OPENAI``).
        """
        try:
            resp = self._open()
            try:
                body = resp.read()
            except OSError as exc:
                raise RemoteError(
                    ConnectionFailure.UNREACHABLE, f"The connection broke while reading {self.url}: {exc}"
                ) from None
            if resp.status >= 400:
                raise failure_for_status(resp.status, self.url, body)
            try:
                return json.loads(body)
            except ValueError:
                raise RemoteError(
                    ConnectionFailure.NOT_OPENAI,
                    f"{self.url} answered, but not with JSON ({body[:60]!r}...): this is not an OpenAI-compatible API.",
                    resp.status,
                ) from None
        finally:
            self.close()

    def events(self) -> Iterator[dict[str, Any]]:
        """The server-sent events of a streamed answer, each ``data:`` line's JSON, until ``[DONE]``.

        Ends early (no error) when :meth:`abort` was called.

        Raises:
            RemoteError: as :meth:`json`, and a stream that breaks off (``UNREACHABLE``) or carries
                something other than JSON events (``NOT_OPENAI``).
        """
        if self._aborted.is_set():  # stopped before it was sent: nothing goes to the server
            return
        try:
            resp = self._open()
            if resp.status >= 400:
                raise failure_for_status(resp.status, self.url, resp.read())
            ctype = resp.getheader("Content-Type", "")
            if "text/event-stream" not in ctype and "json" in ctype:
                raise RemoteError(
                    ConnectionFailure.NOT_OPENAI,
                    f"{self.url} did not stream (Content-Type {ctype}): {_server_said(resp.read())}",
                    resp.status,
                )
            while not self._aborted.is_set():
                try:
                    raw = resp.readline()
                except (OSError, ValueError, http.client.HTTPException) as exc:
                    if self._aborted.is_set():
                        return
                    raise RemoteError(
                        ConnectionFailure.UNREACHABLE, f"The stream from {_where(self.url)} broke off: {exc}"
                    ) from None
                if not raw:
                    return  # the server closed the stream (some send no [DONE])
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("data:"):
                    continue  # blank separators, comments (": ping"), event: names
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError:
                    raise RemoteError(
                        ConnectionFailure.NOT_OPENAI, f"The stream carried something that is not JSON: {data[:80]!r}"
                    ) from None
                if isinstance(event, dict) and "error" in event and "choices" not in event:
                    raise RemoteError(
                        ConnectionFailure.SERVER_ERROR,
                        f"The server stopped with an error: {_server_said(data.encode())}",
                    )
                if isinstance(event, dict):
                    yield event
        finally:
            self.close()

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()


def get_json(endpoint: RemoteEndpoint, url: str, timeout_s: float = 30.0) -> Any:
    """GET ``url`` and return its JSON (raises :class:`RemoteError`)."""
    return Call(endpoint, url, None, timeout_s).json()


def post_json(endpoint: RemoteEndpoint, url: str, body: dict[str, Any], timeout_s: float = 30.0) -> Any:
    """POST ``body`` to ``url`` and return the answer's JSON (raises :class:`RemoteError`)."""
    return Call(endpoint, url, body, timeout_s).json()
