"""app.ui.common.table_model.RowTableModel: set_rows emits the smallest change signals, row_of,
upsert, remove, headers; checked with Qt's model tester too."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt

from app.ui.common.table_model import RowTableModel


@dataclass(frozen=True)
class Row:
    key: str
    value: int


class Col(enum.IntEnum):
    KEY = 0
    VALUE = 1


class Model(RowTableModel[Row]):
    def __init__(self) -> None:
        super().__init__(Col, {Col.KEY: "Key", Col.VALUE: "Value"}, lambda r: r.key, right_aligned=(Col.VALUE,))

    def cell(self, row: Row, row_number: int, column: Any, role: int) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            return row.key if column == Col.KEY else str(row.value)
        return None


def _rows(spec: str) -> list[Row]:
    """'a1 b2' -> [Row('a', 1), Row('b', 2)]."""
    return [Row(s[0], int(s[1:])) for s in spec.split()]


def _record(m: Model) -> list[tuple]:
    events: list[tuple] = []
    m.rowsRemoved.connect(lambda _p, a, b: events.append(("removed", a, b)))
    m.rowsInserted.connect(lambda _p, a, b: events.append(("inserted", a, b)))
    m.dataChanged.connect(lambda a, b, *_: events.append(("changed", a.row(), b.row(), b.column())))
    m.modelReset.connect(lambda: events.append(("reset",)))
    return events


def test_set_rows_emits_only_what_changed(qtmodeltester) -> None:
    m = Model()
    qtmodeltester.check(m)
    events = _record(m)
    m.set_rows(_rows("a1 b2 c3 d4"))
    assert events == [("inserted", 0, 3)]
    events.clear()
    m.set_rows(_rows("a1 b2 c3 d4"))  # nothing new: no signal
    assert events == []
    m.set_rows(_rows("a1 c3"))  # b and d gone, from the bottom up
    assert events == [("removed", 3, 3), ("removed", 1, 1)]
    events.clear()
    m.set_rows(_rows("x0 a1 y5 z6 c9"))  # two blocks inserted, c changed
    assert events == [("inserted", 0, 0), ("inserted", 2, 3), ("changed", 4, 4, 1)]
    assert [r.key for r in m.rows] == ["x", "a", "y", "z", "c"] and m.rows[4].value == 9
    events.clear()
    m.set_rows(_rows("c9 a1"))  # the rows that stay change order: a reset
    assert ("reset",) in events and [r.key for r in m.rows] == ["c", "a"]
    qtmodeltester.check(m)


def test_row_of_upsert_remove_and_headers() -> None:
    m = Model()
    events = _record(m)
    assert m.upsert(Row("a", 1)) == (0, None)
    assert m.upsert(Row("b", 2)) == (1, None)
    assert m.upsert(Row("a", 7)) == (0, Row("a", 1))
    assert events == [("inserted", 0, 0), ("inserted", 1, 1), ("changed", 0, 0, 1)]
    assert m.row_of("b") == 1 and m.row_of("nope") == -1
    assert m.row_by_key("a") == Row("a", 7) and m.row_by_key("nope") is None
    assert m.index(0, Col.VALUE).data() == "7" and m.index(5, 0).data() is None
    m.remove("a")
    m.remove("nope")
    assert [r.key for r in m.rows] == ["b"] and m.rowCount() == 1 and m.columnCount() == 2
    h = Qt.Orientation.Horizontal
    assert [m.headerData(c, h) for c in Col] == ["Key", "Value"]
    right = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    left = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    assert m.headerData(Col.VALUE, h, Qt.ItemDataRole.TextAlignmentRole) == right
    assert m.headerData(Col.KEY, h, Qt.ItemDataRole.TextAlignmentRole) == left


def test_duplicate_keys_reset_instead_of_failing() -> None:
    m = Model()
    m.set_rows(_rows("a1"))
    events = _record(m)
    m.set_rows(_rows("a1 a2"))
    assert events == [("reset",)] and m.rowCount() == 2
