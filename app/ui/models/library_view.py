"""The Library tab's table view: Enter loads, Delete deletes, dropped .gguf files are imported (as a Copy)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QTableView, QWidget

from app.core.models.importer import is_gguf_name


class LibraryView(QTableView):
    """The library table; .gguf files dropped on it are imported.

    Signals:
        files_dropped(list): local paths of the .gguf files dropped.
        load_pressed(): Enter on a row.
        delete_pressed(): Delete on a row.
    """

    files_dropped = Signal(list)
    load_pressed = Signal()
    delete_pressed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("libraryTable")
        self.setAcceptDrops(True)
        self.viewport().setAcceptDrops(True)
        self.setDropIndicatorShown(False)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DropOnly)
        self._name_col = 0
        self._name_min_px = 0
        self._widths: dict[int, int] = {}
        self._hide_order: tuple[int, ...] = ()

    def set_columns(self, name_col: int, name_min_px: int, widths: dict[int, int], hide_order: tuple[int, ...]) -> None:
        """Lay the columns out: ``name_col`` stretches and keeps at least ``name_min_px`` pixels.

        Args:
            name_col: the column that takes the free width.
            name_min_px: the least width it keeps; when the view is narrower (a 1366-pixel
                screen with the panels open), columns of ``hide_order`` are hidden, first
                ones first, until it fits, and shown again when the view grows.
            widths: each other column's width, pixels.
            hide_order: the columns that may be hidden, least useful first.
        """
        self._name_col, self._name_min_px = name_col, name_min_px
        self._widths, self._hide_order = dict(widths), tuple(hide_order)
        for col, w in widths.items():
            self.setColumnWidth(col, w)
        self.fit_columns()

    def fit_columns(self) -> None:
        """Hide or show the optional columns so the name column keeps its least width."""
        model = self.model()
        if model is None or not self._widths:
            return
        for col in self._hide_order:
            self.setColumnHidden(col, False)
        cols = [c for c in range(model.columnCount()) if c != self._name_col]
        used = sum(self.columnWidth(c) or self._widths.get(c, 0) for c in cols)
        free = self.viewport().width() - used
        for col in self._hide_order:
            if free >= self._name_min_px:
                break
            free += self.columnWidth(col) or self._widths.get(col, 0)
            self.setColumnHidden(col, True)

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self.fit_columns()

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.load_pressed.emit()
        elif e.key() == Qt.Key.Key_Delete:
            self.delete_pressed.emit()
        else:
            super().keyPressEvent(e)

    @staticmethod
    def gguf_paths(mime: Any) -> list[str]:
        return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and is_gguf_name(u.toLocalFile())]

    # Drops are always accepted as a Copy, whatever the source proposes: the import copies
    # the file, and a Move would let a file manager delete the original afterwards.
    def dragEnterEvent(self, e: QDragEnterEvent) -> None:
        self._accept_as_copy(e, bool(self.gguf_paths(e.mimeData())))

    def dragMoveEvent(self, e: QDragMoveEvent) -> None:
        self._accept_as_copy(e, bool(self.gguf_paths(e.mimeData())))

    def dropEvent(self, e: QDropEvent) -> None:
        paths = self.gguf_paths(e.mimeData())
        self._accept_as_copy(e, bool(paths))
        if paths:
            self.files_dropped.emit(paths)

    @staticmethod
    def _accept_as_copy(e: QDropEvent, wanted: bool) -> None:
        if wanted:
            e.setDropAction(Qt.DropAction.CopyAction)
            e.accept()
        else:
            e.ignore()
