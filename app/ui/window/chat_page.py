"""Which chat the chat page shows: a new one, one from the Chats list (a search hit scrolled to),
the next or previous one, an imported one; exporting the chat shown; the chat template dialog.

The Chats list follows the chat shown; a model that loads re-decides the replies' Continue.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QWidget

from app.core.conversations import ConversationStore
from app.ui.chat.composer import Composer
from app.ui.chat.controller import ChatController
from app.ui.chat.conversations import ConversationsPanel
from app.ui.chat.export import ExportFormat
from app.ui.chat.view import ChatView
from app.ui.common.highlight import search_terms
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.panels.template import TemplateDialog
from app.ui.window.file_dialogs import FileDialogs
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.pages import Page, Pages
from app.ui.window.settings_controller import SettingsController


class ChatPage:
    """The chat page's commands and what follows the chat shown.

    Args:
        chat: the chat controller (the chat shown, its replies).
        view: the chat's messages (a search hit is marked in them).
        composer: the message box (focused when the chat page comes to the front).
        chats: the Chats list, and ``chats_dock`` the dock it sits in.
        conversations: the stored chats (their order, for next / previous).
        pages: the window's pages.
        notices: where "that chat no longer exists" and export / import outcomes are said.
        files: the file dialogs (export, import).
    """

    def __init__(
        self,
        chat: ChatController,
        view: ChatView,
        composer: Composer,
        chats: ConversationsPanel,
        chats_dock: QDockWidget,
        conversations: ConversationStore,
        pages: Pages,
        notices: Notices,
        files: FileDialogs,
    ) -> None:
        self.chat = chat
        self._view = view
        self._composer = composer
        self._chats = chats
        self._chats_dock = chats_dock
        self._conversations = conversations
        self._pages = pages
        self._notices = notices
        self._files = files
        chats.open_requested.connect(self.open_conversation)
        chats.new_requested.connect(self.new_chat)
        chats.export_requested.connect(self.export_conversation)
        chat.conversations_changed.connect(chats.refresh)
        chat.conversation_changed.connect(chats.set_current)
        pages.page_shown.connect(lambda page: page is Page.CHAT and composer.box.setFocus())

    def new_chat(self) -> None:
        """Show a new, empty chat. During a reply the reply goes on in its own chat (the banner
        says where, with Show it / Stop)."""
        self.chat.new_chat()
        self._composer.box.setFocus()

    def open_conversation(self, conv_id: int, focus_message: int | None = None) -> None:
        """Show chat ``conv_id`` (allowed during a reply: the reply goes on in its own chat); with
        ``focus_message`` (a search hit) scroll to that message and mark the words searched for in it."""
        try:
            self.chat.open_conversation(conv_id, focus_message)
        except KeyError:
            self._notices.show(NoticeTopic.GENERAL, Severity.WARNING, "That chat no longer exists.")
            self._chats.refresh()
            self._chats.set_current(self.chat.conversation_id)
            return
        if self._pages.current is not Page.CHAT:
            self._pages.show_page(Page.CHAT)  # a chat chosen from the list while the Models page is shown
        terms = search_terms(self._chats.search.text())
        if focus_message is not None and terms:
            self._view.highlight_message(focus_message, terms)

    def step_chat(self, step: int) -> None:
        """Open the next (``step`` 1, older) or previous (-1, newer) chat in the Chats list's
        order (Ctrl+PgDown / Ctrl+PgUp); from a new chat, the first or the last."""
        ids = [c.id for c in self._conversations.list_conversations()]
        if not ids:
            return
        cur = self.chat.conversation_id
        i = ids.index(cur) + step if cur in ids else (0 if step > 0 else len(ids) - 1)
        if 0 <= i < len(ids):
            self.open_conversation(ids[i])
            self._composer.box.setFocus()

    def focus_chat_search(self) -> None:
        """Show the Chats panel and put the cursor in its search box (Ctrl+K / Ctrl+F)."""
        self._pages.show_page(Page.CHAT)
        self._chats_dock.show()
        self._chats_dock.raise_()
        self._chats.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self._chats.search.selectAll()

    def draft_empty(self) -> bool:
        """Nothing but spaces in the message box."""
        return not self._composer.box.toPlainText().strip()

    def export_conversation(self, conv_id: int | None, fmt: ExportFormat | str) -> None:
        """Ask where to write chat ``conv_id`` as ``fmt`` and write it; the banner says how it went."""
        if conv_id is None:
            self._notices.show(NoticeTopic.GENERAL, Severity.INFO, "There is no chat to export yet.")
            return
        outcome = self._files.export_conversation(conv_id, ExportFormat(fmt))
        if outcome is not None:
            self._notices.show(NoticeTopic.GENERAL, outcome.severity, outcome.text)

    def export_shown(self, fmt: ExportFormat) -> None:
        """Export the chat shown as ``fmt`` (File → Export)."""
        self.export_conversation(self.chat.conversation_id, fmt)

    def import_conversation(self) -> None:
        """Ask for chat exports (Glassbox's or other apps'), import them and open the newest."""
        outcome = self._files.import_conversation()
        if outcome is None:
            return
        if outcome.conv_id is not None:
            self._chats.refresh()
            self.open_conversation(outcome.conv_id)
        self._notices.show(NoticeTopic.GENERAL, outcome.severity, outcome.text)

    def show_model(self, change: ModelChange) -> None:
        """A model loaded: a larger n_ctx may make a context-full reply continuable; the message box
        takes the focus."""
        if change.phase is ModelPhase.LOADED:
            self.chat.refresh_continue()
            self._composer.box.setFocus()


def open_template(
    parent: QWidget, engine: EngineClient, settings: SettingsController, chat: ChatController, notices: Notices
) -> TemplateDialog | None:
    """Open the chat template and the prompt the model sees, with the per-model override (a
    dialog, returned); None with no model loaded (the banner says so)."""
    if engine.model is None:
        notices.show(NoticeTopic.GENERAL, Severity.INFO, "Load a model to see its chat template and prompt.")
        return None
    dialog = TemplateDialog(
        engine, settings, lambda: chat.messages_for_engine() if chat.conversation_id else (), parent
    )
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.resize(min(1200, parent.width() - 80), min(700, parent.height() - 80))
    dialog.show()
    return dialog
