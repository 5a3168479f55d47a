"""The conversation in the window: what is on screen, what is stored, what the
engine is asked, and the live turn the panels show.

The screen always shows the stored active path (root to the selected leaf), and
the engine is always sent that same path, so the model's context matches the
screen: after an edit, a regenerate or a branch switch the engine keeps the
longest common token prefix in its KV cache and evaluates only the rest; "New
chat" empties the KV cache.

A reply belongs to the conversation it was asked in (:attr:`ChatController.reply_conversation_id`),
not to what is on screen: while it streams, the person may open other chats or a new
one; the reply goes on into its own conversation's stored message, and its widget is
updated only while that conversation is shown (re-attached when it is shown again).
"""

from __future__ import annotations

import enum
import html
import logging
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QTextCursor

from app.core import protocol as P
from app.core.chat.context import ChatMessage, ContextPolicy, GenerationStats, Role, StopReason
from app.core.conversations import ConversationStore, DeletedMessages, Message, MessageMeta
from app.core.conversations.turns import repeated_roles
from app.core.sampling.alternatives import ReplyAlternatives
from app.core.sampling.params import SamplerSettings
from app.ui.chat.alternatives import ChatAlternatives
from app.ui.chat.composer import Composer
from app.ui.chat.message import BadgeKind, MessageAction, MessageWidget
from app.ui.chat.turn import LiveTurn
from app.ui.chat.view import ChatView
from app.ui.common.severity import Severity
from app.ui.common.stats_format import reply_details, reply_footer, stats_footer
from app.ui.engine.client import EngineClient, EngineState
from app.ui.window.notices import NoticeTopic
from app.ui.window.settings_controller import SettingsController

log = logging.getLogger(__name__)

Badge = tuple[str, BadgeKind]

_CUT_BADGES: dict[StopReason, Badge] = {
    StopReason.CANCELLED: ("stopped", BadgeKind.WARN),
    StopReason.CONTEXT_FULL: ("context full", BadgeKind.WARN),
    StopReason.MAX_TOKENS: ("max_tokens reached", BadgeKind.WARN),
    StopReason.ERROR: ("cut off", BadgeKind.ERROR),
}
_NO_BADGE: Badge = ("", BadgeKind.NONE)


class TurnRepair(str, enum.Enum):
    """How :meth:`ChatController.repair_turns` repairs two messages in a row with the same role."""

    MERGE = "merge"  # append the later message to the earlier one
    DELETE_EARLIER = "delete_earlier"  # delete the earlier message, keep what followed it


_CUT_OFF: Badge = ("cut off", BadgeKind.ERROR)


class ChatController(QObject, ChatAlternatives):
    """Sends the conversation to the engine, streams the reply into the view and the store.

    Whether a reply is in flight is the engine client's to say (:attr:`busy` reads
    ``engine.generating``); this controller keeps only what the reply is (the stored
    message it streams into, its widget and text) and closes it on ``generation_ended``
    however the reply ended (finished, failed, engine died, Stop timed out, restart).
    The composer's Send/Stop button follows ``generation_started`` / ``generation_ended``.

    The sampler settings, the context policy and the system prompt of a new chat are read
    from the :class:`SettingsController` when a reply is requested; :attr:`stop_strings`
    and :attr:`top_candidates` are set by the window.

    Signals:
        reply_finished(object): :class:`GenerationStats` of a finished reply.
        notice(object, str, object): a message for the banner (:class:`Severity`, text,
            :class:`NoticeTopic`, so a later event clears only its own kind of message).
        repair_offered(str, list): the model's template refused the conversation's turn order;
            the refusal and ``[(label, callback)]`` repairs for the banner (:meth:`repair_turns`).
        conversation_changed(object): the conversation shown changed (id or None).
        conversations_changed(): titles, order or the set of conversations changed.
        reply_conversation_changed(object): the conversation a reply is being written in
            (id), or None when the reply is over.
        message_deleted(object): a :class:`DeletedMessages` (the window offers Undo).
        funnel_step_requested(object): a token of a reply was clicked: a
            :class:`~app.ui.funnel.controller.StepTarget` for the Funnel panel.
        path_rendered(tuple): the view was built again: the message ids now shown, oldest first
            (a branch switched, a conversation opened; empty with no conversation).
    """

    reply_finished = Signal(object)
    notice = Signal(object, str, object)
    repair_offered = Signal(str, list)
    conversation_changed = Signal(object)
    conversations_changed = Signal()
    reply_conversation_changed = Signal(object)
    message_deleted = Signal(object)
    funnel_step_requested = Signal(object)
    path_rendered = Signal(tuple)

    def __init__(
        self,
        engine: EngineClient,
        view: ChatView,
        composer: Composer,
        turn: LiveTurn,
        store: ConversationStore,
        settings: SettingsController,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.view = view
        self.composer = composer
        self.turn = turn
        self.store = store
        self.settings = settings
        self.conversation_id: int | None = None
        self._reply_id: int | None = None  # stored id of the reply in flight
        self._reply_conv: int | None = None  # the conversation it is written in
        self._reply_widget: MessageWidget | None = None  # its widget, while that conversation is shown
        self._reply_text = ""
        self._reply_prefix = ""  # text already there when continuing a reply
        self._sent_user: tuple[int, str] | None = None  # the message this turn answers, if just sent
        # The alternatives of the reply's steps before this request's (a continued reply's earlier
        # part, a branch's prefix), joined with the request's when it ends.
        self._alts_head: ReplyAlternatives | None = None
        self._alts_offset = 0
        # The reply the live turn (the Tokens panel) shows, and its engine request: (message id, request id).
        self.turn_reply: tuple[int, int] | None = None
        # How many next-token candidates to ask for (0: none; the token inspector costs
        # a pass over the vocabulary per token, so the window asks only while it is shown).
        self.top_candidates = 20
        # Whether the engine keeps each reply's logits per step for the Funnel panel (set by the window).
        self.keep_logits = False
        self.stop_strings: tuple[str, ...] = ()  # extra stop strings for the next reply
        # The system prompt of the chat about to start, when edited before its first message
        # (None: the default from the settings).
        self.pending_system_prompt: str | None = None
        composer.submitted.connect(self.send)
        composer.stop_requested.connect(self.stop)
        view.action_requested.connect(self._on_action)
        engine.prompt_prepared.connect(self._on_prompt)
        engine.prefill_progressed.connect(self.turn.on_prefill)
        engine.token_received.connect(self._on_token)
        engine.context_shifted.connect(self._on_shift)
        engine.generation_finished.connect(self._on_finished)
        engine.generation_failed.connect(self._on_failed)
        engine.generation_started.connect(lambda _rid: composer.set_generating(True))
        engine.generation_ended.connect(self._on_generation_ended)

    @property
    def busy(self) -> bool:
        """True while a reply is in flight (the engine client's :attr:`~EngineClient.generating`)."""
        return self.engine.generating

    @property
    def reply_conversation_id(self) -> int | None:
        """The conversation the reply in flight is written in (None when no reply is in flight)."""
        return self._reply_conv if self._reply_id is not None else None

    @property
    def _sampler(self) -> SamplerSettings:
        return self.settings.settings.sampler

    # ------------------------------------------------------------------ conversation
    def new_chat(self) -> None:
        """Show an empty conversation (created on the first message) and empty the KV cache.

        During a reply the reply goes on into its own conversation (the KV cache is then
        left as it is: the next request keeps only the common prefix anyway)."""
        self.conversation_id = None
        self.render()
        if not self.busy:
            self.turn.reset()
            self.engine.reset_context()
        self.conversation_changed.emit(None)

    def open_conversation(self, conv_id: int, focus_message: int | None = None) -> None:
        """Show a stored conversation (the KV cache follows on the next reply).

        Allowed during a reply: the reply goes on into its own conversation.

        Raises:
            KeyError: no such conversation, or it was deleted.
        """
        if self.store.get_conversation(conv_id).deleted_at is not None:
            raise KeyError(f"conversation {conv_id} was deleted")
        if conv_id != self.conversation_id and not self.busy:
            self.turn.reset()
        self.conversation_id = conv_id
        self.render(focus_message)
        self.conversation_changed.emit(conv_id)

    def render(self, focus_message: int | None = None) -> None:
        """Rebuild the view from the stored active path."""
        self._reply_widget = None  # the view's widgets are rebuilt
        if self.conversation_id is None:
            self.view.clear()
            self.path_rendered.emit(())
            return
        path = {m.id: m for m in self.store.active_path(self.conversation_id)}
        last = next(reversed(path.values()), None)
        last_id = last.id if last is not None else None
        # The messages of a long chat are built as the view needs them (ChatView.show_messages):
        # the newest first, or those from the message to show (a search hit) down.
        self.view.show_messages(list(path), lambda mid: self._shown_widget(path[mid], mid == last_id), focus_message)
        if focus_message is not None:
            self.view.scroll_to_message(focus_message)
        self.path_rendered.emit(tuple(path))

    def _shown_widget(self, m: Message, last: bool = False) -> MessageWidget:
        """The widget of stored message ``m`` of the chat shown (the reply in flight's shows it);
        ``last``: the chat's last message (a question left unanswered offers Reply)."""
        w = self._make_widget(m)
        if m.id == self._reply_id:
            self._attach_reply(w)
        elif last and m.role is Role.USER and self._reply_id is None:
            w.set_can_reply(True)  # its reply was deleted, or never came
        return w

    def _attach_reply(self, w: MessageWidget) -> None:
        """Show the reply in flight in ``w`` (its conversation is shown again)."""
        self._reply_widget = w
        w.set_text(self._reply_text)
        w.set_streaming(True)
        w.set_can_continue(False)
        w.set_footer("")
        w.set_badge("writing…" if self._reply_text != self._reply_prefix else "thinking…", BadgeKind.LIVE)

    def _add_widget(self, m: Message) -> MessageWidget:
        """Show stored message ``m`` after every shown one."""
        w = self._make_widget(m)
        w.refresh()
        return self.view.append(w)

    def _make_widget(self, m: Message) -> MessageWidget:
        """A widget for stored message ``m`` (title, branch ‹ n/m ›, stats, badges), not yet placed, its
        text set but not rendered yet (:meth:`MessageWidget.refresh`)."""
        sib = self.store.siblings(m.id)
        title = ""
        if m.role is Role.ASSISTANT:
            title = m.meta.model_name or (Path(m.meta.model_path).stem if m.meta.model_path else "Assistant")
        w = MessageWidget(m.role, "", title, message_id=m.id)
        w.set_text(m.content)  # rendered when the view places it (ChatView.show_messages)
        w.set_branch(sib.position, sib.count)
        if m.role is Role.ASSISTANT:
            if m.meta.stats is not None:
                w.set_footer(stats_footer(m.meta))
            w.set_how_made(reply_details(m.meta))
            w.set_can_show_tokens(self.store.has_alternatives(m.id))
            if not m.complete:
                reason = StopReason(m.meta.stats.stop_reason) if m.meta.stats else StopReason.ERROR
                w.set_badge(*_CUT_BADGES.get(reason, ("cut off", BadgeKind.WARN)))
                w.set_can_continue(True, self._why_no_continue(m.meta))
        return w

    def refresh_continue(self) -> None:
        """Re-decide each cut-off reply's Continue (the context policy or the loaded n_ctx changed)."""
        for w in self.view.messages:
            if w.message_id is None or w.role is not Role.ASSISTANT or w.message_id == self._reply_id:
                continue
            try:
                m = self.store.get_message(w.message_id)
            except KeyError:
                continue
            if not m.complete:
                w.set_can_continue(True, self._why_no_continue(m.meta))

    def _why_no_continue(self, meta: MessageMeta) -> str:
        """Why Continue cannot work for a reply with ``meta`` ("" when it can): the context was
        full, and neither a larger n_ctx is loaded nor the context policy drops old turns."""
        st = meta.stats
        if st is None or StopReason(st.stop_reason) is not StopReason.CONTEXT_FULL:
            return ""
        if ContextPolicy(self.settings.settings.load.context_policy) is ContextPolicy.ROLLING:
            return ""
        model = self.engine.model
        if model is not None and model.n_ctx > st.n_ctx:
            return ""
        return (
            f"The context is full ({st.n_ctx:,} tokens, n_ctx): raise n_ctx in the Model panel and reload, "
            'or choose "Drop oldest turns and go on" as the context policy, to continue this reply.'
        )

    # ------------------------------------------------------------------ sending
    def messages_for_engine(self, before: int | None = None) -> tuple[ChatMessage, ...]:
        assert self.conversation_id is not None
        return tuple(self.store.chat_history(self.conversation_id, before=before))

    def messages_with_draft(self, draft: str) -> tuple[ChatMessage, ...]:
        """What Send would give the engine for ``draft``: the chat shown (or a new chat's system prompt), then ``draft``."""
        conv = self.conversation_id
        if conv is not None and not self.store.get_conversation(conv).deleted_at:
            history = self.messages_for_engine()
        else:
            pending = self.pending_system_prompt
            system = pending if pending is not None else self.settings.settings.system_prompt
            history = (ChatMessage(Role.SYSTEM, system),) if system else ()
        return (*history, ChatMessage(Role.USER, draft))

    def send(self, text: str) -> bool:
        """Append the person's message and ask for a reply. Returns False if nothing was sent
        (the text then stays in the box)."""
        if self.busy:
            self._say_busy()
            return False
        if self.conversation_id is not None and self.store.get_conversation(self.conversation_id).deleted_at:
            # The chat shown was deleted (Undo still possible): never write into the trash.
            self.conversation_id = None
            self.conversation_changed.emit(None)
        if not self._engine_ready():
            return False
        model = self.engine.model
        if self.conversation_id is None:
            pending = self.pending_system_prompt
            self.conversation_id = self.store.create_conversation(
                system_prompt=pending if pending is not None else self.settings.settings.system_prompt,
                model_path=model.info.path if model else "",
                sampler=self._sampler,
            )
            self.conversation_changed.emit(self.conversation_id)
        path = self.store.active_path(self.conversation_id)
        parent = path[-1].id if path else None
        mid = self.store.add_message(self.conversation_id, parent, Role.USER, text)
        self.view.add_message(Role.USER, text, message_id=mid)
        self.composer.box.clear()
        self.conversations_changed.emit()
        self._sent_user = (mid, text)
        return self._start_reply(parent_id=mid)

    def regenerate(self, message_id: int) -> bool:
        """A new reply next to ``message_id`` (the old one stays as a branch); for a user
        message left without an answer (the last one), its reply."""
        if self.busy:
            self._say_busy()
            return False
        if not self._engine_ready():
            return False
        m = self.store.get_message(message_id)
        if m.role is Role.USER:
            w = self.view.widget_for(message_id)
            if w is not None:
                w.set_can_reply(False)
            return self._start_reply(parent_id=message_id)
        new_id = self.store.regenerate(message_id, self._meta())
        self.render()
        return self._stream_into(new_id, continue_last=False)

    def continue_reply(self, message_id: int) -> bool:
        """Continue a reply that was cut off (stopped, max_tokens, context full)."""
        if self.busy:
            self._say_busy()
            return False
        if not self._engine_ready():
            return False
        msg = self.store.get_message(message_id)
        self.render()
        return self._stream_into(message_id, continue_last=True, prefix=msg.content)

    def edit(self, message_id: int, text: str) -> None:
        """Edit a message: a new branch with the edited text. Editing a question asks for a new reply."""
        if self.busy:
            self._say_busy()
            return
        msg = self.store.get_message(message_id)
        new_id = self.store.edit_message(message_id, text)
        self.render()
        self.conversations_changed.emit()
        if msg.role is Role.USER and new_id != message_id and self._engine_ready(quiet=True):
            self._start_reply(parent_id=new_id)

    def switch_branch(self, message_id: int) -> None:
        if self.busy:
            return
        self.store.select_branch(message_id)
        self.render()

    def delete_message(self, message_id: int) -> DeletedMessages | None:
        """Delete a message and what follows it in its branch; :attr:`message_deleted` carries
        what :meth:`undo_delete_message` needs. None (and nothing deleted) during a reply."""
        if self.busy:
            self._say_busy()
            return None
        deleted = self.store.delete_message_undoable(message_id)
        self.render()
        self.conversations_changed.emit()
        self.message_deleted.emit(deleted)
        return deleted

    def undo_delete_message(self, deleted: DeletedMessages) -> bool:
        """Put back the messages of one delete and show their conversation. False (with a
        notice) when that is no longer possible (a reply is in flight, or the chat is gone)."""
        if self.busy:
            self._say_busy()
            return False
        try:
            self.store.restore_messages(deleted)
        except (KeyError, ValueError) as exc:
            self.notice.emit(Severity.WARNING, f"The message could not be restored: {exc}", NoticeTopic.GENERAL)
            return False
        if self.conversation_id == deleted.conversation_id:
            self.render()
        self.conversations_changed.emit()
        return True

    def _say_busy(self) -> None:
        conv = self.reply_conversation_id
        where = ""
        if conv is not None and conv != self.conversation_id:
            where = f" in “{self.store.get_conversation(conv).title}”"
        self.notice.emit(
            Severity.INFO,
            f"A reply is being written{where}. Wait for it or stop it (Esc); your text is kept.",
            NoticeTopic.REPLY,
        )

    def stop(self) -> None:
        """Stop the reply in flight (Esc / the Stop button)."""
        if self.busy:
            self.engine.cancel()
            if self._reply_widget is not None:
                self._reply_widget.set_badge("stopping…", BadgeKind.LIVE)

    def _engine_ready(self, quiet: bool = False) -> bool:
        if self.engine.state == EngineState.READY:
            return True
        if not quiet:
            if self.engine.state == EngineState.LOADING:
                self.notice.emit(
                    Severity.INFO, "The model is still loading; your message is kept in the box.", NoticeTopic.NO_MODEL
                )
            else:
                self.notice.emit(
                    Severity.WARNING,
                    "No model is loaded. Open a GGUF model first (File → Open model).",
                    NoticeTopic.NO_MODEL,
                )
        return False

    @property
    def chat_template(self) -> str | None:
        """The person's chat template for the loaded model (settings), or None: the GGUF's (a remote
        engine's model: the server's, which renders its own prompt)."""
        model = self.engine.model
        if model is None or model.remote is not None:
            return None
        return self.settings.settings.chat_template_for(model.info.path)

    def _meta(self) -> MessageMeta:
        model = self.engine.model
        sampler = self._sampler
        ready = self.engine.ready_info
        if model is None:
            return MessageMeta(sampler=sampler)
        remote = model.remote  # a remote server made it: the provenance names the server, not a file
        if remote is not None:
            engine = remote.engine_label
        else:
            engine = f"llama-cpp-python {ready.llama_cpp_version}" if ready else ""
        return MessageMeta(
            model_path=model.info.path,
            model_name=Path(model.info.path).name.removesuffix(".gguf"),
            quant="" if remote is not None else model.info.quant_type,
            sampler=sampler,
            load=model.settings,
            system_prompt=self.store.get_conversation(self.conversation_id).system_prompt
            if self.conversation_id
            else "",
            chat_template=self.chat_template,
            engine=engine,
            endpoint=remote.base_url if remote is not None else "",
        )

    def _start_reply(self, parent_id: int) -> bool:
        assert self.conversation_id is not None
        new_id = self.store.add_message(
            self.conversation_id, parent_id, Role.ASSISTANT, "", self._meta(), complete=False
        )
        return self._stream_into(new_id, continue_last=False, render=False)

    def _stream_into(
        self,
        message_id: int,
        *,
        continue_last: bool,
        prefix: str = "",
        render: bool = True,
        reply_prefix: tuple[int, ...] = (),
        alts_head: ReplyAlternatives | None = None,
    ) -> bool:
        if continue_last:
            messages = self.messages_for_engine()  # includes the partial reply, continued as is
            widget = self.view.widget_for(message_id)
        else:
            messages = self.messages_for_engine(before=message_id)
            widget = self.view.widget_for(message_id) if render else None
            if widget is None:
                widget = self._add_widget(self.store.get_message(message_id))
        assert widget is not None
        self._reply_id = message_id
        self._reply_conv = self.conversation_id
        self._reply_widget = widget
        self._reply_prefix = prefix
        self._reply_text = prefix
        widget.set_badge("thinking…", BadgeKind.LIVE)
        widget.set_can_continue(False)
        widget.set_can_show_tokens(False)
        widget.set_streaming(True)
        widget.set_footer("")
        self.turn.start()
        if continue_last:  # the earlier part's steps come first (none kept: the whole reply keeps none)
            alts_head = self.store.alternatives(message_id)
        self._alts_head = alts_head
        self._alts_offset = alts_head.n_steps if alts_head is not None else 0
        # The Timeline and the funnel count the reply's tokens (its earlier ones too).
        self.turn.timeline.first_token = self.turn.alternatives_offset = self._alts_offset
        rid = self.engine.generate(
            messages,
            self._sampler,
            stop_strings=self.stop_strings,
            top_candidates=self.top_candidates,
            continue_last=continue_last,
            context_policy=self.settings.settings.load.context_policy,
            keep_logits=self.keep_logits,
            chat_template=self.chat_template,
            alternatives=self.settings.settings.alternatives_per_token,
            reply_prefix=reply_prefix,
        )
        if rid is None:
            self._abandon("not sent")
            return False
        self.turn_reply = (message_id, rid)
        self.reply_conversation_changed.emit(self._reply_conv)
        return True

    def _abandon(self, badge: str) -> None:
        if self._reply_id is not None:
            self.store.finish_message(self._reply_id, self._reply_text, complete=False)
        if self._reply_widget is not None:
            self._reply_widget.set_badge(badge, BadgeKind.ERROR)
        self._reply_id = None
        self._reply_widget = None
        self._reply_conv = None

    def flush(self) -> None:
        """Write pending streamed text to disk (the window calls it every second)."""
        self.store.flush()

    # ------------------------------------------------------------------ engine events
    def _on_prompt(self, ev: P.PromptPrepared) -> None:
        self.turn.on_prompt(ev)
        if self._reply_widget is not None:
            self._reply_widget.set_badge("prefill…", BadgeKind.LIVE)

    def _on_token(self, ev: P.TokenEvent) -> None:
        self.turn.on_token(ev)
        if self._reply_id is not None and ev.text:
            first = self._reply_text == self._reply_prefix
            self._reply_text += ev.text
            if self._reply_widget is not None:
                if first:
                    self._reply_widget.set_badge(*_NO_BADGE)
                self._reply_widget.set_text(self._reply_text)
            self.store.update_streaming(self._reply_id, self._reply_text)

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
        self, text: str, stats: GenerationStats | None, complete: bool | None, badge: Badge, end_s: float = 0.0
    ) -> None:
        mid, w = self._reply_id, self._reply_widget
        self._sent_user = None
        self._reply_id = None
        self._reply_widget = None
        self._reply_conv = None
        self.turn.on_finished(stats, end_s)
        meta: MessageMeta | None = None
        if (
            mid is not None
            and self._reply_prefix
            and text == self._reply_prefix
            and stats is not None
            and stats.generated_tokens == 0
        ):
            # A continuation stopped before its first token (Esc during prefill): the reply is as it
            # was, so are its stored stats, provenance and badge (not the zeros of a turn that made nothing).
            try:
                old = self.store.finish_message(mid, text, complete=False)
                meta = old.meta
                if old.meta.stats is not None:  # the badge of how the reply had ended
                    badge = _CUT_BADGES.get(StopReason(old.meta.stats.stop_reason), badge)
            except Exception as exc:
                log.exception("could not save reply %s", mid)
                self.notice.emit(Severity.ERROR, f"The reply could not be saved: {exc}", NoticeTopic.GENERAL)
        elif mid is not None:
            try:
                meta = self._finished_meta(mid, stats)
                meta = self.store.finish_message(mid, text, stats=stats, meta=meta, complete=complete).meta
            except Exception as exc:  # storage failure must not lose the on-screen reply
                log.exception("could not save reply %s", mid)
                self.notice.emit(Severity.ERROR, f"The reply could not be saved: {exc}", NoticeTopic.GENERAL)
        if w is not None:
            w.set_text(text)
            w.refresh()
            w.set_streaming(False)
            w.set_badge(*badge)
            if meta is not None and meta.stats is not None:
                w.set_footer(stats_footer(meta))
            elif stats is not None:
                w.set_footer(reply_footer(stats))
            if meta is not None:
                w.set_how_made(reply_details(meta))
            w.set_can_continue(bool(badge[0]) and bool(text), self._why_no_continue(meta) if meta else "")
        self.reply_conversation_changed.emit(None)
        self.conversations_changed.emit()
        self.composer.box.setFocus()

    def _finished_meta(self, mid: int, stats: GenerationStats | None) -> MessageMeta:
        """The meta a finished reply is stored with: the turn's timeline (engine clock) added;
        for a continued reply, the tokens of its earlier parts are kept in ``earlier_tokens``
        (the new stats and timeline cover only the last part)."""
        old = self.store.get_message(mid).meta
        timeline = self.turn.timeline.snapshot()
        meta = replace(old, timeline=None if timeline.is_empty else timeline)
        if not self._reply_prefix or stats is None:
            return meta
        earlier = old.earlier_tokens + (old.stats.generated_tokens if old.stats is not None else 0)
        return replace(meta, earlier_tokens=earlier, edited=False)

    def _on_finished(self, ev: P.Finished) -> None:
        self._keep_alternatives(ev)
        # A continued reply's text is the old part plus what the engine added.
        text = self._reply_prefix + ev.text
        reason = StopReason(ev.stats.stop_reason)
        self._end_reply(text, ev.stats, None, _CUT_BADGES.get(reason, _NO_BADGE), ev.elapsed_s)
        if reason is StopReason.CONTEXT_FULL:
            self.notice.emit(
                Severity.WARNING,
                f"The context is full ({ev.stats.n_ctx:,} tokens, n_ctx). The reply so far is kept. Raise n_ctx in the "
                'Model panel, start a new chat, or choose "Drop oldest turns and go on" as the context policy.',
                NoticeTopic.CONTEXT,
            )
        self.reply_finished.emit(ev.stats)

    def _on_failed(self, ev: P.Failed) -> None:
        text = self._reply_text
        w = self._reply_widget
        mid = self._reply_id
        if not text.strip() and mid is not None and not self._reply_prefix:
            # Nothing was generated: drop the empty reply.
            shown = self._reply_conv == self.conversation_id  # else the person is browsing another chat
            self._reply_id = None
            self._reply_widget = None
            self._reply_conv = None
            self.store.delete_message(mid)
            if w is not None:
                self.view.remove_widget(w)
            self.turn.on_finished(ev.stats)
            self.reply_conversation_changed.emit(None)
            sent = self._sent_user
            repairs = self._turn_repairs() if ev.kind is P.FailureKind.TEMPLATE else []
            if repairs:  # keep what was sent: the repair makes it answerable
                self._sent_user = None
                self.repair_offered.emit(ev.message, repairs)
                return
            if sent is not None and self.view.messages and self.view.messages[-1].message_id == sent[0]:
                # The message just sent could not be answered (e.g. longer than the context):
                # take it out of the conversation, so the next message is not refused for it
                # too, and give its text back in the box, so nothing is lost.
                self.store.delete_message(sent[0])
                self.view.remove_widget(self.view.messages[-1])
                if not self.composer.box.toPlainText().strip():
                    self.composer.box.setPlainText(sent[1])
                    self.composer.box.moveCursor(QTextCursor.MoveOperation.End)  # typing on adds to its end
                self.conversations_changed.emit()
            elif shown and self.view.messages:
                self.view.messages[-1].set_footer(ev.message)
        else:
            self._end_reply(text, ev.stats, False, _CUT_OFF)
        self._sent_user = None
        self.notice.emit(Severity.ERROR, ev.message, NoticeTopic.GENERAL)

    def _on_generation_ended(self, _request_id: int) -> None:
        """The reply is over. If neither Finished nor Failed closed it, the engine went away
        under it (died, Stop timed out, restart, unload): keep the text, mark it cut off."""
        if self._reply_id is not None:
            w = self._reply_widget
            self._end_reply(self._reply_text, None, False, ("engine stopped", BadgeKind.ERROR))
            if w is not None:
                w.set_footer("The engine stopped during this reply; the text above is kept.")
        self.composer.set_generating(False)

    # ------------------------------------------------------------------ turn-order repair
    def _turn_repairs(self) -> list[tuple[str, object]]:
        """Banner actions that repair the first place where the active path repeats a role."""
        if self.conversation_id is None:
            return []
        path = self.store.active_path(self.conversation_id)
        try:
            repeated = repeated_roles([m.role for m in path])
        except ValueError:  # a system message inside the path: not a turn-order problem we can fix
            return []
        if not repeated:
            return []
        earlier, later = path[repeated[0].first].id, path[repeated[0].second].id
        return [
            ("Merge them", lambda: self.repair_turns(later, TurnRepair.MERGE)),
            ("Delete the earlier one", lambda: self.repair_turns(earlier, TurnRepair.DELETE_EARLIER)),
        ]

    def repair_turns(self, message_id: int, how: TurnRepair) -> bool:
        """Repair two messages in a row with the same role, then ask for the reply the chat waits for.

        ``how``: MERGE appends ``message_id`` to its parent (no text lost); DELETE_EARLIER
        deletes ``message_id`` (the earlier one) and keeps what followed it. Returns False
        when nothing was changed (a reply in flight, or the message is gone).
        """
        if self.busy:
            self.notice.emit(
                Severity.INFO, "Stop the reply in progress before repairing the conversation.", NoticeTopic.GENERAL
            )
            return False
        try:
            msg = self.store.get_message(message_id)
            if how is TurnRepair.MERGE:
                self.store.merge_with_parent(message_id)
            else:
                self.store.delete_keeping_replies(message_id)
        except (KeyError, ValueError) as exc:
            self.notice.emit(
                Severity.WARNING, f"The conversation changed; nothing was repaired ({exc}).", NoticeTopic.GENERAL
            )
            return False
        if msg.conversation_id != self.conversation_id:
            self.open_conversation(msg.conversation_id)
        self.render()
        self.conversations_changed.emit()
        role = msg.role.value
        if how is TurnRepair.MERGE:
            self.notice.emit(Severity.INFO, f"Merged the two {role} messages into one.", NoticeTopic.GENERAL)
        else:
            preview = " ".join(msg.content.split())
            preview = preview if len(preview) <= 60 else preview[:59] + "…"
            self.notice.emit(
                Severity.INFO, f"Deleted the earlier {role} message: “{html.escape(preview)}”.", NoticeTopic.GENERAL
            )
        path = self.store.active_path(msg.conversation_id)
        if path and path[-1].role is Role.USER and self._engine_ready():
            self._start_reply(parent_id=path[-1].id)
        return True

    # ------------------------------------------------------------------ message actions
    def _on_action(self, action: MessageAction, message_id: int, payload: object) -> None:
        """Do what a message's button asked (``payload`` as described on :class:`MessageAction`)."""
        action = MessageAction(action)
        if action is MessageAction.REGENERATE:
            self.regenerate(message_id)
        elif action is MessageAction.CONTINUE:
            self.continue_reply(message_id)
        elif action is MessageAction.EDIT:
            self.edit(message_id, str(payload))
        elif action is MessageAction.DELETE:
            self.delete_message(message_id)
        elif action is MessageAction.TOKENS:
            self.show_tokens(message_id, bool(payload))
        elif action is MessageAction.TOKEN_FUNNEL:
            self.open_token_funnel(message_id, int(payload))  # type: ignore[call-overload]
        elif action is MessageAction.BRANCH_FROM:
            step, token = payload  # type: ignore[misc]
            self.branch_from_alternative(message_id, int(step), int(token))
        elif action is MessageAction.BRANCH_STEP:
            sib = self.store.siblings(message_id)
            target = sib.previous_id if payload == -1 else sib.next_id
            if target is not None:
                self.switch_branch(target)
