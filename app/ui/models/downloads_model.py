"""The Downloads tab's table: one row per download, its newest :class:`DownloadStatus`."""

from __future__ import annotations

import enum
from typing import Any

from PySide6.QtCore import QObject, Qt

from app.core.models.downloads import DownloadState, DownloadStatus
from app.ui.common.fmt import duration, format_bytes, speed
from app.ui.common.palette import qcolor
from app.ui.common.table_model import RowTableModel
from app.ui.models.download_actions import state_color, state_label
from app.ui.models.widgets import AMBER, RED, TEXT_SOFT


class DownloadRole(enum.IntEnum):
    """Item data roles of :class:`DownloadsModel` (any column)."""

    STATUS = Qt.ItemDataRole.UserRole + 1  #: the latest :class:`DownloadStatus`
    ID = enum.auto()  #: str
    FRACTION = enum.auto()  #: float 0..1
    STATE = enum.auto()  #: :class:`DownloadState`
    SUBTITLE = enum.auto()  #: repo · quant · parts, or the error
    SUBTITLE_COLOR = enum.auto()  #: QColor (red for an error)


class DownloadColumn(enum.IntEnum):
    NAME = 0
    PROGRESS = 1
    BYTES = 2
    SPEED = 3
    ETA = 4
    STATE = 5
    ACTIONS = 6


HEADERS = {
    DownloadColumn.NAME: "Download",
    DownloadColumn.PROGRESS: "Progress",
    DownloadColumn.BYTES: "Done / total",
    DownloadColumn.SPEED: "Speed",
    DownloadColumn.ETA: "Time left",
    DownloadColumn.STATE: "State",
    DownloadColumn.ACTIONS: "",
}


class DownloadsModel(RowTableModel[DownloadStatus]):
    """Downloads in queue order (oldest first), keyed by download id. Touch it only on the UI thread."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(
            DownloadColumn,
            HEADERS,
            lambda s: s.id,
            right_aligned=(DownloadColumn.BYTES, DownloadColumn.SPEED, DownloadColumn.ETA),
            parent=parent,
        )

    def status(self, download_id: str) -> DownloadStatus | None:
        """The newest status of download ``download_id``, or None when it has no row."""
        return self.row_by_key(download_id)

    def cell(self, s: DownloadStatus, row_number: int, col: Any, role: int) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            if col == DownloadColumn.NAME:
                return s.name
            if col == DownloadColumn.PROGRESS:
                return f"{s.fraction * 100:.0f}%"
            if col == DownloadColumn.BYTES:
                return f"{format_bytes(s.done_bytes)} / {format_bytes(s.total_bytes)}"
            if col == DownloadColumn.SPEED:
                return speed(s.speed) if s.state is DownloadState.RUNNING else "—"
            if col == DownloadColumn.ETA:
                return duration(s.eta) if s.state is DownloadState.RUNNING else "—"
            if col == DownloadColumn.STATE:
                return state_label(s)
            return None
        if role == DownloadRole.STATUS:
            return s
        if role == DownloadRole.ID:
            return s.id
        if role == DownloadRole.FRACTION:
            return s.fraction
        if role == DownloadRole.STATE:
            return s.state
        if role == DownloadRole.SUBTITLE:
            if s.error:
                return s.error
            bits = [s.repo_id]
            if s.quant:
                bits.append(s.quant)
            if s.n_parts > 1:
                bits.append(
                    f"part {s.part_index + 1} of {s.n_parts}"
                    if s.state is DownloadState.RUNNING
                    else f"{s.n_parts} parts"
                )
            return "  ·  ".join(bits)
        if role == DownloadRole.SUBTITLE_COLOR:
            if s.error:
                return RED if s.state is DownloadState.FAILED else AMBER
            return None
        if role == Qt.ItemDataRole.ForegroundRole:
            if col == DownloadColumn.STATE:
                return qcolor(state_color(s))
            return TEXT_SOFT
        if role == Qt.ItemDataRole.TextAlignmentRole and col in self.right_aligned:
            return self.alignment(col)
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = f"{s.repo_id}/{s.name}\n{s.path}"
            if s.state is DownloadState.DONE:
                tip += "\nSize and sha256 match the Hub's listing."
            return tip + (f"\n\n{s.error}" if s.error else "")
        return None
