"""The Hub tab: search GGUF repositories, list a repository's files, judge fit, download.

Every Hub call runs on a worker thread (:class:`~app.ui.common.tasks.TaskPool`);
a newer search, listing or verdict supersedes an older one still in flight.
Nothing here touches the network until the person searches: the tab opens
empty, and with ``HF_HUB_OFFLINE`` set a search says "offline" at once,
without a worker call. The item models are in :mod:`app.ui.models.hub_models`,
the result cards in :mod:`~app.ui.models.repo_card`, the file's fit panel in
:mod:`~app.ui.models.file_detail` and the token row in :mod:`~app.ui.models.token_box`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core.gguf.gguf_info import GGUFError
from app.core.hardware.fit import FitReport, SystemMemory, Verdict
from app.core.models.downloads import DownloadStatus, dest_dir_for
from app.core.models.hub import (
    HubAuthError,
    HubClient,
    HubError,
    HubFile,
    HubOfflineError,
    RepoFiles,
    RepoSummary,
    is_offline_mode,
    offline_error,
    repo_page_url,
    scrub,
)
from app.ui.common import dialogs, palette
from app.ui.common.fmt import ago, format_bytes
from app.ui.common.severity import Severity
from app.ui.common.tasks import TaskPool
from app.ui.models.download_actions import DownloadAction, hub_button
from app.ui.models.file_detail import FileDetail
from app.ui.models.hub_models import (
    VERDICT_SENTENCE,
    FileColumn,
    FileRole,
    FitState,
    HubFilesModel,
    RepoResultsModel,
    RepoRole,
)
from app.ui.models.repo_card import RepoDelegate
from app.ui.models.token_box import TokenBox
from app.ui.models.widgets import FlatDelegate, InlineMessage

log = logging.getLogger(__name__)

SORT_CHOICES = (("Most downloaded", "downloads"), ("Most liked", "likes"), ("Recently updated", "recent"))
SEARCH_LIMIT = 50


class HubTab(QWidget):
    """Search the Hugging Face Hub and download GGUF files that fit.

    Args:
        client: returns the current :class:`HubClient` (rebuilt when the token changes).
        pool: worker threads for Hub calls.
        models_dir: where downloads go (to show which files are already here).
        get_n_ctx: the context length verdicts are for.
        get_memory: the machine's memory (None: measured at each verdict).
        get_saved_token, save_token: the token in Glassbox's settings.

    Signals:
        download_requested(HubFile): download this file.
        load_requested(str): load this downloaded file.
        notice(Severity, str): how serious and the text, for the window's banner.
    """

    download_requested = Signal(HubFile)
    load_requested = Signal(str)
    notice = Signal(Severity, str)

    def __init__(
        self,
        client: Callable[[], HubClient],
        pool: TaskPool,
        models_dir: Path,
        get_n_ctx: Callable[[], int],
        get_memory: Callable[[], SystemMemory | None],
        get_saved_token: Callable[[], str | None],
        save_token: Callable[[str | None], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("hubTab")
        self._client = client
        self.pool = pool
        self.models_dir = models_dir
        self._get_n_ctx = get_n_ctx
        self._get_memory = get_memory
        self._get_saved_token = get_saved_token
        self.searched = False
        self.current_repo: str | None = None
        self.repo_files: RepoFiles | None = None
        self.statuses: dict[str, DownloadStatus] = {}
        self.buttons: dict[int, QPushButton] = {}

        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 10, 12, 10)
        lay.setSpacing(8)

        bar = QHBoxLayout()
        bar.setSpacing(6)
        self.query = QLineEdit()
        self.query.setObjectName("hubSearch")
        self.query.setPlaceholderText("Search GGUF models on Hugging Face (e.g. qwen, llama 3.2, smollm)…")
        self.query.setClearButtonEnabled(True)
        self.query.returnPressed.connect(self.search)
        bar.addWidget(self.query, 1)
        self.sort = QComboBox()
        self.sort.setObjectName("hubSort")
        for label, value in SORT_CHOICES:
            self.sort.addItem(label, value)
        self.sort.currentIndexChanged.connect(lambda _i: self.search() if self.searched else None)
        bar.addWidget(self.sort)
        self.search_button = QPushButton("Search")
        self.search_button.setObjectName("primaryButton")
        self.search_button.clicked.connect(self.search)
        bar.addWidget(self.search_button)
        lay.addLayout(bar)

        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("hubSplit")
        split.setChildrenCollapsible(False)

        left = QFrame()
        left.setObjectName("resultsPane")
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.setSpacing(0)
        self.search_message = InlineMessage()
        ll.addWidget(self.search_message)
        self.results_model = RepoResultsModel(self)
        self.results = QListView()
        self.results.setObjectName("hubResults")
        self.results.setModel(self.results_model)
        self.results.setItemDelegate(RepoDelegate(self.results))
        self.results.setMouseTracking(True)
        self.results.setUniformItemSizes(True)
        self.results.selectionModel().currentChanged.connect(self._result_changed)
        ll.addWidget(self.results, 1)
        self.results_hint = QLabel(
            "Search the Hugging Face Hub for GGUF models.\nNothing is sent over the network until you search."
        )
        self.results_hint.setObjectName("hintLabel")
        self.results_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.results_hint.setWordWrap(True)
        ll.addWidget(self.results_hint, 1)
        self.results.hide()
        split.addWidget(left)

        right = QFrame()
        right.setObjectName("repoPane")
        rl = QVBoxLayout(right)
        rl.setContentsMargins(16, 12, 16, 12)
        rl.setSpacing(6)
        head = QHBoxLayout()
        self.repo_title = QLabel("")
        self.repo_title.setObjectName("repoTitle")
        self.repo_title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        head.addWidget(self.repo_title, 1)
        self.repo_link = QLabel("")
        self.repo_link.setObjectName("repoLink")
        self.repo_link.setTextFormat(Qt.TextFormat.RichText)
        self.repo_link.setOpenExternalLinks(False)
        self.repo_link.linkActivated.connect(lambda url: dialogs.open_url(url))
        head.addWidget(self.repo_link)
        rl.addLayout(head)
        self.repo_facts = QLabel("")
        self.repo_facts.setObjectName("repoFacts")
        self.repo_facts.setWordWrap(True)
        rl.addWidget(self.repo_facts)
        self.repo_message = InlineMessage()
        rl.addWidget(self.repo_message)
        self.files_model = HubFilesModel(self)
        self.files = QTableView()
        self.files.setObjectName("hubFiles")
        self.files.setModel(self.files_model)
        self.files.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.files.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.files.setShowGrid(False)
        self.files.setMouseTracking(True)
        self.files.setWordWrap(False)
        self.files.setItemDelegate(FlatDelegate(self.files, elide_middle=(FileColumn.NAME,)))
        self.files.verticalHeader().hide()
        self.files.verticalHeader().setDefaultSectionSize(38)
        fh = self.files.horizontalHeader()
        fh.setHighlightSections(False)
        fh.setSectionResizeMode(FileColumn.NAME, QHeaderView.ResizeMode.Stretch)
        for c, w in ((FileColumn.QUANT, 84), (FileColumn.SIZE, 80), (FileColumn.FIT, 188), (FileColumn.ACTION, 112)):
            fh.setSectionResizeMode(c, QHeaderView.ResizeMode.Fixed)
            self.files.setColumnWidth(c, w)
        self.files.selectionModel().currentRowChanged.connect(lambda *_: self._show_file_detail())
        for rows_replaced in (self.files_model.modelReset, self.files_model.rowsInserted, self.files_model.rowsRemoved):
            rows_replaced.connect(self._make_buttons)
        self.files_model.dataChanged.connect(self._file_rows_changed)
        rl.addWidget(self.files, 1)

        self.file_detail = FileDetail()
        rl.addWidget(self.file_detail)
        self.repo_hint = QLabel("Select a repository to see its GGUF files and whether each fits this computer.")
        self.repo_hint.setObjectName("hintLabel")
        self.repo_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.repo_hint.setWordWrap(True)
        rl.addWidget(self.repo_hint, 1)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([400, 700])
        lay.addWidget(split, 1)

        self.token_box = TokenBox(get_saved_token, save_token)
        self.token_box.token_saved.connect(self._token_saved)
        lay.addWidget(self.token_box)

        self._set_repo_visible(False)

    # --- token ------------------------------------------------------------------------------------
    def _token_saved(self) -> None:
        if self.current_repo and self.repo_files is not None:
            self._judge()  # a gated repository may be judged now

    def _scrub(self, text: str) -> str:
        return scrub(text, self._get_saved_token(), self.token_box.typed_token())

    # --- search -----------------------------------------------------------------------------------
    def search(self) -> None:
        """Search the Hub for the query (empty: all GGUF repositories) with the chosen order."""
        self.searched = True
        if is_offline_mode():
            self._search_failed(offline_error())
            return
        query = self.query.text().strip()
        sort = self.sort.currentData()
        client = self._client()
        self.search_message.show_message(
            Severity.BUSY, f"Searching the Hub for “{query}”…" if query else "Listing GGUF models on the Hub…"
        )
        self.search_button.setEnabled(False)
        self.pool.submit(
            lambda: client.search(query, sort=sort, limit=SEARCH_LIMIT),
            self._results,
            self._search_failed,
            key="search",
        )

    def _results(self, repos: list[RepoSummary]) -> None:
        self.search_button.setEnabled(True)
        self.results_model.set_repos(repos)
        self.results_hint.hide()
        self.results.show()
        if repos:
            self.search_message.clear_message()
        else:
            q = self.query.text().strip()
            self.search_message.show_message(
                Severity.INFO,
                f"No GGUF repository matches “{q}”." if q else "The Hub returned no GGUF repositories.",
            )

    def _search_failed(self, exc: BaseException) -> None:
        self.search_button.setEnabled(True)
        kind = Severity.WARNING if isinstance(exc, HubOfflineError) else Severity.ERROR
        text = exc.message if isinstance(exc, HubError) else f"Search failed: {type(exc).__name__}: {exc}"
        self.search_message.show_message(kind, self._scrub(text))
        if self.results_model.rowCount() == 0:
            self.results_hint.setText("No results: the search did not reach the Hub (see the message above).")

    # --- a repository -----------------------------------------------------------------------------
    def _result_changed(self, current: QModelIndex, _prev: QModelIndex) -> None:
        if current.isValid():
            self.open_repo(current.data(RepoRole.REPO_ID))

    def select_result(self, row: int) -> None:
        """Select the ``row``-th search result (and list its files)."""
        idx = self.results_model.index(row, 0)
        self.results.selectionModel().setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect)

    def _set_repo_visible(self, on: bool) -> None:
        for w in (self.repo_title, self.repo_link, self.repo_facts, self.files, self.file_detail):
            w.setVisible(on)
        self.repo_hint.setVisible(not on)
        if not on:
            self.repo_message.clear_message()

    def open_repo(self, repo_id: str) -> None:
        """List ``repo_id``'s GGUF files (worker), then judge their fit (worker)."""
        self.current_repo = repo_id
        self.repo_files = None
        self._set_repo_visible(True)
        self.repo_title.setText(repo_id)
        url = repo_page_url(repo_id)
        self.repo_link.setText(f'<a href="{url}" style="color:{palette.LINK}">Open on huggingface.co ↗</a>')
        self.repo_facts.setText("")
        self.files_model.set_files([], [])
        self.file_detail.hide()
        if is_offline_mode():
            self._files_failed(repo_id, offline_error())
            return
        self.repo_message.show_message(Severity.BUSY, "Listing the repository's GGUF files…")
        client = self._client()
        self.pool.submit(
            lambda: client.repo_files(repo_id),
            lambda rf: self._files(repo_id, rf),
            lambda exc: self._files_failed(repo_id, exc),
            key="files",
        )

    def _files(self, repo_id: str, rf: RepoFiles) -> None:
        if repo_id != self.current_repo:
            return
        self.repo_files = rf
        r = rf.repo
        facts = []
        if r.architecture:
            facts.append(r.architecture)
        if r.context_length:
            facts.append(f"trained ctx {r.context_length:,}")
        facts += [f"↓ {r.downloads:,} downloads", f"♥ {r.likes:,}"]
        if r.last_modified:
            facts.append(f"updated {ago(r.last_modified)}")
        if r.gated:
            facts.append("gated: needs a token and the licence accepted")
        files = [f for f in rf.files]
        n = len([f for f in files if not f.is_projector])
        facts.append(f"{n} GGUF model file{'s' if n != 1 else ''}")
        self.repo_facts.setText("  ·  ".join(facts))
        try:
            base = dest_dir_for(self.models_dir, repo_id)
            dests = [base.joinpath(*f.filename.split("/")) for f in files]
        except Exception:
            dests = [Path("/nonexistent") for _ in files]
        self.files_model.set_files(files, dests)
        if not files:
            self.repo_message.show_message(Severity.INFO, f"{repo_id} has no GGUF files.")
            return
        self.repo_message.clear_message()
        self._judge()

    def _files_failed(self, repo_id: str, exc: BaseException) -> None:
        if repo_id != self.current_repo:
            return
        self.files.hide()
        self._show_error(self.repo_message, exc)

    def _show_error(self, where: InlineMessage, exc: BaseException) -> None:
        if isinstance(exc, HubAuthError):
            where.show_message(Severity.ERROR, self._scrub(exc.message), [("Open the repository page ↗", exc.url)])
        elif isinstance(exc, HubOfflineError):
            where.show_message(Severity.WARNING, self._scrub(exc.message))
        elif isinstance(exc, (HubError, GGUFError)):
            where.show_message(Severity.ERROR, self._scrub(str(exc)))
        else:
            where.show_message(Severity.ERROR, self._scrub(f"{type(exc).__name__}: {exc}"))

    # --- fit --------------------------------------------------------------------------------------
    def _judge(self) -> None:
        rf = self.repo_files
        if rf is None or not rf.files:
            return
        repo_id = rf.repo.repo_id
        files = list(rf.files)
        n_ctx = self._get_n_ctx()
        memory = self._get_memory()
        self.files_model.set_fits({}, FitState.CHECKING)
        if is_offline_mode():
            self._fit_failed(repo_id, offline_error())
            return
        client = self._client()
        self.pool.submit(
            lambda: client.fit_all(files, n_ctx, memory=memory),
            lambda reps: self._fitted(repo_id, reps),
            lambda exc: self._fit_failed(repo_id, exc),
            key="fit",
        )

    def rejudge(self) -> None:
        """Judge the shown files again (n_ctx or memory changed); the header is cached."""
        if self.repo_files is not None:
            self._judge()

    def _fitted(self, repo_id: str, reports: dict[HubFile, FitReport]) -> None:
        if repo_id != self.current_repo:
            return
        self.files_model.set_fits(reports, FitState.NONE if reports else FitState.UNKNOWN)
        if self.repo_message.kind in (Severity.BUSY, Severity.ERROR) and reports:
            self.repo_message.clear_message()
        rec = self.files_model.recommended
        row = self.files_model.row_of(rec) if rec is not None else -1
        cur = self.files.selectionModel().currentIndex()
        if row >= 0 and not cur.isValid():
            self.files.selectRow(row)
        self._show_file_detail()

    def _fit_failed(self, repo_id: str, exc: BaseException) -> None:
        if repo_id != self.current_repo:
            return
        state = (
            FitState.NEEDS_ACCESS
            if isinstance(exc, HubAuthError)
            else FitState.OFFLINE
            if isinstance(exc, HubOfflineError)
            else FitState.UNKNOWN
        )
        self.files_model.set_fits({}, state)
        if isinstance(exc, (HubAuthError, HubOfflineError)):
            self._show_error(self.repo_message, exc)
        else:
            msg = exc.message if isinstance(exc, (HubError, GGUFError)) else f"{type(exc).__name__}: {exc}"
            self.repo_message.show_message(Severity.WARNING, self._scrub(f"Fit could not be judged: {msg}"))

    def _show_file_detail(self) -> None:
        idx = self.files.selectionModel().currentIndex()
        if not idx.isValid():
            rec = self.files_model.recommended
            row = self.files_model.row_of(rec) if rec is not None else -1
            if row < 0:
                self.file_detail.hide()
                return
            idx = self.files_model.index(row, 0)
        f: HubFile = idx.data(FileRole.FILE)
        self.file_detail.show_file(
            f, idx.data(FileRole.FIT), bool(idx.data(FileRole.RECOMMENDED)), self.files_model.verdict_text(f)
        )

    # --- download buttons -----------------------------------------------------------------------------
    def _make_buttons(self) -> None:
        self.buttons = {}
        for row, _f in enumerate(self.files_model.files):
            b = QPushButton("Download")
            b.setObjectName("downloadFileButton")
            b.clicked.connect(lambda _=False, r=row: self._button_clicked(r))
            self.files.setIndexWidget(self.files_model.index(row, FileColumn.ACTION), b)
            self.buttons[row] = b
        self._update_buttons()

    def _button_clicked(self, row: int) -> None:
        f = self.files_model.files[row]
        dest = self.files_model.dests[row]
        look = hub_button(self.statuses.get(str(dest)), dest)
        if look is not None and look.action is DownloadAction.LOAD:
            self.load_requested.emit(str(dest))
            return
        self.download_requested.emit(f)

    def set_download_statuses(self, statuses: dict[str, DownloadStatus]) -> None:
        """The downloads' latest statuses, keyed by the first part's destination path."""
        self.statuses = statuses
        self._update_buttons()

    def _file_rows_changed(self, *_: object) -> None:
        """A listed file's row changed (its download state, its verdict): its detail and buttons follow."""
        self._show_file_detail()
        self._update_buttons()

    def _update_buttons(self) -> None:
        for row, b in self.buttons.items():
            f = self.files_model.files[row]
            dest = self.files_model.dests[row]
            text, enabled, tip = "Download", True, f"Download {f.name} ({format_bytes(f.size)}) to {dest.parent}"
            rep = self.files_model.reports.get(f)
            if rep is not None and rep.verdict is not Verdict.FITS:
                tip += f"\nCareful: {VERDICT_SENTENCE[rep.verdict]}"
            if f.missing_parts:
                text, enabled, tip = "Incomplete", False, "The Hub listing lacks: " + ", ".join(f.missing_parts)
            elif f.is_projector:
                text, enabled, tip = "Projector", False, "A multimodal projector, not a model to chat with."
            elif (look := hub_button(self.statuses.get(str(dest)), dest)) is not None:
                text, enabled, tip = look.text, look.enabled, self._scrub(look.tip)
            b.setText(text)
            b.setEnabled(enabled)
            b.setToolTip(tip)
            b.setProperty("state", text.lower() if not text.endswith("%") else "running")
            b.style().unpolish(b)
            b.style().polish(b)
