"""Search words marked in a message shown (a search hit opened from the Chats panel), and taken away again."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from app.ui.chat.message import MessageWidget
from app.ui.common.highlight import highlight_html


class SearchMarks:
    """The labels of the chat view that show search matches, with their own text to restore."""

    def __init__(self) -> None:
        self._marked: list[tuple[QLabel, str]] = []  # (label, its own HTML)

    def mark(self, w: MessageWidget, terms: list[str]) -> tuple[int, QLabel | None]:
        """Mark ``terms`` (search words, case-insensitive) in message ``w``'s text.

        Returns:
            How many matches were marked, and the first label with one (None: none).
        """
        labels = [w.body] if isinstance(w.body, QLabel) else w.body.findChildren(QLabel)
        total = 0
        first: QLabel | None = None
        for label in labels:
            original = label.text()
            marked, n = highlight_html(original, terms)
            if n:
                self._marked.append((label, original))
                label.setText(marked)
                total += n
                first = first or label
        return total, first

    def clear(self) -> None:
        """Remove the marks (labels whose text changed since keep their new text)."""
        for label, original in self._marked:
            try:
                if label.text().count("background-color") > original.count("background-color"):
                    label.setText(original)
            except RuntimeError:  # the label was deleted with its message
                pass
        self._marked = []
