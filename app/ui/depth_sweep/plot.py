"""The sweep's plot: prefill tok/s (top) and decode tok/s (bottom) against depth, the roofline dashed.

The x axis is the depth on a log scale, ``log2(depth + 256)`` so that depth 0 has a place (llama.cpp's
KV view is padded to 256 cells anyway: :data:`app.core.hardware.speed_bound.KV_VIEW_PAD`), labelled at
the depths measured (0, 512, 1k, 2k...). One curve per run shown, each in its colour, with its own
roofline dashed in the same colour to its own deepest depth (each run keeps the roofline of the settings
and bandwidth it was measured with); a run measured under load is drawn with hollow markers. The runs'
colours are keyed in the window's list of runs (a legend on the plot would cover the curves at 1366x768).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.core.depth_sweep.plan import DepthPoint
from app.core.depth_sweep.roofline import DepthBound
from app.core.hardware.speed_bound import KV_VIEW_PAD
from app.ui.common import palette

#: The runs' colours; a run keeps the one given when it started (``SweepRecord.color``).
RUN_COLORS = (palette.GREEN, palette.ACCENT, palette.AMBER, palette.PURPLE, palette.RED, palette.LINK, palette.YELLOW)


def depth_x(depth: int) -> float:
    """Where ``depth`` sits on the x axis: log2(depth + 256)."""
    return math.log2(depth + KV_VIEW_PAD)


def depth_label(depth: int) -> str:
    """0, 512, 1k, 1.5k, 32k: a depth as the axis says it."""
    if depth < 1024:
        return str(depth)
    k = depth / 1024
    return f"{k:.0f}k" if k >= 10 or k == int(k) else f"{k:.1f}k"


@dataclass(frozen=True)
class Series:
    """One run on the plot: its key (a run id), label, colour, points, its own roofline (dashed; empty: none)
    and whether it was measured under load (hollow markers)."""

    key: str
    label: str
    color: str
    points: tuple[DepthPoint, ...]
    bounds: tuple[DepthBound, ...] = ()
    under_load: bool = False


class SweepPlot(QWidget):
    """Two plots sharing the depth axis: prefill tok/s and decode tok/s (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("depthSweepPlot")
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground(palette.PLOT_BG)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.prefill = self.view.addPlot(row=0, col=0)
        self.decode = self.view.addPlot(row=1, col=0)
        for plot, title in ((self.prefill, "Prefill (tok/s)"), (self.decode, "Decode (tok/s)")):
            plot.setTitle(title, color=palette.TEXT_DIM, size="10pt")
            plot.showGrid(x=True, y=True, alpha=0.15)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.setMouseEnabled(x=False, y=False)
        self.decode.setXLink(self.prefill)
        self.decode.setLabel("bottom", "depth: tokens already in the KV cache")
        self.curves: dict[str, list[pg.PlotDataItem]] = {}  # run key -> (prefill, decode) curves

    def show_runs(self, series: Sequence[Series]) -> None:
        """Draw ``series``: one curve each on both plots, and each one's roofline dashed in its colour."""
        self.curves = {}
        self.roofs: dict[str, list[pg.PlotDataItem]] = {}  # run key -> its dashed (decode[, prefill]) bounds
        for plot in (self.prefill, self.decode):
            plot.clear()
        depths: set[int] = set()
        for s in series:
            xs = [depth_x(p.depth) for p in s.points]
            depths.update(p.depth for p in s.points)
            pen = pg.mkPen(s.color, width=2)
            brush = pg.mkBrush(palette.PLOT_BG if s.under_load else s.color)
            items = []
            for plot, ys in (
                (self.prefill, [p.prefill_tok_s for p in s.points]),
                (self.decode, [p.decode_tok_s for p in s.points]),
            ):
                items.append(plot.plot(xs, ys, pen=pen, symbol="o", symbolSize=6, symbolBrush=brush, symbolPen=pen))
            self.curves[s.key] = items
            self.roofs[s.key] = self._roof(s)
            depths.update(b.depth for b in s.bounds)
        ticks = [(depth_x(d), depth_label(d)) for d in sorted(depths)]
        self.decode.getAxis("bottom").setTicks([_thin(ticks)])
        self.prefill.getAxis("bottom").setTicks([_thin(ticks)])
        for plot in (self.prefill, self.decode):
            plot.enableAutoRange()
            plot.setYRange(0, max(_top(plot), 1.0) * 1.1, padding=0)

    def _roof(self, s: Series) -> list[pg.PlotDataItem]:
        """``s``'s roofline, dashed in its colour (none without a decode bound)."""
        bounds = s.bounds
        if not bounds or not any(b.decode_tok_s > 0 for b in bounds):
            return []
        dash = pg.mkPen(s.color, width=1.5, style=Qt.PenStyle.DashLine)
        xs = [depth_x(b.depth) for b in bounds]
        items = [self.decode.plot(xs, [b.decode_tok_s for b in bounds], pen=dash)]
        if any(b.prefill_tok_s > 0 for b in bounds):
            items.append(self.prefill.plot(xs, [b.prefill_tok_s for b in bounds], pen=dash))
        return items


def _top(plot: pg.PlotItem) -> float:
    """The largest y any curve of ``plot`` reaches (0 for none)."""
    top = 0.0
    for item in plot.listDataItems():
        _, ys = item.getData()
        if ys is not None and len(ys):
            top = max(top, float(max(ys)))
    return top


def _thin(ticks: list[tuple[float, str]], min_gap: float = 0.35) -> list[tuple[float, str]]:
    """Drop tick labels that would overlap the one before (closer than ``min_gap`` on the x axis)."""
    out: list[tuple[float, str]] = []
    for x, label in ticks:
        if not out or x - out[-1][0] >= min_gap:
            out.append((x, label))
    return out
