"""The "Make a quantization" dialog: choose a type and a name, start, follow, cancel, then compare.

It offers the types :func:`~app.core.quant.plan.plan_quantization` allows from the source, each with its
expected size and bits per weight, names those it does not offer and why, warns when the source is
already quantized (the result then measures requantization), and runs the quantization as a
:class:`~app.ui.quant.quantize_job.QuantizeJob` (its own engine process). When the result is whole it
says so and offers "Compare with the source" (:attr:`QuantizeDialog.compare_requested`).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLayout,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core import protocol as P
from app.core.quant.plan import QuantPlan, default_destination
from app.core.quant.types import QuantType
from app.ui.common.fmt import duration, format_bytes
from app.ui.common.severity import Severity
from app.ui.quant.quantize_job import QuantizeJob, QuantizeStatus

_ROLE = Qt.ItemDataRole.UserRole


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
        if (window := self.window()) is not None:
            window.adjustSize()

    def clear_message(self) -> None:
        """Hide the message."""
        self.kind, self.plain = None, ""
        self.setText("")
        self.hide()


class QuantizeDialog(QDialog):
    """Make a quantization of one model.

    Args:
        plan: what each type would give from the source (:func:`~app.core.quant.plan.plan_quantization`).
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
        self._name_edited = False
        self.setWindowTitle(f"Make a quantization — {self.source.name}")
        self.setMinimumWidth(560)

        lay = QVBoxLayout(self)
        lay.setSpacing(8)
        lay.setSizeConstraint(QLayout.SizeConstraint.SetMinimumSize)  # grows as progress and messages show
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

        caption = QLabel("Type. Sizes are estimates from the file's tensors; llama.cpp chooses each tensor's type.")
        caption.setWordWrap(True)
        lay.addWidget(caption)
        self.types = QTreeWidget()
        self.types.setObjectName("quantTypes")
        self.types.setRootIsDecorated(False)
        self.types.setHeaderLabels(["Type", "Size (about)", "Bits per weight"])
        self.types.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.types.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in (1, 2):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        for option in plan.options:
            if not option.allowed:
                continue
            item = QTreeWidgetItem(
                [option.qtype.value, format_bytes(option.expected_bytes), f"{option.bits_per_weight:.2f}"]
            )
            item.setData(0, _ROLE, option.qtype)
            for col in (1, 2):
                item.setTextAlignment(col, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.types.addTopLevelItem(item)
        rows = self.types.topLevelItemCount()
        self.types.setFixedHeight(
            self.types.sizeHintForRow(0) * max(rows, 1) + self.types.header().sizeHint().height() + 6
        )
        lay.addWidget(self.types)
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
        self.folder_label.setWordWrap(True)
        lay.addWidget(self.folder_label)

        self.progress = QProgressBar()
        self.progress.setObjectName("quantizeProgress")
        self.progress.setRange(0, 1000)
        self.progress.hide()
        lay.addWidget(self.progress)
        self.status = QLabel("")
        self.status.setObjectName("detailText")
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
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelButton")
        self.cancel_button.hide()
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        for b in (self.compare_button, self.start_button, self.cancel_button, self.close_button):
            buttons.addWidget(b)
        lay.addLayout(buttons)

        job.progressed.connect(self._on_progress)
        job.finished.connect(self._on_finished)
        job.failed.connect(self._on_failed)
        job.cancelled.connect(self._on_cancelled)
        self.types.currentItemChanged.connect(lambda *_: self._type_changed())
        first = self.types.topLevelItem(0)
        if first is not None:
            self.types.setCurrentItem(first)
        else:
            self.start_button.setEnabled(False)
            self.message.show_message(Severity.ERROR, f"No type can be made from {self.source.name}.")
        self._show_folder()

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

    def _name_typed(self, _text: str) -> None:
        self._name_edited = True

    def _type_changed(self) -> None:
        q = self.qtype
        if q is not None and not self._name_edited:
            self.name_edit.setText(default_destination(self.source, q, self.folder).name)

    def _show_folder(self) -> None:
        self.folder_label.setText(f"in {self.folder}")

    # --- running ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the quantization of the chosen type into :attr:`destination` (refused in words when the name
        is empty or taken)."""
        q = self.qtype
        dest = self.destination
        if q is None or self.job.running:
            return
        if not self.name_edit.text().strip():
            self.message.show_message(Severity.ERROR, "Type a name for the quantization.")
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
        self.adjustSize()

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
        fallback = (
            f" llama.cpp gave {ev.fallback_tensors} of {ev.tensors} tensors another type: their rows are not a "
            f"whole number of {ev.qtype.value} blocks."
            if ev.fallback_tensors
            else ""
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
        """Closing while it runs cancels the quantization (the partial file is removed)."""
        self.job.shutdown()
        super().closeEvent(e)
