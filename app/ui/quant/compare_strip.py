"""The Compare window's strip: the text, token by token, each scored token coloured by its KL divergence.

The tokens are laid out like running text (a token with a newline ends its line), each in a chip:
coloured by the KL divergence there (:mod:`app.ui.quant.compare_scale`), a bright bar under it where
the two models' top-1 differ, grey text where the position is context only (the first half of each
n_ctx chunk, not scored), a thin divider where a chunk starts. Hovering a token shows both models'
top five there (:mod:`app.ui.quant.compare_hover`); clicking one selects it (outlined).

Drawn with QPainter from a layout made once per width (a rectangle per token, the first token of
each line), so a paint touches only the lines in view and a hover is a binary search: a text of
tens of thousands of tokens scrolls smoothly.
"""

from __future__ import annotations

import bisect

from PySide6.QtCore import QEvent, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QHelpEvent, QMouseEvent, QPainter, QPaintEvent, QPen, QResizeEvent
from PySide6.QtWidgets import QScrollArea, QSizePolicy, QToolTip, QWidget

from app.core.quant.compare_run import ComparisonRun
from app.ui.common import palette
from app.ui.common.pieces import EMPTY, NEWLINE, TAB
from app.ui.quant.compare_hover import pending_tooltip, tail_tooltip, token_tooltip, unscored_tooltip
from app.ui.quant.compare_scale import FLIP_COLOUR, kl_colour

PAD_X = 0  # pixels each side of a chip's text: none, so a word cut in tokens still reads as one word
CHUNK_GAP = 7  # pixels before the first token of a chunk (its divider drawn in the middle)
MARGIN = 6  # pixels around the text


def display_text(text: str) -> str:
    """A token's text as the strip draws it: tabs as →, newlines as ⏎ (the line then ends), ∅ when empty."""
    if not text:
        return EMPTY
    return text.replace("\t", TAB).replace("\r\n", NEWLINE).replace("\n", NEWLINE).replace("\r", NEWLINE)


class TokenStrip(QWidget):
    """The strip itself (put it in a :class:`QScrollArea` with ``widgetResizable``: :func:`strip_in_scroll`).

    Signals:
        token_clicked(int): the person clicked the token at this position.
    """

    token_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareStrip")
        self.setMouseTracking(False)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        font = QFont(self.font())
        font.setPointSizeF(font.pointSizeF() * 1.08)
        self.setFont(font)
        self._run = ComparisonRun()
        self.names = ("A", "B")  # the two files' names, for the hover
        self._selected: int | None = None
        self._rects: list[QRect] = []  # one per token, in widget coordinates
        self._line_tops: list[int] = []  # each line's top
        self._line_first: list[int] = []  # each line's first token
        self._laid_width = -1
        self._laid_count = -1
        self._shown: list[str] = []

    # ------------------------------------------------------------------ what is shown
    def set_run(self, run: ComparisonRun, names: tuple[str, str]) -> None:
        """Show ``run`` (read at each paint: call :meth:`refresh` when it changed)."""
        self._run, self.names, self._selected = run, names, None
        self._laid_count = -1
        self.refresh()

    def refresh(self) -> None:
        """The run changed (new tokens or figures): lay out again if its text changed, then repaint."""
        if len(self._run.token_texts) != self._laid_count:
            self._relayout()
        self.update()

    @property
    def selected(self) -> int | None:
        return self._selected

    def select(self, index: int | None) -> QRect | None:
        """Outline the token at position ``index`` (None: none); returns its rectangle (to scroll to)."""
        self._selected = index
        self.update()
        if index is None or not 0 <= index < len(self._rects):
            return None
        return QRect(self._rects[index])

    def token_at(self, pos: QPoint) -> int | None:
        """The position of the token under ``pos`` (widget coordinates), or None."""
        line = bisect.bisect_right(self._line_tops, pos.y()) - 1
        if line < 0:
            return None
        first = self._line_first[line]
        last = self._line_first[line + 1] if line + 1 < len(self._line_first) else len(self._rects)
        xs = [self._rects[i].left() for i in range(first, last)]
        i = first + bisect.bisect_right(xs, pos.x()) - 1
        if first <= i < last and self._rects[i].contains(pos):
            return i
        return None

    # ------------------------------------------------------------------ layout
    def _line_height(self) -> int:
        return self.fontMetrics().height() + 7

    def _relayout(self) -> None:
        """Place every token for the current width (like running text; a newline ends the line)."""
        texts = self._run.token_texts
        fm = self.fontMetrics()
        width = max(self.width(), 200)
        lh = self._line_height()
        n_ctx = self._run.n_ctx
        self._shown = [display_text(t) for t in texts]
        self._rects, self._line_tops, self._line_first = [], [], []
        x, y = MARGIN, MARGIN
        self._line_tops.append(y)
        self._line_first.append(0)
        right = width - MARGIN
        for i, shown in enumerate(self._shown):
            w = fm.horizontalAdvance(shown) + 2 * PAD_X
            gap = CHUNK_GAP if i > 0 and n_ctx > 0 and i % n_ctx == 0 else 0
            if x + gap + w > right and x > MARGIN:
                x, y = MARGIN, y + lh
                self._line_tops.append(y)
                self._line_first.append(i)
                gap = CHUNK_GAP if gap else 0
            x += gap
            self._rects.append(QRect(x, y, w, lh - 3))
            x += w
            if NEWLINE in shown and i + 1 < len(self._shown):
                x, y = MARGIN, y + lh
                self._line_tops.append(y)
                self._line_first.append(i + 1)
        self._laid_width = self.width()
        self._laid_count = len(texts)
        height = (y + lh + MARGIN) if texts else 0
        self.setMinimumHeight(height)
        self.updateGeometry()

    def sizeHint(self) -> QSize:
        return QSize(600, self.minimumHeight())

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        if e.size().width() != self._laid_width:
            self._relayout()

    # ------------------------------------------------------------------ painting
    def paintEvent(self, e: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(e.rect(), QColor(palette.BASE))
        if not self._rects:
            p.setPen(QColor(palette.MUTED))
            p.drawText(
                self.rect().adjusted(MARGIN, MARGIN, -MARGIN, -MARGIN),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap,
                "The text appears here token by token once the comparison starts.",
            )
            p.end()
            return
        run = self._run
        lines = self._line_tops
        first_line = max(0, bisect.bisect_right(lines, e.rect().top() - self._line_height()) - 1)
        last_line = bisect.bisect_right(lines, e.rect().bottom())
        start = self._line_first[first_line]
        end = self._line_first[last_line] if last_line < len(self._line_first) else len(self._rects)
        text_pen, dim_pen, pending_pen = QColor(palette.TEXT), QColor(palette.FAINT), QColor(palette.TEXT_DIM)
        flip = QColor(FLIP_COLOUR)
        divider = QPen(QColor(palette.BORDER))
        n_ctx = run.n_ctx
        for i in range(start, end):
            r = self._rects[i]
            tok = run.tokens.get(i)
            if tok is not None:
                fill = QColor(kl_colour(tok.kl))
                p.fillRect(r, fill)
                p.fillRect(QRect(r.left(), r.top(), 1, r.height()), fill.darker(135))  # where the token starts
                if not tok.same_top1:
                    p.fillRect(QRect(r.left(), r.bottom() - 2, r.width(), 3), flip)
                p.setPen(text_pen)
            elif run.is_scored(i):
                p.setPen(pending_pen)
            else:
                p.setPen(dim_pen)
            p.drawText(r.adjusted(PAD_X, 0, 0, -2), Qt.AlignmentFlag.AlignVCenter, self._shown[i])
            if i > 0 and n_ctx > 0 and i % n_ctx == 0:
                p.setPen(divider)
                x = r.left() - CHUNK_GAP // 2 - 1
                p.drawLine(x, r.top() - 1, x, r.bottom() + 1)
        if self._selected is not None and start <= self._selected < end:
            p.setPen(QPen(QColor(palette.WHITE), 2))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(self._rects[self._selected].adjusted(-1, -1, 1, 1))
        p.end()

    # ------------------------------------------------------------------ hover and click
    def tooltip_for(self, index: int) -> str:
        """The hover of the token at ``index`` (rich text)."""
        run = self._run
        text = run.token_texts[index]
        tok = run.tokens.get(index)
        if tok is not None:
            return token_tooltip(tok, *self.names)
        if run.is_scored(index):
            return pending_tooltip(index, text)
        if run.scored and index >= run.scored[-1][1]:
            return tail_tooltip(index, text)
        return unscored_tooltip(index, text, run.chunk_of(index), run.n_ctx)

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            i = self.token_at(e.pos())
            if i is None:
                QToolTip.hideText()
                e.ignore()
            else:
                QToolTip.showText(e.globalPos(), self.tooltip_for(i), self, self._rects[i])
            return True
        return super().event(e)

    def mousePressEvent(self, e: QMouseEvent) -> None:
        i = self.token_at(e.position().toPoint())
        if i is not None and e.button() == Qt.MouseButton.LeftButton:
            self.select(i)
            self.token_clicked.emit(i)
        super().mousePressEvent(e)


def strip_in_scroll(strip: TokenStrip) -> QScrollArea:
    """``strip`` in a vertical scroll area that gives it the viewport's width."""
    area = QScrollArea()
    area.setObjectName("compareStripScroll")
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(strip)
    return area


def scroll_to_token(area: QScrollArea, strip: TokenStrip, index: int) -> None:
    """Select the token at ``index`` and scroll ``area`` so it is in view, a few lines below the top."""
    r = strip.select(index)
    if r is not None:
        area.ensureVisible(r.center().x(), r.center().y(), 20, max(40, area.viewport().height() // 3))
