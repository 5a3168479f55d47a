"""The "Make a quantization" dialog: choose a type and a name, start, follow, cancel, then compare.

It offers the types :func:`~app.core.quant.plan.plan_quantization` allows from the source at once, each
"sizing…" until llama.cpp's dry run of every type (:meth:`QuantizeJob.plan`, a few tenths of a second) fills in
its exact size and bits per weight (a sizing that fails leaves the plan's rough figures, marked "about"), names
those it does not offer and why, says before Start when the chosen type's tensors will fall back to another
type (from the dry run: the file is then larger than the type's bits per weight suggest), warns when the source is already quantized (the result then measures requantization), and runs
the quantization as a :class:`~app.ui.quant.quantize_job.QuantizeJob` (its own engine process). When the
result is whole it says so and offers "Compare with the source" (:attr:`QuantizeDialog.compare_requested`).
Closing it while it runs (Close, the window's ×, Escape) ends the job's process at once and removes its
``.part``, saying nothing.

Its width stays what it was given (at least :data:`MIN_WIDTH`); as messages and the progress show and hide,
only its height follows, the height its rows need at that width (:meth:`QuantizeDialog.fit_height`).
"""

from __future__ import annotations

import enum
from pathlib import Path

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.core.quant.plan import QuantOption, QuantPlan, default_destination, name_problem, with_dry_run
from app.core.quant.types import QuantType
from app.ui.common.fmt import duration, format_bytes
from app.ui.common.severity import Severity
from app.ui.quant.quantize_job import QuantizeJob, QuantizeStatus

_ROLE = Qt.ItemDataRole.UserRole
#: The dialog's least width, px: the type list's three columns and a default name like
#: ``SmolLM2-135M-Instruct.Q4_1.Q5_K_M.gguf`` whole beside "Save as" and "Folder…".
MIN_WIDTH = 560
#: The widest the name field asks for to show a long name whole, px (past it the dialog would leave the screen).
NAME_MAX_WIDTH = 640
#: The size column's text while llama.cpp's dry run sizes the types.
SIZING = "sizing…"


class Sizing(enum.Enum):
    """Where the type list's figures stand."""

    SIZING = "sizing"  #: llama.cpp's dry run is under way
    EXACT = "exact"  #: llama.cpp's dry run's figures
    ROUGH = "rough"  #: the dry run failed: the plan's rough estimates, marked "about"


class DialogMessage(QLabel):
    """A message in the dialog, coloured by its :class:`Severity` (the stylesheet's ``#inlineMessage[kind]``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inlineMessage")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.kind: Severity | None = None
        self.plain = ""
        self.hide()

    def show_message(self, kind: Severity, text: str) -> None:
        """Show ``text`` (plain) as a ``kind`` message."""
        self.kind, self.plain = kind, text
        self.setProperty("kind", kind.value)
        self.style().unpolish(self)
        self.style().polish(self)
        self.setText(text)
        self.show()
        if isinstance(window := self.window(), QuantizeDialog):
            window.fit_height()

    def clear_message(self) -> None:
        """Hide the message."""
        self.kind, self.plain = None, ""
        self.setText("")
        self.hide()


class TypeList(QTreeWidget):
    """The type list, as tall as its rows (asked when the layout is made, so after the stylesheet's padding)."""

    def sizeHint(self) -> QSize:
        rows = max(self.topLevelItemCount(), 1)
        row = max(self.sizeHintForRow(0), self.fontMetrics().height())
        height = self.header().sizeHint().height() + rows * row + 2 * self.frameWidth() + 2
        return QSize(super().sizeHint().width(), height)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()


class QuantizeDialog(QDialog):
    """Make a quantization of one model.

    Args:
        plan: what each type would give from the source (:func:`~app.core.quant.plan.plan_quantization`: the
            types offered; its rough sizes are shown only when llama.cpp's dry run fails).
        folder: where the result goes by default (the models folder).
        job: runs the quantization (tests pass one on a scripted host).

    Signals:
        quantized(Path): the result is whole at this path (the library should list it).
        compare_requested(Path, Path): the person asked to compare the source (first) with the result.
    """

    quantized = Signal(Path)
    compare_requested = Signal(Path, Path)

    def __init__(self, plan: QuantPlan, folder: Path, job: QuantizeJob, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("quantizeDialog")
        self.plan = plan
        self.source = Path(plan.source)
        self.folder = folder
        self.job = job
        job.setParent(self)
        self.made: Path | None = None
        self.finished_state = False  # a result was made and the form is not back yet ("Make another" returns it)
        self._name_edited = False
        self.setWindowTitle(f"Make a quantization — {self.source.name}")
        self.setMinimumWidth(MIN_WIDTH)

        lay = QVBoxLayout(self)
        lay.setSpacing(8)
        self.source_label = QLabel(
            f"<b>{self.source.name}</b> · {plan.source_type} · {format_bytes(plan.source_bytes)} · "
            f"{plan.n_tensors} tensors"
        )
        self.source_label.setObjectName("detailTitle")
        self.source_label.setWordWrap(True)
        lay.addWidget(self.source_label)
        self.notice = DialogMessage()
        if plan.notice:
            self.notice.show_message(Severity.WARNING, plan.notice)
        lay.addWidget(self.notice)

        self.caption = QLabel("Type. Sizes from llama.cpp's dry run of each type (nothing written).")
        self.caption.setWordWrap(True)
        lay.addWidget(self.caption)
        self.sizing = Sizing.SIZING
        self.types = TypeList()
        self.types.setObjectName("quantTypes")
        self.types.setRootIsDecorated(False)
        self.types.setUniformRowHeights(True)
        self.types.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.types.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.types.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.types.setHeaderLabels(["Type", "Size", "Bits per weight"])
        self.types.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.types.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in (1, 2):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        for option in plan.options:
            if not option.allowed:
                continue
            item = QTreeWidgetItem([option.qtype.value, SIZING, ""])
            item.setData(0, _ROLE, option.qtype)
            for col in (1, 2):
                item.setTextAlignment(col, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.types.addTopLevelItem(item)
        lay.addWidget(self.types)
        self.type_note = QLabel("")
        self.type_note.setObjectName("detailText")
        self.type_note.setWordWrap(True)
        self.type_note.hide()
        lay.addWidget(self.type_note)
        refused = [o.refusal for o in plan.options if not o.allowed]
        self.refused_label = QLabel("Not offered: " + " ".join(refused) if refused else "")
        self.refused_label.setObjectName("detailText")
        self.refused_label.setWordWrap(True)
        self.refused_label.setVisible(bool(refused))
        lay.addWidget(self.refused_label)

        dest_row = QHBoxLayout()
        dest_row.addWidget(QLabel("Save as"))
        self.name_edit = QLineEdit()
        self.name_edit.setObjectName("quantizeName")
        self.name_edit.textEdited.connect(self._name_typed)
        dest_row.addWidget(self.name_edit, 1)
        self.choose_button = QPushButton("Folder…")
        self.choose_button.clicked.connect(self.choose_folder)
        dest_row.addWidget(self.choose_button)
        lay.addLayout(dest_row)
        self.folder_label = QLabel()
        self.folder_label.setObjectName("detailText")
        self.folder_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.folder_label)

        self.progress = QProgressBar()
        self.progress.setObjectName("quantizeProgress")
        self.progress.setRange(0, 1000)
        self.progress.hide()
        lay.addWidget(self.progress)
        self.status = QLabel("")
        self.status.setObjectName("detailText")
        self.status.setWordWrap(True)
        self.status.hide()
        lay.addWidget(self.status)
        self.message = DialogMessage()
        lay.addWidget(self.message)

        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.compare_button = QPushButton("Compare with the source")
        self.compare_button.setObjectName("compareButton")
        self.compare_button.hide()
        self.compare_button.clicked.connect(self._compare)
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self._start_clicked)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelButton")
        self.cancel_button.hide()
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        for b in (self.compare_button, self.start_button, self.cancel_button, self.close_button):
            buttons.addWidget(b)
        lay.addLayout(buttons)

        job.planned.connect(self._on_planned)
        job.plan_failed.connect(self._on_plan_failed)
        job.progressed.connect(self._on_progress)
        job.finished.connect(self._on_finished)
        job.failed.connect(self._on_failed)
        job.cancelled.connect(self._on_cancelled)
        self.types.currentItemChanged.connect(lambda *_: self._type_changed())
        self._mark_made()
        first = self.types.topLevelItem(0)
        if first is not None:
            self.types.setCurrentItem(first)
        else:
            self.start_button.setEnabled(False)
            self.message.show_message(Severity.ERROR, f"No type can be made from {self.source.name}.")
        self._show_folder()
        self.resize(MIN_WIDTH, self.height())
        self.fit_height()
        job.plan(self.source)

    # --- choices ------------------------------------------------------------------------------------
    @property
    def qtype(self) -> QuantType | None:
        """The chosen type (None: none offered)."""
        item = self.types.currentItem()
        value = item.data(0, _ROLE) if item is not None else None
        return QuantType(value) if value is not None else None

    def select_type(self, qtype: QuantType) -> None:
        """Choose ``qtype`` (it must be offered).

        Raises:
            ValueError: ``qtype`` is not offered from this source.
        """
        for i in range(self.types.topLevelItemCount()):
            item = self.types.topLevelItem(i)
            if item is not None and item.data(0, _ROLE) == qtype:
                self.types.setCurrentItem(item)
                return
        raise ValueError(f"{qtype.value} is not offered from {self.source.name}")

    @property
    def destination(self) -> Path:
        """Where the result goes: the folder and the name typed (``.gguf`` added when missing)."""
        name = self.name_edit.text().strip()
        if name and not name.lower().endswith(".gguf"):
            name += ".gguf"
        return self.folder / name

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder for the quantization", str(self.folder))
        if folder:
            self.folder = Path(folder)
            self._show_folder()
            self._mark_made()

    def _name_typed(self, _text: str) -> None:
        self._name_edited = True
        self._drop_stale_error()

    def _drop_stale_error(self) -> None:
        """A refusal of the name or type shown before is about a choice since changed: it goes."""
        if self.message.kind is Severity.ERROR and not self.job.running:
            self.message.clear_message()

    def _mark_made(self) -> None:
        """Mark the types whose result (the default name) is already in the folder: "Q8_0 · made"."""
        for i in range(self.types.topLevelItemCount()):
            item = self.types.topLevelItem(i)
            if item is None:
                continue
            q = QuantType(item.data(0, _ROLE))
            dest = default_destination(self.source, q, self.folder)
            made = dest.is_file()
            item.setText(0, f"{q.value} · made" if made else q.value)
            item.setToolTip(0, f"{dest.name} is already in {self.folder}" if made else "")

    def _type_changed(self) -> None:
        q = self.qtype
        if q is None:
            return
        self._drop_stale_error()
        if not self._name_edited:
            self._set_name(default_destination(self.source, q, self.folder).name)
        option = self.plan.option(q)
        note = option.fallback_note or option.refusal
        self.start_button.setEnabled(option.allowed)
        self.type_note.setText(note)
        self.type_note.setVisible(bool(note))
        self.fit_height()

    def _set_name(self, name: str) -> None:
        """Show ``name`` whole: the field asks for its width (up to :data:`NAME_MAX_WIDTH`) and shows its start."""
        self.name_edit.setText(name)
        margins = self.name_edit.textMargins()
        needed = self.name_edit.fontMetrics().horizontalAdvance(name) + margins.left() + margins.right() + 16
        self.name_edit.setMinimumWidth(min(needed, NAME_MAX_WIDTH))
        self.name_edit.setCursorPosition(0)
        self.fit_height()

    def _show_folder(self) -> None:
        """``in <folder>``, elided in the middle when it is longer than the dialog is wide (whole in the tooltip)."""
        self.folder_label.setToolTip(str(self.folder))
        self._elide_folder()

    def _elide_folder(self) -> None:
        text = f"in {self.folder}"
        width = max(self.folder_label.width(), MIN_WIDTH - 40)
        self.folder_label.setText(self.folder_label.fontMetrics().elidedText(text, Qt.TextElideMode.ElideMiddle, width))

    def resizeEvent(self, e: QResizeEvent) -> None:
        """A new width (the person widened or narrowed it): the folder elided again, the height fitted to the
        rows' wrapping at that width."""
        super().resizeEvent(e)
        if e.size().width() != e.oldSize().width():
            self._elide_folder()
            self.fit_height()  # resizes to this width: no further width change, so no loop

    def event(self, e: QEvent) -> bool:
        """After the layout's own pass on a ``LayoutRequest`` (a message, the status line or the progress
        changed size), fit the height again: an explicit minimum height is not raised by Qt."""
        handled = super().event(e)
        if e.type() == QEvent.Type.LayoutRequest:
            self.fit_height()
        return handled

    def fit_height(self) -> None:
        """Make the dialog as tall as its rows need at its present width (wider only when a row needs it: a
        long name's field): the wrapped messages whole, nothing overlapping."""
        lay = self.layout()
        if lay is None:
            return
        lay.activate()
        width = max(self.width(), MIN_WIDTH, lay.totalMinimumSize().width())  # a long name's field widens it
        height = lay.totalHeightForWidth(width) if lay.hasHeightForWidth() else lay.totalSizeHint().height()
        self.setMinimumHeight(height)
        self.resize(width, height)

    # --- running ------------------------------------------------------------------------------------
    def _start_clicked(self) -> None:
        if self.finished_state:
            self.make_another()
        else:
            self.start()

    def make_another(self) -> None:
        """Back to the form after a result was made, nothing started: the types made marked, the first one not
        made chosen, its default name, no message but what was made."""
        self.finished_state = False
        self.start_button.setText("Start")
        self.compare_button.hide()
        self.start_button.setDefault(True)
        self.progress.hide()
        self.status.hide()
        made = self.made.name if self.made is not None else ""
        self._name_edited = False
        self._mark_made()
        for i in range(self.types.topLevelItemCount()):
            item = self.types.topLevelItem(i)
            if item is not None and not item.text(0).endswith("· made"):
                self.types.setCurrentItem(item)
                break
        self._type_changed()  # the name follows the type again
        self.message.show_message(Severity.INFO, f"Made {made}. Choose a type for another, then Start.")
        self.fit_height()

    def start(self) -> None:
        """Start the quantization of the chosen type into :attr:`destination` (refused in words when the name
        is empty or taken)."""
        q = self.qtype
        dest = self.destination
        if q is None or self.job.running or not self.plan.option(q).allowed:
            return
        if problem := name_problem(self.name_edit.text()):
            self.message.show_message(Severity.ERROR, problem)
            return
        if dest.exists():
            self.message.show_message(
                Severity.ERROR, f"{dest} already exists. Choose another name, or delete that file first."
            )
            return
        self.message.clear_message()
        self._set_running(True)
        self.progress.setValue(0)
        self.status.setText(f"Starting llama.cpp's quantizer for {dest.name}…")
        self.job.start(self.source, dest, q)

    def cancel(self) -> None:
        """Stop the quantization: its process is killed (llama.cpp's quantizer has no abort), its partial file removed."""
        if self.job.running:
            self.job.cancel()

    def _set_running(self, running: bool) -> None:
        for w in (self.types, self.name_edit, self.choose_button):
            w.setEnabled(not running)
        self.start_button.setVisible(not running)
        self.cancel_button.setVisible(running)
        self.close_button.setEnabled(not running)
        self.progress.setVisible(running)
        self.status.setVisible(running)
        if running:
            self.compare_button.hide()
        self.fit_height()

    def _on_planned(self, answer: P.QuantizePlanned) -> None:
        """llama.cpp's dry run sized the types: each row's exact size and bits per weight, the chosen type's
        fallback sentence."""
        self.plan = with_dry_run(self.plan, answer)
        self.sizing = Sizing.EXACT
        self._fill_rows()

    def _on_plan_failed(self, message: str) -> None:
        """The sizing failed: the rough estimates, marked "about", and why in the caption."""
        self.sizing = Sizing.ROUGH
        self.caption.setText(f"Type. Sizes are rough estimates: llama.cpp's dry run failed ({message.rstrip('.')}).")
        self._fill_rows()

    def _fill_rows(self) -> None:
        for i in range(self.types.topLevelItemCount()):
            item = self.types.topLevelItem(i)
            if item is not None:
                size, bpw = self._figures(self.plan.option(QuantType(item.data(0, _ROLE))))
                item.setText(1, size)
                item.setText(2, bpw)
        self._type_changed()

    def _figures(self, o: QuantOption) -> tuple[str, str]:
        """A row's size and bits per weight as shown."""
        if not o.allowed:
            return "refused", ""
        if o.exact:
            return format_bytes(o.expected_bytes), f"{o.bits_per_weight:.2f}"
        if self.sizing is Sizing.ROUGH:
            return f"about {format_bytes(o.expected_bytes)}", f"about {o.bits_per_weight:.2f}"
        return SIZING, ""

    def _on_progress(self, st: QuantizeStatus) -> None:
        self.progress.setValue(round(1000 * st.fraction))
        of = f" of {format_bytes(st.expected_bytes)}" if st.expected_bytes else ""
        left = st.seconds_left
        eta = f" · about {duration(left)} left" if left is not None else ""
        self.status.setText(
            f"Tensor {st.tensors_done} of {st.tensors_total} · {format_bytes(st.bytes_written)}{of} written{eta}"
        )

    def _on_finished(self, ev: P.Quantized) -> None:
        self._set_running(False)
        self.made = Path(ev.dest)
        self.finished_state = True
        self._mark_made()
        self.message.clear_message()  # a refusal from before this run is stale
        fallback = ""
        if ev.fallback_tensors:
            # The dry run's reason, the one said before Start (which rows, which types); never a guess at the block
            # size: a Q4_0 file's Q6_K head is not there because 576 is not a whole number of Q4_0 blocks.
            note = self.plan.option(ev.qtype).fallback_note
            fallback = (
                f" {note}"
                if note
                else f" llama.cpp gave {ev.fallback_tensors} of {ev.tensors} tensors another type (its log says which)."
            )
        requant = " It measures requantization." if ev.requantized else ""
        self.message.show_message(
            Severity.INFO,
            f"Made {self.made.name}: {format_bytes(ev.bytes)} (the source: {format_bytes(ev.source_bytes)}) "
            f"in {duration(ev.elapsed_s)}.{fallback}{requant}",
        )
        self.start_button.setText("Make another")
        self.compare_button.show()
        self.compare_button.setDefault(True)
        self.quantized.emit(self.made)

    def _on_failed(self, message: str) -> None:
        self._set_running(False)
        self.message.show_message(Severity.ERROR, message)

    def _on_cancelled(self) -> None:
        self._set_running(False)
        self.message.show_message(
            Severity.INFO, f"Cancelled: {self.destination.name} was not made, and its partial file was removed."
        )

    def _compare(self) -> None:
        if self.made is not None:
            self.compare_requested.emit(self.source, self.made)

    def closeEvent(self, e: QCloseEvent) -> None:
        """Close (or the window's ×) while it runs: the job ends quietly (:meth:`_end_job_quietly`)."""
        self._end_job_quietly()
        super().closeEvent(e)

    def done(self, r: int) -> None:
        """Escape (``reject``) while it runs: the job ends quietly too; Qt (6.3+) closes a dialog from here
        without a :meth:`closeEvent`."""
        self._end_job_quietly()
        super().done(r)

    def _end_job_quietly(self) -> None:
        """Kill a running job's process now and wait until its reader has heard of it, then remove its
        ``.part`` (:meth:`QuantizeJob.shutdown`): the dialog and its job may be deleted right after, and
        nothing of the killed process is reported (no "engine stopped" message, no error banner). A sizing
        under way ends the same way."""
        self.job.shutdown()
