"""The Downloads tab: one row per download with progress, speed, time left and its actions.

The :class:`~app.core.downloads.DownloadManager` calls its listeners on its
worker threads. :class:`DownloadsTab`'s listener only emits a queued signal;
on the UI thread the newest status of each download is kept, and the rows
are repainted by a clock (:data:`REFRESH_MS`) while statuses keep arriving,
never per event.
"""

from __future__ import annotations

import enum
import html
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QRectF,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor, QFontMetrics, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core.downloads import TERMINAL, DownloadManager, DownloadState, DownloadStatus, InsufficientSpaceError
from app.ui.common import dialogs
from app.ui.common.fmt import duration, format_bytes, speed
from app.ui.library.widgets import (
    ACCENT,
    AMBER,
    GREEN,
    MUTED,
    RED,
    TRACK,
    FlatDelegate,
    TwoLineDelegate,
    linkify,
    paint_background,
)

log = logging.getLogger("glassbox.ui.library")

REFRESH_MS = 125  # the repaint clock: 8 Hz while statuses arrive

STATE_COLORS = {
    DownloadState.QUEUED: MUTED,
    DownloadState.RUNNING: ACCENT,
    DownloadState.PAUSED: AMBER,
    DownloadState.DONE: GREEN,
    DownloadState.FAILED: RED,
    DownloadState.CANCELLED: QColor("#6b7280"),
}
STATE_TEXT = {
    DownloadState.QUEUED: "queued",
    DownloadState.RUNNING: "downloading",
    DownloadState.PAUSED: "paused",
    DownloadState.DONE: "done · verified",
    DownloadState.FAILED: "failed",
    DownloadState.CANCELLED: "cancelled",
}


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


class DownloadsModel(QAbstractTableModel):
    """Downloads in queue order (oldest first). Touch it only on the UI thread."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[DownloadStatus] = []

    def row_of(self, download_id: str) -> int:
        for i, s in enumerate(self.rows):
            if s.id == download_id:
                return i
        return -1

    def status(self, download_id: str) -> DownloadStatus | None:
        i = self.row_of(download_id)
        return self.rows[i] if i >= 0 else None

    def upsert(self, status: DownloadStatus) -> tuple[int, DownloadStatus | None]:
        """Insert or update a row; returns (row, the previous status or None)."""
        i = self.row_of(status.id)
        if i < 0:
            i = len(self.rows)
            self.beginInsertRows(QModelIndex(), i, i)
            self.rows.append(status)
            self.endInsertRows()
            return i, None
        prev = self.rows[i]
        self.rows[i] = status
        self.dataChanged.emit(self.index(i, 0), self.index(i, len(DownloadColumn) - 1))
        return i, prev

    def remove(self, download_id: str) -> None:
        i = self.row_of(download_id)
        if i >= 0:
            self.beginRemoveRows(QModelIndex(), i, i)
            del self.rows[i]
            self.endRemoveRows()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(DownloadColumn)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal:
            if role == Qt.ItemDataRole.DisplayRole:
                return HEADERS[DownloadColumn(section)]
            if role == Qt.ItemDataRole.TextAlignmentRole:
                right = DownloadColumn(section) in (DownloadColumn.BYTES, DownloadColumn.SPEED, DownloadColumn.ETA)
                return int(
                    (Qt.AlignmentFlag.AlignRight if right else Qt.AlignmentFlag.AlignLeft)
                    | Qt.AlignmentFlag.AlignVCenter
                )
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self.rows):
            return None
        s = self.rows[index.row()]
        col = DownloadColumn(index.column())
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
                if s.state is DownloadState.RUNNING and s.error:
                    return "retrying"
                return STATE_TEXT[s.state]
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
                return AMBER if s.state is DownloadState.RUNNING and s.error else STATE_COLORS[s.state]
            return QColor("#c9ced8")
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (
            DownloadColumn.BYTES,
            DownloadColumn.SPEED,
            DownloadColumn.ETA,
        ):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = f"{s.repo_id}/{s.name}\n{s.path}"
            if s.state is DownloadState.DONE:
                tip += "\nSize and sha256 match the Hub's listing."
            return tip + (f"\n\n{s.error}" if s.error else "")
        return None


class ProgressDelegate(QStyledItemDelegate):
    """A rounded progress bar with the percentage, coloured by state."""

    def paint(self, p: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        p.save()
        paint_background(p, opt)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        frac = float(index.data(DownloadRole.FRACTION) or 0.0)
        state = index.data(DownloadRole.STATE)
        fm = QFontMetrics(opt.font)
        label_w = fm.horizontalAdvance("100%") + 8
        r = QRectF(opt.rect.adjusted(10, 0, -10 - label_w, 0))
        bar = QRectF(r.left(), r.center().y() - 4, r.width(), 8)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(TRACK)
        p.drawRoundedRect(bar, 4, 4)
        if frac > 0:
            p.setBrush(STATE_COLORS.get(state, ACCENT))
            p.drawRoundedRect(QRectF(bar.left(), bar.top(), max(8.0, bar.width() * min(frac, 1.0)), bar.height()), 4, 4)
        p.setPen(QColor("#c9ced8"))
        p.setFont(opt.font)
        p.drawText(
            QRectF(r.right() + 6, opt.rect.top(), label_w, opt.rect.height()),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            f"{frac * 100:.0f}%",
        )
        p.restore()


class RowActions(QWidget):
    """The buttons of one download row (which ones depends on its state)."""

    def __init__(self, tab: DownloadsTab, download_id: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rowActions")
        self.tab = tab
        self.download_id = download_id
        self.state: DownloadState | None = None
        lay = QHBoxLayout(self)
        lay.setContentsMargins(4, 0, 6, 0)
        lay.setSpacing(4)
        lay.addStretch(1)
        self.buttons: dict[str, QPushButton] = {}
        for key, label, tip in (
            ("load", "Load", "Load this model in the engine"),
            ("show", "Show", "Show the file in the file manager"),
            ("pause", "Pause", "Pause; the partial file is kept, and resuming continues from it"),
            ("resume", "Resume", "Continue from where it stopped"),
            ("retry", "Retry", "Try again from where it stopped"),
            ("cancel", "Cancel", "Stop and delete the partial file"),
            ("remove", "Remove", "Remove from this list (files are not touched)"),
        ):
            b = QPushButton(label)
            b.setObjectName(f"{key}Button")
            b.setProperty("rowAction", True)
            b.setToolTip(tip)
            b.clicked.connect(lambda _=False, k=key: tab.act(k, self.download_id))
            lay.addWidget(b)
            self.buttons[key] = b

    def set_state(self, state: DownloadState) -> None:
        if state == self.state:
            return
        self.state = state
        show = {
            DownloadState.QUEUED: ("pause", "cancel"),
            DownloadState.RUNNING: ("pause", "cancel"),
            DownloadState.PAUSED: ("resume", "cancel"),
            DownloadState.FAILED: ("retry", "cancel"),
            DownloadState.CANCELLED: ("remove",),
            DownloadState.DONE: ("load", "show", "remove"),
        }[state]
        for k, b in self.buttons.items():
            b.setVisible(k in show)


class DownloadsTab(QWidget):
    """Model downloads: progress, speed, time left; pause, resume, cancel, retry, remove, load.

    Args:
        manager: the download manager (started and stopped by the owner).

    Signals:
        load_requested(str): load this downloaded model.
        notice(str, str): kind and text for the window's banner.
        download_finished(object): a :class:`DownloadStatus` that just reached *done*.
        statuses_changed(): rows were updated (after a clock tick with news).
        active_count_changed(int): downloads queued, running or paused.
    """

    load_requested = Signal(str)
    notice = Signal(str, str)
    download_finished = Signal(object)
    statuses_changed = Signal()
    active_count_changed = Signal(int)

    _status_arrived = Signal(object)  # internal: from the manager's threads, queued

    def __init__(self, manager: DownloadManager, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("downloadsTab")
        self.manager = manager
        self.pending: dict[str, DownloadStatus] = {}
        self.ticks = 0  # clock ticks that repainted rows (tests check the clock, not events, drives repaints)
        self.events = 0  # statuses received
        self.actions: dict[str, RowActions] = {}
        self._active = -1
        self._disk_checked = 0.0

        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 10, 12, 10)
        lay.setSpacing(8)
        top = QHBoxLayout()
        self.summary = QLabel("No downloads.")
        self.summary.setObjectName("downloadsSummary")
        top.addWidget(self.summary, 1)
        self.disk_label = QLabel("")
        self.disk_label.setObjectName("diskLabel")
        top.addWidget(self.disk_label)
        self.clear_button = QPushButton("Clear finished")
        self.clear_button.setObjectName("clearFinishedButton")
        self.clear_button.clicked.connect(self.clear_finished)
        top.addWidget(self.clear_button)
        lay.addLayout(top)

        self.model = DownloadsModel(self)
        self.view = QTableView()
        self.view.setObjectName("downloadsTable")
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setShowGrid(False)
        self.view.setMouseTracking(True)
        self.view.setWordWrap(False)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(50)
        self.view.setItemDelegate(FlatDelegate(self.view))
        self.view.setItemDelegateForColumn(
            DownloadColumn.NAME, TwoLineDelegate(DownloadRole.SUBTITLE, DownloadRole.SUBTITLE_COLOR, None, self.view)
        )
        self.view.setItemDelegateForColumn(DownloadColumn.PROGRESS, ProgressDelegate(self.view))
        hh = self.view.horizontalHeader()
        hh.setHighlightSections(False)
        hh.setSectionResizeMode(DownloadColumn.NAME, QHeaderView.ResizeMode.Stretch)
        for c, w in (
            (DownloadColumn.PROGRESS, 170),
            (DownloadColumn.BYTES, 150),
            (DownloadColumn.SPEED, 84),
            (DownloadColumn.ETA, 90),
            (DownloadColumn.STATE, 120),
            (DownloadColumn.ACTIONS, 196),
        ):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.Fixed)
            self.view.setColumnWidth(c, w)
        self.view.selectionModel().currentRowChanged.connect(lambda *_: self._show_detail())
        lay.addWidget(self.view, 1)
        self.empty = QLabel(
            "Downloads from the Hub tab appear here. They keep going while you chat, "
            "and resume after a restart or a crash."
        )
        self.empty.setObjectName("hintLabel")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        lay.addWidget(self.empty, 1)
        self.detail = QLabel("")
        self.detail.setObjectName("downloadDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.RichText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.detail.setOpenExternalLinks(False)
        self.detail.linkActivated.connect(lambda url: dialogs.open_url(url))
        lay.addWidget(self.detail)

        self.clock = QTimer(self)
        self.clock.setInterval(REFRESH_MS)
        self.clock.timeout.connect(self._tick)
        self._status_arrived.connect(self._on_status, Qt.ConnectionType.QueuedConnection)
        self._attached = False

    # --- the manager ------------------------------------------------------------------------------
    def attach(self) -> None:
        """Show the manager's downloads and listen to it (call before ``manager.start()``)."""
        for st in self.manager.items():
            self._apply(st, initial=True)
        self.manager.add_listener(self._listener)
        self._attached = True
        self._after_update()

    def detach(self) -> None:
        """Stop listening and stop the clock (before ``manager.shutdown()``)."""
        if self._attached:
            self.manager.remove_listener(self._listener)
            self._attached = False
        self.clock.stop()
        self.pending.clear()

    def _listener(self, status: DownloadStatus) -> None:
        """Called on the manager's threads: hand the status to the UI thread, nothing else."""
        try:
            self._status_arrived.emit(status)
        except RuntimeError:  # the widget is gone
            pass

    def _on_status(self, status: DownloadStatus) -> None:
        if not self._attached:
            return
        self.events += 1
        self.pending[status.id] = status
        if not self.clock.isActive():
            self.clock.start()

    def _tick(self) -> None:
        if not self.pending:
            self.clock.stop()
            return
        pending, self.pending = self.pending, {}
        for st in pending.values():
            self._apply(st)
        self.ticks += 1
        self._after_update()

    def flush(self) -> None:
        """Apply pending statuses now (as the next clock tick would)."""
        self._tick()

    def _apply(self, st: DownloadStatus, *, initial: bool = False) -> None:
        if st.state is DownloadState.CANCELLED and self.model.row_of(st.id) < 0 and not initial:
            return  # a removed download's last word
        row, prev = self.model.upsert(st)
        acts = self.actions.get(st.id)
        if acts is None:
            acts = RowActions(self, st.id)
            self.actions[st.id] = acts
            self.view.setIndexWidget(self.model.index(row, DownloadColumn.ACTIONS), acts)
        acts.set_state(st.state)
        if initial:
            return
        was = prev.state if prev is not None else None
        if st.state is DownloadState.DONE and was is not DownloadState.DONE:
            self.notice.emit(
                "info",
                f"Downloaded {st.name} ({format_bytes(st.total_bytes)}); size and sha256 match the Hub's listing.",
            )
            self.download_finished.emit(st)
        elif st.state is DownloadState.FAILED and was is not DownloadState.FAILED:
            self.notice.emit("error", f"The download of {st.name} failed: {st.error or 'unknown error'}")

    def _after_update(self) -> None:
        rows = self.model.rows
        n = len(rows)
        running = [s for s in rows if s.state is DownloadState.RUNNING]
        queued = sum(1 for s in rows if s.state is DownloadState.QUEUED)
        paused = sum(1 for s in rows if s.state is DownloadState.PAUSED)
        bits = []
        if running:
            total = sum(s.speed for s in running)
            bits.append(f"{len(running)} downloading" + (f" at {speed(total)}" if total > 0 else ""))
        if queued:
            bits.append(f"{queued} queued")
        if paused:
            bits.append(f"{paused} paused")
        for state, word in (
            (DownloadState.DONE, "done"),
            (DownloadState.FAILED, "failed"),
            (DownloadState.CANCELLED, "cancelled"),
        ):
            n_state = sum(1 for s in rows if s.state is state)
            if n_state:
                bits.append(f"{n_state} {word}")
        self.summary.setText("  ·  ".join(bits) if bits else "No downloads.")
        self.clear_button.setEnabled(any(s.state in TERMINAL for s in rows))
        self.view.setVisible(n > 0)
        self.empty.setVisible(n == 0)
        now = time.monotonic()
        if now - self._disk_checked > 1.0:  # a statvfs at most once a second
            self._disk_checked = now
            try:
                paths = self.manager.paths
                free = shutil.disk_usage(paths.models_dir if paths.models_dir.exists() else paths.data_dir).free
                self.disk_label.setText(f"{format_bytes(free)} free for models")
            except OSError:
                self.disk_label.setText("")
        active = len(running) + queued + paused
        if active != self._active:
            self._active = active
            self.active_count_changed.emit(active)
        self._show_detail()
        self.statuses_changed.emit()

    def _show_detail(self) -> None:
        idx = self.view.selectionModel().currentIndex()
        if not idx.isValid():
            failed = [s for s in self.model.rows if s.state is DownloadState.FAILED]
            st = failed[-1] if failed else None
        else:
            st = idx.data(DownloadRole.STATUS)
        if st is None:
            self.detail.hide()
            return
        text = f"<span style='color:#8b93a1'>{html.escape(f'{st.repo_id} · {st.name} → {st.path}')}</span>"
        if st.error:
            color = "#f87171" if st.state is DownloadState.FAILED else "#f5c451"
            text += f"<br><span style='color:{color}'>{linkify(st.error)}</span>"
        self.detail.setText(text)
        self.detail.show()

    def statuses_by_dest(self) -> dict[str, DownloadStatus]:
        """The newest status of each download, keyed by its first part's destination path."""
        out: dict[str, DownloadStatus] = {}
        for s in self.model.rows:
            key = str(s.path)
            if key not in out or out[key].state in TERMINAL:
                out[key] = s
        return out

    # --- actions ----------------------------------------------------------------------------------
    def act(self, action: str, download_id: str) -> None:
        """Run a row action: load, show, pause, resume, retry, cancel or remove."""
        st = self.model.status(download_id)
        if st is None:
            return
        try:
            if action == "load":
                self.load_requested.emit(str(st.path))
            elif action == "show":
                dialogs.open_folder(Path(st.path).parent)
            elif action == "pause":
                self.manager.pause(download_id)
            elif action in ("resume", "retry"):
                self.manager.resume(download_id)
            elif action == "cancel":
                self.manager.cancel(download_id)
            elif action == "remove":
                self.manager.remove(download_id)
                self.remove_row(download_id)
        except InsufficientSpaceError as exc:
            self.notice.emit("error", str(exc))
        except (KeyError, ValueError) as exc:
            log.info("download action %s on %s: %s", action, download_id, exc)
            self.notice.emit("warning", f"Could not {action} {st.name}: {exc}")

    def remove_row(self, download_id: str) -> None:
        self.pending.pop(download_id, None)
        self.actions.pop(download_id, None)
        self.model.remove(download_id)
        self._after_update()

    def clear_finished(self) -> None:
        """Forget every finished, failed or cancelled download (files are not touched)."""
        for s in list(self.model.rows):
            if s.state in TERMINAL:
                try:
                    self.manager.remove(s.id)
                except (KeyError, ValueError):
                    continue
                self.remove_row(s.id)

    def row_actions(self, download_id: str) -> RowActions | None:
        """The action buttons of a row (for tests and the window)."""
        return self.actions.get(download_id)
