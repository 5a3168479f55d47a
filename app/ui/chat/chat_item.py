"""How an item of the Chats list is drawn: the chat's title on its first line and, under it, a
second line (when the chat changed, "● writing a reply…", or a search hit's snippet), each line
elided on its own to the item's width.

Qt's own item drawing takes the two lines as one text (a newline becomes a line separator in
the text it elides), so a narrow list showed "j…" and lost the second line; this delegate draws
the style's item (background, hover, selection, focus) without text and the two lines itself.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QFontMetrics, QPainter
from PySide6.QtWidgets import (
    QApplication,
    QListWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from app.ui.common import palette
from app.ui.common.elided_label import ELLIPSIS, elide_once
from app.ui.common.palette import qcolor

# The character offset of the first matched word in an item's second line (a search hit), so a
# long snippet is shown from a little before the match rather than cut before it.
ROLE_MATCH = Qt.ItemDataRole.UserRole + 2
# Characters kept before a search match when the second line is shown from the match.
LEAD_CHARS = 12


def item_lines(index: QModelIndex | QPersistentModelIndex) -> tuple[str, str]:
    """The item's ``(title, second line)``: its display text split at its first newline."""
    text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
    title, _, second = text.partition("\n")
    return title, second


def fit_line(fm: QFontMetrics, line: str, width: int, match: int | None = None) -> str:
    """``line`` as it fits ``width`` px in ``fm``'s font, cut at the right with one "…" at most.

    ``match``: the character offset of a search match in ``line``; when the word matched would end
    past the width, the line is shown from a word up to :data:`LEAD_CHARS` characters before it (the
    match itself when no earlier word fits), after the part before the first ": " (the role,
    "user: ") and a "…".
    """
    if match is None:
        return elide_once(fm, line, width)
    word_end = line.find(" ", match)
    word_end = word_end if word_end != -1 else len(line)
    if fm.horizontalAdvance(line[:word_end]) > width:
        head, sep, _ = line.partition(": ")
        keep = len(head) + len(sep) if sep and len(head) + len(sep) <= match else 0
        start = match
        # From up to LEAD_CHARS before the match, at a word's start, as long as the word still fits.
        for s in range(max(keep, match - LEAD_CHARS), match):
            if (s == 0 or line[s - 1] == " ") and fm.horizontalAdvance(
                line[:keep] + ELLIPSIS + line[s:word_end]
            ) <= width:
                start = s
                break
        line = line[:keep] + ELLIPSIS + line[start:].removeprefix(ELLIPSIS)
    return elide_once(fm, line, width)


class ChatItemDelegate(QStyledItemDelegate):
    """Draws a Chats list item as two lines, each elided on its own (see the module docstring).

    The first line is the title (the text colour; a title the store already cut with "…" gets
    no second "…"), the second is drawn in a softer colour. The item's display text stays
    ``"title\\nsecond line"`` (what the list's accessibility and its tests read).
    """

    def shown_lines(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> tuple[str, str]:
        """The two lines as drawn in ``option.rect``, each elided to the item's text width."""
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        return self._fit(opt, index, self._text_rect(opt).width())

    def shown_text(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> str:
        """The text as drawn in ``option.rect``: the two lines of :meth:`shown_lines`, joined by a newline."""
        title, second = self.shown_lines(option, index)
        return f"{title}\n{second}" if second else title

    def _widget_style(self, opt: QStyleOptionViewItem) -> tuple[QWidget | None, QStyle]:
        widget = opt.widget or self.parent()
        if isinstance(widget, QWidget):
            return widget, widget.style()
        return None, QApplication.style()

    def _text_rect(self, opt: QStyleOptionViewItem) -> QRect:
        """Where the item's text goes (inside its padding), less the focus frame's margin each side."""
        widget, style = self._widget_style(opt)
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, widget)
        margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, widget) + 1
        return rect.adjusted(margin, 0, -margin, 0)

    def _fit(
        self, opt: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex, width: int
    ) -> tuple[str, str]:
        title, second = item_lines(index)
        match = index.data(ROLE_MATCH)
        fm = opt.fontMetrics
        return elide_once(fm, title, width), fit_line(fm, second, width, match if isinstance(match, int) else None)

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        rect = self._text_rect(opt)
        title, second = self._fit(opt, index, rect.width())
        widget, style = self._widget_style(opt)
        opt.text = ""  # the style draws the item (background, hover, selection, focus); the lines are drawn here
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        enabled = bool(opt.state & QStyle.StateFlag.State_Enabled) and bool(index.flags() & Qt.ItemFlag.ItemIsEnabled)
        line_h = opt.fontMetrics.height()
        lines = [(title, palette.TEXT if enabled else palette.MUTED)]
        if second:
            lines.append((second, palette.TEXT_SOFT if selected else palette.MUTED))
        top = rect.top() + max(0, (rect.height() - line_h * len(lines)) // 2)
        painter.save()
        painter.setFont(opt.font)
        for i, (line, colour) in enumerate(lines):
            painter.setPen(qcolor(colour))
            box = QRect(rect.left(), top + i * line_h, rect.width(), line_h)
            painter.drawText(box, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), line)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.features &= ~QStyleOptionViewItem.ViewItemFeature.WrapText
        widget, style = self._widget_style(opt)
        hint = style.sizeFromContents(QStyle.ContentsType.CT_ItemViewItem, opt, QSize(), widget)
        # As wide as the list shows (never wider: a line too long for it is elided, not scrolled to).
        view = self.parent()
        room = view.viewport().width() if isinstance(view, QListWidget) else hint.width()
        return QSize(min(hint.width(), room), hint.height())
