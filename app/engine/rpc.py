"""A model split across machines: llama.cpp's RPC devices, where the layers went, and the bytes sent.

llama-cpp-python 0.3.36 has no working ``rpc_servers`` argument, so this module does what
llama.cpp's own ``--rpc`` flag does (``common/arg.cpp`` ``add_rpc_devices``) through ctypes on
the libggml llama_cpp loaded: ``ggml_backend_reg_by_name("RPC")``, its proc address
``ggml_backend_rpc_add_server`` (one call per ``host:port``; it returns a backend reg whose
devices are that server's devices), then the devices go to the model in
``llama_model_params.devices`` (a NULL-terminated ``ggml_backend_dev_t`` array): the RPC devices
first, then this machine's GPUs, as llama.cpp's default device list orders them
(``src/llama.cpp`` ``llama_prepare_model_devices``). The reg is not registered globally, so a later
load without servers does not use them. n_gpu_layers counts the layers on all these devices.

llama.cpp aborts the process when a server cannot be reached or speaks another protocol
version (``GGML_ABORT`` in ``rpc_dispatcher::start``), so every server is checked first in Python
(:func:`app.core.rpc.check_server`: a TCP connect, the HELLO handshake, the device list) and a
failure becomes ``EngineError(RPC)``. A server that dies while the model is loaded still ends
the engine process (llama.cpp aborts: "Remote RPC server crashed or returned malformed
response"); the window reports the engine's exit.

The network cost is measured on this side of each connection: the engine's TCP sockets whose
peer is an RPC server, read with ``getsockopt(TCP_INFO)`` (Linux): bytes written (sent once,
``tcpi_bytes_sent - tcpi_bytes_retrans``, plus ``tcpi_notsent_bytes`` still queued) and
``tcpi_bytes_received``: TCP payload, without headers or retransmissions.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import socket
import struct
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.rpc import DevicePlacement, RpcError, RpcFailure, check_server, parse_endpoint
from app.engine.devices import DeviceType

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_LAYER_RE = re.compile(r"layer\s+(\d+) assigned to device ([^,\s]+)")
_MODEL_BUF_RE = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s*([0-9.]+) MiB")
_KV_BUF_RE = re.compile(r"(\S+) KV buffer size =\s*([0-9.]+) MiB")
_RPC_BUF_RE = re.compile(r"RPC(\d+)\[(.+)\]$")
# struct tcp_info (linux/tcp.h), byte offsets: u64 tcpi_bytes_acked at 120 (counts the SYN too) and
# tcpi_bytes_received at 128 (Linux 4.1+); u32 tcpi_notsent_bytes at 144; u64 tcpi_bytes_sent at 200
# (every transmission) and tcpi_bytes_retrans at 208 (Linux 4.19+).
_TCP_INFO_LEN = 232
_BYTES_ACKED_AT = 120
_NOTSENT_AT = 144
_BYTES_SENT_AT = 200


def _declare(lib: Any) -> None:
    """ggml-backend.h functions this module calls (llama-cpp-python binds none of them)."""
    vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    for name, args, res in (
        ("ggml_backend_reg_by_name", [cp], vp),
        ("ggml_backend_reg_get_proc_address", [vp, cp], vp),
        ("ggml_backend_reg_dev_count", [vp], sz),
        ("ggml_backend_reg_dev_get", [vp, sz], vp),
        ("ggml_backend_dev_count", [], sz),
        ("ggml_backend_dev_get", [sz], vp),
        ("ggml_backend_dev_type", [vp], ctypes.c_int),
        ("ggml_backend_dev_name", [vp], cp),
        ("ggml_backend_dev_description", [vp], cp),
    ):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res


def _libggml() -> Any:
    from llama_cpp import _ggml

    lib = _ggml.libggml
    _declare(lib)
    return lib


def rpc_supported(lib: Any | None = None) -> bool:
    """Whether this llama.cpp build has the RPC backend (built with ``GGML_RPC=ON``)."""
    try:
        lib = lib if lib is not None else _libggml()
        _declare(lib)
        return bool(lib.ggml_backend_reg_by_name(b"RPC"))
    except (AttributeError, OSError):
        return False


@dataclass(frozen=True)
class RpcDevice:
    """One device of an RPC server, as llama.cpp names it (``RPC0``) with its server and index there."""

    ptr: int
    name: str
    endpoint: str
    index: int


class _Meter:
    """Bytes the engine's TCP connections to ``endpoints`` carried: a running total, sampled."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        self._peers: set[tuple[str, int]] = set()
        for ep in endpoints:
            host, port = parse_endpoint(ep)
            try:
                for *_, addr in socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM):
                    self._peers.add((str(addr[0]), int(addr[1])))
            except OSError:
                continue
        self.supported = sys.platform.startswith("linux") and hasattr(socket, "TCP_INFO")

    def sample(self) -> tuple[int, int]:
        """``(sent, received)`` TCP payload bytes on the open connections to the servers, now."""
        if not self.supported or not self._peers:
            return 0, 0
        sent = received = 0
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            return 0, 0
        for name in names:
            try:
                if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                    continue
                dup = os.dup(int(name))
            except (OSError, ValueError):
                continue
            try:
                s = socket.socket(fileno=dup)
            except OSError:
                os.close(dup)
                continue
            with s:  # closes the duplicate only; llama.cpp's descriptor stays open
                try:
                    if s.family not in (socket.AF_INET, socket.AF_INET6) or s.type != socket.SOCK_STREAM:
                        continue
                    peer = s.getpeername()
                    if (str(peer[0]), int(peer[1])) not in self._peers:
                        continue
                    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
                except OSError:
                    continue
            sent_now, got = _written_and_received(info)
            sent += sent_now
            received += got
        return sent, received


def _written_and_received(info: bytes) -> tuple[int, int]:
    """Bytes the process wrote to a TCP socket and bytes it received, from its ``struct tcp_info``.

    Written = transmitted once (bytes_sent - bytes_retrans) + still queued (notsent_bytes): what
    llama.cpp handed to the socket, whether or not the peer has acknowledged it yet. A kernel
    before 4.19 has only bytes_acked (less the SYN): bytes still in flight are not counted there.
    """
    if len(info) < _BYTES_ACKED_AT + 16:
        return 0, 0
    acked, received = struct.unpack_from("<QQ", info, _BYTES_ACKED_AT)
    if len(info) >= _BYTES_SENT_AT + 16:
        (notsent,) = struct.unpack_from("<I", info, _NOTSENT_AT)
        on_wire, retrans = struct.unpack_from("<QQ", info, _BYTES_SENT_AT)
        return on_wire - retrans + notsent, received
    return max(acked - 1, 0), received


@dataclass
class RpcLink:
    """The RPC servers of one load: their devices, the device list given to llama.cpp, the meter.

    Build with :func:`connect`; :data:`NO_RPC` is the link of a load without servers.
    """

    endpoints: tuple[str, ...] = ()
    devices: tuple[RpcDevice, ...] = ()
    local_gpus: tuple[tuple[int, str], ...] = ()  # (ptr, name) of this machine's GPUs, in the list after RPC
    _meter: _Meter | None = None
    _marks: list[tuple[int, int]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return bool(self.devices)

    def use_devices(self) -> Callable[[], None]:
        """Until the returned function is called, ``llama_cpp.Llama(...)`` loads onto these devices
        (the RPC devices, then this machine's GPUs). Nothing changes without RPC devices.

        Llama builds its ``llama_model_params`` inside ``__init__`` from
        ``llama_model_default_params()`` and takes no device list, so that function is wrapped
        to set ``devices`` until the call: use it around the one Llama construction, in a
        ``try``/``finally``.
        """
        if not self.active:
            return lambda: None
        import llama_cpp.llama_cpp as lc

        ptrs = [d.ptr for d in self.devices] + [p for p, _ in self.local_gpus]
        array = (ctypes.c_void_p * (len(ptrs) + 1))(*ptrs, None)
        original = lc.llama_model_default_params

        def with_devices() -> Any:
            params = original()
            params.devices = ctypes.addressof(array)  # the array lives as long as this closure
            return params

        def restore() -> None:
            lc.llama_model_default_params = original

        lc.llama_model_default_params = with_devices
        return restore

    # ------------------------------------------------------------------ network bytes
    def sample(self) -> tuple[int, int]:
        """``(sent, received)`` bytes on the connections to the servers so far; (0, 0) without."""
        return self._meter.sample() if self._meter is not None else (0, 0)

    def turn_started(self) -> None:
        """Mark the start of a turn (before prefill)."""
        if self.active:
            self._marks = [self.sample()]

    def prefill_done(self) -> None:
        """Mark the end of prefill (decode starts)."""
        if self.active and len(self._marks) == 1:
            self._marks.append(self.sample())

    def turn_bytes(self) -> dict[str, int]:
        """The turn's ``GenerationStats`` RPC fields: bytes sent/received in prefill and in decode."""
        if not self.active or not self._marks:
            return {}
        end = self.sample()
        start = self._marks[0]
        mid = self._marks[1] if len(self._marks) > 1 else end
        return {
            "rpc_prefill_sent_bytes": mid[0] - start[0],
            "rpc_prefill_received_bytes": mid[1] - start[1],
            "rpc_decode_sent_bytes": end[0] - mid[0],
            "rpc_decode_received_bytes": end[1] - mid[1],
        }

    # ------------------------------------------------------------------ placement
    def placement(self, lines: Sequence[str], n_layer: int) -> tuple[DevicePlacement, ...]:
        """Which device holds which layers, weights and KV cache, from llama.cpp's load log ``lines``.

        The layer lines are llama.cpp's debug lines "load_tensors: layer N assigned to device X";
        the sizes its "model buffer size" and "KV buffer size" lines (MiB with 2 decimals), each
        buffer counted on its device (host buffers such as ``CUDA_Host`` on the CPU). The CPU row
        comes first, then the devices in llama.cpp's order. ``()`` when the log has no layer lines.

        Args:
            lines: the load's log lines.
            n_layer: the model's repeating layers (the output layer is index ``n_layer``).
        """
        rpc_by_buffer = {(d.endpoint, d.index): d for d in self.devices}
        names = ["CPU", *(d.name for d in self.devices), *(n for _, n in self.local_gpus)]
        endpoint = {d.name: d.endpoint for d in self.devices}
        layers: dict[str, set[int]] = {}
        weights: dict[str, float] = {}
        kv: dict[str, float] = {}

        def device_of(buffer: str) -> str:
            m = _RPC_BUF_RE.match(buffer)
            if m and (m.group(2), int(m.group(1))) in rpc_by_buffer:
                return rpc_by_buffer[(m.group(2), int(m.group(1)))].name
            if buffer in names:
                return buffer
            if buffer.startswith("CPU") or buffer.endswith("_Host"):
                return "CPU"
            return buffer

        for line in lines:
            if m := _LAYER_RE.search(line):
                layers.setdefault(m.group(2), set()).add(int(m.group(1)))
            elif m := _MODEL_BUF_RE.search(line):
                dev = device_of(m.group(1))
                weights[dev] = weights.get(dev, 0.0) + float(m.group(2))
            elif m := _KV_BUF_RE.search(line):
                dev = device_of(m.group(1))
                kv[dev] = kv.get(dev, 0.0) + float(m.group(2))
        if not layers:
            return ()
        order = names + sorted((set(layers) | set(weights) | set(kv)) - set(names))
        out = []
        for dev in order:
            if dev not in layers and dev not in weights and dev not in kv:
                continue
            out.append(
                DevicePlacement(
                    device=dev,
                    endpoint=endpoint.get(dev, ""),
                    layers=tuple(sorted(i for i in layers.get(dev, ()) if i <= n_layer)),
                    weight_bytes=round(weights.get(dev, 0.0) * MIB),
                    kv_bytes=round(kv.get(dev, 0.0) * MIB),
                )
            )
        return tuple(out)


NO_RPC = RpcLink()


def _local_gpus(lib: Any) -> tuple[tuple[int, str], ...]:
    """This machine's GPUs as llama.cpp's default list takes them: discrete GPUs, else integrated ones."""
    gpus: list[tuple[int, str]] = []
    igpus: list[tuple[int, str]] = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        kind = int(lib.ggml_backend_dev_type(dev))
        name = (lib.ggml_backend_dev_name(dev) or b"").decode("utf-8", errors="replace")
        if kind == DeviceType.GPU:
            gpus.append((int(dev), name))
        elif kind == DeviceType.IGPU:
            igpus.append((int(dev), name))
    return tuple(gpus or igpus)


def connect(endpoints: Sequence[str], lib: Any | None = None) -> RpcLink:
    """Check each server, then add its devices: the link for a load with ``endpoints``.

    Args:
        endpoints: ``host:port`` entries (``LoadSettings.rpc_servers``); empty gives :data:`NO_RPC`.
        lib: the libggml ``ctypes.CDLL``; default the one llama_cpp loaded.

    Raises:
        RpcError: a server cannot be used (``UNREACHABLE``, ``BUSY``, ``VERSION``, ``NO_DEVICES``,
            ``BAD_ADDRESS``), or this build has no RPC backend (``VERSION``).
    """
    if not endpoints:
        return NO_RPC
    lib = lib if lib is not None else _libggml()
    _declare(lib)
    reg = lib.ggml_backend_reg_by_name(b"RPC")
    if not reg:
        raise RpcError(
            RpcFailure.VERSION,
            endpoints[0],
            "This llama.cpp build has no RPC backend: rebuild llama-cpp-python with CMAKE_ARGS including "
            "-DGGML_RPC=ON (python3 packaging/bootstrap.py does by default), or clear the RPC servers.",
        )
    address = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server")
    if not address:
        raise RpcError(RpcFailure.VERSION, endpoints[0], "This llama.cpp's RPC backend has no add_server function.")
    add_server = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(address)
    devices: list[RpcDevice] = []
    for ep in endpoints:
        found = check_server(ep)  # raises RpcError before llama.cpp can abort on this server
        server_reg = add_server(ep.encode())
        if not server_reg:
            raise RpcError(RpcFailure.NO_DEVICES, ep, f"RPC server {ep} offers no device.")
        for i in range(int(lib.ggml_backend_reg_dev_count(server_reg))):
            dev = lib.ggml_backend_reg_dev_get(server_reg, i)
            name = (lib.ggml_backend_dev_name(dev) or b"").decode("utf-8", errors="replace")
            devices.append(RpcDevice(int(dev), name, ep, i))
        log.info(
            "RPC server %s: protocol %s, %d device(s), %s bytes free; checked in %.3f s",
            ep,
            ".".join(map(str, found.version)),
            len(found.devices),
            [d.free_bytes for d in found.devices],
            found.seconds,
        )
    return RpcLink(tuple(endpoints), tuple(devices), _local_gpus(lib), _Meter(endpoints))
