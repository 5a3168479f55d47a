"""One horizontal stacked bar: coloured segments on a track, with optional marker lines.

The Stats panel's context and KV cache bars and the Models page's memory-fit bar are
this widget with different segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QRectF, Qt
from PySide6.QtGui import QHelpEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from app.ui.common import palette
from app.ui.common.palette import qcolor

RADIUS_PX = 4


@dataclass(frozen=True)
class BarSegment:
    """A part of the bar: ``value`` in the bar's unit (tokens, bytes...), a palette colour, a tooltip."""

    value: float
    color: str
    tooltip: str = ""


@dataclass(frozen=True)
class BarMarker:
    """A vertical line at ``at`` (in the bar's unit), e.g. a budget or an 80% comfort line."""

    at: float
    color: str
    dashed: bool = False
    width: float = 1.0


class StackedBar(QWidget):
    """Segments left to right over a rounded track, scaled so ``total`` fills the width.

    Segments past ``total`` are clipped at the bar's end. Hovering a segment shows its tooltip.

    Args:
        height_px: the fixed height of the bar.
        border: the palette colour of the outline.
    """

    def __init__(self, height_px: int = 18, border: str = palette.BORDER, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(height_px)
        self.setMaximumHeight(height_px)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.border = border
        self.segments: tuple[BarSegment, ...] = ()
        self.markers: tuple[BarMarker, ...] = ()
        self.total = 0.0

    def set_segments(self, segments: Sequence[BarSegment], total: float, markers: Sequence[BarMarker] = ()) -> None:
        """Show ``segments`` on a bar whose full width is ``total`` (nothing but the track when ``total`` <= 0)."""
        segs, marks = tuple(segments), tuple(markers)
        if (segs, marks, float(total)) != (self.segments, self.markers, self.total):
            self.segments, self.markers, self.total = segs, marks, float(total)
            self.update()

    def _bar_rect(self) -> QRectF:
        return QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)

    def _spans(self) -> list[tuple[float, float, BarSegment]]:
        """``(x0, x1, segment)`` in pixels for each drawn segment, clipped to the bar."""
        r = self._bar_rect()
        out = []
        if self.total > 0:
            x = r.left()
            for seg in self.segments:
                w = r.width() * max(0.0, seg.value) / self.total
                x1 = min(x + w, r.right())
                if x1 > x:
                    out.append((x, x1, seg))
                x += w
        return out

    def paintEvent(self, _e: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = self._bar_rect()
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(qcolor(palette.TRACK))
        p.drawRoundedRect(r, RADIUS_PX, RADIUS_PX)
        for x0, x1, seg in self._spans():
            p.setBrush(qcolor(seg.color))
            p.drawRect(QRectF(x0, r.top(), x1 - x0, r.height()))
        if self.total > 0:
            for m in self.markers:
                x = int(r.left() + r.width() * m.at / self.total)
                style = Qt.PenStyle.DashLine if m.dashed else Qt.PenStyle.SolidLine
                p.setPen(QPen(qcolor(m.color), m.width, style))
                p.drawLine(x, int(r.top()), x, int(r.bottom()))
        p.setPen(QPen(qcolor(self.border)))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRoundedRect(r, RADIUS_PX, RADIUS_PX)
        p.end()

    def segment_at(self, x: float) -> BarSegment | None:
        """The segment under pixel ``x``, if any."""
        return next((seg for x0, x1, seg in self._spans() if x0 <= x < x1), None)

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            seg = self.segment_at(e.x())
            if seg is not None and seg.tooltip:
                QToolTip.showText(e.globalPos(), seg.tooltip, self)
            elif self.toolTip():
                QToolTip.showText(e.globalPos(), self.toolTip(), self)
            else:
                QToolTip.hideText()
                e.ignore()
            return True
        return super().event(e)
