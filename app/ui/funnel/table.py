"""The Funnel panel's table (:class:`FunnelView`): one :class:`~app.core.sampling.funnel.Funnel` painted as
tokens by stages, each cell the token's probability after that stage (× where it was cut), with the
survivors, entropy and the mass outside the rows below; every label and cell explained on hover
(:mod:`app.ui.funnel.legend`). It grows with the room it is given (:attr:`FunnelView.scale`): rows, font and
token column, up to :data:`FunnelView.MAX_SCALE`.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRectF, Qt
from PySide6.QtGui import QFont, QFontDatabase, QFontMetrics, QHelpEvent, QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from app.core.sampling.funnel import Funnel
from app.ui.common import palette
from app.ui.common.palette import qcolor
from app.ui.common.token_label import visible
from app.ui.funnel.legend import (
    FOOTER_HELP,
    LEGEND,
    SHORT,
    UNKNOWN,
    FooterRow,
    cell_tip,
    footer_tip,
    footer_value,
    header_tip,
    pct,
)


def visible_token(text: str) -> str:
    """Show whitespace in a token as every panel does (· space, ⏎ newline, → tab); isolated, so a right-to-left
    token stays after the row's ▶ mark (:mod:`app.ui.common.token_label`)."""
    return visible(text)


class FunnelView(QWidget):
    """Paints one :class:`Funnel` as a table: tokens by stages."""

    NAME_W = 74  # the token column's least width; wider (up to MAX_NAME_W) when the rows' tokens need it
    MAX_NAME_W = 150
    ROW_H = 15  # px at scale 1
    MIN_COL_W = 22  # "100" in the small mono font; narrower panels stagger the stage names (header_rows)
    FOOTER_GAP = 4  # px between the last token row and the footer
    MAX_SCALE = 1.8  # the table grows with the room it is given (the sampling lab) up to this, font included
    COL_W_AT_SCALE_1 = 32  # px of stage column per unit of scale: a wider column allows a larger table

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("funnelView")
        self.funnel: Funnel | None = None
        self.message = "No reply kept its candidates yet: send a message, then click any token of a reply."
        self.setToolTip(LEGEND)
        self.painted = 0  # paints so far (tests and the latency measurement read it)
        self._mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.scale = 1.0  # the table's size over its least (rows, font, token column), from the room it has
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumHeight(self._height(12))

    def _height(self, rows: int) -> int:
        return (rows + self.header_rows() + 3) * self.ROW_H + 10

    @property
    def rh(self) -> int:
        """A row's height, px, at the table's scale."""
        return round(self.ROW_H * self.scale)

    def _rescale(self) -> None:
        """The table's scale: as large as the view's height holds its rows and its width its columns
        (``COL_W_AT_SCALE_1`` px per stage column per unit), between 1 and ``MAX_SCALE``. In a narrow dock it
        stays 1; in the sampling lab the table and its text grow into the room instead of leaving it empty."""
        rows = len(self.funnel.rows) if self.funnel else 12
        n_cols = len(self.funnel.stages) if self.funnel else 1
        by_height = (self.height() - 10) / ((rows + 2 + 3) * self.ROW_H)
        by_width = (self.width() - self.NAME_W * 1.4) / max(1, n_cols) / self.COL_W_AT_SCALE_1
        self.scale = max(1.0, min(self.MAX_SCALE, by_height, by_width))

    def _font(self) -> QFont:
        font = QFont(self._mono)
        font.setPointSizeF(max(7.0, font.pointSizeF() - 1.5) * self.scale)
        return font

    def _label(self, r: int) -> str:
        assert self.funnel is not None
        tok, text = self.funnel.rows[r]
        return ("▶" if tok == self.funnel.drawn else " ") + visible_token(text)

    def name_w(self) -> int:
        """The token column's width, px: the widest row's token (so "·the", "·because" are not cut), at
        least ``NAME_W``, at most ``MAX_NAME_W`` and what leaves every stage column 30 px (longer tokens
        are elided; their tooltip shows them whole)."""
        if self.funnel is None or not self.funnel.rows:
            return self.NAME_W
        fm = QFontMetrics(self._font())
        widest = max(fm.horizontalAdvance(self._label(r)) for r in range(len(self.funnel.rows))) + 6
        room = self.width() - 30 * self.scale * len(self.funnel.stages)
        return int(max(self.NAME_W * self.scale, min(widest, self.MAX_NAME_W * self.scale, room)))

    def _col_w(self) -> float:
        n_cols = len(self.funnel.stages) if self.funnel else 1
        return max(self.MIN_COL_W * self.scale, (self.width() - self.name_w()) / max(1, n_cols))

    def row_at(self, y: float) -> int | None:
        """The candidate row under ``y`` (widget px), or None (the header, the footer, no funnel)."""
        if self.funnel is None:
            return None
        r = int(y // self.rh) - self.header_rows()
        return r if 0 <= r < len(self.funnel.rows) else None

    def column_at(self, x: float) -> int | None:
        """The stage column under ``x`` (widget px), or None (the token column, past the last stage, no funnel)."""
        if self.funnel is None or x < self.name_w():
            return None
        c = int((x - self.name_w()) // self._col_w())
        return c if 0 <= c < len(self.funnel.stages) else None

    def footer_at(self, y: float) -> FooterRow | None:
        """The footer row under ``y`` (widget px): left, H bits, rest % (None: elsewhere)."""
        if self.funnel is None:
            return None
        y0 = (len(self.funnel.rows) + self.header_rows()) * self.rh + self.FOOTER_GAP
        i = int((y - y0) // self.rh) if y >= y0 else -1
        rows = list(FooterRow)
        return rows[i] if 0 <= i < len(rows) else None

    def tooltip_at(self, x: float, y: float) -> str:
        """What the label or cell under (x, y) (widget px) means (:mod:`app.ui.funnel.legend`): a stage's
        header, a token row's name (its whole text, elided in a narrow column, and id), a cell, a footer
        row's name or value; the legend elsewhere (the corner, no funnel)."""
        f = self.funnel
        if f is None:
            return LEGEND
        c = self.column_at(x)
        if y < self.header_rows() * self.rh:
            return header_tip(f, c) if c is not None else LEGEND
        r = self.row_at(y)
        if r is not None:
            if x < self.name_w():
                tok, text = f.rows[r]
                return f"{visible_token(text)}  (token id {tok})"
            return cell_tip(f, r, c) if c is not None else LEGEND
        row = self.footer_at(y)
        if row is None:
            return LEGEND
        return footer_tip(row, f.stages[c]) if c is not None else FOOTER_HELP[row]

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            QToolTip.showText(e.globalPos(), self.tooltip_at(e.pos().x(), e.pos().y()), self)
            return True
        return super().event(e)

    def header_rows(self) -> int:
        """1, or 2 when a stage's name is wider than its column (narrow panels): then every other
        name goes on the second row, so that names never run together ("top_ktop_pmin_p")."""
        if self.funnel is None:
            return 1
        fm = QFontMetrics(self._font())
        widest = max(fm.horizontalAdvance(SHORT[st.kind]) for st in self.funnel.stages)
        return 2 if widest > self._col_w() - 4 else 1

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        rows = len(self.funnel.rows) if self.funnel else 12
        self.setMinimumHeight(self._height(rows))
        self._rescale()

    def show_funnel(self, funnel: Funnel | None, message: str | None = None) -> None:
        self.funnel = funnel
        if message is not None:
            self.message = message
        rows = len(funnel.rows) if funnel else 12
        self.setMinimumHeight(self._height(rows))
        # Every stage's column at its least width: a narrower dock scrolls sideways (DockScroll) instead of cutting
        # off the last stages (the draw).
        self.setMinimumWidth(self.NAME_W + (len(funnel.stages) if funnel else 1) * self.MIN_COL_W)
        self._rescale()
        self.update()

    def paintEvent(self, _e: QPaintEvent) -> None:
        p = QPainter(self)
        self.painted += 1
        f = self.funnel
        if f is None:
            p.setPen(qcolor(palette.MUTED))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.message)
            p.end()
            return
        p.setFont(self._font())
        col_w = self._col_w()
        rh = self.rh
        head = self.header_rows()
        name_w = self.name_w()
        left = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
        centre = Qt.AlignmentFlag.AlignCenter
        # Header: the stages.
        for c, st in enumerate(f.stages):
            x = name_w + c * col_w
            p.setPen(qcolor(palette.GREEN if st.kind.is_draw else palette.TEXT_DIM))
            # Two header rows: the odd columns' names a row lower, centred on their column and free to
            # spread over their neighbours' (empty) halves of that row.
            row = c % 2 if head == 2 else 0
            p.drawText(QRectF(x - col_w / 2, row * rh, 2 * col_w, rh), centre, SHORT[st.kind])
        picked = f.picked
        for r, (tok, _text) in enumerate(f.rows):
            y = (r + head) * rh
            drawn = tok == f.drawn
            p.setPen(qcolor(palette.GREEN if drawn else palette.TEXT))
            p.drawText(
                QRectF(0, y, name_w - 2, rh),
                left,
                p.fontMetrics().elidedText(self._label(r), Qt.TextElideMode.ElideRight, name_w - 2),
            )
            for c, st in enumerate(f.stages):
                x = name_w + c * col_w
                prob = st.probs[r]
                cell = QRectF(x + 1, y + 1, col_w - 2, rh - 2)
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(qcolor(palette.TRACK))
                p.drawRect(cell)
                if not st.known or (c == 0 and tok in f.unkept):  # the kept candidates cannot tell
                    p.setPen(qcolor(palette.FAINT))
                    p.drawText(cell, centre, UNKNOWN)
                elif prob > 0:
                    hit = st.kind.is_draw and tok == picked
                    p.setBrush(qcolor(palette.GREEN if hit else palette.ACCENT))
                    p.drawRect(QRectF(cell.x(), cell.y(), cell.width() * min(1.0, prob), cell.height()))
                    p.setPen(qcolor(palette.WHITE))
                    p.drawText(cell, centre, pct(prob))
                else:
                    p.setPen(qcolor(palette.FAINT))
                    p.drawText(cell, centre, "×")
        # Footer: survivors, entropy, mass outside the rows.
        y0 = (len(f.rows) + head) * rh + self.FOOTER_GAP
        for i, foot in enumerate(FooterRow):
            values = [footer_value(foot, st) for st in f.stages]
            y = y0 + i * rh
            p.setPen(qcolor(palette.TEXT_DIM))
            p.drawText(QRectF(0, y, name_w, rh), left, foot.value)
            p.setPen(qcolor(palette.TEXT_SOFT))
            for c, v in enumerate(values):
                p.drawText(QRectF(name_w + c * col_w, y, col_w, rh), centre, v)
        p.end()
