"""The conversation in the window: what is on screen, what the engine is asked,
and the live turn the panels show."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.core.chat import ChatMessage, GenerationStats, StopReason
from app.engine import protocol as P
from app.ui.chat.view import ChatView, Composer, MessageWidget
from app.ui.engine_client import EngineClient, EngineState
from app.ui.turn import LiveTurn


def stats_footer(stats: GenerationStats) -> str:
    """One line under a reply: tokens, speeds, TTFT, why it ended."""
    parts = [f"{stats.generated_tokens:,} tokens"]
    if stats.decode_tok_s:
        parts.append(f"{stats.decode_tok_s:,.1f} tok/s")
    if stats.generated_tokens:
        parts.append(f"TTFT {stats.ttft_s * 1000:,.0f} ms")
    if stats.evaluated_tokens:
        parts.append(f"prefill {stats.evaluated_tokens:,} tok @ {stats.prefill_tok_s:,.0f} tok/s")
    if stats.cached_tokens:
        parts.append(f"{stats.cached_tokens:,} reused")
    parts.append(StopReason(stats.stop_reason).label)
    return " · ".join(parts)


class ChatController(QObject):
    """Sends the conversation to the engine and streams the reply into the view.

    Signals:
        reply_finished(object): :class:`GenerationStats` of a finished reply.
        notice(str, str): a message for the banner (kind, text).
        busy_changed(bool): a reply started or ended.
    """

    reply_finished = Signal(object)
    notice = Signal(str, str)
    busy_changed = Signal(bool)

    def __init__(self, engine: EngineClient, view: ChatView, composer: Composer, turn: LiveTurn,
                 sampler_source, system_prompt_source, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.view = view
        self.composer = composer
        self.turn = turn
        self._sampler = sampler_source          # () -> (SamplerSettings, stop strings)
        self._system_prompt = system_prompt_source  # () -> str
        self.history: list[ChatMessage] = []
        self._reply: MessageWidget | None = None
        self._reply_text = ""
        self.want_candidates = 20
        composer.submitted.connect(self.send)
        composer.stop_requested.connect(self.stop)
        engine.prompt_prepared.connect(self._on_prompt)
        engine.prefill_progressed.connect(self.turn.on_prefill)
        engine.token_received.connect(self._on_token)
        engine.context_shifted.connect(self._on_shift)
        engine.generation_finished.connect(self._on_finished)
        engine.generation_failed.connect(self._on_failed)
        engine.engine_crashed.connect(self._on_crash)

    @property
    def busy(self) -> bool:
        return self._reply is not None

    def messages_for_engine(self) -> tuple[ChatMessage, ...]:
        sp = self._system_prompt().strip()
        head = (ChatMessage("system", sp),) if sp else ()
        return head + tuple(self.history)

    def send(self, text: str) -> bool:
        """Append the person's message and ask for a reply. Returns False if the engine is not ready."""
        if self.busy:
            return False
        if self.engine.state != EngineState.READY:
            if self.engine.state == EngineState.LOADING:
                self.notice.emit("info", "The model is still loading; your message is kept in the box.")
            else:
                self.notice.emit("warning", "No model is loaded. Open a GGUF model first (File → Open model).")
            return False
        self.history.append(ChatMessage("user", text))
        self.view.add_message("user", text)
        self.composer.box.clear()
        return self._start_reply()

    def _start_reply(self) -> bool:
        sampler, stops = self._sampler()
        model = self.engine.model
        title = Path(model.info.path).name.removesuffix(".gguf") if model else "Assistant"
        self._reply = self.view.add_message("assistant", "", title)
        self._reply.set_badge("thinking…", "live")
        self._reply_text = ""
        self.turn.start()
        rid = self.engine.generate(self.messages_for_engine(), sampler, stop_strings=stops,
                                   top_candidates=self.want_candidates)
        if rid is None:
            self._reply.set_badge("not sent", "error")
            self._reply = None
            return False
        self.composer.set_generating(True)
        self.busy_changed.emit(True)
        return True

    def stop(self) -> None:
        """Stop the reply in flight (Esc / the Stop button)."""
        if self.busy:
            self.engine.cancel()
            if self._reply is not None:
                self._reply.set_badge("stopping…", "live")

    def new_chat(self) -> None:
        """Empty the conversation and the model's context."""
        if self.busy:
            self.engine.cancel()
        self.history.clear()
        self.view.clear()
        self.turn.start()
        self.turn.phase = "idle"
        self.engine.reset_context()

    # ------------------------------------------------------------------------------ events
    def _on_prompt(self, ev: P.PromptPrepared) -> None:
        self.turn.on_prompt(ev)
        if self._reply is not None:
            self._reply.set_badge("prefill…", "live")

    def _on_token(self, ev: P.TokenEvent) -> None:
        self.turn.on_token(ev)
        if self._reply is not None and ev.text:
            if not self._reply_text:
                self._reply.set_badge("", "")
            self._reply_text += ev.text
            self._reply.set_text(self._reply_text)

    def _on_shift(self, ev: P.ContextShifted) -> None:
        self.turn.on_shift(ev)
        self.notice.emit("info", f"The context was full: {ev.dropped_messages} oldest message(s) and "
                                 f"{ev.dropped_reply_tokens} reply tokens left the context; the reply goes on.")

    def _end_reply(self, text: str, stats: GenerationStats | None, badge: tuple[str, str]) -> None:
        w = self._reply
        self._reply = None
        self.turn.on_finished(stats)
        if w is not None:
            w.set_text(text)
            w.refresh()
            w.set_badge(*badge)
            if stats is not None:
                w.set_footer(stats_footer(stats))
            if text:
                self.history.append(ChatMessage("assistant", text))
            elif w.text == "" and badge[0] == "":
                w.set_badge("empty reply", "warn")
        self.composer.set_generating(False)
        self.busy_changed.emit(False)
        self.composer.box.setFocus()

    def _on_finished(self, ev: P.Finished) -> None:
        reason = StopReason(ev.stats.stop_reason)
        badge = {
            StopReason.CANCELLED: ("stopped", "warn"),
            StopReason.CONTEXT_FULL: ("context full", "warn"),
            StopReason.MAX_TOKENS: ("max_tokens reached", "warn"),
        }.get(reason, ("", ""))
        self._end_reply(ev.text, ev.stats, badge)
        if reason == StopReason.CONTEXT_FULL:
            self.notice.emit(
                "warning",
                f"The context is full ({ev.stats.n_ctx:,} tokens, n_ctx). The reply so far is kept. Raise n_ctx in the "
                "Model panel, start a new chat, or choose \"Drop oldest turns and go on\" as the context policy.",
            )
        self.reply_finished.emit(ev.stats)

    def _on_failed(self, ev: P.Failed) -> None:
        partial = self._reply_text
        # A refused turn leaves nothing half-done: the person's message stays on screen and in history.
        self._end_reply(partial, ev.stats, ("not answered" if not partial else "cut off", "error"))
        if not partial and self.view.messages and self.view.messages[-1].role == "assistant":
            # Keep the empty reply card out of the way: it says why below.
            self.view.messages[-1].set_footer(ev.message)
        self.notice.emit("error", ev.message)

    def _on_crash(self, description: str) -> None:
        if self._reply is not None:
            text = self._reply_text
            self._end_reply(text, None, ("engine stopped", "error"))
            if self.view.messages:
                self.view.messages[-1].set_footer("The engine stopped during this reply; the text above is kept.")
