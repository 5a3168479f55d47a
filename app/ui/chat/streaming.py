"""The engine's events for the reply in flight: from the request to the stored message.

:class:`ReplyStreaming` owns the :class:`~app.ui.chat.reply.ReplyInFlight` (:attr:`ReplyStreaming.reply`,
None when no reply is in flight): it sends the request, feeds the live turn (the panels' figures)
and the reply's widget from the engine's events, writes the text to the store as it streams,
and closes the reply however it ended (finished, failed, engine died, Stop timed out, restart:
``generation_ended`` comes in every case), storing its text, figures and provenance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.chat.chat_settings import ChatSettings
from app.core.chat.context import ChatMessage, GenerationStats, StopReason
from app.core.constraint.model import ConstraintKind
from app.core.conversations import ConversationStore, MessageMeta
from app.core.mcp.offer import ToolOffer
from app.ui.chat.alternatives import ChatAlternatives
from app.ui.chat.composer import Composer
from app.ui.chat.presenter import (
    CUT_BADGES,
    CUT_OFF,
    ENGINE_STOPPED,
    ENGINE_STOPPED_FOOTER,
    NOT_SENT,
    PREFILL,
    STOPPING,
    Badge,
    ContinueRule,
    stopped_badge,
)
from app.ui.chat.reply import ReplyInFlight
from app.ui.chat.shown import ShownChat
from app.ui.chat.view import ChatView
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.window.notices import NoticeTopic
from app.ui.window.settings_controller import SettingsController

log = logging.getLogger(__name__)

Repairs = Callable[[], list[tuple[str, object]]]
"""The banner's repairs for the chat shown's turn order (``[(label, callback)]``; empty: none)."""


class ReplyStreaming(QObject):
    """Streams the engine's answer into the reply in flight (see the module docstring).

    Args:
        engine, store, view, composer, shown, settings: the chat's (as the chat controller has them).
        alternatives: keeps a finished reply's alternatives.
        rule: whether a reply cut off by a full context can be continued now.
        repairs: the banner's repairs when the template refused the turn order.

    Signals:
        notice(object, str, object): a message for the banner (:class:`Severity`, text, :class:`NoticeTopic`).
        reply_finished(object): :class:`GenerationStats` of a finished reply.
        repair_offered(str, list): the template refused the turn order: the refusal and the repairs.
        reply_conversation_changed(object): the chat a reply is written in, or None when it ended.
        conversations_changed(): the reply ended (stored), or its question was taken out.
        sent_refused(int, str): the message just sent to chat ``id`` could not be answered (longer
            than the context, say) and was taken out of the chat: the chat id and the message's text.
    """

    notice = Signal(object, str, object)  # (Severity, text, NoticeTopic)
    reply_finished = Signal(object)  # GenerationStats
    repair_offered = Signal(str, list)
    reply_conversation_changed = Signal(object)  # int | None
    conversations_changed = Signal()
    sent_refused = Signal(int, str)
    branch_dropped = Signal()  # a refused branch (nothing generated) was deleted: its sibling is selected again

    def __init__(
        self,
        engine: EngineClient,
        store: ConversationStore,
        view: ChatView,
        composer: Composer,
        shown: ShownChat,
        settings: SettingsController,
        alternatives: ChatAlternatives,
        rule: Callable[[], ContinueRule],
        repairs: Repairs,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.store = store
        self.view = view
        self.composer = composer
        self.shown = shown
        self.turn = shown.live
        self.settings = settings
        self.alternatives = alternatives
        self._rule = rule
        self._repairs = repairs
        self.reply: ReplyInFlight | None = None
        # The tools a new reply offers the model, from its history and message id (the window's MCP
        # ChatTools sets it; None: none).
        self.tool_offer: Callable[[tuple[ChatMessage, ...], int], ToolOffer | None] | None = None
        engine.prompt_prepared.connect(self._on_prompt)
        engine.prefill_progressed.connect(self.turn.on_prefill)
        engine.token_received.connect(self._on_token)
        engine.context_shifted.connect(self._on_shift)
        engine.generation_finished.connect(self._on_finished)
        engine.generation_failed.connect(self._on_failed)
        engine.generation_ended.connect(self._on_generation_ended)

    def start(
        self,
        reply: ReplyInFlight,
        messages: Sequence[ChatMessage],
        cs: ChatSettings,
        *,
        continue_last: bool,
        reply_prefix: tuple[int, ...],
        chat_template: str | None,
        top_candidates: int,
        keep_logits: bool,
    ) -> int | None:
        """Ask the engine for ``reply`` (already shown as thinking) from ``messages`` with the chat's
        settings ``cs`` (and the tools :attr:`tool_offer` gives a new reply); returns the request id
        (None: not sent, the reply is marked "not sent")."""
        self.reply = reply
        self.turn.start(reply.message_id)
        # The Timeline and the funnel count the reply's tokens (its earlier ones too).
        self.turn.timeline.first_token = self.turn.alternatives_offset = reply.alts_offset
        self.shown.refresh()  # the panels show this turn (before the engine says it started)
        rid = self.engine.generate(
            tuple(messages),
            cs.sampler,
            stop_strings=cs.stop_strings,
            top_candidates=top_candidates,
            continue_last=continue_last,
            context_policy=self._rule().context_policy,
            keep_logits=keep_logits,
            chat_template=chat_template,
            alternatives=self.settings.settings.alternatives_per_token,
            reply_prefix=reply_prefix,
            constraint=cs.constraint if cs.constraint.kind != ConstraintKind.NONE else None,
            tools=self.tool_offer(tuple(messages), reply.message_id)
            if self.tool_offer is not None and not continue_last and not reply_prefix
            else None,
        )
        if rid is None:
            self._abandon()
            return None
        self.turn.sent(rid)
        self.reply_conversation_changed.emit(reply.conversation_id)
        return rid

    def _abandon(self) -> None:
        """The request was not sent: the reply is kept as it was, marked "not sent"."""
        reply, self.reply = self.reply, None
        if reply is not None:
            self.store.finish_message(reply.message_id, reply.text, complete=False)
            reply.mark(NOT_SENT)
        self.shown.end_live_turn()

    def stop(self) -> None:
        """Stop the reply in flight (Esc / the Stop button)."""
        if self.engine.generating:
            self.engine.cancel()
            if self.reply is not None:
                self.reply.mark(STOPPING)

    # ------------------------------------------------------------------ engine events
    def _on_prompt(self, ev: P.PromptPrepared) -> None:
        self.turn.on_prompt(ev)
        if self.reply is not None:
            self.reply.mark(PREFILL)

    def _on_token(self, ev: P.TokenEvent) -> None:
        self.turn.on_token(ev)
        reply = self.reply
        if reply is not None and ev.text:
            reply.add(ev.text)
            self.store.update_streaming(reply.message_id, reply.text)

    def _on_shift(self, ev: P.ContextShifted) -> None:
        self.turn.on_shift(ev)
        # The turn's total (dropped before the reply + by every shift so far), as the Stats panel counts it.
        self.notice.emit(
            Severity.INFO,
            f"The context was full: {self.turn.dropped_messages} oldest message(s) left out in this turn, and "
            f"{ev.dropped_reply_tokens} reply tokens left the context; the reply goes on.",
            NoticeTopic.CONTEXT,
        )

    def _end_reply(
        self,
        text: str,
        stats: GenerationStats | None,
        complete: bool | None,
        badge: Badge,
        end_s: float = 0.0,
        note: str | None = None,
    ) -> None:
        """Close the reply in flight: store it (text, figures, provenance) and show it ended."""
        reply, self.reply = self.reply, None
        self.turn.on_finished(stats, end_s)
        meta: MessageMeta | None = None
        if (
            reply is not None
            and reply.prefix
            and text == reply.prefix
            and stats is not None
            and not stats.generated_tokens
        ):
            # A continuation stopped before its first token (Esc during prefill): the reply is as it
            # was, so are its stored stats, provenance and badge (not the zeros of a turn that made nothing).
            try:
                old = self.store.finish_message(reply.message_id, text, complete=False)
                meta = old.meta
                if old.meta.stats is not None:  # the badge of how the reply had ended
                    badge = CUT_BADGES.get(StopReason(old.meta.stats.stop_reason), badge)
            except Exception as exc:
                log.exception("could not save reply %s", reply.message_id)
                self.notice.emit(Severity.ERROR, f"The reply could not be saved: {exc}", NoticeTopic.GENERAL)
        elif reply is not None:
            try:
                meta = self._finished_meta(reply, stats)
                meta = self.store.finish_message(reply.message_id, text, stats=stats, meta=meta, complete=complete).meta
            except Exception as exc:  # storage failure must not lose the on-screen reply
                log.exception("could not save reply %s", reply.message_id)
                self.notice.emit(Severity.ERROR, f"The reply could not be saved: {exc}", NoticeTopic.GENERAL)
        if reply is not None:
            reply.show_end(text, badge, stats, meta, self._rule(), note)
        self.shown.refresh()  # the stored reply: its figures and timeline
        self.reply_conversation_changed.emit(None)
        self.conversations_changed.emit()
        self.composer.setFocus()

    def _finished_meta(self, reply: ReplyInFlight, stats: GenerationStats | None) -> MessageMeta:
        """The meta a finished reply is stored with: the turn's timeline (engine clock) added;
        for a continued reply, the tokens of its earlier parts are kept in ``earlier_tokens``
        (the new stats and timeline cover only the last part)."""
        old = self.store.get_message(reply.message_id).meta
        timeline = self.turn.timeline.snapshot()
        meta = replace(old, timeline=None if timeline.is_empty else timeline)
        if not reply.prefix or stats is None:
            return meta
        earlier = old.earlier_tokens + (old.stats.generated_tokens if old.stats is not None else 0)
        return replace(meta, earlier_tokens=earlier, edited=False)

    def _on_finished(self, ev: P.Finished) -> None:
        reply = self.reply
        if reply is not None:
            self.alternatives.keep(reply, ev)
        else:
            self.turn.on_alternatives(ev.alternatives, 0)
        # A continued reply's text is the old part plus what the engine added.
        text = (reply.prefix if reply is not None else "") + ev.text
        self._end_reply(text, ev.stats, None, stopped_badge(ev.stats), ev.elapsed_s)
        if StopReason(ev.stats.stop_reason) is StopReason.CONTEXT_FULL:
            self.notice.emit(
                Severity.WARNING,
                f"The context is full ({ev.stats.n_ctx:,} tokens, n_ctx). The reply so far is kept. Raise n_ctx in the "
                'Model panel, start a new chat, or choose "Drop oldest turns and go on" as the context policy.',
                NoticeTopic.CONTEXT,
            )
        self.reply_finished.emit(ev.stats)

    def _on_failed(self, ev: P.Failed) -> None:
        reply = self.reply
        if reply is None or reply.text.strip() or reply.prefix:
            self._end_reply(reply.text if reply is not None else "", ev.stats, False, CUT_OFF)
            self.notice.emit(Severity.ERROR, ev.message, NoticeTopic.GENERAL)
            return
        # Nothing was generated: drop the empty reply.
        self.reply = None
        shown = reply.conversation_id == self.shown.conversation_id  # else the person is browsing another chat
        sib = self.store.siblings(reply.message_id)
        self.store.delete_message(reply.message_id)
        if reply.widget is not None:
            self.view.remove_widget(reply.widget)
        self.turn.on_finished(ev.stats)
        self.shown.refresh()
        if shown and (sib.previous_id is not None or sib.next_id is not None):
            # A branch or a regenerated reply refused: the reply it stood beside is shown again, unchanged.
            self.branch_dropped.emit()
        self.reply_conversation_changed.emit(None)
        repairs = self._repairs() if ev.kind is P.FailureKind.TEMPLATE else []
        if repairs:  # keep what was sent: the repair makes it answerable
            self.repair_offered.emit(ev.message, repairs)
            return
        sent = reply.sent_user
        path = self.store.active_path(reply.conversation_id)
        if sent is not None and path and path[-1].id == sent[0]:
            # The message just sent could not be answered (e.g. longer than the context):
            # take it out of the conversation, so the next message is not refused for it
            # too; the chat controller gives its text back to the chat's draft, so nothing is
            # lost (and removes a chat that this message made and left empty).
            self.store.delete_message(sent[0])
            if shown:
                self.view.remove_message(sent[0])
                self.shown.refresh()
            self.sent_refused.emit(reply.conversation_id, sent[1])
            self.conversations_changed.emit()
        elif shown:
            self.view.note_under_last(ev.message)
        # About that send: another chat shown makes it moot (app/ui/window/chat_notices.py).
        self.notice.emit(Severity.ERROR, ev.message, NoticeTopic.SEND)

    def _on_generation_ended(self, _request_id: int) -> None:
        """The reply is over. If neither Finished nor Failed closed it, the engine went away
        under it (died, Stop timed out, restart, unload): keep the text, mark it cut off."""
        if self.reply is not None:
            self._end_reply(self.reply.text, None, False, ENGINE_STOPPED, note=ENGINE_STOPPED_FOOTER)
        self.composer.set_generating(False)
