"""The chat area: message widgets in a scroll area, and the prompt box."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase, QGuiApplication, QKeyEvent, QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.chat.markdown import TEXT_CSS, Segment, StreamingDocument, plain_to_html


def _rich_label(html: str, obj_name: str = "msgText") -> QLabel:
    label = QLabel()
    label.setObjectName(obj_name)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
    label.setOpenExternalLinks(False)
    label.linkActivated.connect(lambda url: QDesktopServices.openUrl(url))
    label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
    label.setText(html)
    return label


class CodeBlock(QFrame):
    """A highlighted code block with its language and a Copy button."""

    def __init__(self, seg: Segment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeBlock")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        head = QFrame()
        head.setObjectName("codeHeader")
        hl = QHBoxLayout(head)
        hl.setContentsMargins(10, 3, 4, 3)
        self.lang = QLabel(seg.language or "text")
        self.lang.setObjectName("codeLang")
        self.copy_btn = QToolButton()
        self.copy_btn.setText("Copy")
        self.copy_btn.setObjectName("codeCopy")
        self.copy_btn.clicked.connect(self._copy)
        hl.addWidget(self.lang)
        hl.addStretch(1)
        hl.addWidget(self.copy_btn)
        lay.addWidget(head)
        self.body = QLabel()
        self.body.setObjectName("codeBody")
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.scroll = QScrollArea()
        self.scroll.setObjectName("codeScroll")
        self.scroll.setWidget(self.body)
        self.scroll.setWidgetResizable(True)
        self.scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        lay.addWidget(self.scroll)
        self.code = ""
        self.set_segment(seg)

    def set_segment(self, seg: Segment) -> None:
        self.code = seg.code
        self.lang.setText(seg.language or "text")
        self.body.setText(seg.html)
        self.body.adjustSize()
        bar = self.scroll.horizontalScrollBar().sizeHint().height()
        self.scroll.setFixedHeight(self.body.sizeHint().height() + bar + 4)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_btn.setText("Copied")
        QTimer.singleShot(1200, lambda: self.copy_btn.setText("Copy"))


def _discard(w: QWidget) -> None:
    """Take a widget out of its layout now and free it on the next event-loop turn."""
    w.hide()
    w.setParent(None)
    w.deleteLater()


class MarkdownView(QWidget):
    """A reply rendered as segment widgets; while streaming only the last ones change."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._lay.setSpacing(6)
        self._doc = StreamingDocument()
        self._final_widgets: list[QWidget] = []
        self._tail_widgets: list[QWidget] = []
        self._tail_kinds: list[str] = []
        self.source = ""

    def set_markdown(self, source: str) -> None:
        """Show ``source`` (the whole reply so far); cost depends on the unfinished tail only."""
        if source == self.source:
            return
        if not source.startswith(self.source):
            self._clear()
        self.source = source
        newly, tail = self._doc.update(source)
        if newly:
            for w in self._tail_widgets:
                _discard(w)
            self._tail_widgets, self._tail_kinds = [], []
            for seg in newly:
                w = self._make(seg)
                self._lay.addWidget(w)
                self._final_widgets.append(w)
        if [s.kind for s in tail] == self._tail_kinds:
            for w, seg in zip(self._tail_widgets, tail):
                self._update(w, seg)
        else:
            for w in self._tail_widgets:
                _discard(w)
            self._tail_widgets = []
            for seg in tail:
                w = self._make(seg)
                self._lay.addWidget(w)
                self._tail_widgets.append(w)
            self._tail_kinds = [s.kind for s in tail]

    def _clear(self) -> None:
        for w in self._final_widgets + self._tail_widgets:
            _discard(w)
        self._final_widgets, self._tail_widgets, self._tail_kinds = [], [], []
        self._doc = StreamingDocument()
        self.source = ""

    @staticmethod
    def _make(seg: Segment) -> QWidget:
        if seg.kind == "code":
            return CodeBlock(seg)
        return _rich_label(f"<style>{TEXT_CSS}</style>{seg.html}")

    @staticmethod
    def _update(w: QWidget, seg: Segment) -> None:
        if isinstance(w, CodeBlock):
            w.set_segment(seg)
        elif isinstance(w, QLabel):
            w.setText(f"<style>{TEXT_CSS}</style>{seg.html}")


class MessageWidget(QFrame):
    """One chat message: header with actions, body, and (for replies) a stats footer.

    Signals:
        action_requested(str, int, object): ``(action, message_id, payload)`` with action one of
            ``edit`` (payload: new text), ``regenerate``, ``continue``, ``delete``,
            ``branch_step`` (payload: -1 or +1).
    """

    action_requested = Signal(str, int, object)

    def __init__(
        self, role: str, text: str = "", title: str = "", message_id: int | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.role = role
        self.message_id = message_id
        self.setObjectName("userMessage" if role == "user" else "assistantMessage")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 14, 10)
        lay.setSpacing(6)
        head = QHBoxLayout()
        head.setSpacing(4)
        self.title = QLabel(title or ("You" if role == "user" else "Assistant"))
        self.title.setObjectName("msgRole")
        head.addWidget(self.title)
        self.badge = QLabel("")
        self.badge.setObjectName("msgBadge")
        self.badge.hide()
        head.addWidget(self.badge)
        head.addStretch(1)
        self.prev_btn = self._action_button("‹", "Previous version", lambda: self._emit("branch_step", -1))
        self.branch_label = QLabel("")
        self.branch_label.setObjectName("branchLabel")
        self.next_btn = self._action_button("›", "Next version", lambda: self._emit("branch_step", 1))
        for w in (self.prev_btn, self.branch_label, self.next_btn):
            head.addWidget(w)
            w.hide()
        self.info_btn = self._action_button("Details", "")
        self.info_btn.hide()
        head.addWidget(self.info_btn)
        self.copy_btn = self._action_button("Copy", "Copy this message's text", self._copy)
        head.addWidget(self.copy_btn)
        self.edit_btn = self._action_button("Edit", "Edit (the current version stays as a branch)", self._start_edit)
        head.addWidget(self.edit_btn)
        self.regen_btn = self._action_button(
            "Regenerate", "A new reply; this one stays as a branch", lambda: self._emit("regenerate")
        )
        self.continue_btn = self._action_button(
            "Continue", "Continue this reply where it stopped", lambda: self._emit("continue")
        )
        self.continue_btn.hide()
        if role == "assistant":
            head.addWidget(self.continue_btn)
            head.addWidget(self.regen_btn)
        else:
            self.regen_btn.hide()
        self.delete_btn = self._action_button(
            "✕", "Delete this message and what follows it in this branch", lambda: self._emit("delete")
        )
        head.addWidget(self.delete_btn)
        if message_id is None:
            for b in (self.edit_btn, self.regen_btn, self.delete_btn):
                b.hide()
        lay.addLayout(head)
        if role == "user":
            self.body: QWidget = _rich_label(plain_to_html(text), "userText")
        else:
            self.body = MarkdownView()
            if text:
                self.body.set_markdown(text)
        lay.addWidget(self.body)
        self.editor: QPlainTextEdit | None = None
        self._edit_bar: QWidget | None = None
        self.footer = QLabel("")
        self.footer.setObjectName("msgFooter")
        self.footer.setWordWrap(True)
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.footer.hide()
        lay.addWidget(self.footer)
        self._text = text
        self._shown = text

    def _action_button(self, text: str, tip: str, slot=None) -> QToolButton:
        b = QToolButton()
        b.setObjectName("msgAction")
        b.setText(text)
        b.setToolTip(tip)
        b.setCursor(Qt.CursorShape.PointingHandCursor)
        if slot is not None:
            b.clicked.connect(slot)
        return b

    def _emit(self, action: str, payload: object = None) -> None:
        if self.message_id is not None:
            self.action_requested.emit(action, self.message_id, payload)

    @property
    def text(self) -> str:
        return self._text

    def set_text(self, text: str) -> None:
        """Set the message's text; the view catches up on :meth:`refresh` (the repaint clock)."""
        self._text = text

    def refresh(self) -> bool:
        """Render pending text. Returns True if anything changed."""
        if self._shown == self._text:
            return False
        self._shown = self._text
        if isinstance(self.body, MarkdownView):
            self.body.set_markdown(self._text)
        else:
            self.body.setText(plain_to_html(self._text))
        return True

    def set_footer(self, text: str) -> None:
        self.footer.setText(text)
        self.footer.setVisible(bool(text))

    def set_badge(self, text: str, kind: str = "") -> None:
        """A small label next to the title (``stopped``, ``context full``...)."""
        self.badge.setText(text)
        self.badge.setProperty("kind", kind)
        self.badge.style().unpolish(self.badge)
        self.badge.style().polish(self.badge)
        self.badge.setVisible(bool(text))

    def set_branch(self, position: int, count: int) -> None:
        """Show "‹ 2/3 ›" when this message has other versions."""
        show = count > 1
        self.branch_label.setText(f"{position}/{count}")
        for w in (self.prev_btn, self.branch_label, self.next_btn):
            w.setVisible(show)
        self.prev_btn.setEnabled(position > 1)
        self.next_btn.setEnabled(position < count)

    def set_how_made(self, text: str) -> None:
        """The Details tooltip: model, quant, sampler settings, seed, measurements."""
        self.info_btn.setToolTip(text)
        self.info_btn.setVisible(bool(text))

    def set_streaming(self, on: bool) -> None:
        """Hide the actions that make no sense while this reply is being written."""
        for b in (self.edit_btn, self.regen_btn, self.delete_btn):
            b.setVisible(
                not on and self.message_id is not None and (b is not self.regen_btn or self.role == "assistant")
            )

    def set_can_continue(self, on: bool) -> None:
        self.continue_btn.setVisible(on and self.role == "assistant" and self.message_id is not None)

    def _start_edit(self) -> None:
        if self.editor is not None:
            return
        self.editor = QPlainTextEdit(self._text)
        self.editor.setObjectName("editBox")
        self.editor.setMinimumHeight(80)
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        cancel = QPushButton("Cancel")
        save = QPushButton("Save and send" if self.role == "user" else "Save")
        save.setObjectName("sendButton")
        cancel.clicked.connect(self._end_edit)
        save.clicked.connect(self._save_edit)
        row.addWidget(cancel)
        row.addWidget(save)
        self._edit_bar = bar
        lay = self.layout()
        idx = lay.indexOf(self.body)
        self.body.hide()
        lay.insertWidget(idx + 1, self.editor)
        lay.insertWidget(idx + 2, bar)
        self.editor.setFocus()

    def _save_edit(self) -> None:
        if self.editor is None:
            return
        text = self.editor.toPlainText()
        self._end_edit()
        if text.strip() and text != self._text:
            self._emit("edit", text)

    def _end_edit(self) -> None:
        for w in (self.editor, self._edit_bar):
            if w is not None:
                w.deleteLater()
        self.editor = None
        self._edit_bar = None
        self.body.show()

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self._text)


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
        action_requested(str, int, object): a message's action (see :class:`MessageWidget`).
        link_activated(str): a link in the placeholder was clicked (``open``, ``models``).
    """

    action_requested = Signal(str, int, object)
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
        self._follow = True
        self.verticalScrollBar().rangeChanged.connect(self._on_range)
        self.verticalScrollBar().valueChanged.connect(self._on_scroll)
        self.set_placeholder("")

    def set_placeholder(self, html: str) -> None:
        self.placeholder.setText(html)
        self.placeholder.setVisible(bool(html) and not self.messages)

    def add_message(self, role: str, text: str = "", title: str = "", message_id: int | None = None) -> MessageWidget:
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
            _discard(w)
        self.placeholder.setVisible(bool(self.placeholder.text()) and not self.messages)

    def scroll_to_message(self, message_id: int) -> None:
        w = self.widget_for(message_id)
        if w is not None:
            self._follow = False
            QTimer.singleShot(0, lambda: self.ensureWidgetVisible(w, 0, 40))

    def clear(self) -> None:
        for w in self.messages:
            _discard(w)
        self.messages = []
        self.placeholder.setVisible(bool(self.placeholder.text()))

    def refresh(self) -> None:
        """Render pending text of every message (called by the window's repaint clock)."""
        for w in reversed(self.messages[-2:]):
            w.refresh()

    def _on_range(self, _min: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _on_scroll(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 4


class PromptBox(QPlainTextEdit):
    """The message box: Enter sends, Shift+Enter adds a line, Esc stops.

    Signals:
        submitted(str): Enter with text.
        stop_requested(): Esc.
    """

    submitted = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptBox")
        self.setPlaceholderText("Message the model — Enter to send, Shift+Enter for a new line, Esc to stop")
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


class SystemPromptBar(QFrame):
    """The conversation's system prompt above the chat: a one-line preview that opens into an editor.

    Signals:
        changed(str): the text was edited.
    """

    changed = Signal(str)

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("systemBar")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 6, 16, 6)
        lay.setSpacing(4)
        row = QHBoxLayout()
        title = QLabel("System prompt")
        title.setObjectName("systemTitle")
        row.addWidget(title)
        self.preview = QLabel()
        self.preview.setObjectName("systemPreview")
        self.preview.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row.addWidget(self.preview, 1)
        self.toggle = QToolButton()
        self.toggle.setObjectName("msgAction")
        self.toggle.setText("Edit")
        self.toggle.setCheckable(True)
        self.toggle.toggled.connect(self._toggled)
        row.addWidget(self.toggle)
        lay.addLayout(row)
        self.editor = QPlainTextEdit()
        self.editor.setObjectName("systemPrompt")
        self.editor.setPlaceholderText("Instructions the model sees before the conversation (optional)")
        self.editor.setFixedHeight(72)
        self.editor.hide()
        lay.addWidget(self.editor)
        self.editor.setPlainText(text)
        self.editor.textChanged.connect(self._edited)
        self._update_preview()

    def text(self) -> str:
        return self.editor.toPlainText()

    def set_text(self, text: str) -> None:
        self.editor.setPlainText(text)

    def _toggled(self, on: bool) -> None:
        self.editor.setVisible(on)
        self.toggle.setText("Done" if on else "Edit")
        if on:
            self.editor.setFocus()

    def _edited(self) -> None:
        self._update_preview()
        self.changed.emit(self.text())

    def _update_preview(self) -> None:
        t = " ".join(self.text().split())
        self.preview.setText(t if t else "none")
        self.preview.setToolTip(self.text())


class Composer(QFrame):
    """The prompt box with its Send / Stop button.

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
