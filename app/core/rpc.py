"""llama.cpp's RPC backend, seen from plain Python: server addresses, the hello check, and the
values the engine reports about a model split across machines.

``rpc-server`` (llama.cpp ``tools/rpc``, target ``ggml-rpc-server``) exposes a machine's ggml devices
over TCP; the engine lists them as devices and llama.cpp puts layers on them (:mod:`app.engine.rpc`).
rpc-server has no authentication and no encryption: anyone who can reach its port can run code on
its devices and read what is sent, so it belongs on a trusted network only.

llama.cpp aborts the whole process (``GGML_ABORT``) when it cannot connect to a server or the
server speaks another protocol version, so :func:`check_server` does the same connection and
handshake first, in Python, and turns each failure into words (:class:`RpcError`).

The wire format (``ggml/src/ggml-rpc/ggml-rpc.cpp``, protocol 7.0.0): a request is
``| cmd (1 byte) | size (uint64) | payload |``, a reply ``| size (uint64) | payload |``,
little-endian. The first command must be HELLO (14) with 24 bytes of transport capabilities
(zeros: plain TCP); the reply is major, minor, patch, a pad byte and the server's 24 bytes.
A server serves one client at a time.
"""

from __future__ import annotations

import enum
import socket
import struct
import time
from dataclasses import dataclass

# ggml/include/ggml-rpc.h of the llama.cpp llama-cpp-python 0.3.36 vendors (checked against a
# real rpc-server built from the same sources by tests/engine/test_rpc.py).
PROTO_MAJOR = 7
PROTO_MINOR = 0
PROTO_PATCH = 0
CMD_GET_DEVICE_MEMORY = 11
CMD_HELLO = 14
CMD_DEVICE_COUNT = 15
CONN_CAPS_SIZE = 24  # ggml-rpc/transport.h RPC_CONN_CAPS_SIZE
DEFAULT_PORT = 50052  # rpc-server's default -p
MAX_SERVERS = 16  # GGML_RPC_MAX_SERVERS
CHECK_TIMEOUT_S = 5.0

SECURITY_NOTE = (
    "rpc-server has no authentication and no encryption: whoever reaches its port can use that "
    "machine and see what is sent. Use it only on a network you trust, never on the internet."
)


class RpcFailure(str, enum.Enum):
    """Why a server cannot be used (``RpcError.kind``)."""

    BAD_ADDRESS = "bad_address"  #: not ``host:port``
    UNREACHABLE = "unreachable"  #: no route, refused, name unknown, or no answer to connect
    BUSY = "busy"  #: connected, but no hello reply in time (rpc-server serves one client at a time)
    VERSION = "version"  #: another RPC protocol version (another llama.cpp)
    NO_DEVICES = "no_devices"  #: the server offers no device


class RpcError(Exception):
    """A server that cannot be used, with a message a person can act on.

    Attributes:
        kind: an :class:`RpcFailure`.
        endpoint: the ``host:port`` concerned.
        message: the whole explanation.
    """

    def __init__(self, kind: RpcFailure, endpoint: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.endpoint = endpoint
        self.message = message


def parse_endpoint(text: str) -> tuple[str, int]:
    """``(host, port)`` of ``"host:port"``: a host name or an IPv4 address (llama.cpp's RPC client
    connects over IPv4 only: ``socket(AF_INET)``, ``gethostbyname``, the host ends at the first ':').

    Raises:
        RpcError: ``BAD_ADDRESS``, saying what is wrong.
    """
    s = text.strip()
    host, sep, port_text = s.rpartition(":")
    if "[" in host or ":" in host:
        raise RpcError(
            RpcFailure.BAD_ADDRESS,
            s,
            f"'{s}': llama.cpp's RPC client connects over IPv4 only; give a host name or an IPv4 address.",
        )
    if not sep or not host or not port_text:
        raise RpcError(RpcFailure.BAD_ADDRESS, s, f"'{s}' is not host:port (for example 192.168.1.20:{DEFAULT_PORT}).")
    try:
        port = int(port_text)
    except ValueError:
        raise RpcError(RpcFailure.BAD_ADDRESS, s, f"'{s}': the port '{port_text}' is not a number.") from None
    if not 0 < port < 65536:
        raise RpcError(RpcFailure.BAD_ADDRESS, s, f"'{s}': the port must be between 1 and 65535.")
    if any(c.isspace() for c in host):
        raise RpcError(RpcFailure.BAD_ADDRESS, s, f"'{s}': a host name has no spaces.")
    return host, port


def parse_servers(text: str) -> tuple[str, ...]:
    """The ``host:port`` entries of ``text`` (separated by commas, spaces or new lines), each once,
    in order, normalised to ``host:port``.

    Raises:
        RpcError: ``BAD_ADDRESS`` for the first entry that is not ``host:port``, or more than
            :data:`MAX_SERVERS` entries.
    """
    out: list[str] = []
    for item in text.replace(",", " ").split():
        host, port = parse_endpoint(item)
        norm = f"{host}:{port}"
        if norm not in out:
            out.append(norm)
    if len(out) > MAX_SERVERS:
        raise RpcError(RpcFailure.BAD_ADDRESS, out[MAX_SERVERS], f"llama.cpp takes at most {MAX_SERVERS} servers.")
    return tuple(out)


@dataclass(frozen=True)
class ServerDevice:
    """One device an rpc-server offers: its index there and its memory, bytes."""

    index: int
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class ServerCheck:
    """What :func:`check_server` found: the protocol version and the devices."""

    endpoint: str
    version: tuple[int, int, int]
    devices: tuple[ServerDevice, ...]
    seconds: float


def version_text(v: tuple[int, int, int]) -> str:
    return ".".join(str(x) for x in v)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _command(sock: socket.socket, cmd: int, payload: bytes) -> bytes:
    sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
    (size,) = struct.unpack("<Q", _recv_exact(sock, 8))
    if size > 1 << 16:
        raise ValueError(f"a reply of {size} bytes")
    return _recv_exact(sock, size)


def check_server(endpoint: str, timeout_s: float = CHECK_TIMEOUT_S) -> ServerCheck:
    """Connect to an rpc-server, say HELLO, and list its devices; the connection is closed after.

    Args:
        endpoint: ``host:port``.
        timeout_s: for the connection and for each reply, seconds.

    Raises:
        RpcError: ``BAD_ADDRESS``, ``UNREACHABLE``, ``BUSY``, ``VERSION`` or ``NO_DEVICES``,
            with a message that names the server and what to do.
    """
    t0 = time.perf_counter()
    host, port = parse_endpoint(endpoint)
    try:  # IPv4, the address llama.cpp will use (gethostbyname: the first one)
        ipv4 = str(socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0])
    except (socket.gaierror, IndexError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else "no address"
        raise RpcError(
            RpcFailure.UNREACHABLE,
            endpoint,
            f"RPC server {endpoint}: the host name has no IPv4 address ({why}); llama.cpp's RPC client uses IPv4.",
        ) from None
    try:
        sock = socket.create_connection((ipv4, port), timeout=timeout_s)
    except TimeoutError:
        raise RpcError(
            RpcFailure.UNREACHABLE,
            endpoint,
            f"RPC server {endpoint} did not answer within {timeout_s:g} s: check the address, that the machine "
            "is on, and that no firewall blocks the port.",
        ) from None
    except OSError as exc:
        raise RpcError(
            RpcFailure.UNREACHABLE,
            endpoint,
            f"RPC server {endpoint} cannot be reached ({exc.strerror or exc}): is rpc-server running there "
            f"(rpc-server -H 0.0.0.0 -p {port}) and is the port open?",
        ) from None
    with sock:
        try:
            reply = _command(sock, CMD_HELLO, bytes(CONN_CAPS_SIZE))
        except TimeoutError:
            raise RpcError(
                RpcFailure.BUSY,
                endpoint,
                f"RPC server {endpoint} accepted the connection but did not answer within {timeout_s:g} s. "
                "rpc-server serves one client at a time: another program (or another Glassbox) may be using it.",
            ) from None
        except (EOFError, OSError, ValueError):
            raise RpcError(
                RpcFailure.VERSION,
                endpoint,
                f"RPC server {endpoint} closed the connection at the handshake: it is most likely built from "
                f"another llama.cpp version (this Glassbox speaks RPC protocol "
                f"{version_text((PROTO_MAJOR, PROTO_MINOR, PROTO_PATCH))}). Build rpc-server from the same "
                "llama.cpp as llama-cpp-python (see the README).",
            ) from None
        if len(reply) < 3:
            raise RpcError(RpcFailure.VERSION, endpoint, f"RPC server {endpoint} sent a {len(reply)}-byte hello.")
        version = (reply[0], reply[1], reply[2])
        if version[0] != PROTO_MAJOR or version[1] > PROTO_MINOR:
            raise RpcError(
                RpcFailure.VERSION,
                endpoint,
                f"RPC server {endpoint} speaks RPC protocol {version_text(version)}; this Glassbox's llama.cpp "
                f"speaks {version_text((PROTO_MAJOR, PROTO_MINOR, PROTO_PATCH))}. Build rpc-server from the same "
                "llama.cpp as llama-cpp-python (see the README).",
            )
        try:
            (count,) = struct.unpack("<I", _command(sock, CMD_DEVICE_COUNT, b""))
            devices = []
            for i in range(count):
                free, total = struct.unpack("<QQ", _command(sock, CMD_GET_DEVICE_MEMORY, struct.pack("<I", i)))
                devices.append(ServerDevice(i, free, total))
        except (EOFError, OSError, ValueError, struct.error) as exc:
            raise RpcError(
                RpcFailure.VERSION,
                endpoint,
                f"RPC server {endpoint} answered the hello but not the device list ({exc}).",
            ) from None
    if not devices:
        raise RpcError(RpcFailure.NO_DEVICES, endpoint, f"RPC server {endpoint} offers no device.")
    return ServerCheck(endpoint, version, tuple(devices), time.perf_counter() - t0)


@dataclass(frozen=True)
class DevicePlacement:
    """Where llama.cpp put part of a model, as its load log says.

    Attributes:
        device: llama.cpp's device name (``CPU``, ``RPC0``, ``CUDA0``).
        endpoint: ``host:port`` of an RPC device, ``""`` for a local one.
        layers: the layers it computes, 0-based; index ``n_layer`` is the output layer.
        weight_bytes: its model buffers ("model buffer size"), bytes.
        kv_bytes: its KV cache buffers ("KV buffer size"), bytes.
    """

    device: str
    endpoint: str
    layers: tuple[int, ...]
    weight_bytes: int
    kv_bytes: int


def layer_ranges(layers: tuple[int, ...], n_layer: int) -> str:
    """``"0-13, 20"`` for layers, with the output layer (index ``n_layer``) named ``output``."""
    body = sorted(i for i in layers if i < n_layer)
    parts: list[str] = []
    start = prev = -2
    for i in body:
        if i != prev + 1:
            if start >= 0:
                parts.append(f"{start}-{prev}" if prev > start else str(start))
            start = i
        prev = i
    if start >= 0:
        parts.append(f"{start}-{prev}" if prev > start else str(start))
    if n_layer in layers:
        parts.append("output")
    return ", ".join(parts) if parts else "none"
