"""The Library tab: every GGUF model Glassbox can load, with load, delete, show, import and folders.

Scans, imports, deletes and last-used updates run on one worker thread (the
:class:`~app.core.models.library.ModelLibrary` is used from one thread at a time);
their results come back by queued signal and replace the table's rows. The
table is :class:`~app.ui.models.library_model.LibraryModel` in a
:class:`~app.ui.models.library_view.LibraryView`; the import loop is
:func:`app.core.models.importer.import_files`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.models.hub import StarterModel, repo_page_url
from app.core.models.importer import ImportResult, import_files
from app.core.models.library import SOURCE_FOLDER, SOURCE_HF_CACHE, ModelEntry, ModelLibrary
from app.core.models.other_apps import suggested_folders
from app.ui.common import dialogs
from app.ui.common.fmt import format_bytes
from app.ui.common.severity import Severity
from app.ui.common.tasks import TaskPool
from app.ui.models.empty_page import EmptyLibraryPage, folder_label
from app.ui.models.library_model import LibraryColumn, LibraryModel, LibraryRole, same_path
from app.ui.models.library_view import LibraryView
from app.ui.models.starter_list import StarterList
from app.ui.models.widgets import FlatDelegate, InlineMessage, TwoLineDelegate

log = logging.getLogger(__name__)

NAME_MIN_PX = 240  # the Model column's least width: a name and its file name stay readable


class LibraryTab(QWidget):
    """The models Glassbox can load, from every place it knows.

    Args:
        library: the model library (used only from ``pool``'s thread).
        pool: a one-thread :class:`TaskPool` for scans, imports and deletes.
        get_folders, set_folders: read and store the added folders (``Settings.library_folders``).

    Signals:
        load_requested(str): load this GGUF (the first part of a split model).
        open_file_requested(): the person wants to open a GGUF file from anywhere.
        notice(Severity, str): how serious and the text, for the window's banner.
        starter_download_requested(StarterModel): download this starter model.
        entries_changed(): a scan finished (the rows were replaced).
        import_finished(ImportResult): an import ended (:class:`~app.core.models.importer.ImportResult`).
        quantize_requested(str): make a quantization of this GGUF (the first part of a split model).
    """

    load_requested = Signal(str)
    open_file_requested = Signal()
    notice = Signal(Severity, str)
    starter_download_requested = Signal(StarterModel)
    entries_changed = Signal()
    import_finished = Signal(ImportResult)
    quantize_requested = Signal(str)

    _import_progressed = Signal(str, int, int)  # internal, from the worker: name, done, total

    def __init__(
        self,
        library: ModelLibrary,
        pool: TaskPool,
        get_folders: Callable[[], list[Path]],
        set_folders: Callable[[list[Path]], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("libraryTab")
        self.library = library
        self.pool = pool
        self._get_folders = get_folders
        self._set_folders = set_folders
        self.scanned = False  # a scan has finished at least once
        self._scanning = False
        self._rescan = False
        self._importing = False
        self._cancel_import = False
        self._load_summary: Callable[[Path], str] | None = None
        self._select_after_scan: Path | None = None

        self.model = LibraryModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(LibraryRole.SORT)
        self.proxy.setFilterRole(LibraryRole.FILTER)
        self.proxy.setFilterKeyColumn(0)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 10, 12, 10)
        lay.setSpacing(8)

        # toolbar
        bar = QHBoxLayout()
        bar.setSpacing(6)
        self.filter = QLineEdit()
        self.filter.setObjectName("libraryFilter")
        self.filter.setPlaceholderText("Filter models by name, architecture, quant…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        bar.addWidget(self.filter, 1)
        self.count_label = QLabel("")
        self.count_label.setObjectName("countLabel")
        bar.addWidget(self.count_label)
        self.import_progress = QProgressBar()
        self.import_progress.setObjectName("importProgress")
        self.import_progress.setMaximumWidth(180)
        self.import_progress.setRange(0, 1000)
        self.import_progress.hide()
        bar.addWidget(self.import_progress)
        self.folders_button = QToolButton()
        self.folders_button.setObjectName("foldersButton")
        self.folders_button.setText("Folders  ▾")
        self.folders_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.folders_menu = QMenu(self.folders_button)
        self.folders_menu.aboutToShow.connect(self._fill_folders_menu)
        self.folders_button.setMenu(self.folders_menu)
        bar.addWidget(self.folders_button)
        self.import_button = QPushButton("Import…")
        self.import_button.setObjectName("importButton")
        self.import_button.setToolTip("Copy GGUF files into Glassbox's models folder (or drop them on the list)")
        self.import_button.clicked.connect(self.import_dialog)
        bar.addWidget(self.import_button)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setObjectName("refreshButton")
        self.refresh_button.clicked.connect(self.refresh)
        bar.addWidget(self.refresh_button)
        lay.addLayout(bar)

        self.message = InlineMessage()
        lay.addWidget(self.message)

        # pages: the table, or the first-run page
        self.stack = QStackedWidget()
        self.view = LibraryView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(LibraryColumn.LAST_USED, Qt.SortOrder.DescendingOrder)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setShowGrid(False)
        self.view.setMouseTracking(True)
        self.view.setWordWrap(False)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(46)
        self.view.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.view.setItemDelegate(FlatDelegate(self.view))
        self.view.setItemDelegateForColumn(
            LibraryColumn.NAME,
            TwoLineDelegate(LibraryRole.SUBTITLE, LibraryRole.SUBTITLE_COLOR, LibraryRole.BADGE, self.view),
        )
        hh = self.view.horizontalHeader()
        hh.setHighlightSections(False)
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setSectionResizeMode(LibraryColumn.NAME, QHeaderView.ResizeMode.Stretch)
        self.view.set_columns(
            LibraryColumn.NAME,
            NAME_MIN_PX,
            {
                LibraryColumn.ARCHITECTURE: 110,
                LibraryColumn.PARAMS: 80,
                LibraryColumn.QUANT: 90,
                LibraryColumn.SIZE: 90,
                LibraryColumn.CONTEXT: 95,
                LibraryColumn.LAST_USED: 100,
                LibraryColumn.SOURCE: 90,
            },
            # hidden first when the table is narrow (they come back as it widens)
            (LibraryColumn.SOURCE, LibraryColumn.LAST_USED, LibraryColumn.CONTEXT, LibraryColumn.PARAMS),
        )
        self.view.doubleClicked.connect(lambda _i: self.load_selected())
        self.view.load_pressed.connect(self.load_selected)
        self.view.delete_pressed.connect(self.delete_selected)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.view.files_dropped.connect(self.import_files)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())
        self.stack.addWidget(self.view)
        self.empty_page = EmptyLibraryPage()
        self.empty_page.open_file_requested.connect(self.open_file_requested)
        self.empty_page.import_requested.connect(self.import_dialog)
        self.empty_page.add_folder_requested.connect(self.add_folder_dialog)
        self.empty_page.folder_chosen.connect(self.add_folder)
        self.empty_page.starters.download_requested.connect(self.starter_download_requested)
        self.stack.addWidget(self.empty_page)
        lay.addWidget(self.stack, 1)

        # details and actions for the selected model
        details = QFrame()
        details.setObjectName("detailsBar")
        dl = QHBoxLayout(details)
        dl.setContentsMargins(12, 8, 8, 8)
        col = QVBoxLayout()
        col.setSpacing(2)
        self.detail_title = QLabel("")
        self.detail_title.setObjectName("detailTitle")
        self.detail_text = QLabel("Select a model.")
        self.detail_text.setObjectName("detailText")
        self.detail_text.setWordWrap(True)
        self.detail_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail_load = QLabel("")  # what the selected file loads with (set_load_summary)
        self.detail_load.setObjectName("detailLoad")
        self.detail_load.setWordWrap(True)
        self.detail_load.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail_load.hide()
        col.addWidget(self.detail_title)
        col.addWidget(self.detail_text)
        col.addWidget(self.detail_load)
        dl.addLayout(col, 1)
        self.show_button = QPushButton("Show in folder")
        self.show_button.setObjectName("showButton")
        self.show_button.clicked.connect(self.show_selected)
        self.delete_button = QPushButton("Delete…")
        self.delete_button.setObjectName("deleteButton")
        self.delete_button.clicked.connect(self.delete_selected)
        self.quantize_button = QPushButton("Quantize…")
        self.quantize_button.setObjectName("quantizeButton")
        self.quantize_button.setToolTip("Make a quantization of this model with llama.cpp's quantizer")
        self.quantize_button.clicked.connect(self.quantize_selected)
        self.load_button = QPushButton("Load")
        self.load_button.setObjectName("loadButton")
        self.load_button.clicked.connect(self.load_selected)
        for b in (self.show_button, self.delete_button, self.quantize_button, self.load_button):
            dl.addWidget(b, 0, Qt.AlignmentFlag.AlignVCenter)
        self.details = details
        lay.addWidget(details)

        self._import_progressed.connect(self._on_import_progress, Qt.ConnectionType.QueuedConnection)
        self._selection_changed()
        self._update_page()

    # --- pages ------------------------------------------------------------------------------------
    @property
    def starters(self) -> StarterList:
        """The first-run page's starter models."""
        return self.empty_page.starters

    @property
    def open_file_button(self) -> QPushButton:
        """The first-run page's "Open a GGUF file…" button."""
        return self.empty_page.open_file_button

    def _update_page(self) -> None:
        empty = self.scanned and not self.model.entries
        self.stack.setCurrentWidget(self.empty_page if empty else self.view)
        self.details.setVisible(not empty)
        self.filter.setEnabled(not empty)
        if empty:
            self.empty_page.suggest_folders([f for f in suggested_folders() if f not in self._get_folders()])
        n = len(self.model.entries)
        bad = sum(1 for e in self.model.entries if e.error)
        size = sum(e.size for e in self.model.entries)
        self.count_label.setText(
            ""
            if not n
            else f"{n} model{'s' if n != 1 else ''} · {format_bytes(size)}" + (f" · {bad} with problems" if bad else "")
        )

    # --- scanning ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Scan every source again (on the worker thread); a scan in progress is followed by one more."""
        if self._scanning:
            self._rescan = True
            return
        self._scanning = True
        self.refresh_button.setEnabled(False)
        if not self.scanned:
            self.message.show_message(Severity.BUSY, "Looking for models…")
        self.pool.submit(self.library.scan, self._scanned, self._scan_failed)

    def _scanned(self, entries: list[ModelEntry]) -> None:
        self._scanning = False
        self.refresh_button.setEnabled(True)
        if self.message.kind == Severity.BUSY:
            self.message.clear_message()
        self.scanned = True
        self._set_entries(entries)
        if self._select_after_scan is not None and not self._rescan:
            self.select_path(self._select_after_scan)
            self._select_after_scan = None
        if self._rescan:
            self._rescan = False
            self.refresh()

    def refresh_and_select(self, path: Path) -> None:
        """Scan again, then select the model at ``path`` (a file just made)."""
        self._select_after_scan = path
        self.refresh()

    def _scan_failed(self, exc: BaseException) -> None:
        self._scanning = False
        self.refresh_button.setEnabled(True)
        self.scanned = True
        self.message.show_message(Severity.ERROR, f"The model library could not be read: {exc}")
        self._update_page()

    def _set_entries(self, entries: list[ModelEntry]) -> None:
        selected = self.selected_entry()
        self.model.set_entries(entries)
        self._update_page()
        if selected is not None:
            self.select_path(selected.path)
        self._selection_changed()
        self.entries_changed.emit()

    # --- selection --------------------------------------------------------------------------------
    def selected_entry(self) -> ModelEntry | None:
        rows = self.view.selectionModel().selectedRows()
        if not rows:
            return None
        entry: ModelEntry | None = rows[0].data(LibraryRole.ENTRY)
        return entry

    def select_path(self, path: str | os.PathLike[str]) -> bool:
        """Select the row of the model at ``path``; False when it is not listed (or filtered out)."""
        row = self.model.row_of(path)
        if row < 0:
            return False
        idx = self.proxy.mapFromSource(self.model.index(row, 0))
        if not idx.isValid():
            return False
        self.view.selectionModel().select(
            idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )
        self.view.scrollTo(idx)
        return True

    def set_load_summary(self, summary: Callable[[Path], str] | None) -> None:
        """Show, under the selected model, what it will be loaded with (``summary(path)``: a line
        naming its load settings and where they come from); None shows nothing."""
        self._load_summary = summary
        self._selection_changed()

    def show_details(self) -> None:
        """Show the selected model's details again (what it loads with may have changed)."""
        self._selection_changed()

    def _selection_changed(self) -> None:
        e = self.selected_entry()
        load = self._load_summary(e.path) if e is not None and e.ok and self._load_summary is not None else ""
        self.detail_load.setText(load)
        self.detail_load.setVisible(bool(load))
        for b in (self.show_button, self.delete_button, self.load_button):
            b.setEnabled(e is not None)
        self.quantize_button.setEnabled(e is not None and e.ok)
        if e is None:
            self.detail_title.setText("")
            self.detail_text.setText("Select a model to load, show or delete it. Drop .gguf files here to import them.")
            self.detail_text.setProperty("error", False)
        else:
            self.load_button.setEnabled(e.ok)
            self.detail_title.setText(e.name)
            if e.error:
                self.detail_text.setText(e.error)
            else:
                parts = f" · {len(e.paths)} parts" if e.is_split else ""
                self.detail_text.setText(f"{e.path}{parts} · {e.source_label}")
            self.detail_text.setProperty("error", bool(e.error))
        self.detail_text.style().unpolish(self.detail_text)
        self.detail_text.style().polish(self.detail_text)

    def _context_menu(self, pos: Any) -> None:
        if not self.view.indexAt(pos).isValid():
            return
        e = self.selected_entry()
        if e is None:
            return
        m = QMenu(self)
        load = m.addAction("Load", self.load_selected)
        load.setEnabled(e.ok)
        m.addAction("Show in folder", self.show_selected)
        m.addAction("Make a quantization…", self.quantize_selected).setEnabled(e.ok)
        m.addAction("Copy path", lambda: QGuiApplication.clipboard().setText(str(e.path)))
        if e.repo_id:
            m.addAction("Open on huggingface.co", lambda: dialogs.open_url(repo_page_url(e.repo_id or "")))
        m.addSeparator()
        m.addAction("Delete…", self.delete_selected)
        m.exec(self.view.viewport().mapToGlobal(pos))

    # --- actions ----------------------------------------------------------------------------------
    def load_selected(self) -> None:
        e = self.selected_entry()
        if e is None:
            return
        if e.error:
            self.notice.emit(Severity.ERROR, e.error)
            return
        self.load_requested.emit(str(e.path))

    def quantize_selected(self) -> None:
        e = self.selected_entry()
        if e is not None and e.ok:
            self.quantize_requested.emit(str(e.path))

    def show_selected(self) -> None:
        e = self.selected_entry()
        if e is not None:
            dialogs.open_folder(e.folder)

    def delete_selected(self) -> None:
        """Ask, then delete every file of the selected model (on the worker thread)."""
        e = self.selected_entry()
        if e is None:
            return
        present = [p for p in e.paths if p not in e.missing_parts]
        files = "\n".join(f"• {p}" for p in present)
        where = {
            SOURCE_HF_CACHE: "It is in the Hugging Face cache, which other tools share. ",
            SOURCE_FOLDER: f"It is in a folder you added ({e.source_label}). ",
        }.get(e.source, "")
        loaded = (
            "It is loaded now: the engine keeps it open until the model is unloaded. "
            if same_path(e.path, self.model.loaded_path)
            else ""
        )
        n = len(present)
        details = (
            f"{files}\n\n{n} file{'s' if n != 1 else ''}, {format_bytes(e.size)} in all. {where}{loaded}"
            "The files are deleted from the disk, not moved to the trash."
        )
        if not dialogs.confirm(self, "Delete model", f"Delete {e.name}?", details):
            return
        self.pool.submit(
            lambda: self.library.delete(e),
            lambda deleted: self._deleted(e, deleted),
            lambda exc: self._delete_failed(e, exc),
        )

    def _deleted(self, e: ModelEntry, deleted: list[Path]) -> None:
        self._set_entries(self.library.entries)
        self.notice.emit(
            Severity.INFO,
            f"Deleted {e.name} ({len(deleted)} file{'s' if len(deleted) != 1 else ''}, {format_bytes(e.size)}).",
        )

    def _delete_failed(self, e: ModelEntry, exc: BaseException) -> None:
        self.notice.emit(Severity.ERROR, f"{e.name} could not be deleted: {exc}")
        self.refresh()

    # --- import -----------------------------------------------------------------------------------
    def import_dialog(self) -> None:
        paths = dialogs.choose_gguf_files(self, Path.home())
        if paths:
            self.import_files(paths)

    def import_files(self, paths: list[str]) -> None:
        """Copy GGUF files into the models folder (atomically, on the worker thread).

        The loop is :func:`app.core.models.importer.import_files`; :attr:`import_finished`
        is emitted when it ends (rows replaced, notices sent).
        """
        if not paths:
            return
        self._importing = True
        self._cancel_import = False
        self.import_progress.setValue(0)
        self.import_progress.setFormat(f"Importing {Path(paths[0]).name}… %p%")
        self.import_progress.show()
        library = self.library
        self.pool.submit(
            lambda: import_files(
                library, paths, progress=self._import_progressed.emit, cancelled=lambda: self._cancel_import
            ),
            self._imported,
            self._import_failed,
        )

    def _on_import_progress(self, name: str, done: int, total: int) -> None:
        if self._importing and total:
            self.import_progress.setFormat(f"Importing {name}… %p%")
            self.import_progress.setValue(int(1000 * done / total))

    def _imported(self, result: ImportResult) -> None:
        self._importing = False
        self.import_progress.hide()
        self._set_entries(self.library.entries)
        if result.imported:
            self.select_path(result.imported[-1].path)
            names = ", ".join(e.name for e in result.imported)
            self.notice.emit(Severity.INFO, f"Imported {names} into the models folder.")
        if result.errors:
            self.notice.emit(Severity.ERROR, "Import failed: " + "; ".join(result.errors))
            self.message.show_message(Severity.ERROR, "Import failed: " + "; ".join(result.errors))
        self.import_finished.emit(result)

    def _import_failed(self, exc: BaseException) -> None:
        self._importing = False
        self.import_progress.hide()
        self.notice.emit(Severity.ERROR, f"Import failed: {exc}")
        self.import_finished.emit(ImportResult(errors=[str(exc)]))

    def cancel_import(self) -> None:
        """Stop an import at its next block (the partial copy is removed)."""
        self._cancel_import = True

    # --- folders ----------------------------------------------------------------------------------
    def _fill_folders_menu(self) -> None:
        m = self.folders_menu
        m.clear()
        a = m.addAction(f"Glassbox models folder: {self.library.paths.models_dir}")
        a.triggered.connect(lambda: dialogs.open_folder(self.library.paths.models_dir))
        m.addAction("Hugging Face cache (shared with other tools)").setEnabled(False)
        folders = self._get_folders()
        if folders:
            m.addSeparator()
            for f in folders:
                sub = m.addMenu(str(f))
                _add_folder_action(sub, "Show in file manager", dialogs.open_folder, f)
                _add_folder_action(sub, "Remove from the library", self.remove_folder, f)
        m.addSeparator()
        for f in suggested_folders():
            if f not in folders:
                _add_folder_action(m, f"Add {folder_label(f)} (found)", self.add_folder, f)
        m.addAction("Add a folder…", self.add_folder_dialog)

    def add_folder_dialog(self) -> None:
        path = dialogs.choose_folder(self, Path.home())
        if path:
            self.add_folder(Path(path))

    def add_folder(self, folder: Path) -> None:
        """Search ``folder`` (recursively) too, remember it, and rescan."""
        folders = self._get_folders()
        if folder in folders:
            return
        self._apply_folders([*folders, folder])

    def remove_folder(self, folder: Path) -> None:
        """Stop searching ``folder`` (its files stay where they are)."""
        self._apply_folders([f for f in self._get_folders() if f != folder])

    def _apply_folders(self, folders: list[Path]) -> None:
        self._set_folders(folders)
        new = list(self._get_folders())

        def work() -> list[ModelEntry]:
            self.library.folders = new
            return self.library.scan()

        self._scanning = True
        self.pool.submit(work, self._scanned, self._scan_failed)

    # --- usage ------------------------------------------------------------------------------------
    def set_loaded(self, path: str | None) -> None:
        """Mark the loaded model's row and remember when it was used."""
        self.model.set_loaded(path)
        if path is None:
            return

        def work() -> list[ModelEntry]:
            try:
                self.library.mark_used(path)
            except OSError as exc:
                log.warning("could not record the model's last use: %s", exc)
            return self.library.entries

        self.pool.submit(work, lambda entries: self._set_entries(entries) if self.scanned else None)


def _add_folder_action(menu: QMenu, text: str, act: Callable[[Path], object], folder: Path) -> None:
    """A menu entry that calls ``act(folder)`` when chosen."""
    menu.addAction(text, lambda: act(folder))
