"""Acceptance by draft position as a bar chart: bar i is the share of the rounds that drafted a position i
whose draft was accepted there (:func:`app.ui.speculative.figures.position_bars`), 0..100%, each bar labelled
with its rounds ("7/9") where the labels fit side by side (else they are left to the tooltip, which always
lists them), on pyqtgraph."""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from app.ui.common import palette
from app.ui.speculative.figures import PositionBar, pct

#: The chart's tallest, px: short enough that the whole chart, its position axis included, shows in the
#: Speculation dock at 1366x768 (the review of issue 22 saw the axis cut below the dock's edge).
MAX_HEIGHT_PX = 165
#: Bars this tall (percent) carry their label inside their top, the others above them.
INSIDE_FROM_PCT = 60.0
#: Space kept between two bar labels, px.
LABEL_GAP_PX = 4

EXPLAINED = (
    "Bar i: of the rounds that drafted a token at position i, the share whose draft was accepted there "
    "(a position is reached only when every earlier one was accepted). Above each bar, where they fit: "
    "accepted/drafted."
)


class PositionPlot(QWidget):
    """The bars (see the module docstring); :attr:`heights` holds what is drawn, percent per position,
    :attr:`labels` each bar's "accepted/drafted" and :attr:`labels_shown` whether they are drawn."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speculationPositionPlot")
        self.view = pg.PlotWidget()
        self.view.setBackground(palette.PLOT_BG)
        # The dock's height, not pyqtgraph's size hint (about 640 x 480), decides how tall it is.
        self.view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
        self.view.setMinimumHeight(120)
        self.setMaximumHeight(MAX_HEIGHT_PX)
        plot = self.view.getPlotItem()
        plot.setTitle("Accepted by draft position", color=palette.TEXT_DIM, size="9pt")
        self.setToolTip(EXPLAINED)
        plot.showGrid(x=False, y=True, alpha=0.15)
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.setMouseEnabled(x=False, y=False)
        plot.setYRange(0, 105, padding=0)
        plot.getAxis("left").setTicks([[(v, f"{v}%") for v in (0, 25, 50, 75, 100)]])
        self.plot = plot
        self.heights: list[float] = []
        self.labels: list[str] = []
        self.label_items: list[pg.TextItem] = []
        self.labels_shown = False
        self.label_font = QFont(self.font())
        self.label_font.setPointSizeF(max(6.5, self.font().pointSizeF() - 1.5))
        plot.getViewBox().sigResized.connect(self._fit_labels)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)

    def show_bars(self, bars: Sequence[PositionBar]) -> None:
        """Draw ``bars`` (none: an empty chart)."""
        self.plot.clear()
        self.heights = [100.0 * b.rate for b in bars]
        self.labels = [f"{b.accepted}/{b.drafted}" for b in bars]
        self.label_items = []
        self.setToolTip(
            EXPLAINED
            + "".join(f"\nposition {b.position}: {b.accepted}/{b.drafted} accepted ({pct(b.rate)})" for b in bars)
        )
        if not bars:
            return
        xs = [b.position for b in bars]
        self.plot.addItem(
            pg.BarGraphItem(x=xs, height=self.heights, width=0.7, brush=palette.GREEN, pen=pg.mkPen(palette.GREEN_BG))
        )
        for x, h, label in zip(xs, self.heights, self.labels, strict=True):
            inside = h >= INSIDE_FROM_PCT  # a tall bar's label inside its top, clear of the title above
            text = pg.TextItem(
                label, color=palette.PLOT_BG if inside else palette.TEXT_SOFT, anchor=(0.5, 0.0 if inside else 1.0)
            )
            text.setFont(self.label_font)
            text.setPos(x, min(h, 100.0) - 1 if inside else h + 1)
            self.plot.addItem(text)
            self.label_items.append(text)
        self.plot.getAxis("bottom").setTicks([[(x, str(x)) for x in xs]])
        self.plot.setXRange(0.4, max(xs) + 0.6, padding=0)
        self.plot.setYRange(0, 110, padding=0)
        self._fit_labels()

    def _fit_labels(self) -> None:
        """Draw the bar labels only when the widest fits in one bar's width with a gap (px)."""
        if not self.label_items:
            self.labels_shown = False
            return
        (x0, x1), _y = self.plot.getViewBox().viewRange()
        per_bar_px = self.plot.getViewBox().width() / max(x1 - x0, 1e-9)
        widest = max(item.boundingRect().width() for item in self.label_items)  # px: a TextItem ignores zoom
        self.labels_shown = widest + LABEL_GAP_PX <= per_bar_px
        for item in self.label_items:
            item.setVisible(self.labels_shown)
