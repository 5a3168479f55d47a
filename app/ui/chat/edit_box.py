"""The editor a message's Edit opens: as tall as its text, and opened in view.

A plain ``QPlainTextEdit`` asks for about 190 px whatever it holds, so a one-line message opened a tall
box, and the chat, following its end, pushed the box's first line out of view under the System prompt
bar (review of issue 20). :class:`EditBox` is :data:`MIN_LINES` to :data:`MAX_LINES` lines tall (past
that its text scrolls), following the text as it is typed and the width as it wraps, and
:meth:`EditBox.reveal` scrolls the chat so that the box and what is under it (its buttons) are in
view, its first line first.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QPlainTextEdit, QScrollArea, QSizePolicy, QWidget

MIN_LINES = 2  # lines of height at least: room to add a line without the box jumping at once
MAX_LINES = 12  # lines of height at most: a longer text scrolls inside the box
REVEAL_BELOW_PX = 48  # what is kept in view under the box when it opens (its Cancel / Save row)


class EditBox(QPlainTextEdit):
    """A message's editor whose height follows its lines (see the module docstring)."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().contentsChanged.connect(self.fit)
        self.fit()

    def lines_needed(self) -> int:
        """Lines the text takes at the box's width (wrapped lines counted)."""
        doc = self.document()
        return sum(max(1, doc.findBlockByNumber(i).layout().lineCount()) for i in range(doc.blockCount()))

    def fit(self) -> None:
        """Make the box as tall as its lines, between :data:`MIN_LINES` and :data:`MAX_LINES`."""
        lines = min(MAX_LINES, max(MIN_LINES, self.lines_needed()))
        margins = self.contentsMargins()
        doc_margin = 2 * self.document().documentMargin()
        height = lines * self.fontMetrics().lineSpacing() + doc_margin + margins.top() + margins.bottom()
        self.setFixedHeight(round(height))

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        if e.size().width() != e.oldSize().width():  # the text wraps anew
            QTimer.singleShot(0, self.fit)

    def reveal(self) -> None:
        """Once laid out, scroll the chat (the scroll area holding the box) to show the box, its first line first."""
        QTimer.singleShot(0, self._reveal)

    def _reveal(self) -> None:
        area = self.parentWidget()
        while area is not None and not isinstance(area, QScrollArea):
            area = area.parentWidget()
        if area is None or not self.isVisible():
            return
        self.fit()
        area.ensureWidgetVisible(self, 0, REVEAL_BELOW_PX)  # the Cancel / Save row under it too
        area.ensureWidgetVisible(self, 0, 8)  # and, if both do not fit, the box's top
