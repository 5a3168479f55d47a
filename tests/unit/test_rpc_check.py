"""RPC servers in plain Python: addresses, the pre-load check's failures in words, the stored
settings, the per-token figures, and reading llama.cpp's load log for where the layers went.

The check's success against a real rpc-server is in tests/engine/test_rpc.py; here small local
listeners play the failures a real server cannot be made to show on demand (another protocol
version, a connection closed at the handshake, a server busy with another client).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from app.core.chat.context import GenerationStats, LoadSettings
from app.core.rpc import (
    CMD_HELLO,
    CONN_CAPS_SIZE,
    PROTO_MAJOR,
    DevicePlacement,
    RpcError,
    RpcFailure,
    check_server,
    layer_ranges,
    parse_endpoint,
    parse_servers,
)
from app.engine.rpc import RpcDevice, RpcLink


def test_addresses_are_host_and_port() -> None:
    assert parse_endpoint("192.168.1.20:50052") == ("192.168.1.20", 50052)
    assert parse_servers("a:1, b:2\nc:3 a:1") == ("a:1", "b:2", "c:3")
    assert parse_servers("") == ()
    for bad, words in (
        ("nohost", "not host:port"),
        ("h:x", "not a number"),
        ("h:70000", "between 1 and 65535"),
        ("[::1]:50052", "IPv4 only"),  # llama.cpp's client: socket(AF_INET), host up to the first ':'
        ("fe80::1:50052", "IPv4 only"),
    ):
        with pytest.raises(RpcError, match=words) as err:
            parse_servers(bad)
        assert err.value.kind is RpcFailure.BAD_ADDRESS
    with pytest.raises(RpcError, match="at most 16"):
        parse_servers(" ".join(f"h:{i}" for i in range(1, 18)))


def test_load_settings_keep_valid_servers_and_drop_the_rest() -> None:
    s = LoadSettings(rpc_servers=["a:1", "b:2"])  # type: ignore[arg-type]  # a list, as JSON gives it
    assert s.rpc_servers == ("a:1", "b:2")
    assert LoadSettings.from_dict(s.to_dict()) == s
    assert LoadSettings.from_dict({"rpc_servers": ["a:1", "bad", 5, "c:3, a:1"]}).rpc_servers == ("a:1", "c:3")
    assert LoadSettings.from_dict({"rpc_servers": "x:9"}).rpc_servers == ("x:9",)
    assert LoadSettings.from_dict({"rpc_servers": {"x": 1}}).rpc_servers == ()
    assert LoadSettings.from_dict({"n_ctx": 512}).rpc_servers == ()  # settings stored before the field existed


def test_per_token_network_figures() -> None:
    stats = GenerationStats(
        evaluated_tokens=100,
        llama_n_decode=9,
        rpc_prefill_sent_bytes=60_000,
        rpc_prefill_received_bytes=40_000,
        rpc_decode_sent_bytes=5_000,
        rpc_decode_received_bytes=4_000,
    )
    assert stats.rpc_prefill_bytes_per_token == 1000.0
    assert stats.rpc_decode_bytes_per_token == 1000.0
    assert GenerationStats().rpc_prefill_bytes_per_token == 0.0 == GenerationStats().rpc_decode_bytes_per_token
    assert stats.to_dict()["rpc_decode_sent_bytes"] == 5_000


def test_layer_ranges_name_the_output_layer() -> None:
    assert layer_ranges((0, 1, 2, 3, 7, 9, 10, 30), 30) == "0-3, 7, 9-10, output"
    assert layer_ranges((), 30) == "none"
    assert layer_ranges((30,), 30) == "output"


@pytest.fixture
def listener() -> Iterator[Callable[[Callable[[socket.socket], None]], str]]:
    """Start a one-connection TCP listener on 127.0.0.1 running ``serve(conn)`` (then closing it); gives ``host:port``."""
    made: list[tuple[socket.socket, threading.Thread]] = []

    def start(serve: Callable[[socket.socket], None]) -> str:
        srv = socket.create_server(("127.0.0.1", 0))

        def run() -> None:
            conn, _ = srv.accept()
            with conn:  # closed when serve returns
                serve(conn)

        t = threading.Thread(target=run, name="rpc-listener", daemon=True)
        t.start()
        made.append((srv, t))
        return f"127.0.0.1:{srv.getsockname()[1]}"

    yield start
    for srv, t in made:
        srv.close()
        t.join(10)


def _read_hello(conn: socket.socket) -> bytes:
    data = b""
    while len(data) < 9 + CONN_CAPS_SIZE:
        data += conn.recv(64)
    return data


def test_a_server_of_another_protocol_version_is_named_with_both_versions(listener) -> None:
    seen: list[bytes] = []

    def serve(conn: socket.socket) -> None:
        seen.append(_read_hello(conn))
        reply = bytes([PROTO_MAJOR - 1, 3, 1, 0]) + bytes(CONN_CAPS_SIZE)
        conn.sendall(struct.pack("<Q", len(reply)) + reply)

    ep = listener(serve)
    with pytest.raises(RpcError) as err:
        check_server(ep, timeout_s=5)
    assert err.value.kind is RpcFailure.VERSION
    assert f"speaks RPC protocol {PROTO_MAJOR - 1}.3.1" in err.value.message
    assert f"speaks {PROTO_MAJOR}.0.0" in err.value.message and ep in err.value.message
    # What went out is llama.cpp's HELLO: command 14, a 24-byte payload of zero capabilities.
    assert seen[0] == struct.pack("<BQ", CMD_HELLO, CONN_CAPS_SIZE) + bytes(CONN_CAPS_SIZE)


def test_a_connection_closed_at_the_handshake_reads_as_another_version(listener) -> None:
    ep = listener(lambda conn: conn.recv(64))  # an older rpc-server refuses the hello size and hangs up
    with pytest.raises(RpcError, match="closed the connection at the handshake") as err:
        check_server(ep, timeout_s=5)
    assert err.value.kind is RpcFailure.VERSION


def test_a_server_that_does_not_answer_is_busy_not_a_hang(listener) -> None:
    ep = listener(lambda conn: time.sleep(2))  # accepts, does not answer: rpc-server serving another client
    with pytest.raises(RpcError, match="one client at a time") as err:
        check_server(ep, timeout_s=0.5)
    assert err.value.kind is RpcFailure.BUSY


def test_a_closed_port_is_unreachable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # bound, then closed: nothing listens there
    with pytest.raises(RpcError, match="cannot be reached") as err:
        check_server(f"127.0.0.1:{port}", timeout_s=2)
    assert err.value.kind is RpcFailure.UNREACHABLE
    assert "rpc-server -H 0.0.0.0" in err.value.message


def test_a_server_with_no_devices_is_refused(listener) -> None:
    def serve(conn: socket.socket) -> None:
        _read_hello(conn)
        reply = bytes([PROTO_MAJOR, 0, 0, 0]) + bytes(CONN_CAPS_SIZE)
        conn.sendall(struct.pack("<Q", len(reply)) + reply)
        conn.recv(64)  # DEVICE_COUNT
        conn.sendall(struct.pack("<QI", 4, 0))

    ep = listener(serve)
    with pytest.raises(RpcError, match="offers no device") as err:
        check_server(ep, timeout_s=5)
    assert err.value.kind is RpcFailure.NO_DEVICES


# llama.cpp's load log for SmolLM2 (30 layers) with every layer on one rpc-server (trimmed).
LOAD_LOG = [
    "load_tensors: loading model tensors, this can take a while... (load_mode = mmap)",
    *(f"load_tensors: layer {i:3d} assigned to device RPC0, is_swa = 0" for i in range(31)),
    "load_tensors: offloading output layer to GPU",
    "load_tensors: offloaded 31/31 layers to GPU",
    "load_tensors:   CPU_Mapped model buffer size =    20.51 MiB",
    "load_tensors: RPC0[127.0.0.1:50052] model buffer size =    82.36 MiB",
    "llama_kv_cache: RPC0[127.0.0.1:50052] KV buffer size =    90.00 MiB",
    "sched_reserve: RPC0[127.0.0.1:50052] compute buffer size =    99.38 MiB",
]


def test_placement_from_the_load_log() -> None:
    link = RpcLink(("127.0.0.1:50052",), (RpcDevice(1, "RPC0", "127.0.0.1:50052", 0),))
    rows = link.placement(LOAD_LOG, 30)
    mib = 1024 * 1024
    assert rows == (
        DevicePlacement("CPU", "", (), round(20.51 * mib), 0),
        DevicePlacement("RPC0", "127.0.0.1:50052", tuple(range(31)), round(82.36 * mib), 90 * mib),
    )
    # A split: layers 0-14 here, the rest and the output on the server.
    split = [line for line in LOAD_LOG if "assigned" not in line]
    split += [
        f"load_tensors: layer {i:3d} assigned to device {'CPU' if i < 15 else 'RPC0'}, is_swa = 0" for i in range(31)
    ]
    rows = link.placement(split, 30)
    assert rows[0].layers == tuple(range(15)) and rows[1].layers == tuple(range(15, 31))
    assert link.placement([line for line in LOAD_LOG if "assigned" not in line], 30) == ()


def test_a_turn_without_rpc_adds_no_fields() -> None:
    link = RpcLink()
    link.turn_started()
    link.prefill_done()
    assert link.turn_bytes() == {} and link.sample() == (0, 0)


def test_llama_gets_the_device_list_only_during_the_load() -> None:
    import ctypes

    import llama_cpp.llama_cpp as lc

    original = lc.llama_model_default_params
    link = RpcLink(("h:1",), (RpcDevice(0x1234, "RPC0", "h:1", 0),), ((0x5678, "CUDA0"),))
    restore = link.use_devices()
    try:
        params = lc.llama_model_default_params()
        devices = ctypes.cast(params.devices, ctypes.POINTER(ctypes.c_void_p))
        assert [devices[0], devices[1], devices[2]] == [0x1234, 0x5678, None]  # RPC first, then GPUs, NULL-ended
    finally:
        restore()
    assert lc.llama_model_default_params is original
    assert not lc.llama_model_default_params().devices
    restore = RpcLink().use_devices()  # no servers: the load is left as it was
    assert lc.llama_model_default_params is original
    restore()
    assert lc.llama_model_default_params is original


def test_tcp_info_gives_the_bytes_written_and_received_on_a_real_connection() -> None:
    from app.engine.rpc import _TCP_INFO_LEN, _written_and_received

    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname())
        peer, _ = srv.accept()
        with client, peer:
            client.sendall(b"x" * 123_456)
            got = 0
            while got < 123_456:
                got += len(peer.recv(1 << 20))
            peer.sendall(b"y" * 777)
            assert len(client.recv(1000)) == 777
            info = client.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
            assert _written_and_received(info) == (123_456, 777)
