"""What the window's banner says about chats, and where it sits.

- A reply being written in a chat that is not shown: where it is, with Show it / Stop
  (the chat list marks that chat).
- Undo for a deleted chat (its title shown as text, never as HTML) and for a deleted message.
- A chat's system prompt edited: it applies to that chat only, unless the person asks
  for it to be the default of new chats too.
- The banner sits on the page shown (chat or models), under that page's bar, so a message
  shows where its action was; a message that belongs to the other page is cleared.

Functions of the :class:`~app.ui.window.main_window.MainWindow` they are given (as ``menus.py``).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QVBoxLayout

from app.core.conversations import DeletedMessages
from app.ui.common.severity import Severity
from app.ui.window.banner import BannerTopic
from app.ui.window.top_bar import Page

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow

# Banner topics that belong to one page: switching to the other page clears them.
PAGE_TOPICS: dict[BannerTopic, Page] = {
    BannerTopic.MODELS_PAGE: Page.MODELS,
    BannerTopic.CHAT_MODEL: Page.CHAT,
    BannerTopic.REPLY: Page.CHAT,
    BannerTopic.SYSTEM_PROMPT: Page.CHAT,
    BannerTopic.NO_MODEL: Page.CHAT,
    BannerTopic.CONTEXT: Page.CHAT,
}


def place_banner(w: MainWindow, page: Page) -> None:
    """Put the banner on ``page`` (under its bar); a message that belongs to the other page goes."""
    owner = PAGE_TOPICS.get(w.banner.topic)
    if owner is not None and owner is not page:
        w.banner.hide()
    under = w.system_bar if page is Page.CHAT else w.models_bar
    column = under.parentWidget().layout()  # the page's column (the models page sits in a scroll area)
    if isinstance(column, QVBoxLayout) and column.indexOf(w.banner) < 0:
        parent = w.banner.parentWidget()
        visible = parent is not None and w.banner.isVisibleTo(parent)
        column.insertWidget(column.indexOf(under) + 1, w.banner)
        w.banner.setVisible(visible)


def show_reply_elsewhere(w: MainWindow) -> None:
    """While a reply is written in a chat that is not shown, the banner says where and the
    chat list marks that chat; otherwise that banner goes."""
    conv = w.chat.reply_conversation_id
    w.chats_panel.set_replying(conv)
    if conv is None or conv == w.chat.conversation_id:
        w.banner.clear(BannerTopic.REPLY)
        return
    title = html.escape(w.conversations.get_conversation(conv).title)
    w.banner.show_message(
        Severity.INFO,
        f"A reply is being written in “{title}”; it goes on and is saved there. Esc stops it.",
        [("Show it", lambda: w.open_conversation(conv)), ("Stop", w.chat.stop)],
        topic=BannerTopic.REPLY,
    )


def conversation_deleted(w: MainWindow, conv_id: int, title: str) -> None:
    """A chat went to the trash: a reply being written in it stops (its text is kept with the
    chat, for Undo); if it was shown, a new chat is shown instead. The banner offers Undo."""
    if w.chat.reply_conversation_id == conv_id:
        w.chat.stop()
    was_shown = w.chat.conversation_id == conv_id
    if was_shown:
        w.new_chat()

    def undo() -> None:
        w.conversations.undo_delete(conv_id)
        w.chats_panel.refresh()
        w.banner.hide()
        # It was shown, and the person has not started another chat since: show it again.
        if was_shown and w.chat.conversation_id is None and not w.composer.box.toPlainText().strip():
            w.open_conversation(conv_id)

    w.banner.show_message(Severity.INFO, f"Deleted “{html.escape(title)}”.", [("Undo", undo)])


def message_deleted(w: MainWindow, deleted: DeletedMessages) -> None:
    """A message (and what followed it in its branch) was deleted: the banner offers Undo."""
    after = f" and the {deleted.count - 1} message(s) after it in that branch" if deleted.count > 1 else ""

    def undo() -> None:
        if w.chat.undo_delete_message(deleted):
            w.banner.hide()

    w.banner.show_message(
        Severity.INFO, f"Deleted the message{after}.", [("Undo", undo)], topic=BannerTopic.DELETED_MESSAGE
    )


def system_prompt_edited(w: MainWindow, text: str) -> None:
    """The person edited the system prompt: it applies to the chat shown (or the new chat about
    to start: :class:`~app.ui.chat.chat_settings.ChatSettingsController`), never silently to every
    new chat; the banner offers "Use for new chats too"."""
    if text == w.settings.system_prompt:
        w.banner.clear(BannerTopic.SYSTEM_PROMPT)
    elif not (w.banner.isVisible() and w.banner.topic is BannerTopic.SYSTEM_PROMPT):
        w.banner.show_message(
            Severity.INFO,
            "This system prompt applies to this chat only; new chats start with the default one.",
            [("Use for new chats too", lambda: use_system_prompt_for_new_chats(w))],
            topic=BannerTopic.SYSTEM_PROMPT,
        )


def use_system_prompt_for_new_chats(w: MainWindow) -> None:
    """Make the system prompt shown the default of every new chat."""
    w.chat_settings.use_system_prompt_for_new_chats()
    w.banner.clear(BannerTopic.SYSTEM_PROMPT)
