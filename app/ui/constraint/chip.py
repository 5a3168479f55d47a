"""The output format's place under the composer: a quiet "Output format…" button while the chat has
none, a chip naming it ("JSON schema") while one is on; either opens the dialog."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton, QWidget

from app.core.constraint.model import ConstraintKind, OutputConstraint

#: What the chip says for each kind.
CHIP_TEXT: dict[ConstraintKind, str] = {
    ConstraintKind.JSON: "JSON",
    ConstraintKind.JSON_SCHEMA: "JSON schema",
    ConstraintKind.GBNF: "GBNF grammar",
}
OFF_TEXT = "Output format…"
TOOLTIP_CHARS = 400  # the schema or grammar shown in the chip's tooltip, at most


class FormatChip(QToolButton):
    """The button under the composer (see the module docstring); ``clicked`` opens the dialog."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAccessibleName("Output format")
        self.show_constraint(OutputConstraint())

    def show_constraint(self, c: OutputConstraint) -> None:
        """Show ``c`` (kind NONE: the quiet button)."""
        on = c.kind != ConstraintKind.NONE
        self.setObjectName("formatChip" if on else "formatButton")
        self.setText(f"{{ }} {CHIP_TEXT[c.kind]}" if on else OFF_TEXT)
        if not on:
            tip = "Constrain this chat's replies: JSON, a JSON schema or a GBNF grammar (llama.cpp's grammar sampler)"
        elif c.kind == ConstraintKind.JSON:
            tip = "Replies in this chat are one JSON object (llama.cpp's JSON grammar). Click to change."
        else:
            text = c.text if len(c.text) <= TOOLTIP_CHARS else c.text[:TOOLTIP_CHARS] + "…"
            tip = f"Replies in this chat follow this {CHIP_TEXT[c.kind]}. Click to change.\n\n{text}"
        self.setToolTip(tip)
        self.style().unpolish(self)
        self.style().polish(self)
