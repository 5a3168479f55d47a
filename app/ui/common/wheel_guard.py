"""A wheel over a panel scrolls the panel: a value widget takes the wheel only when it has
keyboard focus (the person clicked or tabbed into it), as desktop apps do, and a plot
(:func:`pass_wheel_through`) only with Ctrl held."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QGraphicsView,
    QWidget,
)

VALUE_WIDGETS = (QAbstractSlider, QAbstractSpinBox, QComboBox)


class _WheelGuard(QObject):
    """Event filter: an unfocused value widget does not take the wheel; the nearest scroll
    area around it gets it instead (Qt propagates only spontaneous wheel events to parents,
    so it is handed over explicitly)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget) or watched.hasFocus():
            return False
        assert isinstance(event, QWheelEvent)
        area = _scroll_area_around(watched)
        if area is None:
            event.ignore()  # a real wheel goes on to the parents; the value stays
            return True
        _hand_over(event, area)
        return True


class _PlotWheel(QObject):
    """Event filter on a plot's viewport: a wheel without Ctrl goes to the nearest scroll area
    around the plot (pyqtgraph's view box accepts every wheel, even with its mouse interaction
    off, so the panel under the pointer would not scroll); with Ctrl, or with no scroll area
    around, the plot keeps it (a plot with mouse interaction on zooms)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget):
            return False
        assert isinstance(event, QWheelEvent)
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            return False
        area = _scroll_area_around(watched)
        if area is None:
            return False
        _hand_over(event, area)
        return True


def _hand_over(event: QWheelEvent, area: QAbstractScrollArea) -> None:
    """Send ``event`` to ``area``'s viewport at the same screen point and accept the original."""
    viewport = area.viewport()
    pos = viewport.mapFromGlobal(event.globalPosition())
    moved = QWheelEvent(
        pos,
        event.globalPosition(),
        event.pixelDelta(),
        event.angleDelta(),
        event.buttons(),
        event.modifiers(),
        event.phase(),
        event.inverted(),
    )
    QApplication.sendEvent(viewport, moved)
    event.accept()


def _scroll_area_around(w: QWidget) -> QAbstractScrollArea | None:
    p = w.parentWidget()
    while p is not None:
        # A plot is a QGraphicsView (a scroll area of its own, whose viewport receives the wheel): skipped.
        if isinstance(p, QAbstractScrollArea) and not isinstance(p, (*VALUE_WIDGETS, QGraphicsView)):
            return p
        p = p.parentWidget()
    return None


def guard_wheel(root: QWidget) -> int:
    """Guard every slider, spin box and combo box under ``root`` (already created).

    Each gets ``Qt.StrongFocus`` (a wheel does not give it focus) and the filter.
    Returns how many widgets were guarded.
    """
    guard = root.findChild(_WheelGuard, "wheelGuard")
    if guard is None:
        guard = _WheelGuard(root)
        guard.setObjectName("wheelGuard")
    count = 0
    for w in root.findChildren(QWidget):
        if isinstance(w, VALUE_WIDGETS):
            w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            w.installEventFilter(guard)
            count += 1
    return count


def pass_wheel_through(view: QGraphicsView) -> None:
    """Let a wheel over ``view`` (a pyqtgraph plot) scroll the scroll area around it, found when
    the wheel comes (a dock may be re-parented); Ctrl+wheel stays with the plot (:class:`_PlotWheel`)."""
    guard = view.findChild(_PlotWheel, "plotWheel")
    if guard is None:
        guard = _PlotWheel(view)
        guard.setObjectName("plotWheel")
        view.viewport().installEventFilter(guard)
