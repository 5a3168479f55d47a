"""Issue 20, defects 5 and 7: the Server panel at 1366x768, the Tokens caption and the prompt's placeholder
at 800x500 (FakeEngine window). Sizes are the window's client area at those screens, less the frame."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QApplication, QLabel, QPushButton

from app.ui.chat.composer import PLACEHOLDERS, PromptBox
from app.ui.panels.tokens import CAPTION_LEAST
from app.ui.window.window_layout import FRAME_ALLOWANCE

LAPTOP = (1366 - FRAME_ALLOWANCE[0], 768 - FRAME_ALLOWANCE[1] - 40)  # less a task bar: 1350x688
SMALL = (800, 500)
NEIGHBOUR_LEAST = 180  # px: Stats and Sampler above an open Server panel (they were squeezed to ~100)


def _resize(qtbot, window, size):
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size().toTuple() == size)
    QApplication.processEvents()


def test_the_server_panel_at_1366x768_shows_every_label_whole_and_leaves_stats_and_sampler_room(qtbot, window):
    least_width = window.minimumSizeHint().width()
    window.server_dock.show()
    _resize(qtbot, window, LAPTOP)
    window.server_dock.raise_()
    QApplication.processEvents()
    panel = window.server_panel
    # The panel does not widen its column (it made the window's least width 974 px), nor squeeze its neighbours.
    assert window.minimumSizeHint().width() == least_width
    assert window.server_dock.width() <= window.stats_dock.width()
    for dock in (window.stats_dock, window.sampler_dock):
        assert dock.height() >= NEIGHBOUR_LEAST, (dock.objectName(), dock.height())
    buttons = panel.findChildren(QPushButton)
    assert {b.text() for b in buttons} >= {"Copy", "New key", "Cancel request"}
    for b in buttons:
        # each button as wide and as tall as its text needs ("Copv", "New kev": the y's tail was cut)
        assert b.fontMetrics().horizontalAdvance(b.text()) <= b.width() - 2 * 6, (b.text(), b.width())
        assert b.size().toTuple() == b.sizeHint().toTuple(), (b.text(), b.size(), b.sizeHint())
    for label in panel.findChildren(QLabel):
        if label.isVisibleTo(panel) and label.text() and not label.wordWrap():
            assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width(), label.text()
        if label.wordWrap():  # a wrapped text is given the height its lines need
            assert label.height() >= label.heightForWidth(label.width()), label.text()
    # The two switches' texts wrap beside their boxes, and a click on the text toggles the box.
    assert not panel.lan.isChecked()
    lan_text = next(lab for lab in panel.findChildren(QLabel) if lab.buddy() is panel.lan)
    qtbot.mouseClick(lan_text, Qt.MouseButton.LeftButton)
    assert panel.lan.isChecked() and window.settings_ctl.settings.server.expose_lan


def test_the_tokens_caption_has_a_readable_width_at_800x500(qtbot, window):
    panel = window.tokens_panel
    _resize(qtbot, window, (1366, 768))
    assert not panel.caption_on_own_line()  # beside the controls where there is room
    assert panel.summary.width() >= CAPTION_LEAST
    _resize(qtbot, window, SMALL)
    assert panel.summary.width() >= CAPTION_LEAST, panel.summary.width()  # it was a 19 px column
    assert panel.caption_on_own_line()
    assert panel.summary.height() >= panel.summary.heightForWidth(panel.summary.width())
    _resize(qtbot, window, (1366, 768))
    assert not panel.caption_on_own_line() and panel.summary.width() >= CAPTION_LEAST


def _placeholder_fits(box: PromptBox) -> bool:
    """The placeholder, wrapped as QPlainTextEdit paints it, fits the viewport's height."""
    fm = QFontMetricsF(box.document().defaultFont())
    margin = box.document().documentMargin()
    width = box.viewport().width() - margin
    rect = fm.boundingRect(QRectF(0, 0, width, 1e6), int(Qt.TextFlag.TextWordWrap), box.placeholderText())
    return margin + rect.height() <= box.viewport().height()


def test_the_prompt_placeholder_is_never_cut_mid_glyph(qtbot, window):
    box = window.findChild(PromptBox)
    for size in ((1366, 768), SMALL, (1366, 768)):
        _resize(qtbot, window, size)
        assert box.toPlainText() == "" and box.placeholderText().startswith("Message the model")
        assert _placeholder_fits(box), (size, box.placeholderText(), box.viewport().size())
    assert box.placeholderText() == PLACEHOLDERS[0]  # the keys' hint is back in a wide window
    box.setPlainText("hello")
    QApplication.processEvents()
    one_line = box.height()
    box.clear()
    QApplication.processEvents()
    assert box.height() == one_line  # the box stays one line tall while its placeholder fits on one
