"""The Hub tab: search GGUF repositories, list a repository's files, judge fit, download.

Every Hub call runs on a worker thread (:class:`~app.ui.common.tasks.TaskPool`);
a newer search, listing or verdict supersedes an older one still in flight.
Nothing here touches the network until the person searches: the tab opens
empty, and with ``HF_HUB_OFFLINE`` set a search says "offline" at once,
without a worker call.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QAbstractTableModel,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter
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
    QSizePolicy,
    QSplitter,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core.downloads import DownloadState, DownloadStatus, dest_dir_for
from app.core.fit import FitReport, SystemMemory, Verdict
from app.core.gguf_info import GGUFError
from app.core.hub import (
    HubAuthError,
    HubClient,
    HubError,
    HubFile,
    HubOfflineError,
    RepoFiles,
    RepoSummary,
    is_offline_mode,
    offline_error,
    recommend,
    repo_page_url,
    scrub,
)
from app.ui.common import dialogs
from app.ui.common.fmt import ago, count, format_bytes
from app.ui.common.tasks import TaskPool
from app.ui.library.widgets import (
    ACCENT,
    AMBER,
    FAINT,
    MUTED,
    PURPLE,
    TEXT,
    VERDICT_COLORS,
    FitBar,
    FlatDelegate,
    InlineMessage,
    paint_background,
)

log = logging.getLogger("glassbox.ui.library")

SORT_CHOICES = (("Most downloaded", "downloads"), ("Most liked", "likes"), ("Recently updated", "recent"))
SEARCH_LIMIT = 50
VERDICT_TEXT = {Verdict.FITS: "fits", Verdict.TIGHT: "tight", Verdict.DOES_NOT_FIT: "does not fit"}
VERDICT_SENTENCE = {
    Verdict.FITS: "Fits: it leaves at least 20% of the free memory for everything else.",
    Verdict.TIGHT: "Tight: it fits, but leaves less than 20% of the free memory; expect swapping or slow-downs.",
    Verdict.DOES_NOT_FIT: "Does not fit: it needs more memory than is free now.",
}
RECOMMENDED_BG = QColor("#132a1d")


# --- search results --------------------------------------------------------------------------------
class RepoRole(enum.IntEnum):
    """Item data roles of :class:`RepoResultsModel`."""

    REPO = Qt.ItemDataRole.UserRole + 1  #: the :class:`RepoSummary`
    REPO_ID = enum.auto()  #: str
    SUBTITLE = enum.auto()  #: downloads · likes · updated · architecture


class RepoResultsModel(QAbstractListModel):
    """Search results, in the Hub's order. Touch it only on the UI thread."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.repos: list[RepoSummary] = []

    def set_repos(self, repos: list[RepoSummary]) -> None:
        self.beginResetModel()
        self.repos = list(repos)
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.repos)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self.repos):
            return None
        r = self.repos[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, RepoRole.REPO_ID):
            return r.repo_id
        if role == RepoRole.REPO:
            return r
        if role == RepoRole.SUBTITLE:
            bits = [f"↓ {count(r.downloads)}", f"♥ {count(r.likes)}"]
            if r.last_modified:
                bits.append(f"updated {ago(r.last_modified)}")
            if r.architecture:
                bits.append(r.architecture)
            if r.gated:
                bits.append("gated")
            if r.private:
                bits.append("private")
            return "  ·  ".join(bits)
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{r.repo_id}\n{r.downloads:,} downloads · {r.likes:,} likes\n{r.url}"
        return None


class RepoDelegate(QStyledItemDelegate):
    """A search result as a card: ``owner /`` name, then counts and date."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        fm = QFontMetrics(option.font)
        return QSize(260, fm.height() * 2 + 20)

    def paint(self, p: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        p.save()
        paint_background(p, opt)
        p.setPen(QColor("#23272f"))
        p.drawLine(opt.rect.bottomLeft(), opt.rect.bottomRight())
        r = opt.rect.adjusted(12, 8, -10, -8)
        repo: RepoSummary = index.data(RepoRole.REPO)
        owner, _, name = repo.repo_id.partition("/")
        bold = QFont(opt.font)
        bold.setWeight(QFont.Weight.DemiBold)
        fm = QFontMetrics(opt.font)
        bfm = QFontMetrics(bold)
        owner_txt = f"{owner} / " if name else ""
        p.setFont(opt.font)
        p.setPen(MUTED)
        p.drawText(QRect(r.left(), r.top(), r.width(), fm.height()), Qt.AlignmentFlag.AlignLeft, owner_txt)
        x = r.left() + fm.horizontalAdvance(owner_txt)
        p.setFont(bold)
        p.setPen(TEXT)
        p.drawText(
            QRect(x, r.top(), r.right() - x, bfm.height()),
            Qt.AlignmentFlag.AlignLeft,
            bfm.elidedText(name or owner, Qt.TextElideMode.ElideRight, r.right() - x),
        )
        small = QFont(opt.font)
        small.setPointSizeF(opt.font.pointSizeF() * 0.86)
        sfm = QFontMetrics(small)
        p.setFont(small)
        p.setPen(FAINT)
        sub = str(index.data(RepoRole.SUBTITLE) or "")
        p.drawText(
            QRect(r.left(), r.top() + bfm.height() + 4, r.width(), sfm.height()),
            Qt.AlignmentFlag.AlignLeft,
            sfm.elidedText(sub, Qt.TextElideMode.ElideRight, r.width()),
        )
        p.restore()


# --- a repository's files -------------------------------------------------------------------------
class FileRole(enum.IntEnum):
    """Item data roles of :class:`HubFilesModel` (any column)."""

    FILE = Qt.ItemDataRole.UserRole + 1  #: the :class:`HubFile`
    FIT = enum.auto()  #: its :class:`FitReport` or None
    VERDICT = enum.auto()  #: the verdict's text ("fits", "tight", "does not fit") or a state
    RECOMMENDED = enum.auto()  #: bool
    DEST = enum.auto()  #: str, where the download goes


class FileColumn(enum.IntEnum):
    NAME = 0
    QUANT = 1
    SIZE = 2
    FIT = 3
    ACTION = 4


FILE_HEADERS = {
    FileColumn.NAME: "File",
    FileColumn.QUANT: "Quant",
    FileColumn.SIZE: "Size",
    FileColumn.FIT: "Fit on this computer",
    FileColumn.ACTION: "",
}


class HubFilesModel(QAbstractTableModel):
    """A repository's GGUF files with their fit verdicts. Touch it only on the UI thread."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.files: list[HubFile] = []
        self.dests: list[Path] = []
        self.reports: dict[HubFile, FitReport] = {}
        self.recommended: HubFile | None = None
        self.fit_state = ""  # "checking…", "needs access", "unknown" while no reports

    def set_files(self, files: list[HubFile], dests: list[Path]) -> None:
        self.beginResetModel()
        self.files = list(files)
        self.dests = list(dests)
        self.reports = {}
        self.recommended = None
        self.fit_state = "checking…"
        self.endResetModel()

    def set_fits(self, reports: dict[HubFile, FitReport], fit_state: str = "") -> None:
        self.reports = dict(reports)
        self.recommended = recommend(self.reports) if reports else None
        self.fit_state = fit_state
        if self.files:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.files) - 1, len(FileColumn) - 1))

    def row_of(self, file: HubFile) -> int:
        try:
            return self.files.index(file)
        except ValueError:
            return -1

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.files)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(FileColumn)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal:
            if role == Qt.ItemDataRole.DisplayRole:
                return FILE_HEADERS[FileColumn(section)]
            if role == Qt.ItemDataRole.TextAlignmentRole:
                right = FileColumn(section) == FileColumn.SIZE
                return int(
                    (Qt.AlignmentFlag.AlignRight if right else Qt.AlignmentFlag.AlignLeft)
                    | Qt.AlignmentFlag.AlignVCenter
                )
        return None

    def verdict_text(self, f: HubFile) -> str:
        if f.is_projector:
            return "projector"
        if f.missing_parts:
            return "incomplete"
        rep = self.reports.get(f)
        if rep is None:
            return self.fit_state or "—"
        return VERDICT_TEXT[rep.verdict]

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self.files):
            return None
        f = self.files[index.row()]
        col = FileColumn(index.column())
        rep = self.reports.get(f)
        rec = f == self.recommended
        if role == Qt.ItemDataRole.DisplayRole:
            if col == FileColumn.NAME:
                return f.name
            if col == FileColumn.QUANT:
                return f.quant or "—"
            if col == FileColumn.SIZE:
                return format_bytes(f.size)
            if col == FileColumn.FIT:
                text = self.verdict_text(f)
                return f"{text} · ★ recommended" if rec else text
            return None
        if role == FileRole.FILE:
            return f
        if role == FileRole.FIT:
            return rep
        if role == FileRole.VERDICT:
            return self.verdict_text(f)
        if role == FileRole.RECOMMENDED:
            return rec
        if role == FileRole.DEST:
            return str(self.dests[index.row()]) if index.row() < len(self.dests) else None
        if role == Qt.ItemDataRole.BackgroundRole and rec:
            return RECOMMENDED_BG
        if role == Qt.ItemDataRole.ForegroundRole:
            if col == FileColumn.FIT:
                return VERDICT_COLORS.get(rep.verdict, MUTED) if rep else MUTED
            if col == FileColumn.SIZE:
                return QColor("#c9ced8")
            return TEXT if col == FileColumn.NAME else QColor("#c9ced8")
        if role == Qt.ItemDataRole.FontRole:
            if col == FileColumn.QUANT:
                font = QFont("DejaVu Sans Mono")
                font.setPointSizeF(9)
                return font
            if col == FileColumn.FIT and rec:
                font = QFont()
                font.setWeight(QFont.Weight.DemiBold)
                return font
        if role == Qt.ItemDataRole.TextAlignmentRole and col == FileColumn.SIZE:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [f.filename]
            if len(f.parts) > 1:
                lines += [f"  part {i + 1}: {p.filename} ({format_bytes(p.size)})" for i, p in enumerate(f.parts)]
            if f.missing_parts:
                lines.append("The Hub listing lacks: " + ", ".join(f.missing_parts))
            if f.is_projector:
                lines.append("A multimodal projector (image input), not a model to chat with.")
            if rep is not None:
                lines.append(f"{VERDICT_TEXT[rep.verdict]}: {rep.breakdown()}")
            if rec:
                lines.append("Recommended: the largest quant that fits comfortably.")
            return "\n".join(lines)
        return None


# --- the tab ------------------------------------------------------------------------------------------
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
        download_requested(object): download this :class:`HubFile`.
        load_requested(str): load this downloaded file.
        notice(str, str): kind and text for the window's banner.
    """

    download_requested = Signal(object)
    load_requested = Signal(str)
    notice = Signal(str, str)

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
        self._save_token = save_token
        self.searched = False
        self.current_repo: str | None = None
        self.repo_files: RepoFiles | None = None
        self.statuses: dict[str, DownloadStatus] = {}
        self.buttons: dict[int, QPushButton] = {}
        self.last_error: BaseException | None = None

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
        self.files_model.modelReset.connect(self._make_buttons)
        self.files_model.dataChanged.connect(lambda *_: (self._show_file_detail(), self._update_buttons()))
        rl.addWidget(self.files, 1)

        self.file_detail = QFrame()
        self.file_detail.setObjectName("fileDetail")
        fd = QVBoxLayout(self.file_detail)
        fd.setContentsMargins(12, 10, 12, 10)
        fd.setSpacing(5)
        self.detail_title = QLabel("")
        self.detail_title.setObjectName("detailTitle")
        fd.addWidget(self.detail_title)
        self.verdict_label = QLabel("")
        self.verdict_label.setObjectName("verdictLabel")
        self.verdict_label.setWordWrap(True)
        fd.addWidget(self.verdict_label)
        self.fit_bar = FitBar()
        fd.addWidget(self.fit_bar)
        self.breakdown_label = QLabel("")
        self.breakdown_label.setObjectName("breakdownLabel")
        self.breakdown_label.setWordWrap(True)
        self.breakdown_label.setTextFormat(Qt.TextFormat.RichText)
        fd.addWidget(self.breakdown_label)
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

        tok = QFrame()
        tok.setObjectName("tokenRow")
        tl = QHBoxLayout(tok)
        tl.setContentsMargins(10, 6, 8, 6)
        tl.setSpacing(6)
        lab = QLabel("Hugging Face token")
        lab.setObjectName("tokenLabel")
        tl.addWidget(lab)
        self.token_field = QLineEdit()
        self.token_field.setObjectName("tokenField")
        self.token_field.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_field.setPlaceholderText("hf_… (for gated and private models)")
        self.token_field.setMinimumWidth(200)
        self.token_field.setMaximumWidth(280)
        self.token_field.returnPressed.connect(self.save_token)
        tl.addWidget(self.token_field)
        self.token_save = QPushButton("Save")
        self.token_save.setObjectName("tokenSave")
        self.token_save.clicked.connect(self.save_token)
        tl.addWidget(self.token_save)
        self.token_clear = QPushButton("Remove")
        self.token_clear.setObjectName("tokenClear")
        self.token_clear.clicked.connect(self.clear_token)
        tl.addWidget(self.token_clear)
        self.token_status = QLabel("")
        self.token_status.setObjectName("tokenStatus")
        self.token_status.setWordWrap(True)
        self.token_status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        tl.addWidget(self.token_status, 1)
        lay.addWidget(tok)

        self._set_repo_visible(False)
        saved = self._get_saved_token()
        if saved:
            self.token_field.setText(saved)
        self._update_token_status()

    # --- token ------------------------------------------------------------------------------------
    def _update_token_status(self) -> None:
        if self._get_saved_token():
            text = "A token is saved in Glassbox's settings (never shown or logged)."
        elif _login_token_present():
            text = "Using the token from your huggingface_hub login (hf auth login)."
        else:
            text = "No token: public models only. Gated models need one (huggingface.co/settings/tokens)."
        self.token_status.setText(text)
        self.token_clear.setEnabled(bool(self._get_saved_token()))

    def save_token(self) -> None:
        """Store the token in the settings (an empty field removes it)."""
        t = self.token_field.text().strip() or None
        self._save_token(t)
        self._update_token_status()
        if self.current_repo and self.repo_files is not None:
            self._judge()  # a gated repository may be judged now

    def clear_token(self) -> None:
        self.token_field.clear()
        self.save_token()

    def _scrub(self, text: str) -> str:
        return scrub(text, self._get_saved_token(), self.token_field.text().strip() or None)

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
            "busy", f"Searching the Hub for “{query}”…" if query else "Listing GGUF models on the Hub…"
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
                "info", f"No GGUF repository matches “{q}”." if q else "The Hub returned no GGUF repositories."
            )

    def _search_failed(self, exc: BaseException) -> None:
        self.search_button.setEnabled(True)
        self.last_error = exc
        kind = "warning" if isinstance(exc, HubOfflineError) else "error"
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
        self.repo_link.setText(f'<a href="{url}" style="color:#7aa7ff">Open on huggingface.co ↗</a>')
        self.repo_facts.setText("")
        self.files_model.set_files([], [])
        self.file_detail.hide()
        if is_offline_mode():
            self._files_failed(repo_id, offline_error())
            return
        self.repo_message.show_message("busy", "Listing the repository's GGUF files…")
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
            self.repo_message.show_message("info", f"{repo_id} has no GGUF files.")
            return
        self.repo_message.clear_message()
        self._judge()

    def _files_failed(self, repo_id: str, exc: BaseException) -> None:
        if repo_id != self.current_repo:
            return
        self.last_error = exc
        self.files.hide()
        self._show_error(self.repo_message, exc)

    def _show_error(self, where: InlineMessage, exc: BaseException) -> None:
        if isinstance(exc, HubAuthError):
            where.show_message("error", self._scrub(exc.message), [("Open the repository page ↗", exc.url)])
        elif isinstance(exc, HubOfflineError):
            where.show_message("warning", self._scrub(exc.message))
        elif isinstance(exc, (HubError, GGUFError)):
            where.show_message("error", self._scrub(str(exc)))
        else:
            where.show_message("error", self._scrub(f"{type(exc).__name__}: {exc}"))

    # --- fit --------------------------------------------------------------------------------------
    def _judge(self) -> None:
        rf = self.repo_files
        if rf is None or not rf.files:
            return
        repo_id = rf.repo.repo_id
        files = list(rf.files)
        n_ctx = self._get_n_ctx()
        memory = self._get_memory()
        self.files_model.set_fits({}, "checking…")
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
        self.files_model.set_fits(reports, "" if reports else "unknown")
        if self.repo_message.kind in ("busy", "error") and reports:
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
        self.last_error = exc
        state = (
            "needs access"
            if isinstance(exc, HubAuthError)
            else "offline"
            if isinstance(exc, HubOfflineError)
            else "unknown"
        )
        self.files_model.set_fits({}, state)
        if isinstance(exc, (HubAuthError, HubOfflineError)):
            self._show_error(self.repo_message, exc)
        else:
            msg = exc.message if isinstance(exc, (HubError, GGUFError)) else f"{type(exc).__name__}: {exc}"
            self.repo_message.show_message("warning", self._scrub(f"Fit could not be judged: {msg}"))

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
        rep: FitReport | None = idx.data(FileRole.FIT)
        parts = f" · {len(f.parts)} parts" if len(f.parts) > 1 else ""
        rec = " · ★ recommended" if idx.data(FileRole.RECOMMENDED) else ""
        self.detail_title.setText(f"{f.name} · {f.quant or 'unknown quant'} · {format_bytes(f.size)}{parts}{rec}")
        if rep is None:
            state = self.files_model.verdict_text(f)
            self.verdict_label.setText(
                {
                    "checking…": "Judging whether it fits: reading the model's header from the Hub (a few MiB)…",
                    "needs access": "Fit unknown: the header cannot be read without access (see above).",
                    "projector": "A multimodal projector (image input), not a model to chat with.",
                    "incomplete": "The Hub listing lacks part(s): " + ", ".join(f.missing_parts),
                }.get(state, "Fit unknown.")
            )
            self.verdict_label.setStyleSheet("color: #9aa2b1;")
            self.fit_bar.set_report(None)
            self.breakdown_label.setText("")
        else:
            color = VERDICT_COLORS[rep.verdict].name()
            self.verdict_label.setText(VERDICT_SENTENCE[rep.verdict])
            self.verdict_label.setStyleSheet(f"color: {color}; font-weight: 600;")
            self.fit_bar.set_report(rep)
            est = rep.estimate
            against = f"{format_bytes(rep.ram_available)} free RAM"
            if rep.vram_available is not None:
                against += f" + {format_bytes(rep.vram_available)} free VRAM"
            sw = "<span style='color:{c}'>■</span>"
            self.breakdown_label.setText(
                f"{sw.format(c=ACCENT.name())} weights {format_bytes(est.weights)} &nbsp;+&nbsp; "
                f"{sw.format(c=AMBER.name())} KV cache {format_bytes(est.kv_cache)} at n_ctx {rep.n_ctx:,} "
                f"&nbsp;+&nbsp; {sw.format(c=PURPLE.name())} compute {format_bytes(est.compute)} "
                f"&nbsp;=&nbsp; <b>{format_bytes(est.total)}</b> of {against}"
                f" &nbsp;<span style='color:#6b7280'>(dashed line: 80%)</span>"
            )
        self.file_detail.show()

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
        st = self.statuses.get(str(dest))
        if (st is not None and st.state is DownloadState.DONE) or (st is None and dest.exists()):
            self.load_requested.emit(str(dest))
            return
        self.download_requested.emit(f)

    def set_download_statuses(self, statuses: dict[str, DownloadStatus]) -> None:
        """The downloads' latest statuses, keyed by the first part's destination path."""
        self.statuses = statuses
        self._update_buttons()

    def _update_buttons(self) -> None:
        for row, b in self.buttons.items():
            f = self.files_model.files[row]
            dest = self.files_model.dests[row]
            st = self.statuses.get(str(dest))
            text, enabled, tip = "Download", True, f"Download {f.name} ({format_bytes(f.size)}) to {dest.parent}"
            rep = self.files_model.reports.get(f)
            if rep is not None and rep.verdict is not Verdict.FITS:
                tip += f"\nCareful: {VERDICT_SENTENCE[rep.verdict]}"
            if f.missing_parts:
                text, enabled, tip = "Incomplete", False, "The Hub listing lacks: " + ", ".join(f.missing_parts)
            elif f.is_projector:
                text, enabled, tip = "Projector", False, "A multimodal projector, not a model to chat with."
            elif st is not None and st.state is DownloadState.QUEUED:
                text, enabled, tip = "Queued", False, "Waiting in the download queue (see Downloads)."
            elif st is not None and st.state is DownloadState.RUNNING:
                text, enabled, tip = f"{int(st.fraction * 100)}%", False, "Downloading (see Downloads)."
            elif st is not None and st.state is DownloadState.PAUSED:
                text, enabled, tip = "Resume", True, "Paused; resume the download."
            elif st is not None and st.state is DownloadState.FAILED:
                text, enabled, tip = "Retry", True, self._scrub(st.error or "The download failed.")
            elif (st is not None and st.state is DownloadState.DONE) or (st is None and dest.exists()):
                text, enabled, tip = "Load", True, f"Downloaded to {dest}; load it."
            b.setText(text)
            b.setEnabled(enabled)
            b.setToolTip(tip)
            b.setProperty("state", text.lower() if not text.endswith("%") else "running")
            b.style().unpolish(b)
            b.style().polish(b)


def _login_token_present() -> bool:
    """Whether huggingface_hub has a login token (HF_TOKEN or ``hf auth login``); reads no network."""
    try:
        from huggingface_hub import get_token

        return get_token() is not None
    except Exception:
        return False
