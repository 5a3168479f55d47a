"""Each chat's unsent text (its draft): the one owner of the drafts of the chats not shown, and
where a message that could not be sent goes back to.

The message box holds the draft of the chat shown; when another chat is shown, the box's text is
kept as the draft of the chat it was typed in and the box shows the other chat's own draft (a new
chat's draft is kept under ``None``). A message the engine refused (longer than the context, say)
goes back to the draft of the chat it was sent in, shown or not; a chat that message made, left
empty, is removed, and the text becomes the new chat's draft. Drafts live as long as the window
(they are not stored).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QTextCursor

from app.core.conversations import ConversationStore
from app.ui.chat.composer import Composer


class Drafts:
    """The drafts of the chats not shown, the box's text switched when the chat shown changes
    (:meth:`show_chat`), and a refused message's text given back (:meth:`sent_refused`).

    Args:
        composer: the message box (it holds the shown chat's draft).
        store: the stored chats (a chat a refused message made is removed from it).
        new_chat: shows a new chat (in place of a removed chat that was shown).

    Attributes:
        shown: the chat whose draft the box holds (None: a new chat).
    """

    def __init__(self, composer: Composer, store: ConversationStore, new_chat: Callable[[], None]) -> None:
        self._composer = composer
        self._store = store
        self._new_chat = new_chat
        self._kept: dict[int | None, str] = {}
        self.shown: int | None = None

    def draft_of(self, conv_id: int | None) -> str:
        """Chat ``conv_id``'s draft ("" when it has none): the box's text for the chat shown."""
        return self._composer.draft if conv_id == self.shown else self._kept.get(conv_id, "")

    def show_chat(self, conv_id: int | None) -> None:
        """Chat ``conv_id`` is shown now: the box's text is kept as the draft of the chat shown
        before, and the box shows ``conv_id``'s own draft (empty when it has none)."""
        if conv_id == self.shown:
            return
        self._keep(self.shown, self._composer.draft)
        self.shown = conv_id
        self._set_box(self._kept.pop(conv_id, ""))

    def sent_refused(self, conv_id: int, text: str) -> None:
        """The message ``text`` sent to chat ``conv_id`` could not be answered and was taken out of
        it: a chat left empty (the message made it) is removed, a new chat shown in its place when it
        was shown, and ``text`` goes back to the draft of the chat it was sent in (the new chat's when
        that one was removed), unless something else was typed there since."""
        target: int | None = conv_id
        if self._store.discard_if_empty(conv_id):
            target = None
            if conv_id == self.shown:
                # The box's text (typed since the send) stays, as the new chat's draft, after any it had.
                self.shown = None
                earlier, typed = self._kept.pop(None, ""), self._composer.draft
                if earlier.strip():
                    self._set_box(f"{earlier}\n\n{typed}" if typed.strip() else earlier)
                self._new_chat()
            elif (left := self._kept.pop(conv_id, "")) and not self._kept.get(None, "").strip():
                self._kept[None] = left
        if target == self.shown:
            self._composer.restore_draft(text)
        elif not self._kept.get(target, "").strip():
            self._kept[target] = text

    def _set_box(self, text: str) -> None:
        box = self._composer.box
        if box.toPlainText() != text:
            box.setPlainText(text)
            box.moveCursor(QTextCursor.MoveOperation.End)

    def _keep(self, conv_id: int | None, text: str) -> None:
        if text.strip():
            self._kept[conv_id] = text
        else:
            self._kept.pop(conv_id, None)
