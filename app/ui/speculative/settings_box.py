"""The Model panel's "Speculative decoding" group: on/off, the drafter, draft_max and whether the draft
length adapts to what pays here, p_min, the n-gram size and the draft model file, applied with the
reload like the other load settings (they are ``LoadSettings.speculation``, remembered per model file).

The draft model is picked from the library (the Choose… menu lists its GGUF files, the loaded model
left out) or with a file dialog; the panel shows the draft's memory beside the model's
(:meth:`SpeculationBox.show_memory`) and, when a load refused the draft (``FailureKind.INCOMPATIBLE``),
the reason (:meth:`SpeculationBox.show_refusal`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.speculative.settings import DRAFT_MAX_LIMIT, NGRAM_LIMIT, Drafter, SpeculationSettings
from app.ui.common import palette
from app.ui.common.elided_label import ElidedLabel

DrafterChoices = Callable[[], Sequence[tuple[str, str]]]  # (label, path) of the library's GGUF files
# A GGUF name's last part naming its quant type: "-Q4_K_M.gguf", ".Q8_0.gguf", "-IQ3_XXS.gguf", "-BF16.gguf".
QUANT_TAIL = re.compile(r"[-._](?:I?Q\d\w*|B?F16|F32)\.gguf$", re.IGNORECASE)

WHAT_IT_DOES = (
    "A cheap guess drafts a few tokens; the model checks them all in one batch and keeps those its own "
    "sampler would have produced, so the text is the model's and each weight read serves several tokens."
)


class FileNameLabel(ElidedLabel):
    """A GGUF file name cut in the middle where it does not fit, its quant type kept whole at the end
    (``SmolLM2-13….Q8_0.gguf``): two quantizations of one model stay told apart."""

    def elided_text(self) -> str:
        """The name as painted at the current width."""
        text, fm, width = self.text(), self.fontMetrics(), self.contentsRect().width()
        if fm.horizontalAdvance(text) <= width:
            return text
        m = QUANT_TAIL.search(text)
        tail = text[m.start() :] if m else text[-10:]
        room = width - fm.horizontalAdvance(tail)
        head = fm.elidedText(text[: len(text) - len(tail)], Qt.TextElideMode.ElideRight, room) if room > 0 else ""
        return (head or "…") + tail


class SpeculationBox(QWidget):
    """The speculative decoding load settings (see the module docstring).

    Signals:
        edited(): the person changed a field (read :meth:`settings`).
        view_requested(): show the Speculation view.
    """

    edited = Signal()
    view_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speculationBox")
        self._library: DrafterChoices = lambda: ()
        self._choose_file: Callable[[], str | None] = lambda: None
        self._draft_path = ""
        self._header_refusal = False  # the refusal shown comes from the headers (cleared when they agree)
        self.menu: QMenu | None = None  # the last Choose… menu built
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.setSpacing(4)
        self.enabled = QCheckBox("Speculative decoding")
        self.enabled.setObjectName("field_speculation")
        self.enabled.setToolTip(WHAT_IT_DOES)
        lay.addWidget(self.enabled)
        self.fields = QWidget()
        form = QFormLayout(self.fields)
        form.setContentsMargins(8, 0, 0, 0)
        # A narrow dock (1366x768): a field that does not fit beside its label goes under it, never cut.
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(4)
        self.drafter = QComboBox()
        self.drafter.setObjectName("field_drafter")
        self.drafter.addItem("prompt lookup", Drafter.PROMPT_LOOKUP.value)
        self.drafter.addItem("draft model", Drafter.DRAFT_MODEL.value)
        self.drafter.setToolTip(
            "Prompt lookup: no second model; drafts the continuation of the longest recent n-gram match in the "
            "prompt and reply (good when the reply repeats its input: editing code, quoting).\n"
            "Draft model: a second, small GGUF with the same vocabulary drafts greedily."
        )
        self.draft_max = QSpinBox()
        self.draft_max.setObjectName("field_draft_max")
        self.draft_max.setRange(1, DRAFT_MAX_LIMIT)
        self.draft_max.setToolTip("Tokens drafted per round at most (llama.cpp's --draft-max).")
        self.p_min = QDoubleSpinBox()
        self.p_min.setObjectName("field_p_min")
        self.p_min.setRange(0.0, 1.0)
        self.p_min.setSingleStep(0.05)
        self.p_min.setDecimals(2)
        self.p_min.setToolTip(
            "The draft model stops drafting when its top token's probability falls below this "
            "(llama.cpp's --draft-p-min): a long, unsure draft costs verify time for tokens likely rejected."
        )
        self.adaptive = QCheckBox("adaptive")
        self.adaptive.setObjectName("field_draft_adaptive")
        self.adaptive.setToolTip(
            "Adaptive: each round drafts the length with the most tokens per second expected, from the verification "
            "times measured on this machine and the acceptance so far (on a CPU, often 1-2 tokens or none; on a "
            "GPU, up to draft_max).\nOff: every round drafts what the drafter has, up to draft_max, as llama.cpp does."
        )
        self.ngram = QSpinBox()
        self.ngram.setObjectName("field_ngram")
        self.ngram.setRange(1, NGRAM_LIMIT)
        self.ngram.setToolTip("Prompt lookup matches the last this-many tokens against the prompt and reply.")
        # Elided in the middle: the end of the name (its quant type, Q4_1 or Q8_0) stays in view.
        self.draft_name = FileNameLabel("none chosen")
        self.draft_name.setObjectName("draftModelName")
        self.choose_btn = QPushButton("Choose…")
        self.choose_btn.setObjectName("chooseDraftButton")
        self.choose_btn.setToolTip("A small GGUF with the same vocabulary as the model: from your library, or a file")
        self.choose_btn.clicked.connect(lambda: self.open_menu(show=True))
        for w, name in (
            (self.drafter, "drafter"),
            (self.draft_max, "draft_max"),
            (self.p_min, "p_min"),
            (self.ngram, "n-gram size"),
        ):
            w.setAccessibleName(name)
            w.setMinimumWidth(60)
        # "draft model" whole, or the row wraps under its label (WrapLongRows), never "draft mode".
        self.drafter.setMinimumWidth(self.drafter.sizeHint().width())
        form.addRow("drafter", self.drafter)
        form.addRow("draft_max", self.draft_max)
        form.addRow("draft length", self.adaptive)
        form.addRow("p_min", self.p_min)
        form.addRow("n-gram", self.ngram)
        # The file on a row of its own, the dock's whole width, under its label and Choose…: beside the label
        # column it widened a 1366x768 dock, and beside the button its name was cut to "SmolLM2-…".
        self._draft_label = QLabel("draft model")
        form.addRow(self._draft_label, self.choose_btn)
        form.addRow(self.draft_name)
        self._form = form
        self._draft_row = self.draft_name
        lay.addWidget(self.fields)
        self.note = QLabel("")
        self.note.setObjectName("speculationNote")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        lay.addWidget(self.note)
        self.refusal = QLabel("")
        self.refusal.setObjectName("draftRefusal")
        self.refusal.setWordWrap(True)
        self.refusal.setTextFormat(Qt.TextFormat.PlainText)
        self.refusal.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.refusal.setStyleSheet(f"color: {palette.RED};")
        self.refusal.hide()
        lay.addWidget(self.refusal)
        self.view_btn = QPushButton("Speculation view")
        self.view_btn.setObjectName("linkButton")
        self.view_btn.setToolTip("Acceptance by draft position, why rounds stopped, the time split, the roofline")
        self.view_btn.clicked.connect(self.view_requested)
        lay.addWidget(self.view_btn, 0, Qt.AlignmentFlag.AlignLeft)
        self.enabled.toggled.connect(self._person_edited)
        self.drafter.currentIndexChanged.connect(self._person_edited)
        self.draft_max.valueChanged.connect(self._person_edited)
        self.adaptive.toggled.connect(self._person_edited)
        self.p_min.valueChanged.connect(self._person_edited)
        self.ngram.valueChanged.connect(self._person_edited)
        self.set_settings(SpeculationSettings())

    # ------------------------------------------------------------------ the settings
    def settings(self) -> SpeculationSettings:
        """The speculation settings the fields show now."""
        return SpeculationSettings(
            enabled=self.enabled.isChecked(),
            drafter=Drafter(self.drafter.currentData()),
            draft_max=self.draft_max.value(),
            p_min=round(self.p_min.value(), 2),
            ngram=self.ngram.value(),
            draft_model=self._draft_path,
            adaptive=self.adaptive.isChecked(),
        )

    def set_settings(self, s: SpeculationSettings) -> None:
        """Show ``s`` (no :attr:`edited`)."""
        fields = (self.enabled, self.drafter, self.draft_max, self.adaptive, self.p_min, self.ngram)
        for w in fields:
            w.blockSignals(True)
        self.enabled.setChecked(s.enabled)
        self.drafter.setCurrentIndex(max(0, self.drafter.findData(s.drafter.value)))
        self.draft_max.setValue(s.draft_max)
        self.adaptive.setChecked(s.adaptive)
        self.p_min.setValue(s.p_min)
        self.ngram.setValue(s.ngram)
        for w in fields:
            w.blockSignals(False)
        self._set_draft(s.draft_model)
        self._follow()

    def set_sources(self, library: DrafterChoices, choose_file: Callable[[], str | None]) -> None:
        """Where draft models are picked: the library's GGUF files ``(label, path)``, and a file dialog."""
        self._library = library
        self._choose_file = choose_file

    # ------------------------------------------------------------------ what the panel shows
    def show_memory(self, text: str) -> None:
        """The draft model's memory (or why it has none), under the fields."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def show_refusal(self, reason: str) -> None:
        """A load refused the draft model (``FailureKind.INCOMPATIBLE``): its reason ("" : none)."""
        self._header_refusal = False
        self.refusal.setText(f"The draft model was refused: {reason}" if reason else "")
        self.refusal.setVisible(bool(reason))

    def show_header_refusal(self, reason: str) -> None:
        """The draft model chosen cannot draft for the model, as its GGUF header tells, before Apply ("" : it
        can; a load's refusal shown stays)."""
        if reason:
            self.show_refusal(reason)
            self.refusal.setText(f"{reason} Apply is off until you choose another draft model.")
            self._header_refusal = True
        elif self._header_refusal:
            self.show_refusal("")

    # ------------------------------------------------------------------ the draft model
    def open_menu(self, show: bool = False) -> QMenu:
        """The Choose… menu: the library's GGUF files, then "Other file…" (``show``: pop it up)."""
        menu = QMenu(self)
        menu.setObjectName("draftModelMenu")
        choices = list(self._library())
        head = menu.addAction("From your library:" if choices else "Your library has no other GGUF file")
        head.setEnabled(False)
        for label, path in choices:
            act = menu.addAction(label)
            act.setData(path)
            act.setToolTip(path)
            act.triggered.connect(lambda _=False, p=path: self.choose(p))
        menu.addSeparator()
        menu.addAction("Other file…", self._choose_other)
        self.menu = menu
        if show:
            menu.popup(self.choose_btn.mapToGlobal(self.choose_btn.rect().bottomLeft()))
        return menu

    def choose(self, path: str) -> None:
        """Use ``path`` as the draft model (the drafter becomes "draft model"); reported as an edit."""
        self._set_draft(path)
        self.drafter.blockSignals(True)
        self.drafter.setCurrentIndex(self.drafter.findData(Drafter.DRAFT_MODEL.value))
        self.drafter.blockSignals(False)
        self._person_edited()

    def _choose_other(self) -> None:
        path = self._choose_file()
        if path:
            self.choose(path)

    def _set_draft(self, path: str) -> None:
        self._draft_path = path
        self.draft_name.setText(Path(path).name if path else "none chosen")
        self.draft_name.setToolTip(path)

    # ------------------------------------------------------------------
    def _person_edited(self) -> None:
        self._follow()
        self.edited.emit()

    def _follow(self) -> None:
        """Show the fields that apply: all of them only when on; p_min and the file for a draft model,
        the n-gram size for prompt lookup."""
        s = self.settings()
        self.fields.setVisible(s.enabled)
        model = s.drafter is Drafter.DRAFT_MODEL
        self._form.setRowVisible(self.p_min, model)
        self._form.setRowVisible(self._draft_row, model)
        self._form.setRowVisible(self.choose_btn, model)
        self._form.setRowVisible(self.ngram, not model)
        if not s.enabled:
            self.show_memory("")
