"""The engine process's entry point (the ``spawn`` target of :mod:`app.engine.host`).

Runs in a child process started with the ``spawn`` method, so a crash in
llama.cpp (abort, SIGILL, out of memory) ends this process and not the
window.

The window process imports this module (through the host) to name the
target, so it must not import llama_cpp, not even inside a function: that is
what ``lint-imports`` checks ("the UI never touches llama.cpp"). The child
loads :mod:`app.engine.child`, which owns llama.cpp, by name in
:func:`engine_main`; a test checks that importing the engine client leaves
llama_cpp out of ``sys.modules``.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import logging
import os
import signal
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

from app import logfiles
from app.engine.errors import CancelFlag

log = logging.getLogger(__name__)

# The module that imports llama_cpp and runs the requests; loaded by name, only in the child.
CHILD_MODULE = "app.engine.child"
#: The engine's name in process lists (ps, top, a task manager) instead of ``python -c from multiprocessing...``.
PROCESS_NAME = "glassbox-engine"
_PR_SET_NAME = 15  # prctl(2): the thread's name, /proc/<pid>/comm (15 bytes at most)


def name_process(name: str = PROCESS_NAME) -> None:
    """Show this process as ``name`` in process lists.

    With setproctitle (a dependency) the whole command line becomes ``name``
    (``ps aux``, ``/proc/<pid>/cmdline``); on Linux the kernel's name
    (``/proc/<pid>/comm``: ``ps -e``, ``top``) is set as well, through prctl.
    Best effort: a platform without either keeps its name.
    """
    with contextlib.suppress(ImportError):
        import setproctitle

        setproctitle.setproctitle(name)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _setup_logging(log_path: str | None) -> None:
    """engine.log (rotating, private: :mod:`app.logfiles`), or stderr without a path."""
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        logfiles.configure(Path(log_path), debug=logfiles.debug_inherited())
        # Python tracebacks of hard crashes (SIGSEGV, SIGILL, SIGABRT) go to the same file.
        faulthandler.enable(open(log_path, "a", encoding="utf-8"))  # noqa: SIM115 - lives as long as the process
    else:
        logfiles.configure(None, debug=logfiles.debug_inherited())


def engine_main(conn: Connection, cancel: CancelFlag, log_path: str | None = None) -> None:
    """Entry point of the engine process.

    Args:
        conn: duplex pipe end: requests in, events out.
        cancel: ``multiprocessing.Event`` set by the UI to stop the current request.
        log_path: file for the engine log (llama.cpp warnings and errors included).
    """
    # The UI handles Ctrl+C; the engine ends when the pipe closes or on Shutdown.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    name_process()
    _setup_logging(log_path)
    t0 = time.perf_counter()
    if os.environ.get("GLASSBOX_ENGINE_CRASH_ON_START"):
        # Test hook: die the way an incompatible llama.cpp build does.
        os.kill(os.getpid(), getattr(signal, os.environ["GLASSBOX_ENGINE_CRASH_ON_START"]))
    child = importlib.import_module(CHILD_MODULE)
    child.serve(conn, cancel, t0)
