"""The Hub tab's item models: search results (:class:`RepoResultsModel`) and a repository's
GGUF files with their fit verdicts (:class:`HubFilesModel`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QFont

from app.core.hardware.fit import FitReport, Verdict
from app.core.models.hub import HubFile, RepoSummary, recommend
from app.ui.common import palette
from app.ui.common.fmt import ago, count, format_bytes
from app.ui.common.palette import qcolor
from app.ui.common.table_model import RowTableModel
from app.ui.models.widgets import MUTED, TEXT, TEXT_SOFT, VERDICT_COLORS

VERDICT_TEXT = {Verdict.FITS: "fits", Verdict.TIGHT: "tight", Verdict.DOES_NOT_FIT: "does not fit"}
VERDICT_SENTENCE = {
    Verdict.FITS: "Fits: it leaves at least 20% of the free memory for everything else.",
    Verdict.TIGHT: "Tight: it fits, but leaves less than 20% of the free memory; expect swapping or slow-downs.",
    Verdict.DOES_NOT_FIT: "Does not fit: it needs more memory than is free now.",
}
RECOMMENDED_BG = qcolor(palette.RECOMMENDED_BG)


class FitState(str, enum.Enum):
    """Why a file has no fit report (yet): the text its Fit cell shows."""

    NONE = ""  #: reports arrived (or none asked for)
    CHECKING = "checking…"
    NEEDS_ACCESS = "needs access"
    OFFLINE = "offline"
    UNKNOWN = "unknown"


# --- search results --------------------------------------------------------------------------------
class RepoRole(enum.IntEnum):
    """Item data roles of :class:`RepoResultsModel`."""

    REPO = Qt.ItemDataRole.UserRole + 1  #: the :class:`RepoSummary`
    REPO_ID = enum.auto()  #: str
    SUBTITLE = enum.auto()  #: downloads · likes · updated · architecture


class RepoColumn(enum.IntEnum):
    REPO = 0


class RepoResultsModel(RowTableModel[RepoSummary]):
    """Search results, in the Hub's order, keyed by repo id (one column, for a list view).

    Touch it only on the UI thread.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(RepoColumn, {RepoColumn.REPO: "Repository"}, lambda r: r.repo_id, parent=parent)

    @property
    def repos(self) -> list[RepoSummary]:
        return self.rows

    def set_repos(self, repos: list[RepoSummary]) -> None:
        self.set_rows(repos)

    def cell(self, r: RepoSummary, row_number: int, column: Any, role: int) -> Any:
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


@dataclass(frozen=True)
class FileRow:
    """A file of the repository and where its download goes."""

    file: HubFile
    dest: Path


class HubFilesModel(RowTableModel[FileRow]):
    """A repository's GGUF files with their fit verdicts, keyed by file. Touch it only on the UI thread."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(FileColumn, FILE_HEADERS, lambda r: r.file, right_aligned=(FileColumn.SIZE,), parent=parent)
        self.reports: dict[HubFile, FitReport] = {}
        self.recommended: HubFile | None = None
        self.fit_state = FitState.NONE

    @property
    def files(self) -> list[HubFile]:
        return [r.file for r in self.rows]

    @property
    def dests(self) -> list[Path]:
        return [r.dest for r in self.rows]

    def set_files(self, files: list[HubFile], dests: list[Path]) -> None:
        """Show ``files`` (their downloads go to ``dests``); their verdicts are being checked."""
        self.reports = {}
        self.recommended = None
        self.fit_state = FitState.CHECKING
        self.set_rows([FileRow(f, d) for f, d in zip(files, dests, strict=True)])

    def set_fits(self, reports: dict[HubFile, FitReport], fit_state: FitState = FitState.NONE) -> None:
        """The files' fit reports (the recommended file follows); ``fit_state`` for files without one."""
        self.reports = dict(reports)
        self.recommended = recommend(self.reports) if reports else None
        self.fit_state = fit_state
        self.refresh_all()

    def verdict_text(self, f: HubFile) -> str:
        if f.is_projector:
            return "projector"
        if f.missing_parts:
            return "incomplete"
        rep = self.reports.get(f)
        if rep is None:
            return self.fit_state.value or "—"
        return VERDICT_TEXT[rep.verdict]

    def cell(self, row: FileRow, row_number: int, col: Any, role: int) -> Any:
        f = row.file
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
            return str(row.dest)
        if role == Qt.ItemDataRole.BackgroundRole and rec:
            return RECOMMENDED_BG
        if role == Qt.ItemDataRole.ForegroundRole:
            if col == FileColumn.FIT:
                return VERDICT_COLORS.get(rep.verdict, MUTED) if rep else MUTED
            return TEXT if col == FileColumn.NAME else TEXT_SOFT
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
            return self.alignment(col)
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
