"""The Compare window's colour scale for KL divergence, and its legend.

A token's chip is coloured by the KL divergence at that position, in six steps on a logarithmic
scale (nats): below 0.001 the two models agree almost exactly; above 1 they disagree about the next
token as much as two unrelated guesses would. The steps' edges follow the reference figures in
llama.cpp's perplexity README (tools/perplexity/README.md, "LLaMA 3 8b Scoreboard": mean KL
divergence 0.0014 for Q8_0, 0.031 for Q4_K_M, 0.45 for Q2_K against FP16), so a chip's colour reads
as "a Q8_0-sized difference here" or "a Q2_K-sized one".
"""

from __future__ import annotations

import bisect

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.ui.common import palette

# The steps' lower edges (nats) after the first, and their colours (dark green to magenta).
KL_EDGES: tuple[float, ...] = (0.001, 0.01, 0.1, 0.5, 1.0)
KL_COLOURS: tuple[str, ...] = ("#1b3a2c", "#2f6b3f", "#8a7a18", "#b0561a", "#b3262e", "#b02a86")
KL_LABELS: tuple[str, ...] = ("< 0.001", "0.001", "0.01", "0.1", "0.5", "≥ 1 nat")
FLIP_COLOUR = "#38d6f5"  # the bar under a token where the two models' top-1 differ

KL_HELP = (
    "<b>KL divergence</b> (Kullback-Leibler, in nats) at a position: how far model B's probabilities for "
    "the next token are from model A's, KL(P<sub>A</sub> ‖ P<sub>B</sub>) = Σ p<sub>A</sub> ln(p<sub>A</sub> / "
    "p<sub>B</sub>) over the whole vocabulary, as <code>llama-perplexity --kl-divergence</code> computes it. "
    "0 means the same distribution. For reference, llama.cpp's perplexity README (LLaMA 3 8B on "
    "Wikitext-2, against FP16) gives a mean of 0.0014 for Q8_0, 0.0055 for Q6_K, 0.031 for Q4_K_M and "
    "0.45 for Q2_K."
)


def kl_level(kl: float) -> int:
    """Which step of the scale ``kl`` (nats) falls in: 0 (below 0.001) to 5 (1 and above)."""
    return bisect.bisect_right(KL_EDGES, kl)


def kl_colour(kl: float) -> str:
    """The chip colour for a KL divergence of ``kl`` nats."""
    return KL_COLOURS[kl_level(kl)]


class KlLegend(QWidget):
    """One line: the six colour steps with their edges, the top-1 mark, the not-scored look.

    Each part explains itself on hover (the whole widget's tooltip: what KL divergence is, the
    reference figures, what the mark and the grey text mean).
    """

    SWATCH_W = 58

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("klLegend")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setToolTip(
            KL_HELP + "<br><br><span style='color:" + FLIP_COLOUR + "'>▁▁</span> under a token: the two models' "
            "most likely next token differs there (a top-1 flip).<br>"
            "<span style='color:" + palette.FAINT + "'>Grey text</span>: context only, not scored — each chunk "
            "of n_ctx tokens is evaluated from scratch and only its second half is scored, so every scored "
            "token has at least n_ctx/2 tokens before it (as llama-perplexity does)."
        )

    def _parts(self) -> tuple[int, int, int]:
        """(title width, flip-mark width, dim-text width) in pixels at the current font."""
        fm = self.fontMetrics()
        return (
            fm.horizontalAdvance("KL divergence (nats): ") + 4,
            fm.horizontalAdvance("top-1 differs") + 34,
            fm.horizontalAdvance("not scored") + 12,
        )

    def sizeHint(self) -> QSize:
        title, flip, dim = self._parts()
        return QSize(title + self.SWATCH_W * len(KL_COLOURS) + flip + dim + 24, self.fontMetrics().height() + 10)

    def minimumSizeHint(self) -> QSize:
        return QSize(self.SWATCH_W * len(KL_COLOURS) + 8, self.fontMetrics().height() + 10)

    def paintEvent(self, e: QPaintEvent) -> None:
        p = QPainter(self)
        fm = self.fontMetrics()
        h = fm.height() + 6
        y = (self.height() - h) // 2
        title, flip, _dim = self._parts()
        x = 0
        if self.width() >= self.sizeHint().width():
            p.setPen(QColor(palette.TEXT_DIM))
            p.drawText(QRect(0, y, title, h), Qt.AlignmentFlag.AlignVCenter, "KL divergence (nats):")
            x = title
        for colour, label in zip(KL_COLOURS, KL_LABELS, strict=True):
            r = QRect(x, y, self.SWATCH_W - 2, h)
            p.fillRect(r, QColor(colour))
            p.setPen(QColor(palette.TEXT))
            p.drawText(r, Qt.AlignmentFlag.AlignCenter, label)
            x += self.SWATCH_W
        if self.width() < self.sizeHint().width():
            return
        x += 12
        p.setPen(QColor(palette.TEXT))
        p.fillRect(QRect(x, y + h - 3, 22, 3), QColor(FLIP_COLOUR))
        p.drawText(QRect(x, y, 22, h - 2), Qt.AlignmentFlag.AlignCenter, "ab")
        p.setPen(QColor(palette.TEXT_DIM))
        p.drawText(QRect(x + 26, y, flip, h), Qt.AlignmentFlag.AlignVCenter, "top-1 differs")
        x += flip
        p.setPen(QColor(palette.FAINT))
        p.drawText(QRect(x, y, self.width() - x, h), Qt.AlignmentFlag.AlignVCenter, "not scored")
        p.end()
