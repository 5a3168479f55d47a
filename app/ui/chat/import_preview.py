"""The preview shown before chats from other apps are imported: what comes in, what is left out.

A modal dialog over an :class:`~app.core.conversations.importers.ImportPreview` (read and checked,
nothing written yet): a headline with the totals, one row per file (the app it comes from, its
chats, messages and branches), what was left out and why, and every chat with its date and
size. The person imports (the accept button names the count) or cancels.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.conversations.importers import ImportPreview

# The most chats listed one by one (a ChatGPT export can hold thousands; the totals count them all).
MAX_LISTED_CHATS = 2000


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 chat``, ``3 chats`` (thousands grouped: ``1,204 messages``)."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def totals_line(preview: ImportPreview) -> str:
    """``12 chats · 340 messages · 5 branches``."""
    return " · ".join(
        (
            plural(preview.chats, "chat"),
            plural(preview.messages, "message"),
            plural(preview.branches, "branch", "branches"),
        )
    )


def skipped_lines(preview: ImportPreview) -> list[str]:
    """One line per reason something was left out, ``3 × images and files (...)``; empty for none."""
    return [f"{n:,} × {reason.label}" for reason, n in preview.skipped.items()]


class ImportPreviewDialog(QDialog):
    """What an import will add; accepted = import.

    Attributes:
        headline: the totals.
        files: one row per file: name, app, chats, messages, branches.
        skipped: what was left out and why (or that nothing was).
        chats: the chats (title, date, messages, branches), at most :data:`MAX_LISTED_CHATS`.
        import_button: accepts; its text names how many chats come in.
    """

    def __init__(self, preview: ImportPreview, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("importPreview")
        self.setWindowTitle("Import chats")
        lay = QVBoxLayout(self)

        self.headline = QLabel(f"<b>{totals_line(preview)}</b> will be added to your chats.")
        self.headline.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.headline)
        note = QLabel(
            "Titles, times and roles are kept. Edited messages and regenerated replies become "
            "branches (the ‹ 2/3 › arrows). Nothing is written until you import; a file that cannot "
            "be read imports nothing."
        )
        note.setWordWrap(True)
        lay.addWidget(note)

        self.files = _tree(["File", "From", "Chats", "Messages", "Branches"])
        for f in preview.files:
            row = QTreeWidgetItem([f.path.name, f.format.label, f"{f.chats:,}", f"{f.messages:,}", f"{f.branches:,}"])
            row.setToolTip(0, str(f.path))
            _right(row, 2, 5)
            self.files.addTopLevelItem(row)
        self.files.setMaximumHeight(28 + 24 * min(len(preview.files), 4))
        lay.addWidget(self.files)

        lines = skipped_lines(preview)
        self.skipped = QLabel(
            "Left out:\n" + "\n".join("   " + line for line in lines) if lines else "Nothing is left out."
        )
        self.skipped.setObjectName("importSkipped")
        self.skipped.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.skipped)

        self.chats = _tree(["Chat", "Date", "Messages", "Branches"])
        listed = 0
        for f in preview.files:
            for conv, msgs in f.exports:
                self._add_chat(conv.title, conv.created_at, len(msgs), 0)
                listed += 1
            for c in f.conversations[: max(0, MAX_LISTED_CHATS - listed)]:
                self._add_chat(c.title, c.created_at, len(c.messages), c.branches)
                listed += 1
        if preview.chats > listed:
            self.chats.addTopLevelItem(QTreeWidgetItem([f"… and {preview.chats - listed:,} more", "", "", ""]))
        self.chats.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        lay.addWidget(self.chats, 1)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.import_button = QPushButton(f"Import {plural(preview.chats, 'chat')}")
        self.import_button.setDefault(True)
        buttons.addButton(self.import_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(760, 560)

    def _add_chat(self, title: str, created_at: float, messages: int, branches: int) -> None:
        date = time.strftime("%Y-%m-%d %H:%M", time.localtime(created_at)) if created_at > 0 else ""
        item = QTreeWidgetItem([title, date, f"{messages:,}", f"{branches:,}" if branches else ""])
        item.setToolTip(0, title)
        _right(item, 2, 4)
        self.chats.addTopLevelItem(item)


def _right(item: QTreeWidgetItem, first: int, end: int) -> None:
    """Right-align columns ``first`` to ``end - 1`` of ``item`` (its numbers)."""
    for col in range(first, end):
        item.setTextAlignment(col, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def _tree(columns: list[str]) -> QTreeWidget:
    """A flat, read-only list with a header."""
    tree = QTreeWidget()
    tree.setColumnCount(len(columns))
    tree.setHeaderLabels(columns)
    tree.setRootIsDecorated(False)
    tree.setUniformRowHeights(True)
    tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
    tree.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    header = tree.header()
    header.setStretchLastSection(False)
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    return tree
