"""Between the server's event loop and the engine's owner: jobs, their event channel, the gateway.

The server thread makes an :class:`ApiJob` per generation request and hands it to an
:class:`EngineGateway` (the window's bridge, which queues it on the engine client in the UI
thread). Events come back through :meth:`ApiJob.deliver`, which is safe to call from any
thread: it puts the event on the job's asyncio queue in the server's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Protocol

from app.server.embeddings import EmbeddingRequest
from app.server.schema import ParsedRequest

_job_ids = itertools.count(1)


@dataclass(frozen=True)
class ModelCard:
    """The loaded model as the API names it.

    Attributes:
        id: the name clients see in ``/v1/models`` and every response (the file name without .gguf).
        path: the GGUF file.
        n_ctx: the context, tokens.
        eog_token_ids: ids that end generation (left out of ``logprobs``).
        loaded_at: when it was loaded (Unix seconds; ``created`` in ``/v1/models``).
        n_embd: the model's vector size (``/v1/embeddings``' ``dimensions``); 0: unknown.
    """

    id: str
    path: str
    n_ctx: int
    eog_token_ids: tuple[int, ...]
    loaded_at: int
    n_embd: int = 0


@dataclass(eq=False)  # compared and hashed by identity: one object per request
class ApiJob:
    """One generation request on its way through the engine.

    Attributes:
        request: the checked request.
        client: the client's ``host:port``.
        loop: the server's event loop (events are delivered into it).
        id: a number unique in this process (``chatcmpl-<id>`` / ``cmpl-<id>`` in responses).
        created: when it arrived, Unix seconds.
        arrived_ns: when it arrived, ``time.perf_counter_ns`` (queue wait and client-side TTFT count from it).
    """

    request: ParsedRequest
    client: str
    loop: asyncio.AbstractEventLoop
    id: int = field(default_factory=lambda: next(_job_ids))
    created: int = field(default_factory=lambda: int(time.time()))
    arrived_ns: int = field(default_factory=time.perf_counter_ns)
    _events: asyncio.Queue[object] = field(default_factory=asyncio.Queue)

    def deliver(self, event: object) -> None:
        """Hand an engine event to the request's handler (any thread; dropped when the loop has closed)."""
        with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
            self.loop.call_soon_threadsafe(self._events.put_nowait, event)

    def has_events(self) -> bool:
        """True when events are waiting (call in the server's loop)."""
        return not self._events.empty()

    async def next_event(self) -> object:
        """The next event for this request (waits)."""
        return await self._events.get()


@dataclass(eq=False)  # compared and hashed by identity: one object per request
class EmbeddingJob:
    """One ``/v1/embeddings`` request on its way through the engine (issue 23 §3).

    Attributes:
        request: the checked request.
        client: the client's ``host:port``.
        loop: the server's event loop (the answer is delivered into it).
        id: a number unique in this process, shared with :class:`ApiJob` (the Server panel's log).
    """

    request: EmbeddingRequest
    client: str
    loop: asyncio.AbstractEventLoop
    id: int = field(default_factory=lambda: next(_job_ids))
    _answers: asyncio.Queue[object] = field(default_factory=asyncio.Queue)

    def deliver(self, event: object) -> None:
        """Hand the engine's Embedded or Failed to the request's handler (any thread; dropped when the loop has closed)."""
        with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
            self.loop.call_soon_threadsafe(self._answers.put_nowait, event)

    async def answer(self) -> object:
        """The engine's answer (waits)."""
        return await self._answers.get()


class EngineGateway(Protocol):
    """What the server needs from the engine's owner; every method may be called from the server thread."""

    def submit(self, job: ApiJob) -> None:
        """Queue ``job``; its events, ending with Finished or Failed, arrive through ``job.deliver``."""

    def cancel(self, job: ApiJob | EmbeddingJob) -> None:
        """Stop ``job`` (queued or in flight): its client went away."""

    def model(self) -> ModelCard | None:
        """The loaded model, or None."""

    def embed(self, job: EmbeddingJob) -> None:
        """Compute ``job``'s embeddings; exactly one Embedded or Failed arrives through ``job.deliver``."""
