"""Chats panel: the conversation list (newest first), search across all messages,
rename, delete with undo, export."""

from __future__ import annotations

import html
import time

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.conversations import ConversationStore
from app.ui.chat.chat_item import ROLE_MATCH, ChatItemDelegate
from app.ui.chat.export import ExportFormat
from app.ui.common.fmt import ago

ROLE_ID = Qt.ItemDataRole.UserRole
ROLE_MESSAGE = Qt.ItemDataRole.UserRole + 1


class ConversationsPanel(QWidget):
    """Signals:
    open_requested(int, object): show conversation ``id`` (and scroll to a message id, or None).
    new_requested(): start a new chat.
    deleted(int, str): a conversation was deleted (id, title) — the window offers Undo.
    export_requested(int, object): export conversation ``id`` in an :class:`ExportFormat`.
    """

    open_requested = Signal(int, object)  # (chat id, message id | None)
    new_requested = Signal()
    deleted = Signal(int, str)
    export_requested = Signal(int, object)  # (chat id, ExportFormat)

    def __init__(self, store: ConversationStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conversationsPanel")
        self.store = store
        self.current_id: int | None = None
        self.replying_id: int | None = None  # the chat a reply is being written in
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.setSpacing(6)
        top = QHBoxLayout()
        self.search = QLineEdit()
        self.search.setObjectName("chatSearch")
        self.search.setAccessibleName("Search all chats")
        self.search.setPlaceholderText("Search all chats…")
        self.search.setClearButtonEnabled(True)
        top.addWidget(self.search, 1)
        new = QPushButton("+ New")
        new.setObjectName("presetButton")
        new.setToolTip("New chat (Ctrl+N)")
        new.clicked.connect(self.new_requested)
        top.addWidget(new)
        lay.addLayout(top)
        self.list = QListWidget()
        self.list.setObjectName("chatList")
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.itemActivated.connect(self._activated)
        self.list.itemClicked.connect(self._activated)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setItemDelegate(ChatItemDelegate(self.list))  # title and second line, each elided on its own
        lay.addWidget(self.list, 1)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(200)
        self._search_timer.timeout.connect(self.refresh)
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self.search.returnPressed.connect(self._open_first)  # Enter opens the first hit (or chat)
        self.search.installEventFilter(self)  # Down moves into the list
        self.refresh()

    def set_current(self, conv_id: int | None) -> None:
        """Select chat ``conv_id`` in the list (None: no chat is selected: a new chat is shown)."""
        self.current_id = conv_id
        self.refresh()

    def set_replying(self, conv_id: int | None) -> None:
        """Mark chat ``conv_id`` as having a reply being written (None: no reply in flight)."""
        if conv_id != self.replying_id:
            self.replying_id = conv_id
            self.refresh()

    def refresh(self) -> None:
        """Rebuild the list: conversations, or search hits while the search box has text."""
        if self.store.closed:  # the search box's debounce timer fired after the window closed the history
            return
        self.list.clear()
        query = self.search.text().strip()
        if query:
            hits = self.store.search(query, limit=100)
            if not hits:
                item = QListWidgetItem(f"No chat title or message contains “{query}”.")
                item.setFlags(Qt.ItemFlag.NoItemFlags)
                self.list.addItem(item)
            for h in hits:
                where = f"{'title' if h.role is None else h.role.value}: "
                item = QListWidgetItem(f"{h.conversation_title}\n{where}{h.snippet}")
                item.setData(ROLE_ID, h.conversation_id)
                item.setData(ROLE_MESSAGE, h.message_id)
                if h.highlights:  # the second line is shown from the match when it would fall past the width
                    item.setData(ROLE_MATCH, len(where) + h.highlights[0][0])
                item.setToolTip(html.escape(h.snippet))
                self.list.addItem(item)
            return
        now = time.time()
        # PySide6's stubs omit None here; Qt takes a null item (no current item).
        self.list.setCurrentItem(None)  # type: ignore[call-overload]
        for c in self.store.list_conversations():
            when = "● writing a reply…" if c.id == self.replying_id else ago(c.updated_at, now)
            item = QListWidgetItem(f"{c.title}\n{when}")
            item.setData(ROLE_ID, c.id)
            item.setToolTip(html.escape(c.title))  # the whole title where the list cuts it
            self.list.addItem(item)
            if c.id == self.current_id:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        if self.list.count() == 0:
            item = QListWidgetItem("No chats yet.")
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.list.addItem(item)

    def eventFilter(self, obj: QObject, e: QEvent) -> bool:
        if obj is self.search and e.type() == QEvent.Type.KeyPress and e.key() == Qt.Key.Key_Down:  # type: ignore[attr-defined]
            first = self._first_openable()
            if first is not None:
                self.list.setFocus()
                self.list.setCurrentItem(first)
                return True
        return super().eventFilter(obj, e)

    def _first_openable(self) -> QListWidgetItem | None:
        if self._search_timer.isActive():  # the list is about to show the hits of what was typed
            self._search_timer.stop()
            self.refresh()
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(ROLE_ID) is not None:
                return item
        return None

    def _open_first(self) -> None:
        first = self._first_openable()
        if first is not None:
            self.list.setCurrentItem(first)
            self._activated(first)

    def _activated(self, item: QListWidgetItem) -> None:
        cid = item.data(ROLE_ID)
        if cid is not None:
            self.open_requested.emit(int(cid), item.data(ROLE_MESSAGE))

    def _menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None or item.data(ROLE_ID) is None:
            return
        cid = int(item.data(ROLE_ID))
        m = QMenu(self)
        m.addAction("Rename…", lambda: self.rename(cid))
        m.addAction("Export as Markdown…", lambda: self.export_requested.emit(cid, ExportFormat.MARKDOWN))
        m.addAction("Export as JSON (all branches)…", lambda: self.export_requested.emit(cid, ExportFormat.JSON))
        m.addSeparator()
        m.addAction("Delete", lambda: self.delete(cid))
        m.exec(self.list.viewport().mapToGlobal(pos))

    def rename(self, conv_id: int) -> None:
        conv = self.store.get_conversation(conv_id)
        dlg = QInputDialog(self)
        dlg.setWindowTitle("Rename chat")
        dlg.setLabelText("Title:")
        dlg.setTextValue(conv.title)
        dlg.resize(460, dlg.sizeHint().height())
        if dlg.exec():
            self.store.rename(conv_id, dlg.textValue())
            self.refresh()

    def delete(self, conv_id: int) -> None:
        title = self.store.get_conversation(conv_id).title
        self.store.delete_conversation(conv_id)
        self.refresh()
        self.deleted.emit(conv_id, title)
