"""The local API server itself (Starlette on uvicorn, a real socket) with a scripted gateway.

The gateway here stands in for the window's engine bridge, not for any server: it answers
each job with the events a test scripts. What the real engine does is tested in
tests/ui_model/test_local_api.py.
"""

from __future__ import annotations

import base64
import json
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from app.core import protocol as P
from app.core.chat.context import GenerationStats, StopReason
from app.server.gateway import ApiJob, EmbeddingJob, ModelCard
from app.server.runner import ServerThread

KEY = "gb-test-key"


class ScriptedGateway:
    """Answers each job with ``script`` (events), or keeps it open when ``script`` is None."""

    def __init__(self, script: list[object] | None) -> None:
        self.script = script
        self.jobs: list[ApiJob] = []
        self.cancelled: list[ApiJob] = []

    def submit(self, job: ApiJob) -> None:
        self.jobs.append(job)
        for ev in self.script or ():
            job.deliver(ev)

    def cancel(self, job: ApiJob) -> None:
        self.cancelled.append(job)

    def model(self) -> ModelCard:
        return ModelCard("smol", "/m/smol.gguf", 2048, (2,), 1700000000, n_embd=3)

    def embed(self, job: EmbeddingJob) -> None:
        """Two 3-value vectors for any request whose first input is not "fail"; else context_overflow."""
        self.jobs.append(job)  # type: ignore[arg-type]
        if job.request.inputs[0] == "hang":
            return  # never answered: the client goes away
        if job.request.inputs[0] == "fail":
            job.deliver(P.Failed(0, P.FailureKind.CONTEXT_OVERFLOW, "input[0] is 9 tokens, over the limit of 8"))
            return
        vecs = np.array([[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], dtype="<f4")
        job.deliver(P.Embedded(0, vecs.tobytes(), 3, (4, 5), P.Pooling.MEAN, False, 0.01))


@pytest.fixture
def serve():
    servers: list[ServerThread] = []

    def start(script, cors=()):
        gw = ScriptedGateway(script)
        s = ServerThread(gw, KEY, "127.0.0.1", 0, cors)
        s.start()
        servers.append(s)
        return s, gw

    yield start
    for s in servers:
        s.stop()


def http(url, body=None, key=KEY, method=None, headers=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


REPLY = [
    P.PromptPrepared(1, 0.0, 12, 0, 12, 0, (), "prompt"),
    P.TokenEvent(1, "Hi", 5, "Hi", 0, 0.1, 13),
    P.Finished(1, "Hi", GenerationStats(prompt_tokens=12, evaluated_tokens=12, generated_tokens=1, prefill_s=0.1)),
]


def test_listens_on_loopback_and_answers_a_chat(serve):
    s, gw = serve(REPLY)
    assert s.url.startswith("http://127.0.0.1:")
    status, headers, text = http(f"{s.url}/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
    body = json.loads(text)
    assert status == 200 and body["choices"][0]["message"]["content"] == "Hi" and body["model"] == "smol"
    assert "access-control-allow-origin" not in {k.lower() for k in headers}  # CORS off
    assert gw.jobs[0].request.generate.external and not gw.cancelled


def test_not_found_and_wrong_key_have_openai_bodies(serve):
    s, _gw = serve(REPLY)
    status, _h, text = http(f"{s.url}/audio/speech", {"input": "x"})
    assert status == 404 and json.loads(text)["error"]["code"] == "not_found"
    status, _h, text = http(f"{s.url}/models", key=None)
    assert status == 401 and json.loads(text)["error"]["type"] == "authentication_error"
    status, _h, text = http(f"{s.url}/chat/completions", b"not json")
    assert status == 400 and "not valid JSON" in json.loads(text)["error"]["message"]


def test_max_tokens_out_of_range_answers_one_range_naming_the_parameter(serve):
    """One range (the engine's: 1 to 32768), not the API's then the sampler's, with ``param`` set."""
    s, gw = serve(REPLY)
    for name in ("max_tokens", "max_completion_tokens"):
        for value in (40_000, 0):
            status, _h, text = http(
                f"{s.url}/chat/completions", {"messages": [{"role": "user", "content": "x"}], name: value}
            )
            err = json.loads(text)["error"]
            assert status == 400 and err["param"] == name and err["type"] == "invalid_request_error"
            assert err["message"] == f"'{name}' = {value} is out of range; it must be between 1 and 32768."
    assert not gw.jobs
    status, _h, text = http(
        f"{s.url}/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 32768}
    )
    assert status == 200 and gw.jobs[0].request.generate.sampler.max_tokens == 32768


def test_cors_only_for_listed_origins(serve):
    s, _gw = serve(REPLY, cors=("http://localhost:3000",))
    pre = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
    status, headers, _ = http(f"{s.url}/chat/completions", key=None, method="OPTIONS", headers=pre)
    assert status == 200 and headers.get("access-control-allow-origin") == "http://localhost:3000"
    other = {**pre, "Origin": "http://evil.example"}
    status, headers, _ = http(f"{s.url}/chat/completions", key=None, method="OPTIONS", headers=other)
    assert status == 400 and "access-control-allow-origin" not in {k.lower() for k in headers}


def test_port_in_use_is_a_clear_error(serve):
    s, _gw = serve(REPLY)
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{s.port}"):
        ServerThread(ScriptedGateway(REPLY), KEY, "127.0.0.1", s.port).start()


@pytest.mark.timing
def test_switching_off_answers_and_cancels_open_requests(serve):
    s, gw = serve(None)  # requests stay open
    socks = []
    for stream in (False, True):
        body = json.dumps({"prompt": "x", "stream": stream}).encode()
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(
            f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        socks.append(c)
    deadline = time.monotonic() + 5
    while len(gw.jobs) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    t0 = time.monotonic()
    s.stop()
    assert time.monotonic() - t0 < 2 and len(gw.cancelled) == 2
    for c in socks:
        c.settimeout(5)
        data = b""
        while chunk := c.recv(4096):
            data += chunk
        c.close()
        assert b"switched off" in data
    assert data.rstrip().endswith(b"0") and b"data: [DONE]" in data  # the stream ended properly


def test_stream_of_a_cancelled_request_ends_with_an_error_event(serve):
    cancelled = GenerationStats(generated_tokens=1, stop_reason=StopReason.CANCELLED)
    s, _gw = serve([REPLY[0], REPLY[1], P.Finished(1, "Hi", cancelled)])
    status, _h, text = http(f"{s.url}/completions", {"prompt": "x", "stream": True})
    events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert status == 200 and json.loads(events[0])["choices"][0]["text"] == "Hi"
    assert json.loads(events[1])["error"]["code"] == "cancelled" and events[-1] == "[DONE]"


def test_embeddings_float_and_base64_usage_and_an_engine_refusal(serve):
    s, gw = serve(REPLY)
    status, _h, text = http(f"{s.url}/embeddings", {"input": ["a", [1, 2]], "model": "x"})
    body = json.loads(text)
    assert status == 200 and body["object"] == "list" and body["model"] == "smol"
    assert [d["index"] for d in body["data"]] == [0, 1] and body["data"][0]["embedding"] == pytest.approx([0.6, 0.8, 0])
    assert body["usage"] == {"prompt_tokens": 9, "total_tokens": 9}
    assert body["glassbox"]["pooling"] == "mean" and body["glassbox"]["pooling_from_model"] is False
    assert gw.jobs[-1].request.inputs == ("a", (1, 2))
    status, _h, text = http(f"{s.url}/embeddings", {"input": "a", "encoding_format": "base64", "dimensions": 3})
    b64 = json.loads(text)["data"][1]["embedding"]
    assert status == 200 and np.frombuffer(base64.b64decode(b64), dtype="<f4").tolist() == [0, 0, 1]
    status, _h, text = http(f"{s.url}/embeddings", {"input": "fail"})
    err = json.loads(text)["error"]
    assert status == 400 and err["code"] == "context_overflow" and "limit of 8" in err["message"]
    status, _h, text = http(f"{s.url}/embeddings", {"input": "a", "dimensions": 2})
    assert status == 400 and json.loads(text)["error"]["param"] == "dimensions"
    status, _h, text = http(f"{s.url}/embeddings", {"input": "a"}, key="wrong")
    assert status == 401


def test_an_embeddings_client_that_goes_away_cancels_its_request(serve):
    s, gw = serve(REPLY)
    body = json.dumps({"input": "hang"}).encode()
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(
        f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    deadline = time.monotonic() + 5
    while not gw.jobs and time.monotonic() < deadline:
        time.sleep(0.02)
    c.close()
    while not gw.cancelled and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gw.cancelled == gw.jobs and isinstance(gw.cancelled[0], EmbeddingJob)


def test_a_streamed_token_is_sent_when_it_comes_not_held_for_the_next(serve):
    """A token alone in the job's queue goes out at once (tokens already waiting behind it are joined into
    one chunk); the server used to hold each token until another event came, so a stream whose tokens came
    one per engine batch reached the client only when the reply ended."""
    s, gw = serve(None)  # the test delivers the events itself
    c = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"prompt": "x", "stream": True}).encode()
    c.sendall(
        f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    deadline = time.monotonic() + 5
    while not gw.jobs and time.monotonic() < deadline:
        time.sleep(0.01)
    job = gw.jobs[-1]
    job.deliver(REPLY[0])  # PromptPrepared
    job.deliver(REPLY[1])  # the first token; nothing after it yet
    c.settimeout(5)
    data = b""
    while b'"text": "Hi"' not in data and b'"text":"Hi"' not in data:
        chunk = c.recv(4096)
        assert chunk, data
        data += chunk
    job.deliver(REPLY[-1])  # Finished
    while b"[DONE]" not in data:
        data += c.recv(4096)
    c.close()
