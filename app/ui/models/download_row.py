"""The parts of a download's row that are not text: its progress bar and its action buttons."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import QFontMetrics, QPainter
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from app.core.models.downloads import DownloadState
from app.ui.common.palette import qcolor
from app.ui.models.download_actions import ROW_BUTTONS, STATE_LOOKS, DownloadAction
from app.ui.models.downloads_model import DownloadRole
from app.ui.models.widgets import ACCENT, TEXT_SOFT, TRACK, paint_background


class ProgressDelegate(QStyledItemDelegate):
    """A rounded progress bar with the percentage, coloured by state."""

    def paint(self, p: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        p.save()
        paint_background(p, opt)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        frac = float(index.data(DownloadRole.FRACTION) or 0.0)
        state = index.data(DownloadRole.STATE)
        fm = QFontMetrics(opt.font)
        label_w = fm.horizontalAdvance("100%") + 8
        r = QRectF(opt.rect.adjusted(10, 0, -10 - label_w, 0))
        bar = QRectF(r.left(), r.center().y() - 4, r.width(), 8)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(TRACK)
        p.drawRoundedRect(bar, 4, 4)
        if frac > 0:
            look = STATE_LOOKS.get(state)
            p.setBrush(qcolor(look.color) if look is not None else ACCENT)
            p.drawRoundedRect(QRectF(bar.left(), bar.top(), max(8.0, bar.width() * min(frac, 1.0)), bar.height()), 4, 4)
        p.setPen(TEXT_SOFT)
        p.setFont(opt.font)
        p.drawText(
            QRectF(r.right() + 6, opt.rect.top(), label_w, opt.rect.height()),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            f"{frac * 100:.0f}%",
        )
        p.restore()


class RowActions(QWidget):
    """The buttons of one download row; which ones show depends on its state (:data:`STATE_LOOKS`).

    Args:
        act: called with the action and the download id when a button is clicked.
        download_id: the row's download.
    """

    def __init__(
        self, act: Callable[[DownloadAction, str], None], download_id: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("rowActions")
        self.download_id = download_id
        self.state: DownloadState | None = None
        lay = QHBoxLayout(self)
        lay.setContentsMargins(4, 0, 6, 0)
        lay.setSpacing(4)
        lay.addStretch(1)
        self.buttons: dict[DownloadAction, QPushButton] = {}
        for action, (label, tip) in ROW_BUTTONS.items():
            b = QPushButton(label)
            b.setObjectName(f"{action.value}Button")
            b.setProperty("rowAction", True)
            b.setToolTip(tip)
            b.clicked.connect(lambda _=False, a=action: act(a, self.download_id))
            lay.addWidget(b)
            self.buttons[action] = b

    def set_state(self, state: DownloadState) -> None:
        """Show the buttons ``state`` offers, hide the others."""
        if state == self.state:
            return
        self.state = state
        show = STATE_LOOKS[state].row_actions
        for k, b in self.buttons.items():
            b.setVisible(k in show)
