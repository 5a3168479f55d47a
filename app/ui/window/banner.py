"""The dismissible message above the chat, with optional action buttons."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from app.ui.common.severity import Severity

log = logging.getLogger(__name__)


class BannerTopic(str, enum.Enum):
    """What a banner message is about, so a later event clears only its own kind of message."""

    GENERAL = "general"
    MODEL = "model"  # a model could not be loaded
    ENGINE = "engine"  # the engine stopped
    CHAT_MODEL = "chat-model"  # the chat was made with another model
    STARTUP = "startup"  # settings or history set aside at start
    NO_MODEL = "no-model"  # a message was refused because no model is loaded (yet)
    REPLY = "reply"  # a reply is being written (in another chat, or refused an action)
    MODELS_PAGE = "models-page"  # a notice from the models page (library, Hub, downloads)
    SYSTEM_PROMPT = "system-prompt"  # a chat's system prompt was edited (offer it for new chats)
    CONTEXT = "context"  # the context filled (a reply stopped at n_ctx, or old turns were dropped)
    DELETED_MESSAGE = "deleted-message"  # Undo of a message deletion, until the chat changes
    INTERNAL_ERROR = "internal-error"  # an unexpected error in the window (app/diagnostics.py), with its log


class Banner(QFrame):
    """A dismissible message above the chat, with optional action buttons.

    The text may hold chat titles and the person's words, so it is logged at DEBUG only;
    the severity and topic are logged at the severity's level.
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
        self.topic = BannerTopic.GENERAL
        self.severity = Severity.INFO
        self.hide()

    def clear(self, topic: BannerTopic) -> None:
        """Hide the banner if it shows a message about ``topic``."""
        if self.isVisible() and self.topic is BannerTopic(topic):
            self.hide()

    def show_message(
        self,
        severity: Severity,
        text: str,
        actions: list[tuple[str, Callable[[], object]]] | None = None,
        topic: BannerTopic = BannerTopic.GENERAL,
    ) -> None:
        """Show ``text`` (rich text) with a button per ``(label, callback)`` in ``actions``.

        ``topic`` lets a later event clear only its own kind of message (a new model load
        clears a load error, never a startup notice).
        """
        severity = Severity(severity)
        topic = BannerTopic(topic)
        log.log(severity.log_level, "banner shown: %s about %s", severity.value, topic.value)
        log.debug("banner text: %s", text)
        self.topic = topic
        self.severity = severity
        self.setProperty("kind", severity.value)
        self.style().unpolish(self)
        self.style().polish(self)
        self.text.setText(text)
        while self._actions.count():
            item = self._actions.takeAt(0)
            if item.widget():
                item.widget().hide()  # gone now, not at the next event loop turn
                item.widget().deleteLater()
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
            w = self._actions.itemAt(i).widget()
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
