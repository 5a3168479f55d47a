"""Files dropped on the window: accepted as a Copy (the original stays where it is), a
highlight while they are dragged over, the first .gguf loaded, the rest named in a notice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QWidget

from app.ui.common import palette
from app.ui.common.severity import Severity

NAMED_SKIPPED = 5  # skipped files named in the notice (the rest are counted)


class FileDrop:
    """The window's drop handling; the window's drag and drop events call these methods.

    Args:
        window: the widget files are dropped on (the highlight covers it).
        load: loads one GGUF file (the window's ``load_model``).
        notice: shows ``(Severity, text)`` to the person (the banner).

    Attributes:
        highlight: the overlay shown while files are dragged over the window.
    """

    def __init__(
        self, window: QWidget, load: Callable[[str], object], notice: Callable[[Severity, str], object]
    ) -> None:
        self.window = window
        self._load = load
        self._notice = notice
        self.highlight = QLabel("Drop a .gguf file to load it", window)
        self.highlight.setObjectName("dropHighlight")
        self.highlight.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.highlight.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.highlight.setStyleSheet(
            f"QLabel#dropHighlight {{ border: 3px dashed {palette.ACCENT}; background: rgba(59, 130, 246, 40);"
            f" color: {palette.TEXT}; font-size: 18pt; }}"
        )
        self.highlight.hide()

    def enter(self, e: QDragEnterEvent) -> None:
        """Local files dragged in: accepted as a Copy, the highlight shown."""
        if any(u.isLocalFile() for u in e.mimeData().urls()):
            e.setDropAction(Qt.DropAction.CopyAction)
            e.accept()
            self.show_highlight(True)

    def move(self, e: QDragMoveEvent) -> None:
        if any(u.isLocalFile() for u in e.mimeData().urls()):
            e.setDropAction(Qt.DropAction.CopyAction)
            e.accept()

    def leave(self) -> None:
        self.show_highlight(False)

    def drop(self, e: QDropEvent) -> None:
        """Load the first GGUF file dropped; the notice names what was skipped (other files)."""
        self.show_highlight(False)
        files = [u.toLocalFile() for u in e.mimeData().urls() if u.isLocalFile()]
        if not files:
            return
        e.setDropAction(Qt.DropAction.CopyAction)
        e.accept()
        models = [f for f in files if f.lower().endswith(".gguf")]
        skipped = [Path(f).name for f in files if f not in models[:1]]
        if models:
            self._load(models[0])
        if skipped:
            what = ", ".join(skipped[:NAMED_SKIPPED])
            if len(skipped) > NAMED_SKIPPED:
                what += f" and {len(skipped) - NAMED_SKIPPED} more"
            reason = "only one model loads at a time; " if models else ""
            self._notice(
                Severity.INFO if models else Severity.WARNING,
                f"Skipped {len(skipped)} dropped file{'s' if len(skipped) != 1 else ''} ({reason}"
                f"a model is a .gguf file): {what}.",
            )

    def show_highlight(self, on: bool) -> None:
        if on:
            self.highlight.setGeometry(self.window.rect())
            self.highlight.raise_()
        self.highlight.setVisible(on)
