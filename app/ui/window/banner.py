"""The dismissible message above the chat, with optional action buttons: the view of
:class:`~app.ui.window.notices.Notices`, which decides what it says and about what."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from app.ui.common.severity import Severity


class Banner(QFrame):
    """A dismissible message above the chat, with optional action buttons.

    Attributes:
        text: the message (rich text).
        severity: the message's severity (its colour, from the stylesheet's ``kind`` property).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(12, 8, 8, 8)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setObjectName("bannerText")
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.text, 1)
        self._actions = QHBoxLayout()
        lay.addLayout(self._actions)
        close = QToolButton()
        close.setText("✕")
        close.setObjectName("bannerClose")
        close.clicked.connect(self.hide)
        lay.addWidget(close)
        self.severity = Severity.INFO
        self.hide()

    def show_message(
        self,
        severity: Severity,
        text: str,
        actions: list[tuple[str, Callable[[], object]]] | None = None,
    ) -> None:
        """Show ``text`` (rich text) with a button per ``(label, callback)`` in ``actions``
        (posted through :class:`~app.ui.window.notices.Notices`, which logs it)."""
        severity = Severity(severity)
        self.severity = severity
        self.setProperty("kind", severity.value)
        self.style().unpolish(self)
        self.style().polish(self)
        self.text.setText(text)
        while self._actions.count():
            item = self._actions.takeAt(0)
            old = item.widget() if item is not None else None
            if old is not None:
                old.hide()  # gone now, not at the next event loop turn
                old.deleteLater()
        for label, fn in actions or []:
            b = QPushButton(label)
            b.setObjectName("bannerButton")
            b.clicked.connect(fn)
            self._actions.addWidget(b)
            b.show()  # a banner already on screen shows a new child only when told to
        self.show()

    def action_buttons(self) -> list[tuple[str, QPushButton]]:
        """The action buttons shown now, as ``(label, button)`` in order."""
        buttons = []
        for i in range(self._actions.count()):
            item = self._actions.itemAt(i)
            w = item.widget() if item is not None else None
            if isinstance(w, QPushButton):
                buttons.append((w.text(), w))
        return buttons

    def trigger(self, label: str) -> None:
        """Press the action button labelled ``label``.

        Raises:
            KeyError: no action button has that label.
        """
        for text, button in self.action_buttons():
            if text == label:
                button.click()
                return
        raise KeyError(label)
