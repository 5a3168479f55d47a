"""Acceptance by draft position as a bar chart: bar i is the share of the rounds that drafted a position i
whose draft was accepted there (:func:`app.ui.speculative.figures.position_bars`), 0..100%, each bar labelled
with its rounds ("7/9"), on pyqtgraph."""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from app.ui.common import palette
from app.ui.speculative.figures import PositionBar


class PositionPlot(QWidget):
    """The bars (see the module docstring); :attr:`heights` holds what is drawn, percent per position."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speculationPositionPlot")
        self.view = pg.PlotWidget()
        self.view.setBackground(palette.PLOT_BG)
        # The dock's height, not pyqtgraph's size hint (about 640 x 480), decides how tall it is.
        self.view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
        self.view.setMinimumHeight(120)
        plot = self.view.getPlotItem()
        plot.setTitle("Accepted by draft position", color=palette.TEXT_DIM, size="9pt")
        self.setToolTip(
            "Bar i: of the rounds that drafted a token at position i, the share whose draft was accepted there "
            "(a position is reached only when every earlier one was accepted). Above each bar: accepted/drafted."
        )
        plot.showGrid(x=False, y=True, alpha=0.15)
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.setMouseEnabled(x=False, y=False)
        plot.setYRange(0, 105, padding=0)
        plot.getAxis("left").setTicks([[(v, f"{v}%") for v in (0, 25, 50, 75, 100)]])
        self.plot = plot
        self.heights: list[float] = []
        self.labels: list[str] = []
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)

    def show_bars(self, bars: Sequence[PositionBar]) -> None:
        """Draw ``bars`` (none: an empty chart)."""
        self.plot.clear()
        self.heights = [100.0 * b.rate for b in bars]
        self.labels = [f"{b.accepted}/{b.drafted}" for b in bars]
        if not bars:
            return
        xs = [b.position for b in bars]
        self.plot.addItem(
            pg.BarGraphItem(x=xs, height=self.heights, width=0.7, brush=palette.GREEN, pen=pg.mkPen(palette.GREEN_BG))
        )
        for x, h, label in zip(xs, self.heights, self.labels, strict=True):
            text = pg.TextItem(label, color=palette.TEXT_SOFT, anchor=(0.5, 1.0))
            text.setPos(x, min(h, 100.0) + 1)
            self.plot.addItem(text)
        self.plot.getAxis("bottom").setTicks([[(x, str(x)) for x in xs]])
        self.plot.setXRange(0.4, max(xs) + 0.6, padding=0)
        self.plot.setYRange(0, 122, padding=0)
