"""The conversation's system prompt above the chat."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)


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
