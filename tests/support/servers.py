"""Servers on 127.0.0.1 for the remote-engine tests: a free port, start and wait until it answers, stop.

The fixtures that run llama.cpp's llama-server and llama-cpp-python's server over these are in
tests/remote/conftest.py.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
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


def wait_ready(proc: subprocess.Popen, url: str, log: Path, headers: dict[str, str]) -> None:
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


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def serve(cmd: list[str], port: int, ready_url: str, log: Path, headers: dict[str, str]) -> Iterator[RunningServer]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_ready(proc, ready_url, log, headers)
        yield RunningServer(proc, port, f"http://127.0.0.1:{port}/v1", log)
    finally:
        stop_server(proc)
