"""The composer's token count: the draft in tokens while the person types, and the prompt Send would
make against n_ctx, counted by the engine's own tokenizer and chat template."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from app.core import protocol as P
from app.core.chat.context import ROLLING_RESERVE_FRACTION, ChatMessage, ContextPolicy
from app.ui.chat.composer import Composer
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient, EngineState

DEBOUNCE_MS = 250  # a count is asked this long after the last keystroke


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def count_text(ev: P.PromptCounted, policy: ContextPolicy) -> tuple[str, str, Severity]:
    """The composer's line for a count, its tooltip (the line whole, then what it means) and its severity.

    Fits: "37 tokens · prompt 1,240 of n_ctx 4,096 · 2,856 left". Over n_ctx, what Send will do, as the
    engine worked it out by fitting the prompt with ``policy`` (:class:`P.PromptCounted`): "6 oldest
    messages dropped" (a warning) or "too long to send" (an error).
    """
    head = f"{_n(ev.last_tokens, 'token')} · prompt {ev.n_tokens:,} of n_ctx {ev.n_ctx:,}"
    about = (
        f"Your message is {_n(ev.last_tokens, 'token')}. With the chat before it, the chat template's framing and "
        f"the generation prompt, Send evaluates a prompt of {_n(ev.n_tokens, 'token')}; the context holds "
        f"{ev.n_ctx:,} (n_ctx, set in the Model panel), prompt and reply together."
    )
    if ev.dropped_messages == 0 and ev.n_tokens < ev.n_ctx:
        line = f"{head} · {ev.n_ctx - ev.n_tokens:,} left"
        return line, f"{line}\n\n{about} {ev.n_ctx - ev.n_tokens:,} tokens are left for the reply.", Severity.INFO
    if ev.dropped_messages > 0:
        line = f"{head}: {ev.dropped_messages:,} oldest message{'' if ev.dropped_messages == 1 else 's'} dropped"
        tip = (
            f"{about} The context policy drops the oldest turns: Send leaves out the "
            f"{_n(ev.dropped_messages, 'oldest message')} and sends {_n(ev.fitted_tokens, 'token')}, keeping "
            f"{ROLLING_RESERVE_FRACTION:.0%} of n_ctx for the reply."
        )
        return line, f"{line}\n\n{tip}", Severity.WARNING
    line = f"{head}: too long to send"
    if policy is ContextPolicy.ROLLING:
        why = (
            "Even with every older turn left out, the system prompt and this message do not fit in "
            f"{1 - ROLLING_RESERVE_FRACTION:.0%} of n_ctx (the policy keeps {ROLLING_RESERVE_FRACTION:.0%} for the "
            "reply). Shorten the message or raise n_ctx."
        )
    else:
        why = (
            'The context policy is "Stop at the limit": Send is refused. Raise n_ctx, shorten the message, or set '
            'the policy to "Drop oldest turns and go on" (Model panel).'
        )
    return line, f"{line}\n\n{about} {why}", Severity.ERROR


WAITING = "… counted when the reply ends"


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
        self._basis: tuple[str | None, ContextPolicy] | None = None  # the template and policy last counted with
        self.last: P.PromptCounted | None = None  # the count shown (tests read it)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._ask)
        composer.box.textChanged.connect(self.recount)
        engine.prompt_counted.connect(self._counted)
        engine.prompt_count_failed.connect(self._failed)
        # The chat before the draft may have changed (a reply, Regenerate), the model or its n_ctx, or
        # the engine went away (unload, a crash: no answer is coming).
        engine.generation_ended.connect(lambda _rid: self.recount())
        engine.model_loaded.connect(lambda _ev: self._restart())
        engine.state_changed.connect(self._state_changed)

    def _state_changed(self, state: EngineState) -> None:
        if state not in (EngineState.READY, EngineState.GENERATING):
            self._restart()  # unloaded, loading, dead or starting: no answer is coming

    def recount(self) -> None:
        """The draft or what comes before it changed (an edit, another chat, a new system prompt,
        a setting): count again after ``DEBOUNCE_MS``."""
        self._stale = True
        if not self.composer.box.toPlainText().strip():
            self._asked = None  # an answer still coming is for text that is gone
            self._show(None)
        self._timer.start()

    def settings_changed(self) -> None:
        """A setting changed: count again only when it is one the count depends on (the chat
        template override, the context policy), not for every slider moved."""
        if (self._template(), self._policy()) != self._basis:
            self.recount()

    def _restart(self) -> None:
        self._asked = None  # a new model, or a state in which no answer is coming
        self.recount()

    def _ask_if_stale(self) -> None:
        if self._stale and not self._timer.isActive():
            self._ask()

    def _ask(self) -> None:
        text = self.composer.box.toPlainText()
        if not text.strip():
            self._stale = False
            self._asked = None
            self._show(None)
            return
        if self.engine.generating:
            self.composer.set_count(WAITING, "The engine counts after the reply in flight.")
            self.last = None
            return  # asked when the reply ends (recount)
        if self._asked is not None:
            return  # asked again when the answer comes
        self._stale = False
        self._basis = (self._template(), self._policy())
        self._asked = self.engine.count_prompt(self._messages(text), *self._basis)
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
        self.last = None
        if self._stale:
            self._ask_if_stale()
            return
        # A template that rejects the conversation: Send would fail the same way; say so now.
        self.composer.set_count(ev.message, ev.message, Severity.ERROR)

    def _show(self, ev: P.PromptCounted | None) -> None:
        self.last = ev
        if ev is None:
            self.composer.set_count("")
            return
        self.composer.set_count(*count_text(ev, self._policy()))
