"""Fine control of the Sampler panel's sliders (FakeEngine window at 1366x768): arrow keys step a value
by 0.01 (one unit of its field's last decimal), PageUp/PageDown by ten of those, and a drag with
Shift held moves ten times slower than a plain one (the reviewer's 48 px drag took temperature from
0.80 to 4.04)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionSlider

from app.ui.common.fine_slider import FineSlider

SHIFT = Qt.KeyboardModifier.ShiftModifier
PLAIN = Qt.KeyboardModifier.NoModifier


def _temperature(window) -> float:
    return window.sampler_panel.settings().temperature


def test_arrow_keys_step_by_0_01_and_page_keys_by_0_1_whatever_the_track(qtbot, window):
    sp = window.sampler_panel
    rows = sp.rows
    temp = rows["temperature"]
    temp.field.setValue(0.8)
    s = temp.slider
    s.setFocus()
    qtbot.keyClick(s, Qt.Key.Key_Right)
    assert _temperature(window) == pytest.approx(0.81, abs=1e-9)
    assert window.settings.sampler.temperature == pytest.approx(0.81, abs=1e-9)  # applied as a typed value is
    assert temp.value_at(s.value()) == pytest.approx(0.81, abs=0.005)  # the handle follows
    qtbot.keyClick(s, Qt.Key.Key_Left)
    qtbot.keyClick(s, Qt.Key.Key_Left)
    assert _temperature(window) == pytest.approx(0.79, abs=1e-9)
    qtbot.keyClick(s, Qt.Key.Key_Up)
    assert _temperature(window) == pytest.approx(0.80, abs=1e-9)
    qtbot.keyClick(s, Qt.Key.Key_PageUp)
    assert _temperature(window) == pytest.approx(0.90, abs=1e-9)
    qtbot.keyClick(s, Qt.Key.Key_PageDown)
    qtbot.keyClick(s, Qt.Key.Key_Down)
    assert _temperature(window) == pytest.approx(0.79, abs=1e-9)
    # Past the knee, where one track position is 0.015, a key still moves 0.01.
    temp.field.setValue(3.0)
    qtbot.keyClick(s, Qt.Key.Key_Right)
    assert _temperature(window) == pytest.approx(3.01, abs=1e-9)
    # top_p and min_p: 0.01 too, kept within range.
    top_p, min_p = rows["top_p"].slider, rows["min_p"].slider
    rows["top_p"].field.setValue(1.0)
    top_p.setFocus()
    qtbot.keyClick(top_p, Qt.Key.Key_Right)
    assert sp.settings().top_p == 1.0
    qtbot.keyClick(top_p, Qt.Key.Key_PageDown)
    qtbot.keyClick(top_p, Qt.Key.Key_Left)
    assert sp.settings().top_p == pytest.approx(0.89, abs=1e-9)
    rows["min_p"].field.setValue(0.05)
    min_p.setFocus()
    qtbot.keyClick(min_p, Qt.Key.Key_Up)
    assert sp.settings().min_p == pytest.approx(0.06, abs=1e-9)
    qtbot.keyClick(min_p, Qt.Key.Key_Home)  # QSlider's own: the minimum
    assert sp.settings().min_p == 0.0
    qtbot.keyClick(min_p, Qt.Key.Key_Down)
    assert sp.settings().min_p == 0.0  # not below the range
    # A whole number steps by 1.
    top_k = rows["top_k"]
    top_k.field.setValue(40)
    top_k.slider.setFocus()
    qtbot.keyClick(top_k.slider, Qt.Key.Key_Right)
    qtbot.keyClick(top_k.slider, Qt.Key.Key_PageUp)
    assert sp.settings().top_k == 51
    assert "Arrow keys: ±0.01; PageUp/PageDown: ±0.1; drag with Shift held: 10x finer." in temp.slider.toolTip()


def _handle_centre(s: FineSlider) -> QPointF:
    opt = QStyleOptionSlider()
    s.initStyleOption(opt)
    r = s.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderHandle, s)
    return QPointF(r.center())


def _mouse(s: FineSlider, kind: QEvent.Type, x: float, modifiers: Qt.KeyboardModifier) -> None:
    y = s.height() / 2
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    button = none if kind == QEvent.Type.MouseMove else left
    buttons = none if kind == QEvent.Type.MouseButtonRelease else left
    pos = QPointF(x, y)
    ev = QMouseEvent(kind, pos, s.mapToGlobal(pos), button, buttons, modifiers)
    QApplication.sendEvent(s, ev)


def _drag(s: FineSlider, moves: list[tuple[float, Qt.KeyboardModifier]], press_mod=PLAIN) -> None:
    """Press on the handle, move by each (dx px, modifiers) in 4 px events, release."""
    x = _handle_centre(s).x()
    _mouse(s, QEvent.Type.MouseButtonPress, x, press_mod)
    for dx, mod in moves:
        n = max(1, round(abs(dx) / 4))
        for _ in range(n):
            x += dx / n
            _mouse(s, QEvent.Type.MouseMove, x, mod)
    _mouse(s, QEvent.Type.MouseButtonRelease, x, mod)


def test_a_shift_drag_moves_the_slider_ten_times_finer(qtbot, window):
    window.resize(1366, 768)
    qtbot.waitUntil(lambda: window.width() == 1366)
    temp = window.sampler_panel.rows["temperature"]
    s = temp.slider
    start = temp.position(0.8)
    ppp = s.positions_per_px()
    assert 5 < ppp < 40  # a narrow track: 1000 positions over tens of pixels
    # A plain drag of 48 px: as before, the track's own rate (the reviewer's 0.80 -> 4.04).
    temp.field.setValue(0.8)
    _drag(s, [(48, PLAIN)])
    plain = s.value() - start
    assert plain == pytest.approx(48 * ppp, abs=2)
    assert _temperature(window) == temp.value_at(s.value()) and _temperature(window) > 2.5
    # The same 48 px with Shift held: a tenth of the way, still below 1.
    temp.field.setValue(0.8)
    _drag(s, [(48, SHIFT)], press_mod=SHIFT)
    fine = s.value() - start
    assert fine == pytest.approx(plain / 10, abs=2)
    assert 0.8 < _temperature(window) < 1.0 and _temperature(window) == temp.value_at(s.value())
    # Shift pressed mid-drag: no jump, the rest of the drag goes ten times slower.
    temp.field.setValue(0.8)
    _drag(s, [(10, PLAIN), (40, SHIFT)])
    assert s.value() - start == pytest.approx(10 * ppp + 4 * ppp, abs=2)
    assert window.settings.sampler.temperature == _temperature(window)
    # A Shift-press off the handle starts a fine drag from the value as it is, not a jump to the pointer.
    temp.field.setValue(0.8)
    x = s.width() - 3
    _mouse(s, QEvent.Type.MouseButtonPress, x, SHIFT)
    assert _temperature(window) == 0.8
    _mouse(s, QEvent.Type.MouseMove, x - 20, SHIFT)
    _mouse(s, QEvent.Type.MouseButtonRelease, x - 20, SHIFT)
    assert s.value() - start == pytest.approx(-2 * ppp, abs=1) and not s.isSliderDown()
