"""What the Stats and Timeline panels show for the chat shown when no reply is in flight.

Stats show the chat's last stored reply until a new turn starts, and nothing when it has none
(a deleted reply's figures are not left on screen); a model that loads has a new KV cache, so
the last turn's live figures give way to the stored ones too. The Timeline lists the chat's
replies, and the one in flight when it is written in this chat.
"""

from __future__ import annotations

from app.core.conversations import ConversationStore
from app.ui.chat.controller import ChatController
from app.ui.chat.turn import LiveTurn
from app.ui.engine.client import EngineClient
from app.ui.panels.timeline import TimelinePanel, reply_items
from app.ui.window.model_change import ModelChange, ModelPhase


class ShownReply:
    """Keeps the turn's stored figures and the Timeline's list on the chat shown.

    Args:
        chat: the chat controller (the chat shown, the chat a reply is written in).
        engine: the engine client (whether a reply is in flight).
        conversations: the stored chats (their replies' figures).
        turn: the turn the Stats panel reads.
        timeline: the Timeline panel.
    """

    def __init__(
        self,
        chat: ChatController,
        engine: EngineClient,
        conversations: ConversationStore,
        turn: LiveTurn,
        timeline: TimelinePanel,
    ) -> None:
        self._chat = chat
        self._engine = engine
        self._conversations = conversations
        self._turn = turn
        self._timeline = timeline
        chat.conversation_changed.connect(self._conversation_changed)
        chat.message_deleted.connect(lambda _deleted: self.show_last_reply_stats(chat.conversation_id))
        for sig in (chat.conversation_changed, chat.conversations_changed, engine.generation_started):
            sig.connect(lambda *_: self.list_timelines())

    def _conversation_changed(self, conv_id: int | None) -> None:
        if conv_id is not None:  # a new chat: the chat controller has reset the turn
            self.show_last_reply_stats(conv_id)

    def show_model(self, change: ModelChange) -> None:
        """A model loaded: the chat shown shows its last stored reply's figures, as when it is opened."""
        if change.phase is ModelPhase.LOADED:
            self.show_last_reply_stats(self._chat.conversation_id)

    def show_last_reply_stats(self, conv_id: int | None) -> None:
        """The Stats panel shows chat ``conv_id``'s last reply (stored) until a new turn starts;
        nothing when it has none. No change while a reply is in flight (the panels show it)."""
        if self._engine.generating:
            return
        replies = [] if conv_id is None else self._conversations.active_path(conv_id)
        stats = [m.meta.stats for m in replies if m.meta.stats is not None]
        if stats:
            self._turn.show_stored(stats[-1])
        else:
            self._turn.reset()

    def list_timelines(self) -> None:
        """The Timeline panel's replies: the shown chat's, and the one in flight when it is in this chat."""
        conv = self._chat.conversation_id
        live = self._engine.generating and self._chat.reply_conversation_id == conv
        path = [] if conv is None else self._conversations.active_path(conv)
        self._timeline.set_replies(reply_items(path, live), live)
