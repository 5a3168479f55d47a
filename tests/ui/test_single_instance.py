"""One window per data folder: a second start hands its arguments to the running window and exits 0.

The running window is the real one (app.main's wiring, on a FakeEngine); the
second start is a real ``python -m app`` process on the same GLASSBOX_HOME.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core import protocol as P
from app.paths import default_paths
from app.ui.engine.client import EngineState
from app.ui.window.compose import listen_for_second_starts
from app.ui.window.single_instance import LOCK_FILE_NAME, SingleInstance, server_name
from tests.support.window import close_window, make_window

REPO = Path(__file__).resolve().parents[2]
START_S = 120  # a Python start with PySide6 on a loaded 2-CPU machine
# The window comes forward with raise(); the offscreen platform plugin has no windows to raise.
offscreen_raise = pytest.mark.qt_log_ignore("This plugin does not support raise")


def start_glassbox(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """``python -m app ARGS`` from ``cwd``, on this test's GLASSBOX_HOME, importing this checkout."""
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    return subprocess.Popen(
        [sys.executable, "-m", "app", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@offscreen_raise
def test_second_start_hands_its_model_to_the_running_window_and_exits_0(qtbot, tiny_model) -> None:
    paths = default_paths().ensure()
    instance = SingleInstance(paths.data_dir)
    assert instance.claim() and instance.listening
    win = make_window(qtbot)
    listen_for_second_starts(instance, win)
    conversations_before = win.conversations.list_conversations()
    try:
        # A path relative to the second start's working folder, as a file manager or shell passes it.
        second = start_glassbox("--model", tiny_model.name, cwd=tiny_model.parent)
        with qtbot.waitSignal(win.engine.model_loaded, timeout=START_S * 1000):
            pass
        qtbot.waitUntil(lambda: second.poll() is not None, timeout=START_S * 1000)
        output = second.communicate(timeout=10)[0]
        assert second.returncode == 0, output
        assert [r.path for r in win.engine.sent(P.LoadModel)] == [str(tiny_model)]
        assert win.engine.state == EngineState.READY
        assert win.isVisible()
        # The second start opened no window and no history of its own.
        assert not list(paths.data_dir.glob("conversations-this-session*"))
        assert win.conversations.list_conversations() == conversations_before
    finally:
        close_window(win)
        instance.release()


@offscreen_raise
def test_second_start_with_a_missing_model_shows_the_error_in_the_running_window(qtbot, tmp_path) -> None:
    paths = default_paths().ensure()
    instance = SingleInstance(paths.data_dir)
    assert instance.claim()
    win = make_window(qtbot)
    listen_for_second_starts(instance, win)
    try:
        second = start_glassbox("--model", "nowhere.gguf", cwd=tmp_path)
        qtbot.waitUntil(lambda: "does not exist" in win.banner.text.text(), timeout=START_S * 1000)
        assert str(tmp_path / "nowhere.gguf") in win.banner.text.text()
        output = second.communicate(timeout=START_S)[0]
        assert second.returncode == 0, output
        assert win.engine.sent(P.LoadModel) == []
    finally:
        close_window(win)
        instance.release()


CLAIM_AND_HANG = """
import sys, time
from pathlib import Path
from PySide6.QtCore import QCoreApplication
from app.ui.window.single_instance import SingleInstance
app = QCoreApplication([])
instance = SingleInstance(Path(sys.argv[1]))
print("claimed" if instance.claim() and instance.listening else "not claimed", flush=True)
time.sleep(600)
"""


def test_a_crashed_instance_leaves_nothing_that_blocks_the_next_start(qtbot) -> None:
    data_dir = default_paths().ensure().data_dir
    crashed = subprocess.Popen(
        [sys.executable, "-c", CLAIM_AND_HANG, str(data_dir)],
        env=dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen"),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert crashed.stdout is not None and crashed.stdout.readline().strip() == "claimed"
    # While it lives, this process is a second start.
    assert not SingleInstance(data_dir).claim()
    crashed.send_signal(signal.SIGKILL)
    crashed.wait(timeout=30)
    crashed.stdout.close()
    assert (data_dir / LOCK_FILE_NAME).exists()  # its lock file (and, on Unix, its socket) stay behind
    instance = SingleInstance(data_dir)
    try:
        deadline = time.monotonic() + 10
        claimed = instance.claim()
        while not claimed and time.monotonic() < deadline:  # the kernel may take a moment to reap it
            time.sleep(0.1)
            claimed = instance.claim()
        assert claimed and instance.listening
        assert instance.name == server_name(data_dir)
    finally:
        instance.release()
