"""A remote engine behind the local engine's interface: requests in, protocol events out.

:class:`RemoteHost` has the methods of :class:`app.engine.host.EngineHost` that
:class:`app.ui.engine.client.EngineClient` uses (``start``, ``alive``, ``send``, ``recv_raw``,
``cancel``, ``clear_cancel``, ``stop``, ``kill``, ``process``), so the window drives a server exactly
as it drives its engine process, and every panel gets the same events:

- ``start``: an :class:`~app.core.protocol.EngineReady` (no devices: they are the server's).
- :class:`~app.core.protocol.LoadModel`: the connection test (:func:`app.remote.probe.probe`), answered
  with a :class:`~app.core.protocol.ModelLoaded` whose ``remote`` holds what the server reported, or
  a :class:`~app.core.protocol.Failed` (kind ``load``) with the failure's message. Nothing is loaded:
  the server has its model.
- :class:`~app.core.protocol.Generate`: a :class:`~app.remote.generation.RemoteReply` on its own
  thread; ``cancel`` cuts its stream.
- :class:`~app.core.protocol.ResetContext`: answered at once (the server manages its own KV cache).
- :class:`~app.core.protocol.ComputeFunnel`: Failed ``no_logits``: a server sends no logits.

Events wait in a queue that :meth:`recv_raw` reads (one reader thread). After :meth:`stop`,
:meth:`recv_raw` raises :class:`RemoteClosed`, which the reader takes as the end of this host.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from typing import Any

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFInfo
from app.core.hardware.memory import KVCacheLayout
from app.core.remote import RemoteEndpoint, RemoteFacts, ServerKind
from app.remote.generation import RemoteReply
from app.remote.http import RemoteError
from app.remote.probe import probe

_CLOSED = object()


class RemoteClosed(Exception):
    """This remote host was stopped: its reader ends. ``description`` says so, as EngineDied's does."""

    def __init__(self) -> None:
        self.description = "The connection to the remote engine was closed."
        self.exitcode = None
        super().__init__(self.description)


def remote_model_loaded(request_id: int, req: P.LoadModel, facts: RemoteFacts, load_s: float) -> P.ModelLoaded:
    """The ModelLoaded for a server: its model id as ``info.path``, its n_ctx, nothing about the file."""
    name = facts.model_path.rsplit("/", 1)[-1] if facts.model_path else facts.model
    info = GGUFInfo(
        path=facts.model,
        file_size=0,
        version=0,
        metadata={"general.name": name.removesuffix(".gguf"), "general.architecture": facts.kind.value},
        array_lengths={},
        tensors=(),
        data_offset=0,
    )
    return P.ModelLoaded(
        request_id=request_id,
        info=info,
        settings=replace(req.settings, n_ctx=facts.n_ctx),
        n_ctx=facts.n_ctx,
        n_batch=0,
        n_threads=0,
        n_threads_batch=0,
        gpu_offload=False,
        load_s=load_s,
        kv_allocated_bytes=0,
        kv_layout=KVCacheLayout(n_ctx=facts.n_ctx, n_swa=0, layer_cells=(), layer_bytes_per_cell=(), layer_is_swa=()),
        kv_reported_bytes=0,
        compute_reported_bytes=0,
        chat_template=facts.chat_template,
        bos_text="",
        eos_text="",
        eog_token_ids=(),
        add_bos=False,
        remote=facts,
    )


class RemoteHost:
    """A remote engine with :class:`~app.engine.host.EngineHost`'s interface (see the module docstring).

    Args:
        endpoint: the server, its key and the model id to ask for.

    Thread-safety: :meth:`send`, :meth:`cancel`, :meth:`stop` from any thread; :meth:`recv_raw` from one.
    """

    process = None  # no child process: EngineClient.pid is None

    def __init__(self, endpoint: RemoteEndpoint) -> None:
        self.endpoint = endpoint
        self.facts: RemoteFacts | None = None
        self._events: queue.Queue[Any] = queue.Queue()
        self._alive = False
        self._stopped = False
        self._reply: RemoteReply | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Ready at once: sends EngineReady (the version says where the engine is)."""
        self._alive = True
        ready = P.EngineReady(
            llama_cpp_version=f"remote ({self.endpoint.base_url})", system_info="", gpu_offload=False, remote=True
        )
        self._events.put(ready)

    @property
    def alive(self) -> bool:
        return self._alive

    def send(self, request: Any) -> None:
        """Handle a request (never blocks: network work runs on a worker thread)."""
        if not self._alive:
            return
        if isinstance(request, P.LoadModel):
            self._spawn(self._load, request)
        elif isinstance(request, P.Generate):
            self._spawn(self._generate, request)
        elif isinstance(request, P.ResetContext):
            self._events.put(P.ContextReset(request.request_id))
        elif isinstance(request, P.ComputeFunnel):
            self._events.put(
                P.Failed(
                    request.request_id,
                    P.FailureKind.NO_LOGITS,
                    "The sampler funnel needs the model's logits; a remote engine does not send them.",
                )
            )
        elif isinstance(request, P.Shutdown):
            self.stop()

    def _spawn(self, fn: Any, request: Any) -> None:
        threading.Thread(target=fn, args=(request,), name="glassbox-remote", daemon=True).start()

    def _load(self, req: P.LoadModel) -> None:
        t0 = time.monotonic()
        try:
            facts = probe(self.endpoint)
        except RemoteError as exc:
            self._events.put(P.Failed(req.request_id, P.FailureKind.LOAD, exc.message))
            return
        self.facts = facts
        self._events.put(remote_model_loaded(req.request_id, req, facts, time.monotonic() - t0))

    def _generate(self, req: P.Generate) -> None:
        facts = self.facts
        if facts is None:
            self._events.put(P.Failed(req.request_id, P.FailureKind.NO_MODEL, "No remote server is connected."))
            return
        reply = RemoteReply(self.endpoint, facts, req, self._events.put)
        with self._lock:
            self._reply = reply
        if self._cancel.is_set():
            reply.cancel()
        try:
            reply.run()
        finally:
            with self._lock:
                if self._reply is reply:
                    self._reply = None

    def cancel(self) -> None:
        """Stop the reply in flight (its stream is cut; it ends with Finished, ``cancelled``)."""
        self._cancel.set()
        with self._lock:
            reply = self._reply
        if reply is not None:
            reply.cancel()

    def clear_cancel(self) -> None:
        self._cancel.clear()

    def recv_raw(self, timeout: float | None = None) -> Any:
        """The next event (a TokenBatch whole), or None after ``timeout`` seconds.

        Raises:
            RemoteClosed: the host was stopped.
        """
        try:
            ev = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if ev is _CLOSED:
            self._events.put(_CLOSED)  # every later call sees it too
            raise RemoteClosed()
        return ev

    def stop(self, timeout: float = 5.0) -> None:
        """End: cut any reply in flight and close the event queue. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._alive = False
        self.cancel()
        self._events.put(_CLOSED)

    def kill(self) -> None:
        self.stop()

    @property
    def kind(self) -> ServerKind | None:
        return self.facts.kind if self.facts is not None else None
