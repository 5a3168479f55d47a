"""A horizontal slider with fine control: arrow keys step the value in its owner's units, PageUp and
PageDown ten of those steps, and a drag with Shift held moves :attr:`FineSlider.FINE` times slower.

A narrow track makes each pixel a large jump: at 1366x768 temperature's slider is 89 px wide (77 px
of handle travel for 1000 positions), 0.032 a pixel below its knee (2.0) and 0.19 above it, so a
48 px drag from 0.80 ends at 4.14; with Shift, 0.0032 and 0.019 a pixel (0.95). The keys go through the owner (``step_by``), so a
step is the value's own unit (0.01 for temperature, top_p, min_p), not a slider position, whatever
the track's mapping (a kneed one included). A drag is relative: the value follows the pointer's
movement from where it was pressed, at the track's rate (positions per pixel), or a tenth of it
while Shift is held; Shift may be pressed or let go mid-drag without a jump. A press with Shift
anywhere on the track starts a fine drag from the value as it is.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent, QMouseEvent
from PySide6.QtWidgets import QSlider, QStyle, QStyleOptionSlider, QWidget

StepBy = Callable[[int], None]
"""(signed count of fine steps) -> None: the owner moves its value by that many of its steps."""


class FineSlider(QSlider):
    """A horizontal :class:`QSlider` with fine control (see the module docstring).

    Args:
        step_by: what an arrow key (one step) or PageUp/PageDown (:attr:`PAGE` steps) does; None:
            QSlider's own key handling.
    """

    FINE = 10  # a Shift-drag moves this many times slower than a plain drag
    PAGE = 10  # PageUp / PageDown: this many fine steps

    def __init__(self, step_by: StepBy | None = None, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self._step_by = step_by
        self._drag_x: float | None = None  # the pointer's last x during a drag (widget px); None: no drag
        self._drag_pos = 0.0  # the slider position the drag has reached, unrounded
        self._own_press = False  # the drag began with Shift: Qt's press handling never saw it

    def positions_per_px(self) -> float:
        """Slider positions per pixel of a plain drag: the range over the handle's travel (as QSlider maps
        a pointer to a position)."""
        opt = QStyleOptionSlider()
        self.initStyleOption(opt)
        style = self.style()
        groove = style.subControlRect(QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderGroove, self)
        handle = style.subControlRect(QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderHandle, self)
        return (self.maximum() - self.minimum()) / max(1, groove.width() - handle.width())

    def _key_steps(self, key: int) -> int | None:
        """Fine steps for ``key`` (None: not a stepping key)."""
        forward = -1 if self.isRightToLeft() else 1
        steps = {
            Qt.Key.Key_Right.value: forward,
            Qt.Key.Key_Left.value: -forward,
            Qt.Key.Key_Up.value: 1,
            Qt.Key.Key_Down.value: -1,
            Qt.Key.Key_PageUp.value: self.PAGE,
            Qt.Key.Key_PageDown.value: -self.PAGE,
        }
        return steps.get(key)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        steps = self._key_steps(e.key())
        if steps is None or self._step_by is None or not self.isEnabled():
            super().keyPressEvent(e)
            return
        self._step_by(steps)
        e.accept()

    def mousePressEvent(self, e: QMouseEvent) -> None:
        if e.button() == Qt.MouseButton.LeftButton and e.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self._own_press = True
            self.setSliderDown(True)
            e.accept()
        else:
            self._own_press = False
            super().mousePressEvent(e)
        if self.isSliderDown():
            self._drag_x = e.position().x()
            self._drag_pos = float(self.sliderPosition())

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        if self._drag_x is None or not self.isSliderDown():
            super().mouseMoveEvent(e)
            return
        x = e.position().x()
        dx = (x - self._drag_x) * (-1 if self.isRightToLeft() else 1)
        self._drag_x = x
        rate = self.positions_per_px()
        if e.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            rate /= self.FINE
        self._drag_pos = min(float(self.maximum()), max(float(self.minimum()), self._drag_pos + dx * rate))
        self.setSliderPosition(round(self._drag_pos))
        e.accept()

    def mouseReleaseEvent(self, e: QMouseEvent) -> None:
        self._drag_x = None
        if self._own_press:
            self._own_press = False
            self.setSliderDown(False)
            e.accept()
            return
        super().mouseReleaseEvent(e)
