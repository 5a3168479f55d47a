"""Issue 3 end to end (case H1 of docs/field-cases.md), as a person would: search the Hub,
see what fits, download while the app runs, kill the app halfway, restart it, the download
finishes from where it stopped with a verified sha256, and the new model loads and answers.

The Hub is the local FakeHub (the real one is not reachable here); the client is the real
huggingface_hub, the app is the real window (the first run in a child process that is
SIGKILLed, the second in this test).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fixtures import point_hub_at
from tests.support.hub_server import FakeHub
from tests.support.window import WindowEngine, make_window, send

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
ROOT = Path(__file__).resolve().parents[2]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@pytest.fixture
def hub(smollm2):
    server = FakeHub(throttle=25e6).start()  # 25 MB/s: the download takes a few seconds
    server.add_repo(REPO, {"SmolLM2-135M-Instruct.Q4_1.gguf": smollm2}, downloads=1000)
    yield server
    server.release_all()
    server.stop()


def test_search_download_kill_restart_resume_load_and_answer(qtbot, hub, smollm2, tmp_path, monkeypatch, glassbox_home):
    hf_home = tmp_path / "hf"
    env = dict(
        os.environ,
        HF_ENDPOINT=hub.url,
        HF_HOME=str(hf_home),
        HF_HUB_CACHE=str(hf_home / "hub"),
        HF_HUB_DISABLE_TELEMETRY="1",
        QT_QPA_PLATFORM="offscreen",
        PYTHONPATH=str(ROOT),
    )
    env.pop("HF_TOKEN", None)
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.app_download_child", "SmolLM2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if line.startswith("progress"):
                break
        assert lines and lines[-1].startswith("progress"), (
            lines,
            child.stderr.read() if child.poll() is not None else "",
        )
        child.send_signal(signal.SIGKILL)  # kill the app halfway
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        child.stdout.close()
        child.stderr.close()
    assert lines[0].startswith("fit SmolLM2-135M-Instruct.Q4_1.gguf")
    assert lines[0].split()[-1] in ("fits", "tight")
    killed_at = int(lines[-1].split()[2])
    size = smollm2.stat().st_size
    assert 0.3 * size <= killed_at < size
    parts = list(Path(glassbox_home).rglob("*.gguf.part"))
    assert len(parts) == 1 and parts[0].stat().st_size >= 0.3 * size
    assert not [p for p in Path(glassbox_home).rglob("*.gguf") if p.is_file()], "a half model is visible"

    # Restart: the same data folder, the same Hub.
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_home / "hub"))
    point_hub_at(monkeypatch, hub.url)
    win = make_window(qtbot, WindowEngine.REAL)
    try:
        with qtbot.waitSignal(win.models.download_finished, timeout=90_000) as done:
            pass  # the download manager resumes interrupted downloads on start
        path = Path(done.args[0])
        assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size == size
        assert _sha256(path) == _sha256(smollm2)
        ranges = [r.range or "" for r in hub.file_requests("SmolLM2-135M-Instruct.Q4_1.gguf")]
        resumed = [int(r.split("=")[1].split("-")[0]) for r in ranges if r.startswith("bytes=")]
        assert resumed and max(resumed) >= 0.3 * size, ranges  # it went on from where it stopped
        assert not list(Path(glassbox_home).rglob("*.part"))
        with qtbot.waitSignal(win.engine.model_loaded, timeout=60_000):
            assert win.load_model(str(path))
        win.sampler_panel.set_settings(
            win.sampler_panel.settings().__class__(temperature=0.0, max_tokens=12), emit=True
        )
        fin = send(qtbot, win, "Say hello.")
        assert fin.text.strip()
    finally:
        win.close()
        win.conversations.close()
