"""The Downloads tab: one row per download with progress, speed, time left and its actions.

The :class:`~app.core.models.downloads.DownloadManager` calls its listeners on its
worker threads. :class:`DownloadsTab`'s listener only emits a queued signal;
on the UI thread the newest status of each download is kept, and the rows
are repainted by a clock (:data:`REFRESH_MS`) while statuses keep arriving,
never per event. The table is :class:`~app.ui.models.downloads_model.DownloadsModel`;
the progress bar and the row buttons are in :mod:`~app.ui.models.download_row`.
"""

from __future__ import annotations

import contextlib
import html
import logging
import shutil
import time
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core.models.downloads import TERMINAL, DownloadManager, DownloadState, DownloadStatus, InsufficientSpaceError
from app.ui.common import dialogs, palette
from app.ui.common.fmt import format_bytes, speed
from app.ui.common.severity import Severity
from app.ui.models.download_actions import DownloadAction
from app.ui.models.download_row import ProgressDelegate, RowActions
from app.ui.models.downloads_model import DownloadColumn, DownloadRole, DownloadsModel
from app.ui.models.widgets import FlatDelegate, TwoLineDelegate, linkify

log = logging.getLogger(__name__)

REFRESH_MS = 125  # the repaint clock: 8 Hz while statuses arrive


class DownloadsTab(QWidget):
    """Model downloads: progress, speed, time left; pause, resume, cancel, retry, remove, load.

    Args:
        manager: the download manager (started and stopped by the owner).

    Signals:
        load_requested(str): load this downloaded model.
        notice(Severity, str): how serious and the text, for the window's banner.
        download_finished(DownloadStatus): a download that just reached *done*.
        statuses_changed(): rows were updated (after a clock tick with news).
        active_count_changed(int): downloads queued, running or paused.
    """

    load_requested = Signal(str)
    notice = Signal(Severity, str)
    download_finished = Signal(DownloadStatus)
    statuses_changed = Signal()
    active_count_changed = Signal(int)

    _status_arrived = Signal(DownloadStatus)  # internal: from the manager's threads, queued

    def __init__(self, manager: DownloadManager, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("downloadsTab")
        self.manager = manager
        self.pending: dict[str, DownloadStatus] = {}
        self.ticks = 0  # clock ticks that repainted rows (tests check the clock, not events, drives repaints)
        self.events = 0  # statuses received
        self._row_actions: dict[str, RowActions] = {}  # by download id
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
        self.manager.add_listener(self.receive_status)
        self._attached = True
        self._after_update()

    def detach(self) -> None:
        """Stop listening and stop the clock (before ``manager.shutdown()``)."""
        if self._attached:
            self.manager.remove_listener(self.receive_status)
            self._attached = False
        self.clock.stop()
        self.pending.clear()

    def receive_status(self, status: DownloadStatus) -> None:
        """The manager's listener, called on its threads: hand the status to the UI thread, nothing else.

        The status is applied at the next tick of the repaint clock (:data:`REFRESH_MS`).
        """
        with contextlib.suppress(RuntimeError):  # the widget is gone
            self._status_arrived.emit(status)

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
        acts = self._row_actions.get(st.id)
        if acts is None:
            acts = RowActions(self.act, st.id)
            self._row_actions[st.id] = acts
            self.view.setIndexWidget(self.model.index(row, DownloadColumn.ACTIONS), acts)
        acts.set_state(st.state)
        if initial:
            return
        was = prev.state if prev is not None else None
        if st.state is DownloadState.DONE and was is not DownloadState.DONE:
            self.notice.emit(
                Severity.INFO,
                f"Downloaded {st.name} ({format_bytes(st.total_bytes)}); size and sha256 match the Hub's listing.",
            )
            self.download_finished.emit(st)
        elif st.state is DownloadState.FAILED and was is not DownloadState.FAILED:
            self.notice.emit(Severity.ERROR, f"The download of {st.name} failed: {st.error or 'unknown error'}")

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
        text = f"<span style='color:{palette.MUTED}'>{html.escape(f'{st.repo_id} · {st.name} → {st.path}')}</span>"
        if st.error:
            color = palette.RED if st.state is DownloadState.FAILED else palette.YELLOW
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
    def act(self, action: DownloadAction, download_id: str) -> None:
        """Run a row action: load, show, pause, resume, retry, cancel or remove."""
        st = self.model.status(download_id)
        if st is None:
            return
        action = DownloadAction(action)
        try:
            if action is DownloadAction.LOAD:
                self.load_requested.emit(str(st.path))
            elif action is DownloadAction.SHOW:
                dialogs.open_folder(Path(st.path).parent)
            elif action is DownloadAction.PAUSE:
                self.manager.pause(download_id)
            elif action in (DownloadAction.RESUME, DownloadAction.RETRY):
                self.manager.resume(download_id)
            elif action is DownloadAction.CANCEL:
                self.manager.cancel(download_id)
            elif action is DownloadAction.REMOVE:
                self.manager.remove(download_id)
                self.remove_row(download_id)
        except InsufficientSpaceError as exc:
            self.notice.emit(Severity.ERROR, str(exc))
        except (KeyError, ValueError) as exc:
            log.info("download action %s on %s: %s", action.value, download_id, exc)
            self.notice.emit(Severity.WARNING, f"Could not {action.value} {st.name}: {exc}")

    def remove_row(self, download_id: str) -> None:
        self.pending.pop(download_id, None)
        self._row_actions.pop(download_id, None)
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
        return self._row_actions.get(download_id)
