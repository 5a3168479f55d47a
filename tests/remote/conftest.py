"""Remote engines against real servers: llama.cpp's llama-server and llama-cpp-python's own server
(the helpers to run them: :mod:`tests.support.servers`).

llama-server is built by ``packaging/bootstrap.py test`` from the llama.cpp sources llama-cpp-python
vendors (packaging/llama_tools.py) and passed in ``GLASSBOX_TEST_LLAMA_SERVER``; like the test models,
a test that needs it fails (not skips) without it. Each server runs on 127.0.0.1 on a free port,
serving SmolLM2 with a small n_ctx on one thread, once per test module, and is ended by its fixture.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import API_KEY, GENERIC_N_CTX, SERVER_N_CTX, RunningServer, free_port, serve


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
    with serve(cmd, port, f"http://127.0.0.1:{port}/health", log, {}) as server:
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
    with serve(cmd, port, f"http://127.0.0.1:{port}/v1/models", log, {}) as server:
        yield server
