"""The Compare window's set-up: which two GGUF files, which text, which n_ctx; Start / Cancel and progress.

Model A and model B are picked from the library (the loaded model first) or any GGUF file. The text
is either the chat shown, as model A sees it (its chat template, or the person's override for that
file), or a passage pasted or opened from a text file. n_ctx is the chunk size (512 by default, as
``llama-perplexity``'s usual runs). While a comparison runs the form is locked, the progress bar shows
tokens done and time left, and a line says that chat replies are slower meanwhile (the comparison's
own engine process shares the CPU).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.context import ChatMessage
from app.core.models.library import ModelEntry
from app.core.quant.pairing import default_pair, sibling
from app.ui.common import dialogs, palette
from app.ui.common.fmt import duration, format_bytes
from app.ui.quant.compare_picker import ModelPicker

DEFAULT_N_CTX = 512
MAX_TEXT_FILE_BYTES = 20 * 1024 * 1024  # a passage file larger than this is refused (it would take hours)
CPU_NOTE = (
    "The comparison runs in its own engine process: the chat stays usable, but its replies are slower "
    "while this runs, since both share the CPU."
)


@dataclass(frozen=True)
class CompareChoice:
    """What the person asked to compare.

    Attributes:
        path_a, path_b: the two GGUF files (A is the reference: KL(P_A ‖ P_B)).
        text: the passage (None when the chat is compared).
        messages: the chat shown, as sent to the engine (None when a passage is compared).
        chat_template: the person's chat template for model A's file (None: the GGUF's own).
        n_ctx: the chunk size, tokens.
    """

    path_a: str
    path_b: str
    text: str | None
    messages: tuple[ChatMessage, ...] | None
    chat_template: str | None
    n_ctx: int


class CompareSetup(QWidget):
    """The set-up form with Start / Cancel and the progress line.

    Args:
        chat_source: the chat shown as the engine would be sent it, or None when no chat is shown.
        template_for: the person's chat template override for a model file (None: the GGUF's).

    Signals:
        start_requested(CompareChoice): the person pressed Compare with a valid choice.
        cancel_requested(): the person pressed Cancel.
    """

    start_requested = Signal(CompareChoice)
    cancel_requested = Signal()

    def __init__(
        self,
        chat_source: Callable[[], tuple[ChatMessage, ...] | None],
        template_for: Callable[[str], str | None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._chat_source, self._template_for = chat_source, template_for
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.model_a, self.model_b = ModelPicker("A"), ModelPicker("B")
        self.model_a.setToolTip(
            "The reference: KL divergence is measured from A's probabilities to B's, "
            "KL(P_A ‖ P_B), as llama-perplexity measures a quantization from its base model."
        )
        self.model_b.setToolTip("The file compared with A, e.g. a smaller quantization of the same model.")
        form.addRow(_form_label("Model A", self.model_a.toolTip()), self.model_a)
        form.addRow(_form_label("Model B", self.model_b.toolTip()), self.model_b)

        self.use_chat = QRadioButton("The chat shown")
        self.use_chat.setToolTip(
            "The conversation shown in the chat, as model A sees it: rendered with its chat template (your "
            "override for that file, if you set one), special tokens and all."
        )
        self.use_passage = QRadioButton("A passage")
        group = QButtonGroup(self)
        group.addButton(self.use_chat)
        group.addButton(self.use_passage)
        self.chat_info = QLabel("")
        self.chat_info.setWordWrap(True)
        self.chat_info.setStyleSheet(f"color:{palette.MUTED};")
        self.passage = QPlainTextEdit()
        self.passage.setObjectName("comparePassage")
        self.passage.setPlaceholderText(
            "Paste a text here, or open a text file. A few thousand tokens give steady figures."
        )
        self.passage.setMaximumHeight(110)
        self.passage.textChanged.connect(lambda: self.use_passage.setChecked(True))
        self.open_text = QPushButton("Open a text file…")
        self.open_text.clicked.connect(self._open_text)
        text_box = QVBoxLayout()
        chat_row = QHBoxLayout()
        chat_row.addWidget(self.use_chat)
        chat_row.addWidget(self.chat_info, 1)
        text_box.addLayout(chat_row)
        passage_row = QHBoxLayout()
        passage_row.addWidget(self.use_passage)
        passage_row.addStretch(1)
        passage_row.addWidget(self.open_text)
        text_box.addLayout(passage_row)
        text_box.addWidget(self.passage)
        form.addRow(
            _form_label("Text", "What both models read: the chat shown (with model A's chat template) or a passage."),
            text_box,
        )

        self.n_ctx = QSpinBox()
        self.n_ctx.setObjectName("compareNCtx")
        self.n_ctx.setRange(64, 32768)
        self.n_ctx.setSingleStep(64)
        self.n_ctx.setValue(DEFAULT_N_CTX)
        self.n_ctx.setToolTip(
            "Chunk size in tokens. The text is cut into chunks of n_ctx tokens, each evaluated from an empty "
            "KV cache; only the second half of each chunk is scored, so every scored token sees at least "
            "n_ctx/2 tokens before it (llama-perplexity's method; 512 is its usual setting). A passage needs "
            "at least n_ctx tokens (2 × n_ctx for two chunks, as llama-perplexity asks); a chat shorter than "
            "n_ctx is scored as one chunk of its own length, and the result says so."
        )
        self.n_ctx.setSuffix(" tokens per chunk")
        form.addRow(_form_label("n_ctx", self.n_ctx.toolTip()), self.n_ctx)
        col.addLayout(form)

        buttons = QHBoxLayout()
        self.start = QPushButton("Compare")
        self.start.setObjectName("compareStart")
        self.start.setDefault(True)
        self.start.clicked.connect(self._start)
        self.cancel = QPushButton("Cancel")
        self.cancel.setObjectName("compareCancel")
        self.cancel.setEnabled(False)
        self.cancel.clicked.connect(self.cancel_requested.emit)
        self.progress = QProgressBar()
        self.progress.setObjectName("compareProgress")
        self.progress.setTextVisible(True)
        self.progress.setFormat("")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        buttons.addWidget(self.start)
        buttons.addWidget(self.cancel)
        buttons.addWidget(self.progress, 1)
        col.addLayout(buttons)
        self.message = QLabel("")
        self.message.setObjectName("compareMessage")
        self.message.setWordWrap(True)
        col.addWidget(self.message)
        self.use_passage.setChecked(True)

    # ------------------------------------------------------------------ filling
    def fill_models(self, loaded: str | None, entries: Sequence[ModelEntry]) -> None:
        """Offer ``loaded`` and the library's ``entries`` in both pickers. The first time, A is the loaded model
        (else a library file that has another file of its model) and B another file of A's model
        (:func:`~app.core.quant.pairing.default_pair`), or none: B then asks to be chosen, since any other
        file would be refused. Later fills keep the person's choices."""
        had_a, had_b = self.model_a.path, self.model_b.path
        self.model_a.fill(loaded, entries)
        self.model_b.fill(loaded, entries)
        pair_a, pair_b = default_pair(loaded, entries)
        if had_a is None:
            self.model_a.set_path(pair_a)
        if had_b is None:
            a = self.model_a.path
            if a == pair_a:
                self.model_b.set_path(pair_b)
            else:  # the person's A, kept from before: its own sibling
                other = sibling(a, entries) if a else None
                self.model_b.set_path(str(other.path) if other is not None else None)

    def set_pair(self, path_a: str, path_b: str) -> None:
        """Choose the two files (e.g. a quantization and its source, from the Library)."""
        self.model_a.set_path(path_a)
        self.model_b.set_path(path_b)

    def refresh_chat(self) -> None:
        """Say how many messages the chat shown has; offer it only when there is one."""
        messages = self._chat_source()
        if messages:
            self.use_chat.setEnabled(True)
            self.chat_info.setText(f"{len(messages)} message{'s' if len(messages) != 1 else ''}, with A's template")
        else:
            self.use_chat.setEnabled(False)
            self.chat_info.setText("no chat shown")
            self.use_passage.setChecked(True)

    # ------------------------------------------------------------------ the person's actions
    def _open_text(self) -> None:
        path = dialogs.choose_open_path(
            self, "Open a text to compare on", Path.home(), "Text (*.txt *.md);;All files (*)"
        )
        if not path:
            return
        text = read_passage(Path(path))
        if isinstance(text, Exception):
            self.say(str(text), error=True)
            return
        self.passage.setPlainText(text)
        self.use_passage.setChecked(True)
        self.say(f"Opened {Path(path).name} ({len(text):,} characters).")

    def choice(self) -> CompareChoice | str:
        """The valid choice, or what is missing (a message for the person)."""
        a, b = self.model_a.path, self.model_b.path
        if not a or not b:
            return "Pick two GGUF files: model A and model B (Browse… for a file outside the library)."
        for side, p in (("A", a), ("B", b)):
            if not Path(p).is_file():
                return f"Model {side}'s file {p} does not exist any more. Pick another."
        n_ctx = self.n_ctx.value()
        if self.use_chat.isChecked():
            messages = self._chat_source()
            if not messages:
                return "No chat is shown: open a chat, or compare on a passage."
            return CompareChoice(a, b, None, tuple(messages), self._template_for(a), n_ctx)
        text = self.passage.toPlainText()
        if not text.strip():
            return "The passage is empty: paste a text or open a text file (or compare on the chat shown)."
        return CompareChoice(a, b, text, None, None, n_ctx)

    def _start(self) -> None:
        choice = self.choice()
        if isinstance(choice, str):
            self.say(choice, error=True)
            return
        self.start_requested.emit(choice)

    # ------------------------------------------------------------------ while it runs
    def say(self, text: str, *, error: bool = False) -> None:
        """A line under the buttons (red for an error)."""
        self.message.setStyleSheet(f"color:{palette.RED if error else palette.TEXT_DIM};")
        self.message.setText(text)

    def set_running(self, running: bool) -> None:
        """Lock the form while a comparison runs; Cancel only then."""
        for w in (
            self.model_a,
            self.model_b,
            self.use_chat,
            self.use_passage,
            self.passage,
            self.open_text,
            self.n_ctx,
        ):
            w.setEnabled(not running)
        if not running:
            self.refresh_chat()
        self.start.setEnabled(not running)
        self.cancel.setEnabled(running)
        if running:
            self.progress.setRange(0, 0)  # busy until the first figures: loading both models
            self.progress.setFormat("Loading both models…")
            self.say(CPU_NOTE)

    def show_progress(self, done: int, total: int, eta_s: float | None) -> None:
        """Tokens done of ``total`` and the time left."""
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(min(done, total))
        left = f" · {duration(eta_s)} left" if eta_s is not None else ""
        self.progress.setFormat(f"{done:,} / {total:,} tokens{left}")


def _form_label(text: str, tip: str) -> QLabel:
    lab = QLabel(text)
    lab.setToolTip(tip)
    return lab


def read_passage(path: Path) -> str | ValueError:
    """A text file's contents (UTF-8), or what is wrong with it, naming the file and what to do."""
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_FILE_BYTES:
            return ValueError(
                f"{path.name} is {format_bytes(size)}: more than the {format_bytes(MAX_TEXT_FILE_BYTES)} a comparison "
                "takes. Open a shorter excerpt."
            )
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ValueError(f"{path.name} is not UTF-8 text. Save it as UTF-8 text, or paste the passage.")
    except OSError as exc:
        return ValueError(f"Could not read {path}: {exc.strerror or exc}.")
