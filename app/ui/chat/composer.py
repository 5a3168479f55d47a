"""The prompt box and its Send / Stop button."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent, QTextOption
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPlainTextEdit, QPushButton, QWidget


class PromptBox(QPlainTextEdit):
    """The message box: Enter sends, Shift+Enter adds a line, Esc stops, Tab moves the focus on.

    Signals:
        submitted(str): Enter with text.
        stop_requested(): Esc.
    """

    submitted = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptBox")
        self.setAccessibleName("Message to the model")
        # Tab moves the focus on (Shift+Tab back), as in a form: keyboard users can leave the
        # box. A literal tab is pasted, not typed (code pasted with tabs keeps them).
        self.setTabChangesFocus(True)
        self.setPlaceholderText("Message the model (Enter sends, Shift+Enter: new line)")
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.document().contentsChanged.connect(self._fit_height)
        self._fit_height()

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (e.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            text = self.toPlainText()
            if text.strip():
                self.submitted.emit(text)
            return
        if e.key() == Qt.Key.Key_Escape:
            self.stop_requested.emit()
            return
        super().keyPressEvent(e)

    def _fit_height(self) -> None:
        lines = max(1, min(8, int(self.document().size().height())))
        fm = self.fontMetrics()
        self.setFixedHeight(lines * fm.lineSpacing() + 18)

    def event(self, e: QEvent) -> bool:
        # Esc must reach keyPressEvent even when a shortcut would take it.
        if e.type() == QEvent.Type.ShortcutOverride and isinstance(e, QKeyEvent) and e.key() == Qt.Key.Key_Escape:
            e.accept()
            return True
        return super().event(e)


class Composer(QFrame):
    """The prompt box with its Send / Stop button.

    The button shows Stop while a reply is in flight; it does not decide that itself:
    :meth:`set_generating` follows the engine client's ``generation_started`` /
    ``generation_ended`` (wired by the chat controller).

    Signals:
        submitted(str), stop_requested(): as :class:`PromptBox`, also from the button.
    """

    submitted = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(8)
        self.box = PromptBox()
        self.button = QPushButton("Send")
        self.button.setObjectName("sendButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        lay.addWidget(self.box, 1)
        lay.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        self.box.submitted.connect(self.submitted)
        self.box.stop_requested.connect(self.stop_requested)
        self.button.clicked.connect(self._clicked)
        self._generating = False

    def set_generating(self, on: bool) -> None:
        self._generating = on
        self.button.setText("Stop" if on else "Send")
        self.button.setProperty("stop", on)
        self.button.style().unpolish(self.button)
        self.button.style().polish(self.button)

    def _clicked(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            text = self.box.toPlainText()
            if text.strip():
                self.submitted.emit(text)
