"""The reply being written: one object from the request to the stored message.

:class:`ReplyInFlight` is everything about the reply in flight that the chat keeps: its stored
message and chat, the text so far, the part it continues, the question it answers, the
alternatives of its steps before this request's, and its widget while its chat is shown. The
chat controller makes one when it asks the engine for a reply and drops it when the reply
ended (however it ended), so "no reply" is one ``None``, never a set of fields to reset.

Whether a reply is in flight is the engine client's to say (``EngineClient.generating``); this
object says what the reply is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from app.core import protocol as P
from app.core.chat.chat_settings import ChatSettings
from app.core.chat.context import GenerationStats
from app.core.conversations import MessageMeta
from app.core.sampling.alternatives import ReplyAlternatives
from app.ui.chat.message import MessageWidget
from app.ui.chat.presenter import NO_BADGE, Badge, ContinueRule, MessageLook, ended_look, writing_look


@dataclass(eq=False)
class ReplyInFlight:
    """The reply in flight (see the module docstring).

    Attributes:
        message_id: its stored message.
        conversation_id: the chat it is written in (the person may be looking at another).
        look: how its widget showed it when it started (:mod:`app.ui.chat.presenter`).
        prefix: the text already there when continuing a reply ("" for a new reply).
        sent_user: ``(message id, text)`` of the question just sent that it answers, if any: when
            it cannot be answered, the question is taken out and its text goes back to the box.
        alts_head: the alternatives of the reply's steps before this request's (a continued reply's
            earlier part, a branch's prefix), joined with the request's when it ends.
        widget: its widget while its chat is shown (None otherwise).
        text: the text so far (``prefix`` included).
        kept_alternatives: its alternatives were stored.
    """

    message_id: int
    conversation_id: int
    look: MessageLook
    prefix: str = ""
    sent_user: tuple[int, str] | None = None
    alts_head: ReplyAlternatives | None = None
    widget: MessageWidget | None = None
    text: str = field(init=False)
    kept_alternatives: bool = False

    def __post_init__(self) -> None:
        self.text = self.prefix

    @property
    def alts_offset(self) -> int:
        """Steps of the reply before this request's first token."""
        return self.alts_head.n_steps if self.alts_head is not None else 0

    @property
    def wrote(self) -> bool:
        """Whether this request added text (a continuation stopped during its prefill added none)."""
        return self.text != self.prefix

    def attach(self, w: MessageWidget) -> None:
        """Show the reply in ``w`` (it starts, or its chat is shown again)."""
        self.widget = w
        w.present(writing_look(self.look, self.text, self.wrote))

    def detach(self) -> None:
        """Its widget is gone (the chat view is built again)."""
        self.widget = None

    def mark(self, badge: Badge) -> None:
        """Show ``badge`` on its widget (prefill…, stopping…) while it is shown."""
        if self.widget is not None:
            self.widget.show_badge(badge)

    def add(self, piece: str) -> None:
        """Text from the engine: added, and shown (its first text takes the badge away)."""
        first = not self.wrote
        self.text += piece
        if self.widget is not None:
            if first:
                self.widget.show_badge(NO_BADGE)
            self.widget.set_text(self.text)

    def alternatives_kept(self) -> None:
        """Its alternatives were stored: its Tokens button is offered."""
        self.kept_alternatives = True
        if self.widget is not None:
            self.widget.set_can_show_tokens(True)

    def show_end(
        self,
        text: str,
        badge: Badge,
        stats: GenerationStats | None,
        meta: MessageMeta | None,
        rule: ContinueRule,
        note: str | None = None,
    ) -> None:
        """The reply ended with ``text``: its widget (if shown) shows it whole, marked with ``badge``, with
        its figures and provenance (:func:`~app.ui.chat.presenter.ended_look`); ``note`` replaces its
        footer (what went wrong)."""
        w = self.widget
        if w is None:
            return
        w.set_text(text)
        w.refresh()
        look = ended_look(replace(self.look, can_show_tokens=self.kept_alternatives), text, badge, stats, meta, rule)
        w.present(replace(look, footer=note) if note is not None else look)


def new_reply_meta(
    model: P.ModelLoaded | None,
    ready: P.EngineReady | None,
    cs: ChatSettings,
    system_prompt: str,
    chat_template: str | None,
) -> MessageMeta:
    """How a new reply is made, stored with it before its figures come: the ``model`` loaded (a remote
    server's: the provenance names the server, not a file), the engine build (``ready``), the chat's
    settings ``cs`` and ``system_prompt``, the person's ``chat_template`` override (None: the GGUF's)."""
    if model is None:
        return MessageMeta(sampler=cs.sampler, stop_strings=cs.stop_strings, constraint=cs.constraint)
    remote = model.remote
    if remote is not None:
        engine = remote.engine_label
    else:
        engine = f"llama-cpp-python {ready.llama_cpp_version}" if ready else ""
    return MessageMeta(
        model_path=model.info.path,
        model_name=Path(model.info.path).name.removesuffix(".gguf"),
        quant="" if remote is not None else model.info.quant_type,
        sampler=cs.sampler,
        load=model.settings,
        system_prompt=system_prompt,
        chat_template=chat_template,
        engine=engine,
        endpoint=remote.base_url if remote is not None else "",
        stop_strings=cs.stop_strings,
        constraint=cs.constraint,
    )


def continued_settings(cs: ChatSettings, meta: MessageMeta, continuing: bool) -> ChatSettings:
    """The chat's settings ``cs`` for a reply stored with ``meta``: when ``continuing`` it, its own output format
    (``meta.constraint``, the one it was written under) instead of the chat's current one, so the continuation
    goes on under the grammar its text so far was made with; else (or stored without one) ``cs`` as it is."""
    return replace(cs, constraint=meta.constraint) if continuing and meta.constraint is not None else cs
