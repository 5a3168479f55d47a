"""The conversation in the window: what is on screen, what is stored, and what the engine is asked.

The screen always shows the stored active path (root to the selected leaf), and
the engine is always sent that same path, so the model's context matches the
screen: after an edit, a regenerate or a branch switch the engine keeps the
longest common token prefix in its KV cache and evaluates only the rest; "New
chat" empties the KV cache.

The pieces it composes, each the one owner of its part:

- :class:`~app.ui.chat.shown.ShownChat`: the chat and turn shown, which the panels follow (this
  controller tells it what it built on screen);
- :class:`~app.ui.chat.chat_settings.ChatSettingsController`: what applies to the chat shown, and the rule for new chats;
- :class:`~app.ui.chat.reply.ReplyInFlight`: the reply being written, streamed into by
  :class:`~app.ui.chat.streaming.ReplyStreaming` (the engine's events);
- :mod:`app.ui.chat.presenter`: what a stored message's widget shows;
- :class:`~app.ui.chat.turn_repair.TurnRepairs`: the turn-order repairs the banner offers, and doing one.

A reply belongs to the conversation it was asked in (:attr:`ChatController.reply_conversation_id`),
not to what is on screen: while it streams, the person may open other chats or a new
one; the reply goes on into its own conversation's stored message, and its widget is
updated only while that conversation is shown (re-attached when it is shown again).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.core.chat.context import ChatMessage, ContextPolicy, Role
from app.core.conversations import ConversationStore, DeletedMessages, Message, MessageMeta
from app.core.sampling.alternatives import ReplyAlternatives
from app.core.sampling.params import SamplerSettings
from app.ui.chat.alternatives import ChatAlternatives, branch_start
from app.ui.chat.chat_settings import ChatSettingsController
from app.ui.chat.composer import Composer
from app.ui.chat.drafts import Drafts
from app.ui.chat.message import MessageAction, MessageWidget
from app.ui.chat.presenter import ContinueRule, MessageLook, stored_look, tool_result_title
from app.ui.chat.reply import ReplyInFlight, continued_settings, new_reply_meta
from app.ui.chat.shown import ShownChat
from app.ui.chat.streaming import ReplyStreaming
from app.ui.chat.turn_repair import TurnRepairs
from app.ui.chat.view import ChatView
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient, EngineState
from app.ui.window.notices import NoticeTopic
from app.ui.window.settings_controller import SettingsController

__all__ = ["ChatController"]


class ChatController(QObject):
    """Sends the conversation to the engine, streams the reply into the view and the store.

    Whether a reply is in flight is the engine client's to say (:attr:`busy` reads
    ``engine.generating``); :attr:`reply` is what the reply is (None when there is none),
    closed on ``generation_ended`` however the reply ended (finished, failed, engine died,
    Stop timed out, restart). The composer's Send/Stop button follows ``generation_started`` /
    ``generation_ended``.

    The settings of a reply (sampler, system prompt, stop strings) are the chat's
    (:attr:`chat_settings`); the context policy and the chat template come from the
    :class:`SettingsController`; :attr:`top_candidates` and :attr:`keep_logits` are set by the window.

    Signals:
        reply_finished(object): :class:`GenerationStats` of a finished reply.
        notice(object, str, object): a message for the banner (:class:`Severity`, text,
            :class:`NoticeTopic`, so a later event clears only its own kind of message).
        repair_offered(str, list): the model's template refused the conversation's turn order;
            the refusal and ``[(label, callback)]`` repairs for the banner (:attr:`repairs`).
        conversation_changed(object): the conversation shown changed (id or None).
        conversations_changed(): titles, order or the set of conversations changed.
        reply_conversation_changed(object): the conversation a reply is being written in
            (id), or None when the reply is over.
        message_deleted(object): a :class:`DeletedMessages` (the window offers Undo).
        funnel_step_requested(object): a token of a reply was clicked: a
            :class:`~app.ui.funnel.controller.StepTarget` for the Funnel panel.
    """

    reply_finished = Signal(object)  # GenerationStats
    notice = Signal(object, str, object)  # (Severity, text, NoticeTopic)
    repair_offered = Signal(str, list)
    conversation_changed = Signal(object)  # int | None
    conversations_changed = Signal()
    reply_conversation_changed = Signal(object)  # int | None
    message_deleted = Signal(object)  # DeletedMessages
    funnel_step_requested = Signal(object)  # StepTarget

    def __init__(
        self,
        engine: EngineClient,
        view: ChatView,
        composer: Composer,
        shown: ShownChat,
        store: ConversationStore,
        settings: SettingsController,
        chat_settings: ChatSettingsController,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.view = view
        self.composer = composer
        self.shown = shown
        self.turn = shown.live
        self.store = store
        self.settings = settings
        self.chat_settings = chat_settings
        self.alternatives = ChatAlternatives(
            store, view, settings, shown, lambda: self._sampler, lambda: self.reply.message_id if self.reply else None
        )
        # The turn-order repairs the banner offers when the template refuses the chat (app/ui/chat/turn_repair.py).
        self.repairs = TurnRepairs(store, shown, self.notice.emit, lambda: self.busy, self._show_repaired, self._answer)
        self.streaming = ReplyStreaming(
            engine, store, view, composer, shown, settings, self.alternatives, lambda: self.continue_rule,
            self.repairs.offers, self,
        )  # fmt: skip
        for name in (
            "notice",
            "reply_finished",
            "repair_offered",
            "reply_conversation_changed",
            "conversations_changed",
        ):
            getattr(self.streaming, name).connect(getattr(self, name))
        # How many next-token candidates to ask for (0: none; the token inspector costs
        # a pass over the vocabulary per token, so the window asks only while it is shown).
        self.top_candidates = 20
        # Whether the engine keeps each reply's logits per step for the Funnel panel (set by the window).
        self.keep_logits = False
        self.drafts = Drafts(composer, store, self.new_chat)  # each chat's unsent text; the box holds the shown chat's
        self.conversation_changed.connect(self.drafts.show_chat)
        self.streaming.sent_refused.connect(self.drafts.sent_refused)
        self.streaming.branch_dropped.connect(self.render)
        composer.submitted.connect(self.send)
        composer.stop_requested.connect(self.stop)
        view.action_requested.connect(self._on_action)
        engine.generation_started.connect(lambda _rid: composer.set_generating(True))
        engine.model_loaded.connect(self._model_loaded)

    @property
    def busy(self) -> bool:
        """True while a reply is in flight (the engine client's :attr:`~EngineClient.generating`)."""
        return self.engine.generating

    @property
    def conversation_id(self) -> int | None:
        """The conversation shown (None: a new chat, stored with its first message); :attr:`shown` holds it."""
        return self.shown.conversation_id

    @property
    def reply(self) -> ReplyInFlight | None:
        """The reply in flight (None: none), owned by :attr:`streaming`."""
        return self.streaming.reply

    @property
    def reply_conversation_id(self) -> int | None:
        """The conversation the reply in flight is written in (None when no reply is in flight)."""
        return self.reply.conversation_id if self.reply is not None else None

    @property
    def _sampler(self) -> SamplerSettings:
        return self.chat_settings.current.sampler

    @property
    def continue_rule(self) -> ContinueRule:
        """What decides whether a reply cut off by a full context can be continued now."""
        model = self.engine.model
        return ContinueRule(self.context_policy, model.n_ctx if model is not None else 0)

    @property
    def context_policy(self) -> ContextPolicy:
        """The loaded model's context policy (part of the load settings remembered for its file;
        applies to the next reply without a reload); the defaults' without a model."""
        model = self.engine.model
        return self.settings.settings.load_for(model.info.path if model is not None else None).context_policy

    # ------------------------------------------------------------------ conversation
    def new_chat(self) -> None:
        """Show an empty conversation (created on the first message) and empty the KV cache.

        During a reply the reply goes on into its own conversation (the KV cache is then
        left as it is: the next request keeps only the common prefix anyway)."""
        self._show(None)
        if not self.busy:
            self.shown.end_live_turn()
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
        self._show(conv_id, focus_message)
        self.conversation_changed.emit(conv_id)

    def render(self, focus_message: int | None = None) -> None:
        """Rebuild the view from the stored active path (and tell :attr:`shown`)."""
        self._show(self.conversation_id, focus_message)

    def _show(self, conv: int | None, focus_message: int | None = None) -> None:
        """Show chat ``conv`` (None: a new chat) as stored, and tell :attr:`shown`."""
        if self.reply is not None:
            self.reply.detach()  # the view's widgets are rebuilt
        if conv is None:
            self.view.clear()
            self.shown.show(None, ())
            return
        path = self.store.active_path(conv)
        by_id = {m.id: m for m in path}
        last_id = path[-1].id if path else None
        # The messages of a long chat are built as the view needs them (ChatView.show_messages):
        # the newest first, or those from the message to show (a search hit) down.
        self.view.show_messages(list(by_id), lambda mid: self._shown_widget(by_id[mid], mid == last_id), focus_message)
        if focus_message is not None:
            self.view.scroll_to_message(focus_message)
        self.shown.show(conv, path)

    def _shown_widget(self, m: Message, last: bool = False) -> MessageWidget:
        """The widget of stored message ``m`` of the chat shown (the reply in flight's shows it);
        ``last``: the chat's last message (a question left unanswered offers Reply)."""
        reply = self.reply
        w = self._make_widget(m, unanswered=last and m.role is Role.USER and reply is None)
        if reply is not None and m.id == reply.message_id:
            reply.attach(w)
        return w

    def _add_widget(self, m: Message) -> MessageWidget:
        """Show stored message ``m`` after every shown one."""
        w = self._make_widget(m)
        w.refresh()
        return self.view.append(w)

    def _make_widget(self, m: Message, unanswered: bool = False) -> MessageWidget:
        """A widget for stored message ``m`` (:func:`~app.ui.chat.presenter.stored_look`), not yet placed,
        its text set but not rendered yet (:meth:`MessageWidget.refresh`)."""
        look = self._look(m, unanswered)
        w = MessageWidget(m.role, "", look.title, message_id=m.id)
        w.present(look)  # the text is rendered when the view places it (ChatView.show_messages)
        return w

    def _look(self, m: Message, unanswered: bool = False) -> MessageLook:
        has_alts = m.role is Role.ASSISTANT and self.store.has_alternatives(m.id)
        return stored_look(
            m, self.store.siblings(m.id), has_alternatives=has_alts, rule=self.continue_rule, unanswered=unanswered
        )

    def refresh_continue(self) -> None:
        """Re-decide each cut-off reply's Continue (the context policy or the loaded n_ctx changed)."""
        rule = self.continue_rule
        streaming = self.reply.message_id if self.reply is not None else None
        for w in self.view.built_messages():
            if w.message_id is None or w.role is not Role.ASSISTANT or w.message_id == streaming:
                continue
            try:
                m = self.store.get_message(w.message_id)
            except KeyError:
                continue
            if not m.complete:
                w.set_can_continue(True, rule.why_not(m.meta))

    def _model_loaded(self, _ev: object) -> None:
        """A model loaded: the KV cache is new, so the panels show the chat's stored figures; a larger
        n_ctx may make a context-full reply continuable."""
        if not self.busy:
            self.shown.end_live_turn()
        self.refresh_continue()

    # ------------------------------------------------------------------ sending
    def messages_for_engine(self, before: int | None = None) -> tuple[ChatMessage, ...]:
        """The chat shown as the engine is sent it (up to ``before``); the loaded model's replies carry
        the tokens it sampled for them, so every turn's prompt holds them (:mod:`app.engine.kv_reuse`)."""
        assert self.conversation_id is not None
        model = self.engine.model
        tokens_of = model.info.path if model is not None and model.remote is None else None
        return tuple(self.store.chat_history(self.conversation_id, before=before, tokens_of=tokens_of))

    def messages_with_draft(self, draft: str) -> tuple[ChatMessage, ...]:
        """What Send would give the engine for ``draft``: the chat shown (or a new chat's system prompt), then ``draft``."""
        conv = self.conversation_id
        if conv is not None and not self.store.get_conversation(conv).deleted_at:
            history = self.messages_for_engine()
        else:
            system = self.chat_settings.current.system_prompt
            history = (ChatMessage(Role.SYSTEM, system),) if system else ()
        return (*history, ChatMessage(Role.USER, draft))

    def send(self, text: str, *, from_composer: bool = True) -> bool:
        """Append a message, ask for a reply; False if not sent (text kept). Not from_composer: a tool's result."""
        if self.busy:
            self._say_busy()
            return False
        if not self._engine_ready():
            return False
        if from_composer:
            self.composer.take_draft()  # sent: not a draft of the chat it is sent in, nor of the one it makes
        if self.conversation_id is not None and self.store.get_conversation(self.conversation_id).deleted_at:
            # The chat shown was deleted (Undo still possible): never write into the trash.
            self.shown.show(None, ())
            self.conversation_changed.emit(None)
        model = self.engine.model
        conv = self.conversation_id
        if conv is None:
            cs = self.chat_settings.current
            conv = self.store.create_conversation(
                system_prompt=cs.system_prompt,
                model_path=model.info.path if model else "",
                sampler=cs.sampler,
                stop_strings=cs.stop_strings,
                constraint=cs.constraint,
            )
            self.shown.show(conv, ())
            self.conversation_changed.emit(conv)
        path = self.store.active_path(conv)
        mid = self.store.add_message(conv, path[-1].id if path else None, Role.USER, text)
        self.view.add_message(Role.USER, text, tool_result_title(text), message_id=mid)
        self.conversations_changed.emit()
        return self._start_reply(parent_id=mid, sent_user=(mid, text))

    def regenerate(self, message_id: int) -> bool:
        """A new reply next to ``message_id`` (the old one stays as a branch); for a user
        message left without an answer (the last one), its reply."""
        if not self._may_start():
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
        if not self._may_start():
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

    def _may_start(self) -> bool:
        """A new reply can start now (none in flight, a model ready); otherwise the banner says why."""
        if self.busy:
            self._say_busy()
            return False
        return self._engine_ready()

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
        self.streaming.stop()

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
        """How the next reply of the chat shown is made (its provenance, before its figures)."""
        conv = self.conversation_id
        system_prompt = self.store.get_conversation(conv).system_prompt if conv else ""
        return new_reply_meta(
            self.engine.model, self.engine.ready_info, self.chat_settings.current, system_prompt, self.chat_template
        )

    def _start_reply(self, parent_id: int, sent_user: tuple[int, str] | None = None) -> bool:
        assert self.conversation_id is not None
        new_id = self.store.add_message(
            self.conversation_id, parent_id, Role.ASSISTANT, "", self._meta(), complete=False
        )
        return self._stream_into(new_id, continue_last=False, render=False, sent_user=sent_user)

    def _stream_into(
        self,
        message_id: int,
        *,
        continue_last: bool,
        prefix: str = "",
        render: bool = True,
        reply_prefix: tuple[int, ...] = (),
        alts_head: ReplyAlternatives | None = None,
        sent_user: tuple[int, str] | None = None,
    ) -> bool:
        """Ask the engine for the reply stored as ``message_id`` of the chat shown (see
        :meth:`ReplyStreaming.start`); False when it was not sent (the reply is marked "not sent")."""
        conv = self.conversation_id
        assert conv is not None
        if continue_last:
            messages = self.messages_for_engine()  # includes the partial reply, continued as is
            widget = self.view.widget_for(message_id)
            alts_head = self.store.alternatives(message_id)  # the earlier part's steps come first
        else:
            messages = self.messages_for_engine(before=message_id)
            widget = self.view.widget_for(message_id) if render else None
            if widget is None:
                widget = self._add_widget(self.store.get_message(message_id))
        assert widget is not None
        reply = ReplyInFlight(
            message_id, conv, self._look(self.store.get_message(message_id)), prefix, sent_user, alts_head
        )
        reply.attach(widget)
        rid = self.streaming.start(
            reply,
            messages,
            continued_settings(self.chat_settings.current, self.store.get_message(message_id).meta, continue_last),
            continue_last=continue_last,
            reply_prefix=reply_prefix,
            chat_template=self.chat_template,
            top_candidates=self.top_candidates,
            keep_logits=self.keep_logits,
        )
        return rid is not None

    def flush(self) -> None:
        """Write pending streamed text to disk (the window calls it every second)."""
        self.store.flush()

    def _show_repaired(self, conv: int) -> None:
        """Show chat ``conv`` as a turn-order repair left it (:attr:`repairs`)."""
        if conv != self.conversation_id:
            self.open_conversation(conv)
        self.render()
        self.conversations_changed.emit()

    def _answer(self, parent_id: int) -> None:
        """Ask for the reply to the chat shown's message ``parent_id`` when a model is ready (a repaired chat)."""
        if self._engine_ready():
            self._start_reply(parent_id=parent_id)

    # ------------------------------------------------------------------ alternatives
    def open_token_funnel(self, message_id: int, step: int) -> None:
        """Show token ``step`` of reply ``message_id`` in the Funnel panel (:attr:`funnel_step_requested`)."""
        target = self.alternatives.step_target(message_id, step)
        if target is not None:
            self.funnel_step_requested.emit(target)

    def branch_from_alternative(self, message_id: int, step: int, token: int) -> bool:
        """Continue reply ``message_id`` from token ``step`` with ``token`` instead: a new branch (‹ n/m ›) next
        to it, whose first ``step`` tokens are the reply's own (kept in the engine's KV cache: only ``token`` is
        evaluated). False when nothing was started (a reply in flight, no model, or no alternatives kept)."""
        if not self._may_start():
            return False
        model = self.engine.model
        alts, refusal = self.alternatives.branch_from(message_id, step, model.info.path if model else None)
        if alts is None:
            self.notice.emit(Severity.WARNING, refusal, NoticeTopic.GENERAL)
            return False
        reply_prefix, head = branch_start(alts, step, token)
        new_id = self.store.regenerate(message_id, self._meta())
        self.render()
        return self._stream_into(new_id, continue_last=False, reply_prefix=reply_prefix, alts_head=head)

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
            self.alternatives.show_tokens(message_id, bool(payload))
        elif action is MessageAction.TOKEN_FUNNEL:
            self.open_token_funnel(message_id, int(payload))  # type: ignore[call-overload]
        elif action is MessageAction.BRANCH_FROM and isinstance(payload, tuple):
            self.branch_from_alternative(message_id, int(payload[0]), int(payload[1]))
        elif action is MessageAction.BRANCH_STEP:
            sib = self.store.siblings(message_id)
            target = sib.previous_id if payload == -1 else sib.next_id
            if target is not None:
                self.switch_branch(target)
