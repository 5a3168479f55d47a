"""A Hub search result painted as a card: ``owner /`` name, then downloads, likes, date."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import QStyledItemDelegate, QStyleOptionViewItem

from app.core.models.hub import RepoSummary
from app.ui.common import palette
from app.ui.common.palette import qcolor
from app.ui.models.hub_models import RepoRole
from app.ui.models.widgets import FAINT, MUTED, TEXT, paint_background


class RepoDelegate(QStyledItemDelegate):
    """A search result as a card: ``owner /`` name, then counts and date."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        fm = QFontMetrics(option.font)
        return QSize(260, fm.height() * 2 + 20)

    def paint(self, p: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        p.save()
        paint_background(p, opt)
        p.setPen(qcolor(palette.GRID))
        p.drawLine(opt.rect.bottomLeft(), opt.rect.bottomRight())
        r = opt.rect.adjusted(12, 8, -10, -8)
        repo: RepoSummary = index.data(RepoRole.REPO)
        owner, _, name = repo.repo_id.partition("/")
        bold = QFont(opt.font)
        bold.setWeight(QFont.Weight.DemiBold)
        fm = QFontMetrics(opt.font)
        bfm = QFontMetrics(bold)
        owner_txt = f"{owner} / " if name else ""
        p.setFont(opt.font)
        p.setPen(MUTED)
        p.drawText(QRect(r.left(), r.top(), r.width(), fm.height()), Qt.AlignmentFlag.AlignLeft, owner_txt)
        x = r.left() + fm.horizontalAdvance(owner_txt)
        p.setFont(bold)
        p.setPen(TEXT)
        p.drawText(
            QRect(x, r.top(), r.right() - x, bfm.height()),
            Qt.AlignmentFlag.AlignLeft,
            bfm.elidedText(name or owner, Qt.TextElideMode.ElideRight, r.right() - x),
        )
        small = QFont(opt.font)
        small.setPointSizeF(opt.font.pointSizeF() * 0.86)
        sfm = QFontMetrics(small)
        p.setFont(small)
        p.setPen(FAINT)
        sub = str(index.data(RepoRole.SUBTITLE) or "")
        p.drawText(
            QRect(r.left(), r.top() + bfm.height() + 4, r.width(), sfm.height()),
            Qt.AlignmentFlag.AlignLeft,
            sfm.elidedText(sub, Qt.TextElideMode.ElideRight, r.width()),
        )
        p.restore()
