"""What the local API's real-model tests share (tests/ui_model/test_local_api*.py): switching the window's
server on, an ``openai`` client for it, waiting for a client call run in a thread, and the fixtures of
the files that run on both models (``window_model``, ``bg``, ``api``).

Import the fixtures into a test module under their function names (``from tests.support.local_api import
api_fixture, bg_fixture``): pytest knows them as ``api`` and ``bg``, and a test asking for ``api`` does not
shadow an imported name."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import openai
import pytest

from tests.support.window import REPLY_TIMEOUT_MS

T = TypeVar("T")


def serve(win: Any, **changes: Any) -> tuple[str, str]:
    """Switch the window's server on (any free port unless given); returns (base URL, key)."""
    s = win.settings_ctl.settings.server
    win.settings_ctl.update(server=replace(s, enabled=True, port=changes.pop("port", 0), **changes))
    assert win.server.running, win.server.error
    return win.server.url, win.settings_ctl.settings.server.api_key


def open_client(url: str, key: str) -> openai.OpenAI:
    """An ``openai`` client for the window's server: no retries, 60 s per call."""
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)


def wait(qtbot: Any, fut: Future[T], timeout: int = REPLY_TIMEOUT_MS) -> T:
    """The result of a client call run in a thread, the Qt loop turning meanwhile (the server lives on it)."""
    qtbot.waitUntil(fut.done, timeout=timeout)
    return fut.result()


@pytest.fixture(params=["smollm2", "gemma"], name="window_model")
def window_model_fixture(request: pytest.FixtureRequest) -> Path:
    """The model the ``window`` loads: each test runs on SmolLM2 and Gemma 3 unless it says otherwise."""
    path: Path = request.getfixturevalue(request.param)
    return path


smollm2_only = pytest.mark.parametrize("window_model", ["smollm2"], indirect=True)


@pytest.fixture(name="bg")
def bg_fixture() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    """Client calls in threads; all of them have ended when the test ends."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    yield pool
    pool.shutdown(wait=True)


@pytest.fixture(name="api")
def api_fixture(window: Any) -> Iterator[tuple[Any, openai.OpenAI]]:
    """The window serving, and a client for it (closed, the server switched off, when the test ends)."""
    c = open_client(*serve(window))
    yield window, c
    c.close()
    window.server.switch(False)
