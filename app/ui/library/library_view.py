"""The Library tab's table view: Enter loads, Delete deletes, dropped .gguf files are imported (as a Copy)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent
from PySide6.QtWidgets import QAbstractItemView, QTableView, QWidget

from app.core.importer import is_gguf_name


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
