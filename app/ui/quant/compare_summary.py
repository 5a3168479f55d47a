"""The Compare window's summary: the figures over the whole text, and each file's own.

Left, over the text: PPL of each model, their ratio and its natural log, mean, median, 99th and
99.9th percentile and maximum KL divergence, "same top-1" with its binomial error, RMS Δp (each ± its
error as llama-perplexity computes it). Right, per file: its size on disk, its weights in memory,
prefill and decode tok/s measured in the same run. Every label and value explains itself on hover:
what the figure means, which way is better, and llama.cpp's reference figures
(:mod:`app.core.quant.reference`).
"""

from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.core.gguf.gguf_info import format_bytes
from app.core.quant.chunks import MIN_VERDICT_TOKENS, plural
from app.core.quant.comparison import ComparisonSummary, ModelFigures
from app.core.quant.reference import SOURCE, place_kl, reference_line
from app.ui.common import palette
from app.ui.quant.compare_scale import KL_HELP

_REF = f"<br><span style='color:{palette.MUTED}'>Reference ({SOURCE}): "

# (key, label, explanation) for the figures over the text, in the order shown.
TEXT_FIGURES: tuple[tuple[str, str, str], ...] = (
    (
        "ppl_ratio",
        "PPL ratio B / A",
        "Perplexity of B divided by perplexity of A over the scored tokens, ± its error (propagated from "
        "both, as <code>llama-perplexity</code> prints “Mean PPL(Q)/PPL(base)”). 1 means B predicts this "
        "text as well as A; above 1, B is more surprised by it." + _REF + reference_line("ppl_ratio") + "</span>",
    ),
    (
        "ln_ratio",
        "ln(PPL B / PPL A)",
        "The natural log of the PPL ratio: the mean difference of the two models' log-likelihoods per "
        "token, in nats. 0 when the two give the same probabilities to the actual text.",
    ),
    (
        "kl_mean",
        "Mean KL divergence",
        KL_HELP
        + " The mean is over every scored token, ± its standard error."
        + _REF
        + reference_line("kl_mean")
        + "</span>",
    ),
    (
        "kl_median",
        "Median KL divergence",
        "Half the scored tokens have a KL divergence below this (nats). Far below the mean when a few "
        "tokens carry most of the difference.",
    ),
    (
        "kl_p99",
        "99th percentile KL",
        "1 token in 100 has a KL divergence above this (nats): the tail where the two models disagree most. "
        "LLaMA 3 8B BF16 vs FP16 (llama.cpp's perplexity README): 0.00022.",
    ),
    (
        "kl_p999",
        "99.9th percentile KL",
        "1 token in 1,000 has a KL divergence above this (nats). LLaMA 3 8B BF16 vs FP16 (llama.cpp's "
        "perplexity README): 0.0008.",
    ),
    ("kl_max", "Maximum KL", "The largest KL divergence at any scored token (nats): jump to it in the list."),
    (
        "same_top1",
        "Same top-1",
        "How often both models put the same token first (the token greedy decoding would pick), ± the "
        "binomial error √(p(1−p)/n). 100% means a greedy reply would be the same token by token as long "
        "as the context is the same." + _REF + reference_line("same_top1") + "</span>",
    ),
    (
        "rms_dp",
        "RMS Δp",
        "Root mean square of Δp = p<sub>B</sub> − p<sub>A</sub>, the change of the probability of the token "
        "that actually comes next, ± its error. If quantization only added noise to the probabilities, "
        "this would be that noise's standard deviation." + _REF + reference_line("rms_dp") + "</span>",
    ),
)

# (key, label, explanation) for each file's figures.
FILE_FIGURES: tuple[tuple[str, str, str], ...] = (
    (
        "ppl",
        "PPL",
        "Perplexity over the scored tokens: exp of the mean negative log-likelihood of the actual next "
        "token, ± its error. Lower is better; only comparable between models with the same vocabulary.",
    ),
    ("file_bytes", "Size on disk", "The GGUF file's size."),
    ("weights_bytes", "Weights in memory", "What llama.cpp holds for the weights once loaded (llama_model_size)."),
    (
        "prefill_tok_s",
        "Prefill",
        "Prompt tokens evaluated per second over the comparison's chunks (n_ctx tokens "
        "at a time), on this machine, while the chat may have been using the CPU too.",
    ),
    (
        "decode_tok_s",
        "Decode",
        "Tokens generated per second in a short greedy reply after the comparison "
        "(one token at a time: bound by reading the weights from memory, so a smaller file is usually faster).",
    ),
)


def pm(value: float, err: float, digits: int = 4) -> str:
    """``value ± err`` to ``digits`` significant digits (no ± when the error is 0 or unknown)."""
    if not math.isfinite(value):
        return "–"
    body = f"{value:.{digits}g}"
    return f"{body} ± {err:.2g}" if math.isfinite(err) and err > 0 else body


def pct_pm(value: float, err: float) -> str:
    """A fraction and its error as percentages, e.g. ``97.31 ± 0.25 %``."""
    if not math.isfinite(value):
        return "–"
    return f"{100 * value:.2f} ± {100 * err:.2f} %" if math.isfinite(err) and err > 0 else f"{100 * value:.2f} %"


def text_value(s: ComparisonSummary, key: str) -> str:
    """The shown value of figure ``key`` (one of :data:`TEXT_FIGURES`) of ``s``."""
    if key == "ppl_ratio":
        return pm(s.ppl_ratio, s.ppl_ratio_err, 5)
    if key == "ln_ratio":
        return pm(s.ln_ratio, s.ln_ratio_err)
    if key == "kl_mean":
        return pm(s.kl_mean, s.kl_mean_err)
    if key == "same_top1":
        return pct_pm(s.same_top1, s.same_top1_err)
    if key == "rms_dp":
        return pct_pm(s.rms_dp, s.rms_dp_err)
    return pm(float(getattr(s, key)), 0.0)


def file_value(f: ModelFigures, key: str) -> str:
    """The shown value of figure ``key`` (one of :data:`FILE_FIGURES`) of file ``f``."""
    if key == "ppl":
        return pm(f.ppl, f.ppl_err, 5)
    if key in ("file_bytes", "weights_bytes"):
        n = int(getattr(f, key))
        return format_bytes(n) if n > 0 else "–"
    v = float(getattr(f, key))
    if v <= 0 or not math.isfinite(v):
        return "–"
    return f"{v:,.0f} tok/s" if v >= 100 else f"{v:,.1f} tok/s"


def verdict(s: ComparisonSummary) -> str:
    """One sentence over the whole comparison, for its header: where its mean KL divergence sits on
    llama.cpp's scoreboard, only from :data:`~app.core.quant.chunks.MIN_VERDICT_TOKENS` scored tokens up
    (llama-perplexity's own floor); a chat shorter than the n_ctx asked is said to be one shorter chunk."""
    ran = f"{plural(s.n_scored, 'token')} scored in {plural(s.n_chunks, 'chunk')} of n_ctx {s.n_ctx:,}. "
    if s.shrunk:
        ran = (
            f"The chat is {s.n_ctx:,} tokens, shorter than n_ctx {s.n_ctx_asked:,}: it was scored as one chunk of "
            f"{s.n_ctx:,} ({plural(s.n_scored, 'token')} scored, its second half). "
        )
    if s.n_scored < MIN_VERDICT_TOKENS:
        return (
            f"{ran}Too few tokens for a verdict: llama-perplexity does no statistics under {MIN_VERDICT_TOKENS} "
            f"scored tokens. Compare on a longer text (a few thousand tokens give steady figures)."
        )
    return (
        f"{ran}Mean KL divergence {s.kl_mean:.3g} nats: {place_kl(s.kl_mean)} in llama.cpp's LLaMA 3 8B scoreboard; "
        f"same top-1 {100 * s.same_top1:.1f}%."
    )


def _label(text: str, tip: str, *, value: bool = False) -> QLabel:
    lab = QLabel(text)
    lab.setToolTip(tip)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if value:
        lab.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        lab.setStyleSheet(f"color:{palette.TEXT}; font-weight:600;")
    else:
        lab.setStyleSheet(f"color:{palette.TEXT_DIM};")
    return lab


class SummaryView(QWidget):
    """The figures of a finished comparison (empty, with a line saying so, before)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareSummary")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.headline = QLabel("The figures over the whole text appear here when the comparison ends.")
        self.headline.setObjectName("compareHeadline")
        self.headline.setWordWrap(True)
        self.headline.setStyleSheet(f"color:{palette.TEXT_SOFT};")
        outer.addWidget(self.headline)
        row = QHBoxLayout()
        row.setSpacing(12)
        outer.addLayout(row)
        self.values: dict[str, QLabel] = {}  # figure key ("kl_mean", "a.ppl"...) -> its value label
        half = 4  # the text's figures in two blocks: PPL and KL divergence's centre, then its tail and the rest
        for i, block in enumerate((TEXT_FIGURES[:half], TEXT_FIGURES[half:])):
            if i:
                row.addWidget(_divider())
            grid = _grid()
            for r, (key, label, tip) in enumerate(block):
                grid.addWidget(_label(label, tip), r, 0)
                self.values[key] = _label("–", tip, value=True)
                grid.addWidget(self.values[key], r, 1)
            row.addLayout(grid)
            row.setAlignment(grid, Qt.AlignmentFlag.AlignTop)
        self.file_grid = _grid()
        self.file_names: dict[str, QLabel] = {}
        for c, side in enumerate(("a", "b"), start=1):
            head = _label(side.upper(), "", value=True)
            self.file_names[side] = head
            self.file_grid.addWidget(head, 0, c)
        for r, (key, label, tip) in enumerate(FILE_FIGURES, start=1):
            self.file_grid.addWidget(_label(label, tip), r, 0)
            for c, side in enumerate(("a", "b"), start=1):
                self.values[f"{side}.{key}"] = _label("–", tip, value=True)
                self.file_grid.addWidget(self.values[f"{side}.{key}"], r, c)
        # The files' figures under the text's, not beside them: three blocks side by side needed 835 px once
        # filled, and the window widened itself (1280 -> 1309-1335 px) to show them.
        row.addStretch(1)
        files_row = QHBoxLayout()
        files_row.addLayout(self.file_grid)
        files_row.addStretch(1)
        outer.addLayout(files_row)
        self.elapsed = _label(
            "",
            "Wall time of the whole comparison in the engine process (both models, every chunk, the decode test).",
        )
        # two long file names wrap: on one line they widened the window (1280 -> 1335 px)
        self.elapsed.setWordWrap(True)
        outer.addWidget(self.elapsed)

    def clear(self, message: str) -> None:
        """No figures: dashes, and ``message`` as the headline."""
        self.headline.setText(message)
        for lab in self.values.values():
            lab.setText("–")
        self.elapsed.setText("")

    def show_summary(self, s: ComparisonSummary, load: str = "") -> None:
        """Fill every figure from ``s``; ``load``: why its tok/s were measured under load ("" when quiet,
        :func:`~app.core.hardware.machine_load.load_note`), said under them and on their hover."""
        self.headline.setText(verdict(s))
        self.headline.setToolTip(KL_HELP)
        for key, _label_text, _tip in TEXT_FIGURES:
            self.values[key].setText(text_value(s, key))
        for side, figures in (("a", s.a), ("b", s.b)):
            self.file_names[side].setToolTip(f"Model {side.upper()}: {figures.path}")
            for key, _label_text, _tip in FILE_FIGURES:
                self.values[f"{side}.{key}"].setText(file_value(figures, key))
        speeds = dict((key, tip) for key, _label_text, tip in FILE_FIGURES if key.endswith("_tok_s"))
        for side in ("a", "b"):
            for key, tip in speeds.items():
                lab = self.values[f"{side}.{key}"]
                lab.setToolTip(f"{tip} Measured under load: {load}." if load else tip)
                if load:
                    lab.setText(lab.text() + " *")
        note = f"\n* tok/s {load}: lower and noisier than on a quiet machine." if load else ""
        self.elapsed.setText(
            f"A: {Path(s.a.path).name}   ·   B: {Path(s.b.path).name}   ·   took {s.elapsed_s:,.1f} s{note}"
        )


def _grid() -> QGridLayout:
    grid = QGridLayout()
    grid.setHorizontalSpacing(10)
    grid.setVerticalSpacing(2)
    return grid


def _divider() -> QFrame:
    line = QFrame()
    line.setFrameShape(QFrame.Shape.VLine)
    line.setStyleSheet(f"color:{palette.DIVIDER};")
    return line
