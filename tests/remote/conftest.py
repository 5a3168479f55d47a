"""Remote engines against real servers: llama.cpp's llama-server and llama-cpp-python's own server.

llama-server is built by ``packaging/bootstrap.py test`` from the llama.cpp sources llama-cpp-python
vendors (packaging/llama_tools.py) and passed in ``GLASSBOX_TEST_LLAMA_SERVER``; like the test models,
a test that needs it fails (not skips) without it. Each server runs on 127.0.0.1 on a free port,
serving SmolLM2 with a small n_ctx on one thread, once per test module, and is ended by its fixture.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER_N_CTX = 2048
# llama-cpp-python's server keeps the logits of every position (logits_all, for logprobs):
# n_ctx x n_vocab floats, 200 MB for SmolLM2 at 1024.
GENERIC_N_CTX = 1024
API_KEY = "test-key-7f3a"
START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningServer:
    """A server process on 127.0.0.1: its OpenAI base URL and the process."""

    proc: subprocess.Popen
    port: int
    base_url: str
    log: Path


def _wait_ready(proc: subprocess.Popen, url: str, log: Path, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    pytest.fail(f"the server did not answer {url} within {START_TIMEOUT_S:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def _serve(cmd: list[str], port: int, ready_url: str, log: Path, headers: dict[str, str]) -> Iterator[RunningServer]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_ready(proc, ready_url, log, headers)
        yield RunningServer(proc, port, f"http://127.0.0.1:{port}/v1", log)
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    value = os.environ.get("GLASSBOX_TEST_LLAMA_SERVER")
    if not value or not Path(value).is_file():
        pytest.fail(
            "llama-server is needed: set GLASSBOX_TEST_LLAMA_SERVER to its path, or run the suite with "
            "`python3 packaging/bootstrap.py test`, which builds it (packaging/llama_tools.py).",
            pytrace=False,
        )
    return Path(value)


@pytest.fixture(scope="module")
def llama_server(llama_server_bin, smollm2, tmp_path_factory) -> Iterator[RunningServer]:
    """llama-server serving SmolLM2 on 127.0.0.1 (n_ctx 2048, 1 thread, 1 slot), with API key :data:`API_KEY`."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    cmd = [
        str(llama_server_bin), "-m", str(smollm2), "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", str(SERVER_N_CTX), "-t", "1", "-np", "1", "--api-key", API_KEY, "--no-webui",
    ]  # fmt: skip
    with _serve(cmd, port, f"http://127.0.0.1:{port}/health", log, {}) as server:
        yield server


@pytest.fixture(scope="module")
def llama_cpp_python_server(smollm2, tmp_path_factory) -> Iterator[RunningServer]:
    """llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) serving SmolLM2 on 127.0.0.1."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama-cpp-server") / "server.log"
    cmd = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2), "--host", "127.0.0.1",
        "--port", str(port), "--n_ctx", str(GENERIC_N_CTX), "--n_threads", "1", "--model_alias", "smollm2",
    ]  # fmt: skip
    with _serve(cmd, port, f"http://127.0.0.1:{port}/v1/models", log, {}) as server:
        yield server
