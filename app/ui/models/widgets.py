"""Small widgets and delegates shared by the models window's tabs."""

from __future__ import annotations

import html
import re

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from app.core.gguf.gguf_info import format_bytes
from app.core.hardware.fit import COMFORT, FitReport, Verdict
from app.ui.common import dialogs, palette
from app.ui.common.palette import qcolor
from app.ui.common.severity import Severity
from app.ui.common.stacked_bar import BarMarker, BarSegment, StackedBar

# QColor aliases of palette names, for painters and item-data roles.
TEXT = qcolor(palette.TEXT)
TEXT_SOFT = qcolor(palette.TEXT_SOFT)
MUTED = qcolor(palette.MUTED)
FAINT = qcolor(palette.FAINT)
ACCENT = qcolor(palette.ACCENT)
GREEN = qcolor(palette.GREEN)
AMBER = qcolor(palette.AMBER)
RED = qcolor(palette.RED)
PURPLE = qcolor(palette.PURPLE)
TRACK = qcolor(palette.TRACK)
SELECTED = qcolor(palette.SELECTED)
HOVER = qcolor(palette.HOVER)

VERDICT_COLORS = {Verdict.FITS: GREEN, Verdict.TIGHT: AMBER, Verdict.DOES_NOT_FIT: RED}

_URL_RE = re.compile(r"https?://[^\s<>\"')]+[^\s<>\"').,;:]")


def linkify(text: str) -> str:
    """``text`` as HTML with every http(s) URL a clickable link."""
    out, pos = [], 0
    for m in _URL_RE.finditer(text):
        out.append(html.escape(text[pos : m.start()]))
        url = m.group(0)
        out.append(f'<a href="{html.escape(url)}" style="color:{palette.LINK}">{html.escape(url)}</a>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


class InlineMessage(QLabel):
    """A message inside a tab (a :class:`Severity`: info, warning, error or busy) with clickable links.

    Links open through :func:`app.ui.common.dialogs.open_url`.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inlineMessage")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.setOpenExternalLinks(False)
        self.linkActivated.connect(lambda url: dialogs.open_url(url))
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.kind: Severity | None = None
        self.plain = ""
        self.hide()

    def show_message(self, kind: Severity | str, text: str, links: list[tuple[str, str]] | None = None) -> None:
        """Show ``text`` (plain; URLs become links) and optional extra ``(label, url)`` links.

        Raises:
            ValueError: ``kind`` is not a :class:`Severity` value.
        """
        self.kind = Severity(kind)
        self.plain = text
        body = linkify(text)
        for label, url in links or []:
            body += f' &nbsp;<a href="{html.escape(url)}" style="color:{palette.LINK}">{html.escape(label)}</a>'
        self.setProperty("kind", self.kind.value)
        self.style().unpolish(self)
        self.style().polish(self)
        self.setText(body)
        self.show()

    def clear_message(self) -> None:
        """Hide the message (``kind`` becomes None)."""
        self.kind = None
        self.plain = ""
        self.setText("")
        self.hide()


def paint_background(p: QPainter, opt: QStyleOptionViewItem) -> None:
    """Row background: selection and hover, flat."""
    if opt.state & QStyle.StateFlag.State_Selected:
        p.fillRect(opt.rect, SELECTED)
    elif opt.state & QStyle.StateFlag.State_MouseOver:
        p.fillRect(opt.rect, HOVER)


class TwoLineDelegate(QStyledItemDelegate):
    """A cell with a bold first line (DisplayRole) and a smaller second line.

    Args:
        subtitle_role: the role holding the second line.
        subtitle_color_role: a role holding a QColor for the second line (e.g. red for errors).
        badge_role: a role holding a short badge text drawn after the first line (e.g. ``loaded``).
    """

    def __init__(
        self,
        subtitle_role: int,
        subtitle_color_role: int | None = None,
        badge_role: int | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.subtitle_role = subtitle_role
        self.subtitle_color_role = subtitle_color_role
        self.badge_role = badge_role

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        fm = QFontMetrics(option.font)
        return QSize(240, fm.height() * 2 + 16)

    def paint(self, p: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        p.save()
        paint_background(p, opt)
        r = opt.rect.adjusted(10, 6, -8, -6)
        title_font = QFont(opt.font)
        title_font.setWeight(QFont.Weight.DemiBold)
        fm = QFontMetrics(title_font)
        title = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        badge = str(index.data(self.badge_role) or "") if self.badge_role is not None else ""
        small = QFont(opt.font)
        small.setPointSizeF(max(6.0, opt.font.pointSizeF() * 0.86))
        sfm = QFontMetrics(small)
        badge_w = sfm.horizontalAdvance(badge) + 14 if badge else 0
        p.setFont(title_font)
        p.setPen(TEXT)
        line1 = QRect(r.left(), r.top(), r.width() - (badge_w + 8 if badge else 0), fm.height())
        text = fm.elidedText(title, Qt.TextElideMode.ElideRight, line1.width())
        p.drawText(line1, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
        if badge:
            x = r.left() + fm.horizontalAdvance(text) + 8
            br = QRectF(x, line1.top() + 1, badge_w, line1.height() - 2)
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(qcolor(palette.GREEN_BG))
            p.drawRoundedRect(br, 4, 4)
            p.setPen(GREEN)
            p.setFont(small)
            p.drawText(br, Qt.AlignmentFlag.AlignCenter, badge)
        sub = str(index.data(self.subtitle_role) or "")
        color = index.data(self.subtitle_color_role) if self.subtitle_color_role is not None else None
        p.setFont(small)
        p.setPen(color if isinstance(color, QColor) else MUTED)
        line2 = QRect(r.left(), line1.bottom() + 3, r.width(), sfm.height())
        p.drawText(
            line2,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            sfm.elidedText(
                sub, Qt.TextElideMode.ElideMiddle if color is None else Qt.TextElideMode.ElideRight, line2.width()
            ),
        )
        p.restore()


class FlatDelegate(QStyledItemDelegate):
    """Plain cells painted flat (selection/hover like :class:`TwoLineDelegate`), honouring
    BackgroundRole, ForegroundRole, FontRole and TextAlignmentRole.

    Args:
        elide_middle: columns whose long text is shortened in the middle (file names).
    """

    def __init__(self, parent: QWidget | None = None, elide_middle: tuple[int, ...] = ()) -> None:
        super().__init__(parent)
        self.elide_middle = set(elide_middle)

    def paint(self, p: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        p.save()
        bg = index.data(Qt.ItemDataRole.BackgroundRole)
        if isinstance(bg, QColor) and not opt.state & QStyle.StateFlag.State_Selected:
            p.fillRect(opt.rect, bg)
        paint_background(p, opt)
        fg = index.data(Qt.ItemDataRole.ForegroundRole)
        color = fg.color() if hasattr(fg, "color") else (fg if isinstance(fg, QColor) else TEXT_SOFT)
        font = index.data(Qt.ItemDataRole.FontRole) or opt.font
        p.setFont(font)
        p.setPen(color)
        align = index.data(Qt.ItemDataRole.TextAlignmentRole)
        flags = Qt.AlignmentFlag(int(align)) if align is not None else Qt.AlignmentFlag.AlignLeft
        r = opt.rect.adjusted(10, 0, -10, 0)
        mode = Qt.TextElideMode.ElideMiddle if index.column() in self.elide_middle else Qt.TextElideMode.ElideRight
        text = QFontMetrics(font).elidedText(opt.text, mode, r.width())
        p.drawText(r, flags | Qt.AlignmentFlag.AlignVCenter, text)
        p.restore()


class FitBar(StackedBar):
    """Memory needed against memory free: weights | KV cache | compute, on a track of the budget.

    A thin mark shows the comfort line (80% of the budget): past it the verdict is *tight*.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(14, border=palette.DIVIDER, parent=parent)
        self.setObjectName("fitBar")
        self.report: FitReport | None = None

    def set_report(self, report: FitReport | None) -> None:
        self.report = report
        self.setVisible(report is not None)
        if report is None or report.budget <= 0:
            self.set_segments([], 0)
            return
        est = report.estimate
        markers = [BarMarker(COMFORT * report.budget, palette.TEXT, dashed=True)]
        if est.total > report.budget:  # the part past the budget
            markers.insert(0, BarMarker(report.budget, palette.RED, width=2))
        self.set_segments(
            [
                BarSegment(est.weights, palette.ACCENT, f"weights {format_bytes(est.weights)}"),
                BarSegment(est.kv_cache, palette.AMBER, f"KV cache {format_bytes(est.kv_cache)}"),
                BarSegment(est.compute, palette.PURPLE, f"compute buffers {format_bytes(est.compute)}"),
            ],
            max(report.budget, est.total),
            markers,
        )
