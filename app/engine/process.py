"""The engine process's main loop: receive requests, run them, send events.

Runs in a child process started with the ``spawn`` method (see
:mod:`app.engine.host`), so a crash in llama.cpp (abort, SIGILL, out of
memory) ends this process and not the window.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from app import logfiles
from app.core import protocol as P

log = logging.getLogger("glassbox.engine")


def _setup_logging(log_path: str | None) -> None:
    """engine.log (rotating, private: :mod:`app.logfiles`), or stderr without a path."""
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        logfiles.configure(Path(log_path))
        # Python tracebacks of hard crashes (SIGSEGV, SIGILL, SIGABRT) go to the same file.
        faulthandler.enable(open(log_path, "a", encoding="utf-8"))  # noqa: SIM115 - lives as long as the process
    else:
        logfiles.configure(None)


def engine_main(conn: Connection, cancel, log_path: str | None = None) -> None:
    """Entry point of the engine process.

    Args:
        conn: duplex pipe end: requests in, events out.
        cancel: ``multiprocessing.Event`` set by the UI to stop the current request.
        log_path: file for the engine log (llama.cpp warnings and errors included).
    """
    # The UI handles Ctrl+C; the engine ends when the pipe closes or on Shutdown.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _setup_logging(log_path)
    t0 = time.perf_counter()
    if os.environ.get("GLASSBOX_ENGINE_CRASH_ON_START"):
        # Test hook: die the way an incompatible llama.cpp build does.
        os.kill(os.getpid(), getattr(signal, os.environ["GLASSBOX_ENGINE_CRASH_ON_START"]))
    import llama_cpp

    from app.engine.llama_log import LlamaLog
    from app.engine.session import EngineError, Session

    llama_log = LlamaLog()
    llama_cpp.llama_backend_init()
    system_info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
    log.info(
        "engine started in %.2f s; llama-cpp-python %s; %s",
        time.perf_counter() - t0,
        llama_cpp.__version__,
        system_info,
    )

    def emit(event: object) -> None:
        try:
            conn.send(event)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            raise ParentGone() from None

    emit(P.EngineReady(llama_cpp.__version__, system_info, bool(llama_cpp.llama_supports_gpu_offload())))
    session = Session(emit, cancel, llama_log)
    try:
        while True:
            try:
                req = conn.recv()
            except (EOFError, OSError):
                break
            if isinstance(req, P.Shutdown):
                break
            _handle(session, req, emit, EngineError)
    except ParentGone:
        log.info("the window went away; the engine ends")
    finally:
        session.unload()
        conn.close()


class ParentGone(Exception):
    """The UI end of the pipe is closed: nobody is listening, so the engine ends."""


def _handle(session, req, emit, engine_error) -> None:
    rid = getattr(req, "request_id", -1)
    try:
        if isinstance(req, P.LoadModel):
            emit(session.load(req))
        elif isinstance(req, P.Generate):
            emit(session.generate(req))
        elif isinstance(req, P.ResetContext):
            session.reset()
            emit(P.ContextReset(rid))
        else:
            emit(P.Failed(rid, "internal", f"The engine does not know the request {type(req).__name__}."))
    except ParentGone:
        raise
    except engine_error as exc:
        log.info("request %s failed: %s", rid, exc.message)
        emit(P.Failed(rid, exc.kind, exc.message))
    except Exception as exc:  # a bug: report it, keep the engine alive
        log.error("request %s crashed:\n%s", rid, traceback.format_exc())
        emit(
            P.Failed(
                rid,
                "internal",
                f"The engine hit an internal error ({type(exc).__name__}: {exc}). Details are in the engine log.",
            )
        )
