"""The Compare window: two quantizations of one model, token by token (issue 21 §1).

Left, the set-up (:mod:`app.ui.quant.compare_setup`), the figures over the text
(:mod:`app.ui.quant.compare_summary`) and the exports; right, the legend, the strip of the text
coloured by KL divergence (:mod:`app.ui.quant.compare_strip`) and the worst tokens, highest KL
divergence first: a click on one scrolls the strip to it. It is a window of its own, not modal:
the chat stays usable while a comparison runs in its own engine process
(:class:`~app.ui.quant.compare_controller.CompareController`). It repaints on a 10 Hz clock when
the comparison moved (docs/architecture.md, principle 6), not per engine event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QBrush, QCloseEvent, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.context import ChatMessage
from app.core.models.library import ModelEntry
from app.core.quant import export
from app.core.quant.comparison import ComparisonSummary
from app.ui.common import dialogs, palette
from app.ui.common.elided_label import ElidedLabel
from app.ui.common.token_label import visible
from app.ui.jobs.runner import JobRunner
from app.ui.quant.compare_controller import CompareController
from app.ui.quant.compare_scale import FLIP_COLOUR, KlLegend, kl_colour
from app.ui.quant.compare_setup import CompareChoice, CompareSetup
from app.ui.quant.compare_strip import TokenStrip, scroll_to_token, strip_in_scroll
from app.ui.quant.compare_summary import SummaryView

WORST_SHOWN = 200  # rows of the worst-tokens list
REFRESH_MS = 100  # the window's repaint clock


def _section(title: str) -> QLabel:
    lab = QLabel(title)
    lab.setStyleSheet(f"color:{palette.TEXT}; font-weight:600; margin-top:6px;")
    return lab


class CompareWindow(QWidget):
    """The window (see the module docstring).

    Args:
        controller: runs the comparisons; the window reads its :attr:`~CompareController.run`.
        entries: the library's models, as last scanned.
        loaded: the chat's loaded model file, or None.
        chat_source: the chat shown as the engine would be sent it (None: no chat shown).
        template_for: the person's chat template override for a model file (None: the GGUF's).
        parent: the main window (this one stays a window of its own).
    """

    def __init__(
        self,
        controller: CompareController,
        entries: Callable[[], Sequence[ModelEntry]],
        loaded: Callable[[], str | None],
        chat_source: Callable[[], tuple[ChatMessage, ...] | None],
        template_for: Callable[[str], str | None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setObjectName("compareWindow")
        self.setWindowTitle("Compare quantizations — token by token")
        self.controller = controller
        self._entries, self._loaded = entries, loaded
        self._shown_version = -1
        self._export_dir = Path.home()

        self.setup = CompareSetup(chat_source, template_for)
        self.summary = SummaryView()
        self.export_csv = QPushButton("Export CSV…")
        self.export_csv.setToolTip(
            "One row per scored token: KL divergence, same top-1, p and Δp, surprisals, both top fives."
        )
        self.export_json = QPushButton("Export JSON…")
        self.export_json.setToolTip("The summary, every scored token's figures, and the text's tokens.")
        for b in (self.export_csv, self.export_json):
            b.setEnabled(False)
        self.export_csv.clicked.connect(self.save_csv)
        self.export_json.clicked.connect(self.save_json)

        self.strip = TokenStrip()
        self.strip_area = strip_in_scroll(self.strip)
        self.legend = KlLegend()
        self.status = ElidedLabel("", min_chars=12)
        self.status.setObjectName("compareStatus")
        self.status.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.status.setStyleSheet(f"color:{palette.TEXT_DIM};")
        self.worst = self._worst_table()

        # Left: what to compare, the exports, the worst tokens. Right: the figures over the text, the strip.
        left = QWidget()
        left_col = QVBoxLayout(left)
        left_col.setContentsMargins(0, 0, 6, 0)
        left_col.addWidget(_section("What to compare"))
        left_col.addWidget(self.setup)
        exports = QHBoxLayout()
        exports.addWidget(self.export_csv)
        exports.addWidget(self.export_json)
        exports.addStretch(1)
        left_col.addLayout(exports)
        worst_title = _section("Worst tokens")
        worst_title.setToolTip(
            f"The {WORST_SHOWN} scored tokens with the highest KL divergence, highest first. Click one to find it "
            "in the text; hover for both models' top five there."
        )
        left_col.addWidget(worst_title)
        left_col.addWidget(self.worst, 1)

        right = QWidget()
        right_col = QVBoxLayout(right)
        right_col.setContentsMargins(6, 0, 0, 0)
        right_col.addWidget(_section("Over the text"))
        right_col.addWidget(self.summary)
        head = QHBoxLayout()
        head.addWidget(_section("The text, token by token"))
        head.addWidget(self.status, 1)
        right_col.addLayout(head)
        right_col.addWidget(self.legend)
        right_col.addWidget(self.strip_area, 1)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        outer = QVBoxLayout(self)
        outer.addWidget(self.splitter)

        self.setup.start_requested.connect(self.start)
        self.setup.cancel_requested.connect(controller.cancel)
        self.strip.token_clicked.connect(self._strip_clicked)
        controller.finished.connect(self._finished)
        controller.failed.connect(self._failed)
        controller.cancelled.connect(self._cancelled)
        controller.ended.connect(self._ended)
        self.clock = QTimer(self)
        self.clock.setInterval(REFRESH_MS)
        self.clock.timeout.connect(self.refresh)
        self.resize(1280, 720)
        self.splitter.setSizes([440, 840])

    def _worst_table(self) -> QTableWidget:
        """The worst tokens' table: position, token, KL divergence (coloured), each model's top-1."""
        table = QTableWidget(0, 4)
        table.setObjectName("compareWorst")
        tips = (
            "The token's number in the text, counted from 1 (the CSV's token_number; its position, counted "
            "from 0 as llama.cpp counts, is one less).",
            "The token that actually comes next there.",
            "KL divergence at this token: the list is sorted by it, highest first.",
            "Each model's most likely next token there (blue: they differ). Hover a row for both top fives.",
        )
        for c, (label, tip) in enumerate(zip(("#", "Token", "KL (nats)", "Top-1: A → B"), tips, strict=True)):
            head_item = QTableWidgetItem(label)
            head_item.setToolTip(tip)
            table.setHorizontalHeaderItem(c, head_item)
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # Widths from the font, not ResizeToContents: measuring every cell at each setItem made filling 200 rows
        # take 1.9 s of the window's CPU (while the engine timed model A's decode), and the measured columns
        # widened the window. The top-1 column takes the room left; a cell too narrow is cut in its middle,
        # so both ends of "A → B" show, and its tooltip has both top fives.
        fm = table.fontMetrics()
        header = table.horizontalHeader()
        header.setMinimumSectionSize(fm.horizontalAdvance("999"))
        for c, sample in ((0, "99,999 "), (1, "M" * 7), (2, "0.00123 ")):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.Interactive)
            table.setColumnWidth(c, fm.horizontalAdvance(sample) + 12)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.cellClicked.connect(self._worst_clicked)
        table.currentCellChanged.connect(lambda row, _c, _pr, _pc: self._worst_clicked(row, 0))

        return table

    # ------------------------------------------------------------------ opening
    def prepare(self) -> None:
        """Before showing: the library's models and the chat shown, as they are now."""
        self.setup.fill_models(self._loaded(), self._entries())
        self.setup.refresh_chat()

    def set_pair(self, path_a: Path, path_b: Path) -> None:
        """Choose the two files (from the Library's "Compare with the source")."""
        self.setup.set_pair(str(path_a), str(path_b))

    # ------------------------------------------------------------------ running
    def start(self, choice: CompareChoice) -> None:
        """Start comparing as ``choice`` says (nothing when one is running)."""
        if not self.controller.start(choice):
            return
        self.strip.set_run(self.controller.run, (Path(choice.path_a).name, Path(choice.path_b).name))
        self.summary.clear("Comparing… the figures over the whole text appear when every chunk is scored.")
        self.worst.setRowCount(0)
        self.setup.set_running(True)
        self.status.setText("")
        for b in (self.export_csv, self.export_json):
            b.setEnabled(False)
        self.clock.start()

    def refresh(self) -> None:
        """Repaint what changed since the last tick: the strip, the progress, the worst tokens."""
        c = self.controller
        if c.version == self._shown_version:
            return
        self._shown_version = c.version
        run = c.run
        self.strip.refresh()
        if run.token_texts and c.running:
            self.setup.show_progress(len(run.tokens), run.total or run.n_scored_expected, run.eta_s())
            if run.total and len(run.tokens) >= run.total:  # every chunk scored: the engine times a short decode
                self.setup.progress.setFormat(f"{len(run.tokens):,} tokens scored · measuring decode tok/s…")
        if run.token_texts:
            flips = run.flips()
            self.status.setText(
                f"{len(run.token_texts):,} tokens · {len(run.tokens):,} / {run.n_scored_expected:,} scored · "
                f"{flips:,} top-1 flip{'s' if flips != 1 else ''}"
            )
        self._fill_worst()
        has_tokens = bool(run.tokens)
        self.export_csv.setEnabled(has_tokens and not c.running)
        self.export_json.setEnabled(has_tokens and not c.running)

    def _fill_worst(self) -> None:
        run = self.controller.run
        worst = run.worst(WORST_SHOWN)
        self.worst.setUpdatesEnabled(False)
        self.worst.blockSignals(True)
        self.worst.setRowCount(len(worst))
        for r, t in enumerate(worst):
            a1 = t.top_a[0].text if t.top_a else ""
            b1 = t.top_b[0].text if t.top_b else ""
            pos = QTableWidgetItem(f"{t.index + 1:,}")
            pos.setData(Qt.ItemDataRole.UserRole, t.index)
            kl = QTableWidgetItem(f"{t.kl:.4g}")
            kl.setBackground(_brush(kl_colour(t.kl)))
            kl.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            flip = QTableWidgetItem(f"{visible(a1)} → {visible(b1)}" if not t.same_top1 else f"{visible(a1)} (same)")
            if not t.same_top1:
                flip.setForeground(_brush(FLIP_COLOUR))
            tip = self.strip.tooltip_for(t.index) if t.index < len(run.token_texts) else ""
            for c, item in enumerate((pos, QTableWidgetItem(visible(t.text)), kl, flip)):
                item.setToolTip(tip)
                self.worst.setItem(r, c, item)
        self.worst.blockSignals(False)
        self.worst.setUpdatesEnabled(True)

    def _worst_clicked(self, row: int, _col: int) -> None:
        item = self.worst.item(row, 0)
        if item is not None:
            scroll_to_token(self.strip_area, self.strip, int(item.data(Qt.ItemDataRole.UserRole)))

    def _strip_clicked(self, index: int) -> None:
        for r in range(self.worst.rowCount()):
            item = self.worst.item(r, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == index:
                self.worst.blockSignals(True)
                self.worst.selectRow(r)
                self.worst.blockSignals(False)
                return
        self.worst.clearSelection()

    def _finished(self, summary: ComparisonSummary) -> None:
        self.summary.show_summary(summary, self.controller.load_text)
        self.setup.say(f"Done in {summary.elapsed_s:,.1f} s. Hover a token for both models' top five there.")

    def _failed(self, message: str) -> None:
        self.setup.say(message, error=True)
        self.summary.clear("No figures: the comparison did not finish.")

    def _cancelled(self) -> None:
        n = len(self.controller.run.tokens)
        self.setup.say(f"Cancelled. The {n:,} tokens scored before are kept (no summary: it needs the whole text).")
        self.summary.clear("No figures over the text: the comparison was cancelled.")

    def _ended(self) -> None:
        self.setup.set_running(False)
        self.setup.progress.setRange(0, 1)
        run = self.controller.run
        self.setup.progress.setValue(1 if run.summary is not None else 0)
        self.setup.progress.setFormat(f"{len(run.tokens):,} tokens scored" if run.summary is not None else "")
        self._shown_version = -1
        self.refresh()
        self.clock.stop()

    # ------------------------------------------------------------------ exports
    def _export_to(self, title: str, suffix: str, file_filter: str) -> Path | None:
        choice = self.controller.choice
        stem = "comparison"
        if choice is not None:
            stem = f"{Path(choice.path_a).stem}-vs-{Path(choice.path_b).stem}"
        chosen = dialogs.choose_save_path(self, title, self._export_dir / f"{stem}{suffix}", file_filter)
        if not chosen:
            return None
        path = Path(chosen)
        self._export_dir = path.parent
        return path

    def save_csv(self) -> None:
        """Export CSV…: one row per scored token (:func:`app.core.quant.export.write_csv`)."""
        path = self._export_to("Export the comparison as CSV", ".csv", "CSV (*.csv)")
        if path is not None:
            run = self.controller.run
            self._write(path, lambda: export.write_csv(path, run.tokens.values()))

    def save_json(self) -> None:
        """Export JSON…: the summary and the tokens (:func:`app.core.quant.export.write_json`)."""
        path = self._export_to("Export the comparison as JSON", ".json", "JSON (*.json)")
        if path is not None:
            run = self.controller.run
            self._write(path, lambda: export.write_json(path, run.summary, run.tokens.values(), run.token_texts))

    def _write(self, path: Path, write: Callable[[], None]) -> None:
        try:
            write()
        except OSError as exc:
            self.setup.say(f"Could not write {path}: {exc.strerror or exc}. Choose another folder.", error=True)
            return
        self.setup.say(f"Exported to {path}.")

    # ------------------------------------------------------------------ closing
    def closeEvent(self, e: QCloseEvent) -> None:
        """Closing the window stops a comparison in flight (its process is ended at once)."""
        if self.controller.running:
            self.controller.shutdown()
            self._ended()
            self.setup.say("The comparison was stopped when its window closed.")
        super().closeEvent(e)


def _brush(colour: str) -> QBrush:
    return QBrush(QColor(colour))


def make_compare_window(
    entries: Callable[[], Sequence[ModelEntry]],
    loaded: Callable[[], str | None],
    chat_source: Callable[[], tuple[ChatMessage, ...] | None],
    template_for: Callable[[str], str | None],
    make_runner: Callable[[], JobRunner] | None = None,
    parent: QWidget | None = None,
    others: Callable[[], tuple[str, ...]] = tuple,
) -> CompareWindow:
    """A Compare window with its controller (``make_runner``: None starts real engine processes; ``others``:
    what else Glassbox runs now, for the tok/s measured under load)."""
    controller = CompareController(make_runner or JobRunner, others=others)
    window = CompareWindow(controller, entries, loaded, chat_source, template_for, parent)
    controller.setParent(window)
    return window
