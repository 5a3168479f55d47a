"""The local API's owner in the window: starts and stops the server, feeds its requests to the engine.

:class:`ServerController` is the :class:`~app.server.gateway.EngineGateway` the server thread
talks to. ``submit`` and ``cancel`` are called in the server thread and reach the UI thread
through queued signals; there each request goes to the engine's API side (``engine.api``,
:meth:`~app.ui.engine.api_requests.ApiRequests.submit`), which decides when it runs in the engine.
Each request's events are logged (:mod:`app.ui.server.request_log`) and handed back to the server
thread (``ApiJob.deliver``). An embeddings request goes to
:meth:`~app.ui.engine.api_requests.ApiRequests.embed` instead (not the queue: the engine runs it in
a context of its own, beside a reply in flight), under the same busy policy.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.core import protocol as P
from app.core.chat.context import ChatMessage, Role, StopReason
from app.core.server_settings import BusyPolicy, ServerSettings
from app.server.gateway import ApiJob, EmbeddingJob, ModelCard
from app.server.runner import ServerThread
from app.ui.engine.client import EngineClient, EngineState
from app.ui.server.request_log import EMBEDDINGS, MAX_ENTRIES, ApiLogEntry, RequestStatus
from app.ui.window.settings_controller import SettingsController

log = logging.getLogger(__name__)

BUSY_MESSAGE = (
    "The model is writing a reply in the Glassbox window, and Glassbox's Server panel is set to refuse "
    "requests meanwhile. Try again in a moment."
)
# What the client is told of a request the person cancelled in the Server panel.
CANCELLED_IN_PANEL = "The request was cancelled in Glassbox's Server panel."


class ServerController(QObject):
    """Runs the API server by the settings and bridges its requests to the engine client.

    Args:
        engine: the engine's one owner.
        settings: the settings' one owner (``server`` field).

    Signals:
        server_changed(): started, stopped, or failed to start (:attr:`url`, :attr:`error`).
        entry_changed(ApiLogEntry): a request's log entry was added or changed.
    """

    server_changed = Signal()
    entry_changed = Signal(ApiLogEntry)

    _submitted = Signal(ApiJob)  # from the server thread (queued)
    _cancel_asked = Signal(object)  # ApiJob | EmbeddingJob, from the server thread (queued)
    _embed_asked = Signal(EmbeddingJob)  # from the server thread (queued)

    def __init__(self, engine: EngineClient, settings: SettingsController, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self._settings = settings
        self._server: ServerThread | None = None
        self._running_with: ServerSettings | None = None
        self.error = ""
        self.entries: list[ApiLogEntry] = []
        self._tickets: dict[int, int] = {}  # job id -> engine ticket, while queued or running
        self._embeds: dict[int, int] = {}  # embeddings job id -> engine request id, while running
        self._cancelled_here: set[int] = set()  # job ids cancelled in the Server panel, until they end
        self._card: ModelCard | None = None
        self._submitted.connect(self._on_submitted)
        self._cancel_asked.connect(self._on_cancel_asked)
        self._embed_asked.connect(self._on_embed_asked)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.state_changed.connect(self._on_state_changed)
        self._applied: ServerSettings | None = None
        self._closed = False
        settings.changed.connect(self._settings_changed)

    # ---------------------------------------------------------------------------- server
    @property
    def url(self) -> str | None:
        """The base URL while serving (``http://127.0.0.1:8765/v1``), else None."""
        return self._server.url if self._server is not None else None

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    def _settings_changed(self, settings: object) -> None:
        s = settings.server  # type: ignore[attr-defined]
        if s != self._applied:
            self.apply(s)

    def apply(self, s: ServerSettings) -> None:
        """Serve as ``s`` says: start, restart with new settings, or stop. A key is generated when there is none."""
        if self._closed:
            return
        self._applied = s
        self.engine.api.set_parallel(s.parallel)
        if s.enabled and not s.api_key:
            self._settings.update(server=s.with_key())  # comes back here through settings.changed
            return
        if not s.enabled:
            self.stop()
            return
        running = self._running_with
        if self._server is not None and running is not None and running == replace(s, parallel=running.parallel):
            return  # the number of parallel sequences needs no restart: the engine client applies it
        self.stop()
        server = ServerThread(self, s.api_key, s.host, s.port, s.cors_origins)
        try:
            server.start()
        except (OSError, RuntimeError) as exc:
            self.error = f"The API server could not start: {exc}."
            log.warning("%s", self.error)
            self.server_changed.emit()
            return
        self._server = server
        self._running_with = s
        self.error = ""
        self.server_changed.emit()

    def stop(self) -> None:
        """Stop serving (requests in flight are cancelled when their connections close)."""
        server, self._server = self._server, None
        self._running_with = None
        if server is not None:
            server.stop()
            self.server_changed.emit()

    def switch(self, on: bool) -> None:
        """Switch the server on or off (stored in the settings)."""
        self._settings.update(server=replace(self._settings.settings.server, enabled=on))

    def new_key(self) -> None:
        """Replace the API key (clients with the old one get 401 from now on)."""
        s = self._settings.settings.server
        self._settings.update(server=replace(s, api_key="").with_key())

    # --------------------------------------------------------------------------- gateway
    def submit(self, job: ApiJob) -> None:
        """Queue ``job`` on the engine (server thread: crosses to the UI thread)."""
        self._submitted.emit(job)

    def cancel(self, job: ApiJob | EmbeddingJob) -> None:
        """Cancel ``job``: its client went away (server thread)."""
        self._cancel_asked.emit(job)

    def model(self) -> ModelCard | None:
        """The loaded model (a snapshot the UI thread replaces; read from any thread)."""
        return self._card

    def embed(self, job: EmbeddingJob) -> None:
        """Compute ``job``'s embeddings (server thread: crosses to the UI thread)."""
        self._embed_asked.emit(job)

    # ----------------------------------------------------------------------- UI thread
    def cancel_request(self, job_id: int) -> bool:
        """Cancel a request from the window (queued: it never runs; running: stopped like Stop);
        its client is told it was cancelled in the Server panel."""
        done = self._cancel(job_id)
        if done:
            self._cancelled_here.add(job_id)
        return done

    def _cancel(self, job_id: int) -> bool:
        if job_id in self._embeds:
            return self.engine.api.cancel_embed(self._embeds[job_id])
        ticket = self._tickets.get(job_id)
        return ticket is not None and self.engine.api.cancel(ticket)

    @Slot(object)
    def _on_submitted(self, job: ApiJob) -> None:
        req = job.request
        entry = ApiLogEntry(job.id, req.endpoint.value, job.client, req.messages)
        self._add(entry)
        if self._card is None or self.engine.model is None:
            self._end(
                job,
                entry,
                P.Failed(0, P.FailureKind.NO_MODEL, "No model is loaded in Glassbox. Load one in the window first."),
            )
            return
        policy = self._settings.settings.server.busy_policy
        if policy is BusyPolicy.REFUSE and self.engine.generating:
            self._end(job, entry, P.Failed(0, P.FailureKind.BUSY, BUSY_MESSAGE))
            return

        def sink(ev: object) -> None:
            if isinstance(ev, P.Finished | P.Failed):
                self._end(job, entry, ev)
                return
            if isinstance(ev, P.PromptPrepared):
                entry.started()
                self.entry_changed.emit(entry)
            elif isinstance(ev, P.TokenEvent):
                entry.reply += ev.text
            job.deliver(ev)

        template = self._settings.settings.chat_template_for(self.engine.model.info.path)
        self._tickets[job.id] = self.engine.api.submit(with_chat_template(req.generate, template), sink)

    @Slot(object)
    def _on_embed_asked(self, job: EmbeddingJob) -> None:
        entry = ApiLogEntry(job.id, EMBEDDINGS, job.client, (ChatMessage(Role.USER, job.request.summary),))
        self._add(entry)

        def end(ev: object) -> None:
            self._embeds.pop(job.id, None)
            ev = self._told_why(job.id, ev)
            if isinstance(ev, P.Embedded):
                entry.embedded(ev)
            elif isinstance(ev, P.Failed):
                entry.failed(ev.message, cancelled=ev.kind is P.FailureKind.CANCELLED)
            self.entry_changed.emit(entry)
            job.deliver(ev)

        card, model = self._card, self.engine.model
        if card is None or model is None:
            end(P.Failed(0, P.FailureKind.NO_MODEL, "No model is loaded in Glassbox. Load one in the window first."))
            return
        if self._settings.settings.server.busy_policy is BusyPolicy.REFUSE and self.engine.generating:
            end(P.Failed(0, P.FailureKind.BUSY, BUSY_MESSAGE))
            return
        rid = self.engine.api.embed(P.Embed(0, job.request.inputs, card.n_ctx), end)
        if rid is None:
            why = "the engine is a remote server" if self.engine.remote is not None else "no model is loaded"
            end(P.Failed(0, P.FailureKind.NO_MODEL, f"Embeddings need the local engine with a model; {why}."))
            return
        self._embeds[job.id] = rid
        entry.started()
        self.entry_changed.emit(entry)

    def _told_why(self, job_id: int, ev: object) -> object:
        """``ev``, its message saying so when the request was cancelled in the Server panel."""
        here = job_id in self._cancelled_here
        self._cancelled_here.discard(job_id)
        if here and isinstance(ev, P.Failed) and ev.kind is P.FailureKind.CANCELLED:
            return replace(ev, message=CANCELLED_IN_PANEL)
        return ev

    def _end(self, job: ApiJob, entry: ApiLogEntry, ev: P.Finished | P.Failed) -> None:
        self._tickets.pop(job.id, None)
        here = job.id in self._cancelled_here
        told = self._told_why(job.id, ev)
        assert isinstance(told, P.Finished | P.Failed)
        ev = told
        if isinstance(ev, P.Finished):
            who = "cancelled in the Server panel" if here else "stopped (the client went away or the model changed)"
            entry.finished(ev.text, ev.stats, who if ev.stats.stop_reason is StopReason.CANCELLED else "")
        else:
            entry.failed(ev.message, cancelled=ev.kind is P.FailureKind.CANCELLED)
        self.entry_changed.emit(entry)
        job.deliver(ev)

    @Slot(object)
    def _on_cancel_asked(self, job: ApiJob | EmbeddingJob) -> None:
        self._cancel(job.id)

    def _add(self, entry: ApiLogEntry) -> None:
        self.entries.append(entry)
        del self.entries[:-MAX_ENTRIES]
        self.entry_changed.emit(entry)

    def queue_text(self) -> str:
        """``1 running, 2 waiting`` (API requests in the engine's queue)."""
        running = sum(e.status is RequestStatus.RUNNING for e in self.entries)
        return f"{running} running, {len(self.engine.api.waiting)} waiting"

    def entry_of_ticket(self, ticket: int) -> ApiLogEntry | None:
        """The log entry of the request the engine client gave ``ticket`` (queued or running), or None."""
        job_id = next((j for j, t in self._tickets.items() if t == ticket), None)
        return next((e for e in self.entries if e.job_id == job_id), None) if job_id is not None else None

    def _on_model_loaded(self, ev: P.ModelLoaded) -> None:
        self._card = ModelCard(
            id=Path(ev.info.path).name.removesuffix(".gguf"),
            path=ev.info.path,
            n_ctx=ev.n_ctx,
            eog_token_ids=ev.eog_token_ids,
            loaded_at=int(time.time()),
            n_embd=ev.info.n_embd,
        )

    def _on_state_changed(self, state: EngineState) -> None:
        if state in (EngineState.NO_MODEL, EngineState.DEAD, EngineState.LOADING, EngineState.STARTING):
            self._card = None

    def shutdown(self) -> None:
        """Stop the server for good (the window is closing)."""
        self._closed = True
        self.stop()


def with_chat_template(gen: P.Generate, template: str | None) -> P.Generate:
    """An API request as the engine gets it: a chat is rendered with the person's chat template
    override for the loaded model (``template``; None: the GGUF's), as their own chats are; a
    completion's raw prompt is used as sent."""
    return replace(gen, chat_template=template) if gen.raw_prompt is None else gen
