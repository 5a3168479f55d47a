"""pytest fixtures for Hub, download and library tests.

Import them into a test module (``from tests.support.fixtures import *``) or
list this module in a conftest's ``pytest_plugins``.

- ``hf_isolated``: huggingface_hub sees no real token, cache or offline flag
  (HF_HOME, HF_HUB_CACHE under tmp_path; telemetry off so no agent-registry
  request is made).
- ``gb_paths``: Glassbox paths under a temporary ``GLASSBOX_HOME``.
- ``fake_hub``: a started :class:`~tests.support.hub_server.FakeHub`.
- ``hub_endpoint``: ``fake_hub`` with HF_ENDPOINT pointing at it, including
  huggingface_hub's import-time constants (``ENDPOINT`` and the resolve URL
  template, which ``hf_hub_url`` uses).
- ``no_leaks``: fails a test that leaves a thread running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants
from huggingface_hub.utils import close_session

from app.paths import HOME_ENV, Paths, default_paths
from tests.support.hub_server import FakeHub

__all__ = ["fake_hub", "gb_paths", "hf_isolated", "hub_endpoint", "no_leaks", "point_hub_at"]


def point_hub_at(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Point huggingface_hub at ``url`` as HF_ENDPOINT would have at import time."""
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")


@pytest.fixture
def hf_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolate huggingface_hub from the real profile; returns the fake HF_HOME."""
    hf_home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_home / "hub"))
    for var in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HUGGINGFACE_HUB_CACHE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hf_home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)
    return hf_home


@pytest.fixture
def gb_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hf_isolated: Path) -> Paths:
    """Glassbox paths under ``tmp_path/home`` (GLASSBOX_HOME set), created."""
    home = tmp_path / "home"
    monkeypatch.setenv(HOME_ENV, str(home))
    return default_paths().ensure()


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Fail when the test leaves a thread running (waits up to 5 s for stragglers)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not extra, f"threads left running: {[t.name for t in extra]}"


@pytest.fixture
def fake_hub(no_leaks: None) -> Iterator[FakeHub]:
    """A running fake Hub; stopped (and huggingface_hub's session closed) after the test."""
    hub = FakeHub().start()
    try:
        yield hub
    finally:
        close_session()  # drop keep-alive connections to the server before it stops
        hub.stop()


@pytest.fixture
def hub_endpoint(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch, hf_isolated: Path) -> FakeHub:
    """``fake_hub`` with huggingface_hub pointed at it."""
    point_hub_at(monkeypatch, fake_hub.url)
    return fake_hub
