"""The parts of the chat's scroll area under :class:`~app.ui.chat.view.ChatView`: the column it
scrolls (:class:`Column`), the pages messages built in the background are laid out in
(:class:`Page`), keeping what the viewport shows in place while messages are built above it
(:class:`KeepInPlace`), and freeing a closed chat's widgets a few at a time (:class:`Graveyard`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QPoint, QSize, QTimer
from PySide6.QtWidgets import QLayout, QScrollArea, QSizePolicy, QVBoxLayout, QWidget


class Column(QWidget):
    """The scroll area's content: its size hint is its height at the viewport's width.

    QScrollArea asks a height-for-width layout for the height at the *size hint's*
    width; word-wrapped labels hint a narrow width, so the column came out twice as
    tall as its messages and the view scrolled into blank space. Answering with the
    viewport's width makes the column exactly as tall as what it shows.
    """

    def __init__(self, area: QScrollArea) -> None:
        super().__init__()
        self._area = area

    def sizeHint(self) -> QSize:
        lay = self.layout()
        w = self._area.viewport().width()
        if lay is not None and lay.hasHeightForWidth() and w > 0:
            return QSize(w, lay.heightForWidth(w))
        return super().sizeHint()

    def minimumSizeHint(self) -> QSize:
        # The children's minimum heights are measured at their narrowest width (far too
        # tall for word-wrapped text): the minimum height is the one at the viewport's
        # width, and the width may shrink (the window must stay resizable).
        return QSize(200, self.sizeHint().height())


class Page(QWidget):
    """Up to ``ChatView.PAGE_SIZE`` messages built in the background, in their own layout:
    a message added to a page lays out that page and the column's pages, not every message."""

    def __init__(self, spacing: int, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("chatPage")
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # as MessageWidget's
        self.lay = QVBoxLayout(self)
        self.lay.setContentsMargins(0, 0, 0, 0)
        self.lay.setSpacing(spacing)


class KeepInPlace:
    """While messages are built above the shown ones, keep what the viewport shows where it is
    on screen (unless ``keep`` is False: the view follows the newest text or keeps a search match
    in view).

    Args:
        area: the chat's scroll area.
        messages: the built message widgets, oldest first (read on entering).
        keep: whether to keep the place at all.
    """

    def __init__(self, area: QScrollArea, messages: Sequence[QWidget], keep: bool) -> None:
        self._area = area
        self._messages = messages
        self._keep = keep
        self._anchor: QWidget | None = None
        self._offset = 0

    def __enter__(self) -> None:
        msgs = self._messages
        if msgs and self._keep:
            top = self._area.verticalScrollBar().value()
            # The first message reaching into the viewport (what the person looks at).
            lo, hi = 0, len(msgs) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                w = msgs[mid]
                if self._y(w) + w.height() > top:
                    hi = mid
                else:
                    lo = mid + 1
            self._anchor = msgs[lo]
            self._offset = self._y(self._anchor) - top

    def _y(self, w: QWidget) -> int:
        """``w``'s top in the column (a message may sit in a page)."""
        column = self._area.widget()
        return w.mapTo(column, QPoint(0, 0)).y() if column is not None else 0

    def __exit__(self, *exc: object) -> None:
        if self._anchor is None:
            return
        # Lay the column out now (the layouts' requests are posted events), then scroll by
        # what moved above the anchor (nothing, when the blank block took it).
        for _ in range(2):
            QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        bar = self._area.verticalScrollBar()
        value = self._y(self._anchor) - self._offset
        if value != bar.value():
            bar.setValue(value)


class Graveyard(QObject):
    """Widgets taken out of the column, hidden at once and freed one per event-loop turn (freeing a
    long chat's widgets at once stalls the window)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._dead: list[QWidget] = []
        self._reaper = QTimer(self)
        self._reaper.setSingleShot(True)
        self._reaper.setInterval(0)
        self._reaper.timeout.connect(self._reap)

    def bury(self, w: QWidget, layout: QLayout) -> None:
        """Hide ``w``, take it out of ``layout`` now, and free it later."""
        w.hide()
        layout.removeWidget(w)
        self._dead.append(w)
        if not self._reaper.isActive():
            self._reaper.start()

    def _reap(self) -> None:
        if self._dead:
            w = self._dead.pop()
            with contextlib.suppress(RuntimeError):  # already freed with the window
                w.deleteLater()
        if self._dead:
            self._reaper.start()
