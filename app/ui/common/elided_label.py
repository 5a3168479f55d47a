"""A one-line label that shows "…" where its text does not fit, and the whole text as its tooltip."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFontMetrics, QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QStyle, QStyleOption, QWidget

ELLIPSIS = "…"


def elide_once(fm: QFontMetrics, text: str, width: int, mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> str:
    """``text`` as it fits ``width`` px in ``fm``'s font, with one "…" at most where it is cut: a text
    already cut with a trailing "…" (a chat title) loses that one before it is elided again.
    Each line of a multi-line text is elided on its own."""
    out = []
    for line in text.split("\n"):
        if fm.horizontalAdvance(line) > width:
            if mode is Qt.TextElideMode.ElideRight:
                line = line.removesuffix(ELLIPSIS).rstrip()
            line = fm.elidedText(line, mode, width)
        out.append(line)
    return "\n".join(out)


class ElidedLabel(QLabel):
    """A plain-text label that elides at ``mode`` instead of being cut off.

    ``text()`` stays the whole text; its size hint asks for the whole width, its minimum for
    ``min_chars`` characters, and when the layout gives it less, the painted text ends in "…".
    """

    def __init__(
        self,
        text: str = "",
        parent: QWidget | None = None,
        *,
        mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight,
        min_chars: int = 8,
    ) -> None:
        super().__init__(text, parent)
        self._mode = mode
        self._min_chars = min_chars
        self.setToolTip(text)

    def setText(self, text: str) -> None:
        super().setText(text)
        self.setToolTip(text)

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        floor = self.fontMetrics().horizontalAdvance("x" * self._min_chars + "…")
        return QSize(min(hint.width(), floor), hint.height())

    def elided_text(self) -> str:
        """The text as painted at the current width."""
        return elide_once(self.fontMetrics(), self.text(), self.contentsRect().width(), self._mode)

    def paintEvent(self, e: QPaintEvent) -> None:
        p = QPainter(self)
        opt = QStyleOption()
        opt.initFrom(self)
        self.style().drawPrimitive(QStyle.PrimitiveElement.PE_Widget, opt, p, self)
        p.setPen(self.palette().color(self.foregroundRole()))
        p.drawText(self.contentsRect(), int(self.alignment() | Qt.AlignmentFlag.AlignVCenter), self.elided_text())
