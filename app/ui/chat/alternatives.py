"""The chat's part in every token's alternatives: keep a finished reply's, show them, open a token's
funnel step, branch from an alternative (mixed into :class:`~app.ui.chat.controller.ChatController`,
which this module does not import: its methods' self-type is the protocol :class:`_Chat`).

A reply's alternatives (:class:`~app.core.sampling.alternatives.ReplyAlternatives`) come with the engine's
``Finished``; a continued reply's earlier steps, or a branch's prefix, are joined in front of them,
and they are stored next to the reply. A branch from an alternative is a new sibling of the reply
(the ‹ n/m › arrows), asked of the engine with ``reply_prefix``: the reply's first tokens and the
chosen one, so the KV cache keeps what came before it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.sampling.alternatives import ReplyAlternatives, TokenColour
from app.ui.common.severity import Severity
from app.ui.funnel.controller import StepTarget
from app.ui.window.notices import NoticeTopic

if TYPE_CHECKING:
    from PySide6.QtCore import SignalInstance

    from app.core.conversations import ConversationStore, MessageMeta
    from app.core.sampling.params import SamplerSettings
    from app.ui.chat.message import MessageWidget
    from app.ui.chat.turn import LiveTurn
    from app.ui.chat.view import ChatView
    from app.ui.engine.client import EngineClient
    from app.ui.window.settings_controller import SettingsController

log = logging.getLogger(__name__)


class _Chat(Protocol):
    """What these methods use of the chat controller that mixes them in (mypy's self-type for a mixin:
    the controller is checked against it where they are called, and this module need not import it)."""

    engine: EngineClient
    view: ChatView
    turn: LiveTurn
    store: ConversationStore
    settings: SettingsController
    conversation_id: int | None
    turn_reply: tuple[int, int] | None
    _reply_id: int | None
    _reply_widget: MessageWidget | None
    _reply_prefix: str
    _alts_head: ReplyAlternatives | None
    _alts_offset: int

    @property
    def notice(self) -> SignalInstance: ...
    @property
    def funnel_step_requested(self) -> SignalInstance: ...
    @property
    def busy(self) -> bool: ...
    @property
    def _sampler(self) -> SamplerSettings: ...
    def _say_busy(self) -> None: ...
    def _engine_ready(self, quiet: bool = False) -> bool: ...
    def _meta(self) -> MessageMeta: ...
    def render(self, focus_message: int | None = None) -> None: ...
    def step_target(self, message_id: int, step: int) -> StepTarget | None: ...
    def _stream_into(
        self,
        message_id: int,
        *,
        continue_last: bool,
        prefix: str = "",
        render: bool = True,
        reply_prefix: tuple[int, ...] = (),
        alts_head: ReplyAlternatives | None = None,
    ) -> bool: ...


class ChatAlternatives:
    """Every token's alternatives, for the chat controller (see the module docstring).

    Uses the controller's store, view, engine, settings and turn; keeps ``_alts_head`` (the
    steps before the request's own) and ``_alts_offset`` (how many), and :attr:`turn_reply`.
    """

    _alts_head: ReplyAlternatives | None
    _alts_offset: int
    turn_reply: tuple[int, int] | None

    def _keep_alternatives(self: _Chat, ev: P.Finished) -> None:
        """Store the finished reply's alternatives (after its earlier steps, if any) and give them to the live turn."""
        mid, head = self._reply_id, self._alts_head
        self._alts_head = None
        alts = ev.alternatives
        if alts is not None and self._reply_prefix and head is None:
            alts = None  # a continued reply whose earlier part kept none: its tokens would not spell its text
        elif alts is not None and head is not None:
            alts = head.joined(alts)
        self.turn.on_alternatives(alts, self._alts_offset)
        if mid is None or alts is None:
            return
        try:
            self.store.set_alternatives(mid, alts, durable=False)  # finish_message, next, makes it durable
        except Exception:  # the reply itself is saved by _end_reply; its alternatives are a bonus
            log.exception("could not save the alternatives of reply %s", mid)
            return
        if self._reply_widget is not None:
            self._reply_widget.set_can_show_tokens(True)

    def show_tokens(self: _Chat, message_id: int, on: bool) -> None:
        """Show reply ``message_id`` as its tokens with their alternatives (``on``), or as its text."""
        w = self.view.widget_for(message_id)
        if w is None:
            return
        alts = self.store.alternatives(message_id) if on else None
        w.show_tokens(alts, self.settings.settings.token_colour)

    def set_token_colour(self: _Chat, colour: TokenColour) -> None:
        """Colour every reply shown as its tokens by ``colour`` (with the Tokens panel, at once)."""
        for w in self.view.messages:
            if w.token_text is not None:
                w.token_text.set_colour(colour)

    def step_target(self: _Chat, message_id: int, step: int) -> StepTarget | None:
        """Token ``step`` of stored reply ``message_id`` for the Funnel panel (None: it kept no alternatives)."""
        alts = self.store.alternatives(message_id)
        if alts is None or not 0 <= step < alts.n_steps:
            return None
        meta = self.store.get_message(message_id).meta
        settings = meta.sampler if meta.sampler is not None else self._sampler
        stored = alts.stored_step(step, message_id, settings, meta.seed_used or 0)
        if self.turn_reply is not None and self.turn_reply[0] == message_id and message_id != self._reply_id:
            offset = self.turn.alternatives_offset
            return StepTarget(stored, self.turn_reply[1], step - offset, alts.n_steps - offset, alts.n_steps)
        return StepTarget(stored, reply_steps=alts.n_steps)

    def newest_step_target(self: _Chat) -> StepTarget | None:
        """The last token of the newest reply shown that kept alternatives (None: there is none, or the
        last message shown is the reply streaming: the funnel follows that one)."""
        if self.conversation_id is None:
            return None
        path = self.store.active_path(self.conversation_id)
        if path and self._reply_id is not None and path[-1].id == self._reply_id:
            return None
        for m in reversed(path):
            alts = self.store.alternatives(m.id) if m.role is Role.ASSISTANT else None
            if alts is not None and alts.n_steps:
                return self.step_target(m.id, alts.n_steps - 1)
        return None

    def open_token_funnel(self: _Chat, message_id: int, step: int) -> None:
        """Show token ``step`` of reply ``message_id`` in the Funnel panel (:attr:`funnel_step_requested`)."""
        target = self.step_target(message_id, step)
        if target is not None:
            self.funnel_step_requested.emit(target)

    def branch_from_alternative(self: _Chat, message_id: int, step: int, token: int) -> bool:
        """Continue reply ``message_id`` from token ``step`` with ``token`` instead: a new branch (‹ n/m ›)
        next to it, whose first ``step`` tokens are the reply's own; the engine keeps them in its KV
        cache and evaluates only ``token`` before decoding on. False when nothing was started (a reply
        in flight, no model, or the reply kept no alternatives)."""
        if self.busy:
            self._say_busy()
            return False
        if not self._engine_ready():
            return False
        alts = self.store.alternatives(message_id)
        if alts is None or not 0 <= step < alts.n_steps:
            self.notice.emit(Severity.WARNING, "This reply kept no alternatives to continue from.", NoticeTopic.GENERAL)
            return False
        made_by = self.store.get_message(message_id).meta.model_path
        model = self.engine.model
        if model is not None and made_by and Path(made_by).name != Path(model.info.path).name:
            self.notice.emit(
                Severity.WARNING,
                f"This reply was written by {Path(made_by).name}; load it to continue from one of its tokens "
                "(token ids differ from model to model).",
                NoticeTopic.GENERAL,
            )
            return False
        text = next((c.text for c in alts.view(step).candidates if c.token_id == token), "")
        head = alts.head(step + 1).with_token(step, token, text)
        new_id = self.store.regenerate(message_id, self._meta())
        self.render()
        return self._stream_into(new_id, continue_last=False, reply_prefix=(*alts.tokens[:step], token), alts_head=head)
