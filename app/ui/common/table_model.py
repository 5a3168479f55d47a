"""A generic table model: rows of one (frozen) dataclass, columns an IntEnum, custom roles an IntEnum.

:class:`RowTableModel` holds the rowCount/columnCount/headerData/row replacement
and lookup every table of the window used to repeat; a subclass only says what a
cell shows (:meth:`RowTableModel.cell`). :meth:`RowTableModel.set_rows` emits the
smallest change signals it can (rows removed, rows inserted, rows changed), so a
view keeps its selection, scroll position and index widgets when a list is
refreshed; only when the surviving rows changed order does it reset the model.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt

RowT = TypeVar("RowT")

_LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


class RowTableModel(QAbstractTableModel, Generic[RowT]):
    """Rows of ``RowT`` with one key each; touch it only on the UI thread.

    Args:
        columns: the IntEnum of the columns (0, 1, 2...).
        headers: each column's header text.
        key: a row's identity (a download id, a path...): :meth:`row_of` and
            :meth:`set_rows` match rows by it.
        right_aligned: columns whose header and cells are right-aligned (numbers).
        parent: the owning QObject.

    Subclasses implement :meth:`cell`; :meth:`data` checks the index first.
    """

    def __init__(
        self,
        columns: type[enum.IntEnum],
        headers: Mapping[Any, str],
        key: Callable[[RowT], Hashable],
        *,
        right_aligned: Iterable[enum.IntEnum] = (),
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.columns = columns
        self.headers = dict(headers)
        self.key = key
        self.right_aligned = frozenset(right_aligned)
        self.rows: list[RowT] = []

    # --- rows ------------------------------------------------------------------------------------
    def row_of(self, key: Hashable) -> int:
        """The row whose key is ``key``, or -1."""
        for i, r in enumerate(self.rows):
            if self.key(r) == key:
                return i
        return -1

    def row_by_key(self, key: Hashable) -> RowT | None:
        """The row whose key is ``key``, or None."""
        i = self.row_of(key)
        return self.rows[i] if i >= 0 else None

    def set_rows(self, rows: Sequence[RowT]) -> None:
        """Replace the rows, emitting rowsRemoved, rowsInserted and dataChanged for what changed.

        Rows are matched by key. Rows that stay keep their relative order;
        if they do not (the new list reorders them), or two new rows share a
        key, the model is reset instead.
        """
        new = list(rows)
        new_keys = [self.key(r) for r in new]
        wanted = set(new_keys)
        if len(wanted) != len(new_keys):
            self._reset(new)
            return
        # 1. remove the rows that are gone, bottom up, a contiguous block at a time
        i = len(self.rows) - 1
        while i >= 0:
            if self.key(self.rows[i]) in wanted:
                i -= 1
                continue
            last = i
            while i - 1 >= 0 and self.key(self.rows[i - 1]) not in wanted:
                i -= 1
            self.beginRemoveRows(QModelIndex(), i, last)
            del self.rows[i : last + 1]
            self.endRemoveRows()
            i -= 1
        # 2. the rows that stay must keep their order, else a reset
        kept = [self.key(r) for r in self.rows]
        kept_set = set(kept)
        if [k for k in new_keys if k in kept_set] != kept:
            self._reset(new)
            return
        # 3. insert the new rows where they go, a contiguous block at a time
        pos = 0
        j = 0
        while j < len(new):
            if new_keys[j] in kept_set:
                pos += 1
                j += 1
                continue
            start = j
            while j < len(new) and new_keys[j] not in kept_set:
                j += 1
            self.beginInsertRows(QModelIndex(), pos, pos + (j - start) - 1)
            self.rows[pos:pos] = new[start:j]
            self.endInsertRows()
            pos += j - start
        # 4. the rows that stayed and changed
        changed = [k for k, (old, now) in enumerate(zip(self.rows, new, strict=True)) if old != now]
        self.rows = new
        if changed:
            self.dataChanged.emit(self.index(changed[0], 0), self.index(changed[-1], len(self.columns) - 1))

    def _reset(self, rows: list[RowT]) -> None:
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def upsert(self, row: RowT) -> tuple[int, RowT | None]:
        """Insert ``row`` at the end or replace the row with its key.

        Returns:
            (its row number, the row it replaced or None).
        """
        i = self.row_of(self.key(row))
        if i < 0:
            i = len(self.rows)
            self.beginInsertRows(QModelIndex(), i, i)
            self.rows.append(row)
            self.endInsertRows()
            return i, None
        prev = self.rows[i]
        self.rows[i] = row
        self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.columns) - 1))
        return i, prev

    def remove(self, key: Hashable) -> None:
        """Remove the row with key ``key`` (nothing when there is none)."""
        i = self.row_of(key)
        if i >= 0:
            self.beginRemoveRows(QModelIndex(), i, i)
            del self.rows[i]
            self.endRemoveRows()

    def refresh_all(self) -> None:
        """Tell the views every cell may show something else (state outside the rows changed)."""
        if self.rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, len(self.columns) - 1))

    def alignment(self, column: int) -> int:
        """The TextAlignmentRole value of ``column``: right for :attr:`right_aligned`, else left."""
        return int(_RIGHT if column in self.right_aligned else _LEFT)

    # --- Qt model API ---------------------------------------------------------------------------
    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(self.columns):
            if role == Qt.ItemDataRole.DisplayRole:
                return self.headers.get(self.columns(section), "")
            if role == Qt.ItemDataRole.TextAlignmentRole:
                return self.alignment(section)
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self.rows):
            return None
        return self.cell(self.rows[index.row()], index.row(), self.columns(index.column()), role)

    def cell(self, row: RowT, row_number: int, column: Any, role: int) -> Any:
        """What ``row`` shows in ``column`` for ``role`` (None: nothing). Subclasses implement it."""
        raise NotImplementedError
