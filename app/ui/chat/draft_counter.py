"""The composer's token count: the draft in tokens while the person types, and the prompt Send would
make against n_ctx, counted by the engine's own tokenizer and chat template."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from app.core import protocol as P
from app.core.chat import ChatMessage, ContextPolicy
from app.ui.chat.composer import Composer
from app.ui.common.severity import Severity
from app.ui.engine_client import EngineClient

DEBOUNCE_MS = 250  # a count is asked this long after the last keystroke


def count_text(ev: P.PromptCounted, policy: ContextPolicy) -> tuple[str, str, Severity]:
    """The composer's line for a count, its tooltip and its severity.

    Fits: "37 tokens · prompt 1,240 of n_ctx 4,096 · 2,856 left for the reply". Over n_ctx: a
    warning saying what Send will do under ``policy`` (drop the oldest turns, or refuse).
    """
    draft = f"{ev.last_tokens:,} token{'s' if ev.last_tokens != 1 else ''}"
    tip = (
        f"Your message is {ev.last_tokens:,} tokens. With the chat before it, the chat template's framing and "
        f"the generation prompt, Send evaluates a prompt of {ev.n_tokens:,} tokens; the context holds "
        f"{ev.n_ctx:,} (n_ctx, set in the Model panel), prompt and reply together."
    )
    if ev.n_tokens < ev.n_ctx:
        left = ev.n_ctx - ev.n_tokens
        return (
            f"{draft} · prompt {ev.n_tokens:,} of n_ctx {ev.n_ctx:,} · {left:,} left for the reply",
            tip,
            Severity.INFO,
        )
    over = f"{draft} · prompt {ev.n_tokens:,} > n_ctx {ev.n_ctx:,}"
    if policy is ContextPolicy.ROLLING:
        return f"{over}: the oldest turns will be left out", tip, Severity.WARNING
    return (
        f"{over}: too long to send (raise n_ctx, or let the oldest turns drop)",
        tip + ' The context policy is "Stop at the limit": Send is refused until it fits.',
        Severity.ERROR,
    )


class DraftCounter(QObject):
    """Asks the engine to count the draft (:meth:`EngineClient.count_prompt`) ``DEBOUNCE_MS`` after
    the last edit, one request at a time, never while a reply is in flight (the engine answers
    after it; the count is asked when it ends), and writes the answer on the composer's count line.
    An empty draft, no model or a remote engine (it renders its own prompt): no count.

    Args:
        engine: the engine client; composer: the composer it counts and writes on.
        messages: what Send would give the engine for a draft (the chat so far, then the draft).
        chat_template: the chat template override in use (None: the GGUF's).
        policy: the context policy in use.
    """

    def __init__(
        self,
        engine: EngineClient,
        composer: Composer,
        messages: Callable[[str], tuple[ChatMessage, ...]],
        chat_template: Callable[[], str | None],
        policy: Callable[[], ContextPolicy],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.composer = composer
        self._messages = messages
        self._template = chat_template
        self._policy = policy
        self._asked: int | None = None  # the count request in flight
        self._stale = False  # the draft changed since the last count was asked
        self.last: P.PromptCounted | None = None  # the count shown (tests read it)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._ask)
        composer.box.textChanged.connect(self.recount)
        engine.prompt_counted.connect(self._counted)
        engine.prompt_count_failed.connect(self._failed)
        engine.generation_ended.connect(lambda _rid: self._ask_if_stale())
        engine.model_loaded.connect(lambda _ev: self._restart())
        engine.engine_crashed.connect(lambda _why: self._restart())

    def recount(self) -> None:
        """The draft or what comes before it changed (an edit, another chat, a new system prompt):
        count again after ``DEBOUNCE_MS``."""
        self._stale = True
        if not self.composer.box.toPlainText().strip():
            self._show(None)
        self._timer.start()

    def _restart(self) -> None:
        self._asked = None  # a new model or a dead engine: no answer is coming
        self.recount()

    def _ask_if_stale(self) -> None:
        if self._stale and not self._timer.isActive():
            self._ask()

    def _ask(self) -> None:
        text = self.composer.box.toPlainText()
        if not text.strip():
            self._stale = False
            self._show(None)
            return
        if self._asked is not None or self.engine.generating:
            return  # asked again when the answer comes, or when the reply ends
        self._stale = False
        self._asked = self.engine.count_prompt(self._messages(text), self._template())
        if self._asked is None:
            self._show(None)  # no model, or a remote engine

    def _counted(self, ev: P.PromptCounted) -> None:
        if ev.request_id != self._asked:
            return
        self._asked = None
        if self._stale:
            self._ask_if_stale()  # typed on meanwhile: this count is already old
            return
        self._show(ev)

    def _failed(self, ev: P.Failed) -> None:
        if ev.request_id != self._asked:
            return
        self._asked = None
        self._show(None)  # a template error: the Template panel and Send say why
        self._ask_if_stale()

    def _show(self, ev: P.PromptCounted | None) -> None:
        self.last = ev
        if ev is None:
            self.composer.set_count("")
            return
        self.composer.set_count(*count_text(ev, self._policy()))
