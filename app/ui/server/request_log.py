"""The Server panel's log: one entry per API request, with its conversation and its figures.

Kept in memory for this run only (the last :data:`MAX_ENTRIES`), apart from the person's chats:
API conversations never enter the chat list or the conversation store.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from app.core import protocol as P
from app.core.chat.context import ChatMessage, GenerationStats, StopReason

MAX_ENTRIES = 200
EMBEDDINGS = "embeddings"  # an embeddings request's endpoint (the others: app.server.schema.Endpoint's values)


class RequestStatus(str, enum.Enum):
    """Where one API request is."""

    QUEUED = "queued"  # waiting for the engine
    RUNNING = "running"  # in the engine (prefill or decode)
    DONE = "done"
    CANCELLED = "cancelled"  # by the window, or its client went away
    FAILED = "failed"  # refused (busy, no model, bad prompt) or the engine failed


@dataclass
class ApiLogEntry:
    """One API request as the Server panel shows it.

    Attributes:
        job_id: the server's job number (``chatcmpl-glassbox-<id>``).
        endpoint: ``chat.completions``, ``completions`` or ``embeddings``.
        client: the client's ``host:port``.
        messages: the conversation the client sent (a completion's prompt as one user message).
        arrived: when it arrived, Unix seconds.
        arrived_mono: the same, ``time.monotonic()`` seconds (for the queue wait).
        status: where it is.
        reply: the reply so far (the whole reply once done).
        stats: the engine's figures for the turn (TTFT, prefill, decode, tokens), once done.
        queued_s: seconds it waited for the engine.
        error: why it failed or was cancelled.
        embedded_tokens: an embeddings request's tokens evaluated, once done (it has no ``stats``).
    """

    job_id: int
    endpoint: str
    client: str
    messages: tuple[ChatMessage, ...]
    arrived: float = field(default_factory=time.time)
    arrived_mono: float = field(default_factory=time.monotonic)
    status: RequestStatus = RequestStatus.QUEUED
    reply: str = ""
    stats: GenerationStats | None = None
    queued_s: float = 0.0
    error: str = ""
    embedded_tokens: int = 0

    def started(self) -> None:
        """The engine took it: it waited until now."""
        self.status = RequestStatus.RUNNING
        self.queued_s = time.monotonic() - self.arrived_mono

    def finished(self, text: str, stats: GenerationStats, cancelled_by: str = "") -> None:
        """It ended with a reply (``cancelled_by`` says who stopped it, when someone did)."""
        self.reply = text
        self.stats = stats
        if stats.stop_reason is StopReason.CANCELLED:
            self.status = RequestStatus.CANCELLED
            self.error = cancelled_by or "cancelled"
        else:
            self.status = RequestStatus.DONE

    def embedded(self, ev: P.Embedded) -> None:
        """An embeddings request ended: the reply is a line on the vectors, their tokens and time."""
        pooling = f"{ev.pooling.value} pooling" + ("" if ev.model_pooling else " (the model declares none)")
        self.reply = (
            f"{len(ev.token_counts)} vectors of {ev.n_embd} values, {sum(ev.token_counts):,} tokens, "
            f"{pooling}, L2-normalized, {ev.elapsed_s * 1000:.0f} ms"
        )
        self.embedded_tokens = sum(ev.token_counts)
        self.status = RequestStatus.DONE

    def failed(self, message: str, cancelled: bool = False) -> None:
        self.status = RequestStatus.CANCELLED if cancelled else RequestStatus.FAILED
        self.error = message

    @property
    def transcript(self) -> str:
        """The conversation as text: each message under its role, then the reply (or the error); an
        embeddings request's inputs, then what came back."""
        embeddings = self.endpoint == EMBEDDINGS
        parts = [f"[{'inputs' if embeddings else m.role.value}]\n{m.content}" for m in self.messages]
        if self.reply or self.status in (RequestStatus.RUNNING, RequestStatus.DONE):
            parts.append(f"[{'embeddings' if embeddings else 'assistant, reply'}]\n{self.reply}")
        if self.error:
            parts.append(f"[{self.status.value}] {self.error}")
        return "\n\n".join(parts)
