"""A check box whose text wraps: a text-less :class:`QCheckBox` beside a word-wrapped label.

Qt's check box draws its text on one line, so a long one sets the width of its whole panel (the
Server panel's "Serve the loaded model on an OpenAI-compatible API" made its dock 426 px wide at
least) or is cut off. Here the text wraps to the width given, and a click on it toggles the box,
as a click on a check box's own text does.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSizePolicy, QWidget


class _ClickLabel(QLabel):
    """A word-wrapped label that clicks ``box`` when released over with the left button."""

    def __init__(self, text: str, box: QCheckBox) -> None:
        super().__init__(text)
        self._box = box
        self.setWordWrap(True)
        self.setBuddy(box)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    def mouseReleaseEvent(self, e: QMouseEvent) -> None:
        if (
            e.button() == Qt.MouseButton.LeftButton
            and self.rect().contains(e.position().toPoint())
            and self.isEnabled()
        ):
            self._box.click()
        super().mouseReleaseEvent(e)


class WrappedCheck(QWidget):
    """A check box (``box``, the one to connect to and read) with ``text`` wrapped beside it.

    Args:
        text: what the box switches; also the box's accessible name and the label's text.
        parent: the usual Qt parent.

    Attributes:
        box: the :class:`QCheckBox` (no text of its own).
        label: the word-wrapped :class:`QLabel` showing ``text``.
    """

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.box = QCheckBox()
        self.box.setAccessibleName(text)
        self.label = _ClickLabel(text, self.box)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.box, 0, Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.label, 1)
