"""``ToolCallDialog``: before a tool runs, the person sees the exact call (server, tool, arguments as the
model wrote them, and indented to read) and allows or denies it (LM Studio asks the same way). Window-modal, never blocking:
:attr:`ToolCallDialog.decided` says the answer."""

from __future__ import annotations

import html
import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.tools.spec import ToolCall
from app.mcp.values import McpTool


def pretty_arguments(arguments: str) -> str:
    """A call's arguments as indented JSON (as written when they are not JSON)."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def _text_box(text: str, name: str) -> QPlainTextEdit:
    box = QPlainTextEdit(text)
    box.setReadOnly(True)
    box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    box.setAccessibleName(name)
    return box


class ToolCallDialog(QDialog):
    """Allow or deny one tool call.

    Args:
        call: the call as the model wrote it.
        tool: the MCP tool it names (its server and description).

    Signals:
        decided(bool): True when the person allowed the call (Deny, Esc or closing: False); once.

    Attributes:
        arguments: the exact arguments, character for character as the model wrote them (read-only,
            selectable; the first tab).
        indented: the same arguments indented (JSON), in the second tab; None when that would be the
            same text (or they are not JSON).
        allow_button, deny_button: the answers (Deny is the default).
    """

    decided = Signal(bool)

    def __init__(self, call: ToolCall, tool: McpTool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Allow this tool call?")
        self.setObjectName("toolCallDialog")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self._answered = False
        lay = QVBoxLayout(self)
        head = QLabel(
            f"The model asks to run <b>{html.escape(tool.name)}</b> on the MCP server "
            f"<b>{html.escape(tool.server)}</b> with these arguments:"
        )
        head.setWordWrap(True)
        lay.addWidget(head)
        self.arguments = _text_box(call.arguments, "The call's arguments, exactly as the model wrote them")
        pretty = pretty_arguments(call.arguments)
        self.indented = _text_box(pretty, "The call's arguments, indented") if pretty != call.arguments else None
        if self.indented is None:
            lay.addWidget(self.arguments, 1)
        else:
            self.arguments.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
            tabs = QTabWidget()
            tabs.addTab(self.arguments, "As written")
            tabs.addTab(self.indented, "Indented")
            tabs.setTabToolTip(0, "The arguments character for character as the model wrote them: what the tool gets")
            tabs.setTabToolTip(1, "The same arguments, indented to read")
            lay.addWidget(tabs, 1)
        if tool.description:
            about = QLabel(f"What it does, in the server's words: {html.escape(tool.description)}")
            about.setWordWrap(True)
            lay.addWidget(about)
        buttons = QDialogButtonBox()
        self.allow_button = QPushButton("&Allow")
        self.deny_button = QPushButton("&Deny")
        buttons.addButton(self.allow_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.deny_button, QDialogButtonBox.ButtonRole.RejectRole)
        self.deny_button.setDefault(True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.finished.connect(self._answer)
        self.resize(560, 300)

    def _answer(self, result: int) -> None:
        if not self._answered:
            self._answered = True
            self.decided.emit(result == QDialog.DialogCode.Accepted)
