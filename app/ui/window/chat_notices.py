"""What the notices say about chats.

- A reply being written in a chat that is not shown: where it is, with Show it / Stop
  (the chat list marks that chat).
- Undo for a deleted chat (its title shown as text, never as HTML) and for a deleted message.
- A chat made with another model than the loaded one: an offer to load that model.
- The chat controller's own notices (a refused message, a full context, a repair offered).

When the chat shown changes, the notices about the chat that was shown go (a message it could
not send among them: its text went back to that chat's draft).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

from app.core.conversations import ConversationStore, DeletedMessages
from app.ui.chat.controller import ChatController
from app.ui.chat.conversations import ConversationsPanel
from app.ui.chat.placeholder import display_name
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient, EngineState
from app.ui.window.chat_page import ChatPage
from app.ui.window.notices import Notices, NoticeTopic

# Notices about the chat shown: another chat shown makes them moot.
CHAT_TOPICS = (
    NoticeTopic.SYSTEM_PROMPT,
    NoticeTopic.CHAT_MODEL,
    NoticeTopic.CONTEXT,
    NoticeTopic.DELETED_MESSAGE,
    NoticeTopic.SEND,
)


class ChatNotices:
    """Posts and clears the notices about chats (see the module docstring).

    Args:
        page: the chat page (the chat shown, its commands).
        chats: the Chats list (it marks the chat a reply is written in).
        conversations: the stored chats (titles, Undo of a deletion).
        engine: the engine client (the loaded model; a new turn ends the Undo of a deleted message).
        notices: where it is said.
        load_model: loads a GGUF file (the chat's model, offered).
    """

    def __init__(
        self,
        page: ChatPage,
        chats: ConversationsPanel,
        conversations: ConversationStore,
        engine: EngineClient,
        notices: Notices,
        load_model: Callable[[str], object],
    ) -> None:
        self._page = page
        self._chat: ChatController = page.chat
        self._chats = chats
        self._conversations = conversations
        self._engine = engine
        self._notices = notices
        self._load_model = load_model
        chat = self._chat
        chat.notice.connect(lambda kind, text, topic: notices.show(topic, kind, text))
        chat.repair_offered.connect(lambda text, fixes: notices.show(NoticeTopic.GENERAL, Severity.ERROR, text, fixes))
        chat.reply_conversation_changed.connect(lambda _conv: self.show_reply_elsewhere())
        chat.message_deleted.connect(self.message_deleted)
        chat.conversation_changed.connect(self._conversation_changed)
        chats.deleted.connect(self.conversation_deleted)
        # A new turn changes the chat: undoing an earlier deletion would now reshuffle its branches.
        engine.generation_started.connect(lambda _rid: notices.clear(NoticeTopic.DELETED_MESSAGE))

    def show_reply_elsewhere(self) -> None:
        """While a reply is written in a chat that is not shown, the notice says where and the
        chat list marks that chat; otherwise that notice goes."""
        conv = self._chat.reply_conversation_id
        self._chats.set_replying(conv)
        if conv is None or conv == self._chat.conversation_id:
            self._notices.clear(NoticeTopic.REPLY)
            return
        title = html.escape(self._conversations.get_conversation(conv).title)
        self._notices.show(
            NoticeTopic.REPLY,
            Severity.INFO,
            f"A reply is being written in “{title}”; it goes on and is saved there. Esc stops it.",
            [("Show it", lambda: self._page.open_conversation(conv)), ("Stop", self._chat.stop)],
        )

    def conversation_deleted(self, conv_id: int, title: str) -> None:
        """A chat went to the trash: a reply being written in it stops (its text is kept with the
        chat, for Undo); if it was shown, a new chat is shown instead. The notice offers Undo."""
        chat = self._chat
        if chat.reply_conversation_id == conv_id:
            chat.stop()
        was_shown = chat.conversation_id == conv_id
        if was_shown:
            self._page.new_chat()

        def undo() -> None:
            self._conversations.undo_delete(conv_id)
            self._chats.refresh()
            self._notices.hide()
            # It was shown, and the person has not started another chat since: show it again.
            if was_shown and chat.conversation_id is None and self._page.draft_empty():
                self._page.open_conversation(conv_id)

        self._notices.show(NoticeTopic.GENERAL, Severity.INFO, f"Deleted “{html.escape(title)}”.", [("Undo", undo)])

    def message_deleted(self, deleted: DeletedMessages) -> None:
        """A message (and what followed it in its branch) was deleted: the notice offers Undo."""
        after = f" and the {deleted.count - 1} message(s) after it in that branch" if deleted.count > 1 else ""

        def undo() -> None:
            if self._chat.undo_delete_message(deleted):
                self._notices.hide()

        self._notices.show(NoticeTopic.DELETED_MESSAGE, Severity.INFO, f"Deleted the message{after}.", [("Undo", undo)])

    def _conversation_changed(self, conv_id: int | None) -> None:
        self.show_reply_elsewhere()
        self._notices.clear(*CHAT_TOPICS)  # about the chat that was shown
        if conv_id is None:
            return
        conv = self._conversations.get_conversation(conv_id)
        model = self._engine.model
        # Offer the chat's model when another one (or none) is in place; not while starting or
        # loading (start-up opens the last chat before it loads the last model).
        if (
            conv.model_path
            and (model is None or model.info.path != conv.model_path)
            and Path(conv.model_path).exists()
            and self._engine.state in (EngineState.READY, EngineState.NO_MODEL)
        ):
            name = display_name(conv.model_path)
            self._notices.show(
                NoticeTopic.CHAT_MODEL,
                Severity.INFO,
                f"This chat was made with {name}, which is not the loaded model.",
                [(f"Load {name}", lambda: self._load_model(conv.model_path))],
            )
