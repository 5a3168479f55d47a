"""The "Output format" dialog: a chat's output constraint chosen, written, checked and kept.

The kind (free text, any JSON object, a JSON schema, a GBNF grammar), an editor for the schema or
grammar, **Check** (the engine converts the schema with llama-cpp-python's converter and parses the
grammar with llama.cpp's grammar parser: :meth:`~app.ui.engine.client.EngineClient.check_constraint`;
the error's line is named and marked in the editor), and **OK**, which checks first and keeps the
format only when it passes. With no model loaded, the schema's plain check runs here
(:func:`app.core.constraint.schema_check.schema_problem`) and the grammar is parsed with the first reply.
"""

from __future__ import annotations

import contextlib
import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QResizeEvent, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.constraint.schema_check import schema_problem
from app.ui.common import palette
from app.ui.engine.client import EngineClient

#: The kinds in the order offered, with their names.
KINDS: tuple[tuple[ConstraintKind, str], ...] = (
    (ConstraintKind.NONE, "Free text (no constraint)"),
    (ConstraintKind.JSON, "JSON (any object)"),
    (ConstraintKind.JSON_SCHEMA, "JSON schema"),
    (ConstraintKind.GBNF, "GBNF grammar"),
)
HELP: dict[ConstraintKind, str] = {
    ConstraintKind.NONE: "Replies are free text.",
    ConstraintKind.JSON: "Every reply is one JSON object: llama.cpp's JSON grammar allows only tokens that keep it valid.",
    ConstraintKind.JSON_SCHEMA: (
        "Every reply is JSON that follows this schema, converted to a grammar by llama-cpp-python's converter. "
        "Enforced: type, properties, required, additionalProperties, items, prefixItems, min/maxItems, enum, "
        "const, anyOf, oneOf, allOf, local $ref, pattern (^…$), min/maxLength, format (date, time, date-time, "
        "uuid). Refused, as the converter would ignore them: minimum, maximum, patternProperties, not, if…"
    ),
    ConstraintKind.GBNF: (
        "Every reply matches this grammar (llama.cpp's GBNF, grammars/README.md), from the rule 'root'. "
        "When the grammar is complete only an end token is allowed: the reply stops."
    ),
}
EXAMPLES: dict[ConstraintKind, str] = {
    ConstraintKind.JSON_SCHEMA: (
        '{\n  "type": "object",\n  "properties": {\n    "answer": {"type": "string"},\n'
        '    "confidence": {"type": "string", "enum": ["low", "medium", "high"]}\n  },\n'
        '  "required": ["answer", "confidence"]\n}\n'
    ),
    ConstraintKind.GBNF: 'root ::= answer "."\nanswer ::= "yes" | "no"\n',
}
_LINE_RE = re.compile(r"\bline (\d+)")


class OutputFormatDialog(QDialog):
    """Choose a chat's output format (see the module docstring).

    Args:
        engine: checks the format (:meth:`EngineClient.check_constraint`, :attr:`EngineClient.constraint_checked`).
        current: the chat's format now.

    After ``exec()`` returns Accepted, :attr:`chosen` is the format to keep.
    """

    def __init__(self, engine: EngineClient, current: OutputConstraint, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("outputFormatDialog")
        self.setWindowTitle("Output format")
        self.engine = engine
        self.chosen = current
        self._rid: int | None = None  # the check waiting for the engine
        self._accept_when_ok = False  # OK was pressed: keep the format when the check passes
        self._texts: dict[ConstraintKind, str] = {current.kind: current.text}
        lay = self._lay = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Replies in this chat:"))
        self.kind = QComboBox()
        for kind, name in KINDS:
            self.kind.addItem(name, kind)
        row.addWidget(self.kind, 1)
        self.example = QPushButton("Example")
        self.example.setToolTip("Put an example in the editor")
        row.addWidget(self.example)
        lay.addLayout(row)
        self.help = QLabel()
        self.help.setObjectName("detailLabel")
        self.help.setWordWrap(True)
        lay.addWidget(self.help)
        self.editor = QPlainTextEdit()
        self.editor.setObjectName("formatEditor")
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.editor.setFont(mono)
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.editor.setMinimumSize(520, 220)
        lay.addWidget(self.editor, 1)
        self.verdict = QLabel("")
        self.verdict.setObjectName("formatResult")
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.verdict)
        buttons = QHBoxLayout()
        self.check_button = QPushButton("Check")
        self.check_button.setToolTip("Convert and parse it with the loaded model's llama.cpp, as a reply would")
        self.ok_button = QPushButton("OK")
        self.ok_button.setDefault(True)
        cancel = QPushButton("Cancel")
        buttons.addWidget(self.check_button)
        buttons.addStretch(1)
        buttons.addWidget(self.ok_button)
        buttons.addWidget(cancel)
        lay.addLayout(buttons)
        self.kind.setCurrentIndex([k for k, _ in KINDS].index(current.kind))
        self._kind_changed()
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.editor.textChanged.connect(self._edited)
        self.example.clicked.connect(self._fill_example)
        self.check_button.clicked.connect(self.check)
        self.ok_button.clicked.connect(self._ok)
        cancel.clicked.connect(self.reject)
        engine.constraint_checked.connect(self._checked)

    # ------------------------------------------------------------------ state
    def constraint(self) -> OutputConstraint:
        """The format as the dialog shows it now."""
        kind: ConstraintKind = self.kind.currentData()
        has_text = kind in (ConstraintKind.JSON_SCHEMA, ConstraintKind.GBNF)
        return OutputConstraint(kind, self.editor.toPlainText() if has_text else "")

    def _kind_changed(self) -> None:
        kind: ConstraintKind = self.kind.currentData()
        has_text = kind in (ConstraintKind.JSON_SCHEMA, ConstraintKind.GBNF)
        self.editor.blockSignals(True)
        self.editor.setPlainText(self._texts.get(kind, ""))
        self.editor.blockSignals(False)
        self.editor.setEnabled(has_text)
        self.editor.setPlaceholderText(EXAMPLES.get(kind, ""))
        self.example.setEnabled(has_text)
        self.check_button.setEnabled(kind != ConstraintKind.NONE)
        self.help.setText(HELP[kind])
        self._say("", ok=True)
        self._fit()

    def _edited(self) -> None:
        self._texts[self.kind.currentData()] = self.editor.toPlainText()
        self._rid = None  # an answer for the old text is not this text's
        self._say("", ok=True)

    def _fill_example(self) -> None:
        self.editor.setPlainText(EXAMPLES.get(self.kind.currentData(), ""))

    # ------------------------------------------------------------------ checking
    def check(self) -> None:
        """Check the format shown: here first (a schema's plain check), then in the engine when a model is loaded."""
        c = self.constraint()
        local = self._local_problem(c)
        if local:
            self._accept_when_ok = False
            self._say(local, ok=False)
            return
        rid = self.engine.check_constraint(c) if c.kind != ConstraintKind.NONE else None
        if rid is None:
            self._say_unchecked(c)
            if self._accept_when_ok:
                self._keep(c)
            return
        self._rid = rid
        self._say("Checking…", ok=True)

    @staticmethod
    def _local_problem(c: OutputConstraint) -> str:
        if c.kind in (ConstraintKind.JSON_SCHEMA, ConstraintKind.GBNF) and not c.text.strip():
            return "Write the schema or grammar first (Example puts one in)."
        if c.kind == ConstraintKind.JSON_SCHEMA:
            problem = schema_problem(c.text)
            if problem:
                return problem[0].upper() + problem[1:]
        return ""

    def _say_unchecked(self, c: OutputConstraint) -> None:
        if c.kind == ConstraintKind.NONE:
            self._say("", ok=True)
        elif self.engine.model is None:
            self._say(
                "No model is loaded: the schema was checked here; llama.cpp parses it with the first reply.", ok=True
            )
        else:
            self._say("This engine cannot check it here; it is checked with the first reply.", ok=True)

    def _checked(self, ev: object) -> None:
        if not isinstance(ev, P.ConstraintChecked | P.Failed) or ev.request_id != self._rid:
            return
        self._rid = None
        if isinstance(ev, P.Failed):
            self._accept_when_ok = False
            message = ev.message
            if self.kind.currentData() == ConstraintKind.JSON_SCHEMA and message.startswith("The grammar "):
                # The converter's grammar, not the schema: its lines are not the editor's.
                message = f"The grammar made from this schema cannot be used (llama.cpp: {message})"
            self._say(message, ok=False)
            return
        rules = f"{ev.n_rules} grammar rule{'s' if ev.n_rules != 1 else ''}"
        self._say(f"✓ It can be used ({rules} for llama.cpp's grammar sampler).", ok=True)
        if self._accept_when_ok:
            self._keep(self.constraint())

    def _say(self, text: str, *, ok: bool) -> None:
        """Show ``text`` under the editor (green when ``ok``, red otherwise); a named line is marked in the editor."""
        self.verdict.setText(text)
        self.verdict.setStyleSheet(f"color: {palette.GREEN if ok else palette.RED}")
        marks: list[QTextEdit.ExtraSelection] = []
        # A line named is the editor's: a grammar's, or a schema's JSON error (never the generated grammar's).
        editors = self.kind.currentData() == ConstraintKind.GBNF or text.startswith("The JSON schema is not valid JSON")
        m = _LINE_RE.search(text) if not ok and editors else None
        if m:
            block = self.editor.document().findBlockByNumber(int(m.group(1)) - 1)
            if block.isValid():
                sel = QTextEdit.ExtraSelection()
                sel.format.setBackground(QColor(palette.RED).darker(260))
                sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
                sel.cursor = QTextCursor(block)
                marks.append(sel)
                cursor = QTextCursor(block)
                self.editor.setTextCursor(cursor)
                self.editor.ensureCursorVisible()
        self.editor.setExtraSelections(marks)
        self._fit()

    # ------------------------------------------------------------------ layout
    def _needed_height(self, width: int) -> int:
        """The least height, pixels, that shows everything at ``width`` without overlap: the wrapped labels
        at their height for that width (a layout's minimum leaves them out), the rest at their minimum."""
        lay = self._lay
        m = lay.contentsMargins()
        inner = max(1, width - m.left() - m.right())
        heights = []
        for i in range(lay.count()):
            item = lay.itemAt(i)
            if item is None:
                continue
            w = item.widget()
            if isinstance(w, QLabel) and w.wordWrap():
                if w.text():
                    heights.append(w.heightForWidth(inner))
            elif not item.isEmpty():
                heights.append(item.minimumSize().height())
        return m.top() + m.bottom() + sum(heights) + lay.spacing() * max(0, len(heights) - 1)

    def _fit(self) -> None:
        """Keep the dialog at least as tall as its text needs (help and verdict grow with their text)."""
        need = self._needed_height(self.width())
        self.setMinimumHeight(need)
        if self.height() < need:
            self.resize(self.width(), need)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """A new width wraps the labels again: the least height follows."""
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._fit()

    # ------------------------------------------------------------------ closing
    def _ok(self) -> None:
        """Check first; keep the format when it passes (free text is kept at once)."""
        c = self.constraint()
        if c.kind == ConstraintKind.NONE:
            self._keep(c)
            return
        self._accept_when_ok = True
        self.check()

    def _keep(self, c: OutputConstraint) -> None:
        self.chosen = c
        self._accept_when_ok = False
        self.accept()

    def done(self, result: int) -> None:
        with contextlib.suppress(RuntimeError, TypeError):  # already disconnected
            self.engine.constraint_checked.disconnect(self._checked)
        super().done(result)
