"""A model split across machines: SmolLM2's layers on a real llama.cpp rpc-server on 127.0.0.1.

The rpc-server is ``ggml-rpc-server`` built from the same llama.cpp sources as the wheel
(``packaging/llama_tools.py``; ``python3 packaging/bootstrap.py test`` passes its path in
``GLASSBOX_TEST_RPC_SERVER``). The engine reaches it through a byte-counting TCP relay in this
process, so what the engine reports it sent and received per turn (read from its own sockets'
``TCP_INFO``) is checked against bytes counted at the other end of the connection. (The server's
``/proc/<pid>/io`` cannot be the check: rpc-server uses ``send``/``recv``, which rchar and
wchar do not count.)
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import protocol as P
from app.core.rpc import PROTO_MAJOR, PROTO_MINOR, PROTO_PATCH, RpcError, RpcFailure, check_server
from tests.support.engine import SYSTEM, Engine, start_engine

RPC_ENV = "GLASSBOX_TEST_RPC_SERVER"
PROMPT = [SYSTEM, ("user", "Name three colours of the rainbow and one fruit of each colour.")]
N_CTX = 1024
MAX_TOKENS = 48


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


class CountingRelay:
    """A TCP relay on 127.0.0.1 to ``upstream`` that counts the bytes each way (one thread, selectors)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.to_server = 0
        self.to_client = 0
        self.connections = 0
        self._srv = socket.create_server(("127.0.0.1", 0))
        self._srv.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._srv, selectors.EVENT_READ)
        self._peer: dict[socket.socket, tuple[socket.socket, bool]] = {}  # sock -> (other end, from the client)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rpc-relay", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self._srv.getsockname()[1]}"

    def counts(self) -> tuple[int, int]:
        """``(to_server, to_client)`` bytes relayed so far."""
        return self.to_server, self.to_client

    def _close(self, s: socket.socket) -> None:
        other, _ = self._peer.pop(s, (None, False))
        for x in (s, other):
            if x is not None:
                self._peer.pop(x, None)
                with contextlib.suppress(KeyError, ValueError):
                    self._sel.unregister(x)
                x.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.1):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                if s is self._srv:
                    client, _ = self._srv.accept()
                    self.connections += 1
                    server = socket.create_connection(self.upstream)
                    for x in (client, server):
                        x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self._peer[client] = (server, True)
                    self._peer[server] = (client, False)
                    self._sel.register(client, selectors.EVENT_READ)
                    self._sel.register(server, selectors.EVENT_READ)
                    continue
                if s not in self._peer:
                    continue
                other, from_client = self._peer[s]
                try:
                    data = s.recv(1 << 20)
                except OSError:
                    data = b""
                if not data:
                    self._close(s)
                    continue
                if from_client:  # counted before it is passed on: whoever got it finds it counted
                    self.to_server += len(data)
                else:
                    self.to_client += len(data)
                other.sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for s in list(self._peer):
            self._close(s)
        self._sel.close()
        self._srv.close()


@pytest.fixture(scope="module")
def rpc_server() -> Iterator[str]:
    """A real rpc-server on 127.0.0.1 (one thread), ready: gives its ``host:port``."""
    value = os.environ.get(RPC_ENV)
    if not value or not Path(value).is_file():
        pytest.fail(
            f"llama.cpp's rpc-server is needed: set {RPC_ENV} to its path, or run the suite with "
            "`python3 packaging/bootstrap.py test`, which builds it.",
            pytrace=False,
        )
    port = _free_port()
    proc = subprocess.Popen(
        [value, "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ep = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                found = check_server(ep, timeout_s=5)
                break
            except RpcError as exc:
                assert proc.poll() is None, f"rpc-server exited with {proc.returncode}"
                if exc.kind is not RpcFailure.UNREACHABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # The server built from the wheel's llama.cpp speaks the protocol Glassbox checks for.
        assert found.version == (PROTO_MAJOR, PROTO_MINOR, PROTO_PATCH)
        assert found.devices and found.devices[0].total_bytes > 0
        yield ep
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def relay(rpc_server: str) -> Iterator[CountingRelay]:
    host, port = rpc_server.rsplit(":", 1)
    r = CountingRelay((host, int(port)))
    yield r
    r.close()


@pytest.fixture(scope="module")
def split_engine(smollm2: Path, relay: CountingRelay) -> Iterator[tuple[Engine, int]]:
    """SmolLM2 with every layer on the rpc-server (through the relay); gives the engine and the
    bytes the relay carried toward the server during the load."""
    before = relay.to_server
    eng = start_engine(smollm2, n_ctx=N_CTX, rpc_servers=(relay.endpoint,))
    yield eng, relay.to_server - before
    eng.host.stop()


@pytest.fixture(scope="module")
def local_engine(smollm2: Path) -> Iterator[Engine]:
    eng = start_engine(smollm2, n_ctx=N_CTX)
    yield eng
    eng.host.stop()


def _greedy(eng: Engine) -> tuple[list[int], P.Finished]:
    ids: list[int] = []
    fin = eng.generate(
        PROMPT,
        on_event=lambda ev: ids.append(ev.token_id) if isinstance(ev, P.TokenEvent) else None,
        temperature=0.0,
        max_tokens=MAX_TOKENS,
        seed=1,
    )
    assert isinstance(fin, P.Finished), getattr(fin, "message", fin)
    return ids, fin


def test_the_layers_live_on_the_rpc_server(split_engine, relay: CountingRelay) -> None:
    eng, load_bytes = split_engine
    loaded = eng.loaded
    n_layer = loaded.info.n_layer
    assert loaded.settings.rpc_servers == (relay.endpoint,)
    assert loaded.gpu_offload  # n_gpu_layers counts the layers on the RPC device
    by_device = {d.device: d for d in loaded.placement}
    rpc = [d for d in loaded.placement if d.endpoint == relay.endpoint]
    assert len(rpc) == 1, loaded.placement
    assert rpc[0].device.startswith("RPC")
    assert rpc[0].layers == tuple(range(n_layer + 1))  # every repeating layer and the output layer
    assert rpc[0].kv_bytes > 0  # the KV cache lives with its layers
    # llama.cpp keeps the input layer (token embeddings) on the CPU; the rest of the weights went over.
    assert by_device["CPU"].layers == ()
    assert rpc[0].weight_bytes > by_device["CPU"].weight_bytes > 0
    # What the engine says it sent while loading is what the model's connection carried; llama.cpp also
    # opens short connections during the load (the Python check, the device count, memory and size
    # queries), closed before the engine can read them: a few KiB, counted at the relay only.
    assert loaded.rpc_load_sent_bytes >= rpc[0].weight_bytes
    assert relay.connections > 1
    assert 0 <= load_bytes - loaded.rpc_load_sent_bytes <= load_bytes // 1000, (load_bytes, loaded.rpc_load_sent_bytes)
    print(
        f"\nRPC load: {loaded.rpc_load_sent_bytes:,} bytes sent ({rpc[0].weight_bytes:,} bytes of weights on "
        f"{rpc[0].device}) in {loaded.load_s:.2f} s; at the relay {load_bytes:,} bytes on {relay.connections} connections"
    )


def test_greedy_replies_match_the_local_ones_token_for_token(split_engine, local_engine, relay) -> None:
    eng, _ = split_engine
    local_ids, local_fin = _greedy(local_engine)
    to_server0, to_client0 = relay.counts()
    split_ids, fin = _greedy(eng)
    to_server, to_client = relay.to_server - to_server0, relay.to_client - to_client0
    assert len(local_ids) >= 8, local_fin.text
    assert split_ids == local_ids
    assert fin.text == local_fin.text

    s = fin.stats
    sent = s.rpc_prefill_sent_bytes + s.rpc_decode_sent_bytes
    received = s.rpc_prefill_received_bytes + s.rpc_decode_received_bytes
    # Measured on the engine's side of the connection; counted at the relay on the other side.
    assert sent == to_server, (sent, to_server)
    assert received == to_client, (received, to_client)
    assert s.rpc_prefill_sent_bytes > 0 and s.rpc_prefill_received_bytes > 0
    assert s.rpc_decode_sent_bytes > 0 and s.rpc_decode_received_bytes > 0
    # Every evaluated token's logits (49,152 floats) come back over the network.
    n_vocab = eng.loaded.info.n_vocab
    assert s.rpc_decode_received_bytes >= s.llama_n_decode * n_vocab * 4
    print(
        f"\nRPC turn: prefill {s.evaluated_tokens} tokens, {s.rpc_prefill_sent_bytes:,} B sent + "
        f"{s.rpc_prefill_received_bytes:,} B received = {s.rpc_prefill_bytes_per_token:,.0f} B/token; "
        f"decode {s.llama_n_decode} tokens, {s.rpc_decode_sent_bytes:,} B sent + {s.rpc_decode_received_bytes:,} B "
        f"received = {s.rpc_decode_bytes_per_token:,.0f} B/token; decode {s.decode_tok_s:.1f} tok/s "
        f"(local {local_fin.stats.decode_tok_s:.1f}), prefill {s.prefill_tok_s:.1f} tok/s "
        f"(local {local_fin.stats.prefill_tok_s:.1f})"
    )


@pytest.mark.timing
def test_a_server_in_use_is_busy_not_a_hang(split_engine, rpc_server: str) -> None:
    # rpc-server serves one client at a time, and the loaded model is that client.
    t0 = time.monotonic()
    with pytest.raises(RpcError) as err:
        check_server(rpc_server, timeout_s=1.0)
    assert err.value.kind is RpcFailure.BUSY
    assert time.monotonic() - t0 < 5


def test_an_unreachable_server_is_a_clear_failure_and_the_engine_lives_on(local_engine: Engine, smollm2) -> None:
    ep = f"127.0.0.1:{_free_port()}"  # nothing listens there
    ev = local_engine.load(smollm2, n_ctx=N_CTX, rpc_servers=(ep,))
    assert isinstance(ev, P.Failed), ev
    assert ev.kind is P.FailureKind.RPC
    assert ep in ev.message and "cannot be reached" in ev.message and "rpc-server" in ev.message
    # llama.cpp would have aborted the process on that server; the engine still answers.
    again = local_engine.load(smollm2, n_ctx=N_CTX)
    assert isinstance(again, P.ModelLoaded), again
    assert again.settings.rpc_servers == ()
    assert again.placement and all(d.endpoint == "" for d in again.placement)


def test_a_server_of_another_llama_cpp_is_refused_before_llama_cpp_sees_it(local_engine: Engine, smollm2) -> None:
    # A listener that answers the hello as a server one protocol version older would.
    srv = socket.create_server(("127.0.0.1", 0))
    ep = f"127.0.0.1:{srv.getsockname()[1]}"

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.recv(64)
            reply = bytes([PROTO_MAJOR - 1, 0, 0, 0]) + bytes(24)
            conn.sendall(struct.pack("<Q", len(reply)) + reply)
            conn.recv(64)  # until the engine hangs up

    t = threading.Thread(target=serve, name="old-rpc-server", daemon=True)
    t.start()
    try:
        ev = local_engine.load(smollm2, n_ctx=N_CTX, rpc_servers=(ep,))
    finally:
        t.join(10)
        srv.close()
    assert isinstance(ev, P.Failed), ev
    assert ev.kind is P.FailureKind.RPC
    assert f"speaks RPC protocol {PROTO_MAJOR - 1}.0.0" in ev.message and "same llama.cpp" in ev.message
    again = local_engine.load(smollm2, n_ctx=N_CTX)  # llama.cpp would have aborted; the engine lives
    assert isinstance(again, P.ModelLoaded), again
