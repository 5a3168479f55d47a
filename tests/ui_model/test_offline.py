"""No network unless the person searches or downloads: starting the app and chatting
open no network connection, in the window's process or in the engine's."""

from __future__ import annotations

import os
import socket

from tests.support.window import WindowEngine, close_window, load, make_window, send

HOOK = """
import os, socket
with open({marker!r}, "a") as f:
    f.write(f"{{os.getpid()}}\\n")
_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
def _log(sock, addr):
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        with open({log!r}, "a") as f:
            f.write(f"{{os.getpid()}} {{addr!r}}\\n")
def connect(self, addr, *a):
    _log(self, addr)
    return _connect(self, addr, *a)
def connect_ex(self, addr, *a):
    _log(self, addr)
    return _connect_ex(self, addr, *a)
socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
"""


# Case H3 (docs/field-cases.md).
def test_starting_the_app_and_chatting_opens_no_network_connection(qtbot, smollm2, tmp_path, monkeypatch):
    log, marker = tmp_path / "connects.log", tmp_path / "hooked.pids"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HOOK.format(log=str(log), marker=str(marker)))
    # The engine process (spawned) loads the hook through PYTHONPATH...
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    # ...and this process records its own connections directly.
    seen: list = []
    real = socket.socket.connect

    def connect(self, addr, *a):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            seen.append(addr)
        return real(self, addr, *a)

    monkeypatch.setattr(socket.socket, "connect", connect)
    win = make_window(qtbot, WindowEngine.REAL)
    try:
        load(qtbot, win, smollm2)
        fin = send(qtbot, win, "Hello!")
        assert fin.text.strip()
        win.show_page("models")  # the model library too (it scans disk only)
        qtbot.waitUntil(lambda: win.models.library_tab.scanned, timeout=10_000)  # the scan is over before we look
        engine_pid = win.engine.pid
        assert engine_pid is not None
    finally:
        close_window(win)
    hooked = marker.read_text().split()
    assert str(engine_pid) in hooked, "the check did not reach the engine process"
    assert seen == []
    assert not log.exists(), log.read_text()
