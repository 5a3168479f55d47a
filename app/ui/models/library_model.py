"""The Library tab's table: one row per model Glassbox can load (a split model is one row)."""

from __future__ import annotations

import enum
import os
from collections import Counter
from typing import Any

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QFont

from app.core.models.library import SOURCE_FOLDER, SOURCE_HF_CACHE, SOURCE_MODELS, ModelEntry
from app.ui.common import palette
from app.ui.common.fmt import ago, format_bytes, format_count
from app.ui.common.palette import qcolor
from app.ui.common.table_model import RowTableModel
from app.ui.models.widgets import RED

SOURCE_SHORT = {SOURCE_MODELS: "Glassbox", SOURCE_FOLDER: "Folder", SOURCE_HF_CACHE: "HF cache"}


class LibraryRole(enum.IntEnum):
    """Item data roles of :class:`LibraryModel` (any column)."""

    ENTRY = Qt.ItemDataRole.UserRole + 1  #: the :class:`ModelEntry`
    PATH = enum.auto()  #: str, the file to load
    ERROR = enum.auto()  #: str or None
    SORT = enum.auto()  #: the column's sort key
    FILTER = enum.auto()  #: lower-case text the filter box matches
    SUBTITLE = enum.auto()  #: second line of the name cell
    SUBTITLE_COLOR = enum.auto()  #: QColor of the second line (red for errors)
    BADGE = enum.auto()  #: "loaded" on the loaded model's row
    LOADED = enum.auto()  #: bool


class LibraryColumn(enum.IntEnum):
    NAME = 0
    ARCHITECTURE = 1
    PARAMS = 2
    QUANT = 3
    SIZE = 4
    CONTEXT = 5
    LAST_USED = 6
    SOURCE = 7


HEADERS = {
    LibraryColumn.NAME: "Model",
    LibraryColumn.ARCHITECTURE: "Architecture",
    LibraryColumn.PARAMS: "Params",
    LibraryColumn.QUANT: "Quant",
    LibraryColumn.SIZE: "Size",
    LibraryColumn.CONTEXT: "Trained ctx",
    LibraryColumn.LAST_USED: "Last used",
    LibraryColumn.SOURCE: "Source",
}


def home_short(folder: os.PathLike[str] | str) -> str:
    """``folder`` with the home folder written ``~`` (``~/models/x``)."""
    text, home = os.path.abspath(folder), os.path.expanduser("~")
    if home not in ("~", os.sep) and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home) :]
    return text


def same_path(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    """Whether two paths name the same file (absolute paths compared; None is never the same)."""
    return a is not None and b is not None and os.path.abspath(a) == os.path.abspath(b)


class LibraryModel(RowTableModel[ModelEntry]):
    """The library's entries as a table (one row per model; a split model is one row), keyed by path.

    Touch it only on the UI thread.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(
            LibraryColumn,
            HEADERS,
            lambda e: os.path.abspath(e.path),
            right_aligned=(LibraryColumn.PARAMS, LibraryColumn.SIZE, LibraryColumn.CONTEXT),
            parent=parent,
        )
        self.loaded_path: str | None = None
        self._twins: set[str] = set()  # file names (lower case) that more than one row has

    @property
    def entries(self) -> list[ModelEntry]:
        """The rows, in the library's order."""
        return self.rows

    def set_entries(self, entries: list[ModelEntry]) -> None:
        """Replace the rows (models that stay keep their row, selection and scroll position)."""
        names = Counter(e.file_name.lower() for e in entries)
        self._twins = {n for n, count in names.items() if count > 1}
        self.set_rows(entries)

    def set_loaded(self, path: str | None) -> None:
        """Mark the row of the model at ``path`` as loaded (None: no model loaded)."""
        self.loaded_path = path
        self.refresh_all()

    def row_of(self, key: Any) -> int:
        """The row whose model includes the file ``key`` (any part of a split model), or -1."""
        for i, e in enumerate(self.rows):
            if any(same_path(p, key) for p in e.paths):
                return i
        return -1

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        return (
            Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
            if index.isValid()
            else Qt.ItemFlag.ItemIsDropEnabled
        )

    def cell(self, e: ModelEntry, row_number: int, col: Any, role: int) -> Any:
        loaded = same_path(e.path, self.loaded_path)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(e, col)
        if role == LibraryRole.ENTRY:
            return e
        if role == LibraryRole.PATH:
            return str(e.path)
        if role == LibraryRole.ERROR:
            return e.error
        if role == LibraryRole.LOADED:
            return loaded
        if role == LibraryRole.BADGE:
            return "loaded" if loaded else None
        if role == LibraryRole.SUBTITLE:
            return e.error if e.error else self.subtitle(e)
        if role == LibraryRole.SUBTITLE_COLOR:
            return RED if e.error else None
        if role == LibraryRole.FILTER:
            return " ".join([e.name, e.file_name, e.architecture, e.quant, e.source_label, e.repo_id or ""]).lower()
        if role == LibraryRole.SORT:
            return self._sort_key(e, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == LibraryColumn.SOURCE:
                return f"{e.source_label}\n{e.folder}"
            tip = f"{e.name}\n{e.path}"
            if e.is_split:
                tip += f"\n{len(e.paths)} parts"
            return tip + (f"\n\n{e.error}" if e.error else "")
        if role == Qt.ItemDataRole.ForegroundRole:
            if e.error and col != LibraryColumn.NAME:
                return qcolor(palette.MUTED_2)
            if col in (LibraryColumn.LAST_USED, LibraryColumn.SOURCE):
                return qcolor(palette.TEXT_DIM)
            return None
        if role == Qt.ItemDataRole.FontRole and col == LibraryColumn.QUANT and e.quant:
            f = QFont()
            f.setFamily("DejaVu Sans Mono")
            f.setPointSizeF(9)
            return f
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return self.alignment(col)
        return None

    def subtitle(self, e: ModelEntry) -> str:
        """The name cell's second line: the file's name, and its folder when another row has a file
        of the same name (two copies in two folders looked identical); the delegate elides it in
        the middle, so the folder's end stays in view."""
        if e.file_name.lower() not in self._twins:
            return e.file_name
        return f"{e.file_name} · {home_short(e.folder)}"

    @staticmethod
    def _display(e: ModelEntry, col: LibraryColumn) -> str:
        if col == LibraryColumn.NAME:
            return e.name
        if col == LibraryColumn.ARCHITECTURE:
            return e.architecture if e.architecture != "unknown" or not e.error else "—"
        if col == LibraryColumn.PARAMS:
            return format_count(e.n_params) if e.n_params else "—"
        if col == LibraryColumn.QUANT:
            return e.quant or "—"
        if col == LibraryColumn.SIZE:
            return format_bytes(e.size) if e.size else "—"
        if col == LibraryColumn.CONTEXT:
            return f"{e.context_length:,}" if e.context_length else "—"
        if col == LibraryColumn.LAST_USED:
            return ago(e.last_used) if e.last_used else "never"
        return SOURCE_SHORT.get(e.source, e.source)

    @staticmethod
    def _sort_key(e: ModelEntry, col: LibraryColumn) -> Any:
        if col == LibraryColumn.PARAMS:
            return e.n_params
        if col == LibraryColumn.SIZE:
            return e.size
        if col == LibraryColumn.CONTEXT:
            return e.context_length
        if col == LibraryColumn.LAST_USED:
            return e.last_used or 0.0
        return LibraryModel._display(e, col).lower()
