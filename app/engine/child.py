"""The engine process's work once llama.cpp is imported: receive requests, run them, send events.

Only the engine child imports this module (:func:`app.engine.process.engine_main`
loads it by name), so llama_cpp and libllama are never loaded into the window process.
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.engine.backends import load_backends
from app.engine.devices import gpu_devices
from app.engine.errors import CancelFlag, EngineError, ParentGone
from app.engine.llama_log import LlamaLog
from app.engine.quant.compare import compare_models
from app.engine.quant.dry_run import plan_quantize
from app.engine.quant.quantize import quantize
from app.engine.rpc import rpc_supported
from app.engine.session import Session

log = logging.getLogger(__name__)


def serve(conn: Connection, cancel: CancelFlag, t0: float) -> None:
    """Start llama.cpp, send EngineReady, then answer requests until Shutdown or the pipe closes.

    Args:
        conn: duplex pipe end: requests in, events out.
        cancel: the Stop flag the UI sets.
        t0: when the process started (perf_counter seconds), for the start-up time in the log.
    """
    llama_log = LlamaLog(stopping=cancel.is_set)
    try:
        load_backends()  # a GGML_BACKEND_DL build: its best CPU variant, before any model load
    except OSError:
        log.exception("the ggml backends could not be loaded; model loads will fail")
    llama_cpp.llama_backend_init()
    system_info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
    log.info(
        "engine started in %.2f s; llama-cpp-python %s; %s",
        time.perf_counter() - t0,
        llama_cpp.__version__,
        system_info,
    )

    send_lock = threading.Lock()  # the main loop and the funnel (reader thread) both send

    def emit(event: object) -> None:
        try:
            with send_lock:
                conn.send(event)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            raise ParentGone() from None

    try:
        devices = gpu_devices()
    except (AttributeError, OSError) as exc:  # a libggml without the backend device API
        log.warning("GPU devices cannot be listed: %s", exc)
        devices = ()
    # gpu_offload: a GPU of this machine (llama_supports_gpu_offload() says yes for any RPC build).
    emit(P.EngineReady(llama_cpp.__version__, system_info, bool(devices), devices, rpc=rpc_supported()))
    session = Session(emit, cancel, llama_log)
    inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
    inspections: queue.SimpleQueue[object] = queue.SimpleQueue()
    embeds: queue.SimpleQueue[object] = queue.SimpleQueue()
    threading.Thread(
        target=_read, args=(conn, session, emit, inbox, inspections, embeds), name="glassbox-requests", daemon=True
    ).start()
    threading.Thread(target=_inspect, args=(session, emit, inspections), name="glassbox-inspect", daemon=True).start()
    threading.Thread(target=_inspect, args=(session, emit, embeds), name="glassbox-embed", daemon=True).start()
    try:
        while True:
            req = inbox.get()
            if req is None or isinstance(req, P.Shutdown):
                break
            handle(session, req, emit)
    except ParentGone:
        log.info("the window went away; the engine ends")
    finally:
        session.unload()
        conn.close()


class Lane(enum.Enum):
    """Which thread runs a request (:data:`LANES`)."""

    MAIN = "main"  #: the main loop, one at a time: loads, turns, resets, prompt renders and counts, depth sweeps
    READER = "reader"  #: the pipe reader, at once: a funnel is answered while a reply streams
    INSPECT = "inspect"  #: the inspect thread, one at a time: an inspection has its own llama.cpp context
    EMBED = "embed"  #: the embed thread, one at a time: embeddings have their own llama.cpp context


#: The request types that do not run on the main loop.
LANES: dict[type[Any], Lane] = {
    P.ComputeFunnel: Lane.READER,
    P.InspectToken: Lane.INSPECT,
    P.PrepareInspect: Lane.INSPECT,
    P.Embed: Lane.EMBED,
    P.CancelEmbed: Lane.READER,
    P.GenerateParallel: Lane.READER,  # only queued here: the parallel loop has its own thread
    P.CancelSequence: Lane.READER,
    P.CheckConstraint: Lane.READER,  # output constraints (issue 23 §1): milliseconds, answered while a reply streams
}


def _reset(session: Session, req: P.ResetContext) -> P.ContextReset:
    session.reset()
    return P.ContextReset(req.request_id)


def _prepare_inspect(session: Session, _req: P.PrepareInspect) -> None:
    session.prepare_inspect()  # no answer: the inspection that follows reports any failure


#: Request type -> what runs it: the request's terminal event, or None for a request that gets no answer.
#: (Shutdown is the main loop's own: it ends the loop.)
HANDLERS: dict[type[Any], Callable[[Session, Any], object | None]] = {
    P.LoadModel: lambda session, req: session.load(req),
    P.Generate: lambda session, req: session.generate(req),
    P.ComputeFunnel: lambda session, req: session.funnel(req),
    P.RenderPrompt: lambda session, req: session.render_prompt(req),
    P.CountPrompt: lambda session, req: session.count_prompt(req),
    P.InspectToken: lambda session, req: session.inspect_token(req),
    P.PrepareInspect: _prepare_inspect,
    P.ResetContext: _reset,
    P.SweepDepth: lambda session, req: session.sweep_depth(req),
    P.Quantize: lambda session, req: quantize(
        req, emit=session.emit, llama_log=session.llama_log, cancel=session.cancel
    ),
    # Comparing two quantizations (issue 21): its own models and contexts, no chat model needed.
    P.CompareModels: lambda session, req: compare_models(req, emit=session.emit, cancel=session.cancel),
    # Embeddings (issue 23 §3): the loaded model in a context of its own, on the embed lane.
    P.Embed: lambda session, req: session.embed(req),
    P.CancelEmbed: lambda session, req: session.cancel_embed(req),
    # Several API requests decoded together (issue 23 §4): the parallel loop's own thread and context.
    P.GenerateParallel: lambda session, req: session.generate_parallel(req),
    P.CancelSequence: lambda session, req: session.cancel_sequence(req),
    # Sizing a quantization (issue 21 §2): llama.cpp's dry run of each type offered, nothing written.
    P.PlanQuantize: lambda session, req: plan_quantize(req, llama_log=session.llama_log),
    # Output constraints (issue 23 §1): a JSON schema converted and a grammar parsed, nothing generated.
    P.CheckConstraint: lambda session, req: session.check_constraint(req),
}


def _read(
    conn: Connection,
    session: Session,
    emit: Callable[[object], None],
    inbox: queue.SimpleQueue[object],
    inspections: queue.SimpleQueue[object],
    embeds: queue.SimpleQueue[object],
) -> None:
    """Receive requests and route them by :data:`LANES`: the reader's at once, the inspect thread's to
    ``inspections``, the embed thread's to ``embeds``, the rest to the main loop's ``inbox``; None to
    each when the pipe closes."""
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            inbox.put(None)
            inspections.put(None)
            embeds.put(None)
            return
        lane = LANES.get(type(req), Lane.MAIN)
        if isinstance(req, P.ComputeFunnel) and req.stored is not None and req.stored.model_path:
            lane = Lane.INSPECT  # a stored reply's logits may be recomputed: an evaluation, off the reader
        if lane is Lane.INSPECT:
            inspections.put(req)
            continue
        if lane is Lane.EMBED:
            embeds.put(req)
            continue
        if lane is Lane.READER:
            try:
                handle(session, req, emit)
            except ParentGone:
                inbox.put(None)
                return
            continue
        inbox.put(req)
        if isinstance(req, P.Shutdown):
            inspections.put(None)
            embeds.put(None)
            return


def _inspect(session: Session, emit: Callable[[object], None], inspections: queue.SimpleQueue[object]) -> None:
    """The inspect thread (and the embed thread, on its own queue): run its requests one at a time, off
    the main loop, so a reply, Stop and a new message go on meanwhile (each has its own llama.cpp context)."""
    while True:
        req = inspections.get()
        if req is None:
            return
        try:
            handle(session, req, emit)
        except ParentGone:
            return


def handle(session: Session, req: object, emit: Callable[[object], None]) -> None:
    """Run one request by :data:`HANDLERS` and emit its terminal event (Failed for errors and for a
    request the engine does not know; bugs are logged, the engine lives on).

    Raises:
        ParentGone: the UI end of the pipe closed.
    """
    rid = getattr(req, "request_id", -1)
    handler = HANDLERS.get(type(req))
    try:
        if handler is None:
            emit(P.Failed(rid, P.FailureKind.INTERNAL, f"The engine does not know the request {type(req).__name__}."))
            return
        answer = handler(session, req)
        if answer is not None:
            emit(answer)
    except ParentGone:
        raise
    except EngineError as exc:
        log.info("request %s failed: %s", rid, exc.message)
        emit(P.Failed(rid, exc.kind, exc.message))
    except Exception as exc:  # a bug: report it, keep the engine alive
        log.error("request %s crashed:\n%s", rid, traceback.format_exc())
        emit(
            P.Failed(
                rid,
                P.FailureKind.INTERNAL,
                f"The engine hit an internal error ({type(exc).__name__}: {exc}). Details are in the engine log.",
            )
        )
