"""The conversation on screen: a column of message widgets in a scroll area that follows
the newest text, with a placeholder while it is empty."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.core.chat import Role
from app.ui.chat.message import CodeBlock, MessageAction, MessageWidget, discard
from app.ui.common.highlight import highlight_html

__all__ = ["ChatView", "CodeBlock", "MessageAction", "MessageWidget"]


class _Column(QWidget):
    """The scroll area's content: its size hint is its height at the viewport's width.

    QScrollArea asks a height-for-width layout for the height at the *size hint's*
    width; word-wrapped labels hint a narrow width, so the column came out twice as
    tall as its messages and the view scrolled into blank space. Answering with the
    viewport's width makes the column exactly as tall as what it shows.
    """

    def __init__(self, area: QScrollArea) -> None:
        super().__init__()
        self._area = area

    def sizeHint(self) -> QSize:
        lay = self.layout()
        w = self._area.viewport().width()
        if lay is not None and lay.hasHeightForWidth() and w > 0:
            return QSize(w, lay.heightForWidth(w))
        return super().sizeHint()

    def minimumSizeHint(self) -> QSize:
        # The children's minimum heights are measured at their narrowest width (far too
        # tall for word-wrapped text): the minimum height is the one at the viewport's
        # width, and the width may shrink (the window must stay resizable).
        return QSize(200, self.sizeHint().height())


class ChatView(QScrollArea):
    """The conversation: a column of :class:`MessageWidget` that follows the newest text.

    Signals:
        action_requested(object, int, object): a message's :class:`MessageAction` (see :class:`MessageWidget`).
        link_activated(str): a link in the placeholder was clicked (``open``, ``models``).
    """

    action_requested = Signal(object, int, object)
    link_activated = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._inner = _Column(self)
        self._inner.setObjectName("chatInner")
        self._col = QVBoxLayout(self._inner)
        self._col.setContentsMargins(24, 16, 24, 16)
        self._col.setSpacing(12)
        self.placeholder = QLabel()
        self.placeholder.setObjectName("chatPlaceholder")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setOpenExternalLinks(False)
        self.placeholder.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.placeholder.linkActivated.connect(self.link_activated)
        self._col.addWidget(self.placeholder)
        self._col.addStretch(1)
        self.setWidget(self._inner)
        self.messages: list[MessageWidget] = []
        self._highlighted: list[tuple[QLabel, str]] = []  # labels showing search matches, their own HTML
        # A search match to keep in view while the chat just opened settles (layout passes move it).
        self._scroll_target: QWidget | None = None
        self._target_timer = QTimer(self)
        self._target_timer.setSingleShot(True)
        self._target_timer.setInterval(600)
        self._target_timer.timeout.connect(lambda: setattr(self, "_scroll_target", None))
        self._follow = True
        self.verticalScrollBar().rangeChanged.connect(self._on_range)
        self.verticalScrollBar().valueChanged.connect(self._on_scroll)
        self.set_placeholder("")

    def set_placeholder(self, html: str) -> None:
        self.placeholder.setText(html)
        self.placeholder.setVisible(bool(html) and not self.messages)

    def add_message(
        self, role: Role | str, text: str = "", title: str = "", message_id: int | None = None
    ) -> MessageWidget:
        w = MessageWidget(role, text, title, message_id)
        w.action_requested.connect(self.action_requested)
        self._col.insertWidget(self._col.count() - 1, w)
        self.messages.append(w)
        self.placeholder.hide()
        self._follow = True
        return w

    def widget_for(self, message_id: int) -> MessageWidget | None:
        return next((w for w in self.messages if w.message_id == message_id), None)

    def remove_widget(self, w: MessageWidget | None) -> None:
        if w is not None and w in self.messages:
            self.messages.remove(w)
            discard(w)
        self.placeholder.setVisible(bool(self.placeholder.text()) and not self.messages)

    def scroll_to_message(self, message_id: int) -> None:
        w = self.widget_for(message_id)
        if w is not None:
            self._follow = False
            QTimer.singleShot(0, lambda: self.ensureWidgetVisible(w, 0, 40))

    def highlight_message(self, message_id: int, terms: list[str]) -> int:
        """Mark ``terms`` (search words, case-insensitive) in message ``message_id`` and scroll
        to its first match (to the message when none is shown). The previous marks are
        removed first; a message's next repaint with new text drops its marks.

        Returns:
            How many matches were marked (0 when the message is not shown).
        """
        self.clear_highlight()
        w = self.widget_for(message_id)
        if w is None:
            return 0
        labels = [w.body] if isinstance(w.body, QLabel) else w.body.findChildren(QLabel)
        total = 0
        first: QLabel | None = None
        for label in labels:
            original = label.text()
            marked, n = highlight_html(original, terms)
            if n:
                self._highlighted.append((label, original))
                label.setText(marked)
                total += n
                first = first or label
        self._follow = False
        self._scroll_target = first or w
        self._target_timer.start()
        QTimer.singleShot(0, self._scroll_to_target)
        return total

    def clear_highlight(self) -> None:
        """Remove the search marks (labels whose text changed since keep their new text)."""
        for label, original in self._highlighted:
            try:
                if label.text().count("background-color") > original.count("background-color"):
                    label.setText(original)
            except RuntimeError:  # the label was deleted with its message
                pass
        self._highlighted = []

    def _scroll_to_target(self) -> None:
        """Bring the search match into view (again after each layout change while the chat
        just opened is still being laid out, see ``_target_timer``)."""
        target = self._scroll_target
        if target is None:
            return
        try:
            self.ensureWidgetVisible(target, 0, max(40, self.viewport().height() // 3))
        except RuntimeError:  # deleted meanwhile (the chat was closed)
            self._scroll_target = None

    def clear(self) -> None:
        self.clear_highlight()
        for w in self.messages:
            discard(w)
        self.messages = []
        self.placeholder.setVisible(bool(self.placeholder.text()))

    def refresh(self) -> None:
        """Render pending text of every message (called by the window's repaint clock)."""
        for w in reversed(self.messages[-2:]):
            w.refresh()

    def _on_range(self, _min: int, maximum: int) -> None:
        if self._scroll_target is not None:
            self._scroll_to_target()
        elif self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _on_scroll(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4
