"""The dismissible message above the chat, with optional action buttons: the view of
:class:`~app.ui.window.notices.Notices`, which decides what it says and about what.

The banner takes its own place in the page's column, above the chat (it pushes the chat down,
never covers it), and at most :data:`MAX_LINES` lines of it: a longer message is folded, with
**More** to unfold it (the base-model notice was seven lines in the Sampling lab's chat column at
1366x768, and pushed a short reply's action row out of the 189 px left to the chat). When it goes, the chat moves up into its place, so what was under the pointer
is suddenly a message's button: a :class:`ClickGuard` swallows the clicks on the place where it
was for :data:`GUARD_MS` (a click meant for the banner, made as it vanished, must not regenerate a
reply).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtCore import QElapsedTimer, QEvent, QObject, QPoint, QRect, Qt, QTimer
from PySide6.QtGui import QMouseEvent, QResizeEvent, QTextDocument
from PySide6.QtWidgets import QApplication, QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from app.ui.common.severity import Severity

QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's "no maximum" for a widget's size

# Milliseconds after a banner goes during which a click on the place it took does nothing: about a
# reaction time (a click already on its way when the banner vanished), short enough not to be felt.
GUARD_MS = 300
# Lines of a message shown before it is folded behind More: a sentence or two, so that the chat keeps
# most of a short column (the Sampling lab at 1366x768 leaves the chat about 340 px).
MAX_LINES = 3


class ClickGuard(QObject):
    """Swallows mouse presses (and the release of a press it swallowed) inside a screen rectangle for
    a while: an event filter on the application, installed only while armed.

    Attributes:
        rect: the guarded rectangle, in global (screen) coordinates.
        swallowed: how many presses it swallowed (since it was made).
    """

    _PRESSES = (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonDblClick)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.rect = QRect()
        self.swallowed = 0
        self._clock = QElapsedTimer()
        self._ms = 0
        self._eat_release = False
        self._installed = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.disarm)

    @property
    def armed(self) -> bool:
        """Whether presses in :attr:`rect` are swallowed now."""
        return self._installed and self._clock.isValid() and self._clock.elapsed() < self._ms

    def arm(self, rect: QRect, ms: int) -> None:
        """Swallow presses inside ``rect`` (global coordinates) for the next ``ms`` milliseconds."""
        app = QApplication.instance()
        if app is None or rect.isEmpty():
            return
        self.rect, self._ms = QRect(rect), ms
        self._clock.start()
        if not self._installed:
            app.installEventFilter(self)
            self._installed = True
        self._timer.start(ms)

    def disarm(self) -> None:
        """Swallow nothing from now on (the time is up, or a banner is shown again in the place guarded)."""
        self._timer.stop()
        app = QApplication.instance()
        if self._installed and app is not None:
            app.removeEventFilter(self)
        self._installed = self._eat_release = False

    def eventFilter(self, obj: QObject, e: QEvent) -> bool:
        kind = e.type()
        if kind == QEvent.Type.MouseButtonRelease and self._eat_release:
            self._eat_release = False
            return True
        if (
            kind in self._PRESSES
            and isinstance(e, QMouseEvent)
            and obj.isWidgetType()
            and self.armed
            and self.rect.contains(e.globalPosition().toPoint())
        ):
            self.swallowed += 1
            self._eat_release = True
            return True
        return False


class Banner(QFrame):
    """A dismissible message above the chat, with optional action buttons.

    Attributes:
        text: the message (rich text).
        severity: the message's severity (its colour, from the stylesheet's ``kind`` property).
        guard: swallows clicks on the place the banner took, for :data:`GUARD_MS` after it went.
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
        self.text.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)  # folded: its first lines
        lay.addWidget(self.text, 1)
        self.more = QToolButton()
        self.more.setObjectName("bannerMore")
        self.more.setCheckable(True)
        self.more.setText("More")
        self.more.setToolTip("Show the whole message")
        self.more.toggled.connect(self._unfold)
        self.more.hide()
        lay.addWidget(self.more)
        self._actions = QHBoxLayout()
        lay.addLayout(self._actions)
        close = QToolButton()
        close.setText("✕")
        close.setObjectName("bannerClose")
        close.clicked.connect(self.hide)
        lay.addWidget(close)
        self.severity = Severity.INFO
        self.guard = ClickGuard(self)
        self.hide()

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._fold()

    def _fold(self) -> None:
        """Fold the message to :data:`MAX_LINES` lines when it needs more at its width, More beside it.

        Whether it needs more is judged at the width the text has with More shown (hidden, More's
        width is taken off first), so showing More never makes the text fit again (no back and forth).
        """
        cap = self.folded_height()
        width = self.text.width()
        if not self.more.isVisible():
            lay = self.layout()
            width -= self.more.sizeHint().width() + (lay.spacing() if lay is not None else 0)
        folds = self.text.heightForWidth(max(1, width)) > cap + 2
        if folds != self.more.isVisible():
            self.more.setVisible(folds)
        self.text.setMaximumHeight(cap if folds and not self.more.isChecked() else QWIDGETSIZE_MAX)

    def folded_height(self) -> int:
        """The height of :data:`MAX_LINES` lines of the message's rich text, pixels (a rich text line is a
        pixel taller than the font's line spacing)."""
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self.text.font())
        doc.setHtml("<br>".join(["Ay"] * MAX_LINES))
        return math.ceil(doc.size().height())

    def _unfold(self, on: bool) -> None:
        """More (``on``) shows the whole message; Less folds it again."""
        self.more.setText("Less" if on else "More")
        self.more.setToolTip("Fold the message" if on else "Show the whole message")
        self._fold()

    def setVisible(self, visible: bool) -> None:
        """Hidden while on screen (:meth:`hide`, ✕, a notice cleared): the place it took is guarded
        for :data:`GUARD_MS` (moved to the other page with its page, it is not); shown again, the
        banner is what is there, and its buttons take clicks at once."""
        if not visible and self.isVisible():
            self.guard.arm(QRect(self.mapToGlobal(QPoint(0, 0)), self.size()), GUARD_MS)
        elif visible:
            self.guard.disarm()
        super().setVisible(visible)

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
        self.more.setChecked(False)  # a new message starts folded
        self._fold()
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
