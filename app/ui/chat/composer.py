"""The prompt box, its Send / Stop button and the draft's token count."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QRectF, Qt, Signal
from PySide6.QtGui import QFontMetricsF, QKeyEvent, QResizeEvent, QShowEvent, QTextCursor, QTextOption
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QPlainTextEdit, QPushButton, QWidget

from app.ui.common.elided_label import ElidedLabel
from app.ui.common.severity import Severity

# The box's placeholder, the longest that fits on one line: a narrow window (800x500) drops the keys'
# hint before the box grows a line (its second line was cut mid-glyph).
PLACEHOLDERS = (
    "Message the model (Enter sends, Shift+Enter: new line)",
    "Message the model (Enter sends)",
    "Message the model",
)


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
        self.setPlaceholderText(PLACEHOLDERS[0])
        self.setAccessibleDescription(PLACEHOLDERS[0])
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        # After the layout: wrapped lines are counted, and a width change that re-wraps refits too.
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)
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

    def _fit_height(self, *_args: object) -> None:
        """As tall as the text's lines (wrapped lines counted), 1 to 8, so no scroll bar shows under 8.
        QPlainTextEdit lays each line out ceil(line spacing) px tall; the document's margin and the box's
        frame and padding (its contents margins, known once the style sheet is applied) come on top."""
        self._choose_placeholder()
        lines = max(1, min(8, max(int(self.document().size().height()), self.placeholder_lines())))
        line_h = math.ceil(QFontMetricsF(self.document().defaultFont()).lineSpacing())
        m = self.contentsMargins()
        doc = 2 * self.document().documentMargin()
        self.setFixedHeight(int(lines * line_h + doc + m.top() + m.bottom() + 1))

    def _text_width(self) -> float:
        """The width the placeholder wraps to, px: the viewport less the document's margin (as
        QPlainTextEdit paints it)."""
        return self.viewport().width() - self.document().documentMargin()

    def _choose_placeholder(self) -> None:
        """The longest of :data:`PLACEHOLDERS` that fits the box on one line (else the shortest)."""
        fm = QFontMetricsF(self.document().defaultFont())
        width = self._text_width()
        text = next((t for t in PLACEHOLDERS if fm.horizontalAdvance(t) <= width - 2), PLACEHOLDERS[-1])
        if text != self.placeholderText():
            self.setPlaceholderText(text)

    def placeholder_lines(self) -> int:
        """The lines the placeholder takes, wrapped at words as Qt paints it, when the box is empty
        (else 1): a narrow box (800x500) grows to show it whole rather than cutting its second line."""
        text = self.placeholderText()
        if not text or not self.document().isEmpty():
            return 1
        fm = QFontMetricsF(self.document().defaultFont())
        width = self._text_width()
        if width <= 0:
            return 1
        rect = fm.boundingRect(QRectF(0, 0, width, 1e6), int(Qt.TextFlag.TextWordWrap), text)
        return max(1, math.ceil(rect.height() / fm.lineSpacing() - 0.01))

    def changeEvent(self, e: QEvent) -> None:
        super().changeEvent(e)
        if e.type() in (QEvent.Type.StyleChange, QEvent.Type.FontChange):
            self._fit_height()  # the style sheet's padding and font arrive after __init__

    def showEvent(self, e: QShowEvent) -> None:
        super().showEvent(e)
        self._fit_height()  # polished now: the style sheet's margins are known

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        if e.size().width() != e.oldSize().width():
            self._fit_height()  # re-wrapped

    def event(self, e: QEvent) -> bool:
        # Esc must reach keyPressEvent even when a shortcut would take it.
        if e.type() == QEvent.Type.ShortcutOverride and isinstance(e, QKeyEvent) and e.key() == Qt.Key.Key_Escape:
            e.accept()
            return True
        return super().event(e)


class Composer(QFrame):
    """The prompt box with its Send / Stop button, and under the box a line for the draft's token
    count (:class:`app.ui.chat.draft_counter.DraftCounter` writes it: :meth:`set_count`).

    The button shows Stop while a reply is in flight; it does not decide that itself:
    :meth:`set_generating` follows the engine client's ``generation_started`` /
    ``generation_ended`` (wired by the chat controller). What the chat does with the draft:
    :meth:`take_draft` (it was sent), :meth:`restore_draft` (it could not be answered); the
    composer takes the focus for its box.

    Signals:
        submitted(str), stop_requested(): as :class:`PromptBox`, also from the button.
    """

    submitted = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        lay = QGridLayout(self)
        lay.setContentsMargins(10, 8, 10, 2)
        lay.setHorizontalSpacing(8)
        lay.setVerticalSpacing(1)
        self.box = PromptBox()
        self.button = QPushButton("Send")
        self.button.setObjectName("sendButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.count = ElidedLabel("", min_chars=4)
        self.count.setObjectName("draftCount")
        self.count.setAccessibleName("Tokens in the message")
        self.count.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        # One line always (no jump when the first character is typed); a long count ends in "…".
        self.count.setFixedHeight(self.count.fontMetrics().height())
        lay.addWidget(self.box, 0, 0)
        lay.addWidget(self.button, 0, 1, Qt.AlignmentFlag.AlignBottom)
        self._footer = QHBoxLayout()
        self._footer.setContentsMargins(0, 0, 0, 0)
        self._footer.addWidget(self.count, 1)
        lay.addLayout(self._footer, 1, 0, 1, 2)
        lay.setColumnStretch(0, 1)
        self.box.submitted.connect(self._submit)
        self.box.stop_requested.connect(self.stop_requested)
        self.button.clicked.connect(self._clicked)
        self.setFocusProxy(self.box)
        self._generating = False
        self._held = ""  # why Send is held ("" when it is not): set_held

    def add_to_footer(self, widget: QWidget) -> None:
        """Put ``widget`` on the line under the box, right of the draft's count (the output format's chip)."""
        self._footer.addWidget(widget, 0, Qt.AlignmentFlag.AlignVCenter)

    @property
    def draft(self) -> str:
        """The text in the box."""
        return self.box.toPlainText()

    def take_draft(self) -> str:
        """The text in the box, which is emptied (it was sent)."""
        text = self.box.toPlainText()
        self.box.clear()
        return text

    def restore_draft(self, text: str) -> None:
        """Give ``text`` back in the box (a message that could not be answered), unless the person
        has typed something else since; typing on adds to its end."""
        if self.box.toPlainText().strip():
            return
        self.box.setPlainText(text)
        self.box.moveCursor(QTextCursor.MoveOperation.End)

    def set_generating(self, on: bool) -> None:
        self._generating = on
        self.button.setText("Stop" if on else "Send")
        self.button.setProperty("stop", on)
        self.button.style().unpolish(self.button)
        self.button.style().polish(self.button)

    def set_held(self, reason: str) -> None:
        """Hold Send while the engine cannot reply (a depth sweep): disabled, ``reason`` as its tooltip,
        Enter keeps the text in the box; "" releases it. Stop is never held."""
        self._held = reason
        self.button.setEnabled(not reason or self._generating)
        self.button.setToolTip(reason)

    def _submit(self, text: str) -> None:
        if not self._held:  # held: the text stays in the box (whoever holds Send says why)
            self.submitted.emit(text)

    def set_count(self, text: str, tooltip: str = "", severity: Severity = Severity.INFO) -> None:
        """Show the draft's count (empty: none); ``severity`` colours it (warning: over n_ctx)."""
        self.count.setText(text)
        self.count.setToolTip(tooltip)
        if self.count.property("kind") != severity.value:
            self.count.setProperty("kind", severity.value)
            self.count.style().unpolish(self.count)
            self.count.style().polish(self.count)

    def _clicked(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            text = self.box.toPlainText()
            if text.strip():
                self.submitted.emit(text)
