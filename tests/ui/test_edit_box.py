"""Review of issue 20: Edit opened a tall editor (about 190 px for a one-line message) whose first line was
clipped under the System prompt bar. The editor is as tall as its text (a few lines at least, scrolling past
MAX_LINES) and opens in view, its first line shown (scripted engine)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QPoint, QRect
from PySide6.QtWidgets import QApplication

from app.core.chat.context import Role
from app.ui.chat.edit_box import MAX_LINES, MIN_LINES
from tests.support.fake_engine import reply
from tests.support.window import send


def _global_rect(widget) -> QRect:
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def _settle() -> None:
    for _ in range(3):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()


def test_edit_opens_an_editor_as_tall_as_its_text_with_its_first_line_in_view(qtbot, window):
    window.resize(1366, 768)
    qtbot.waitUntil(lambda: window.size().toTuple() == (1366, 768))
    window.engine.script(reply("Once upon a time there was a dragon.\n" * 3))
    send(qtbot, window, "Tell me a story.")
    window.engine.script(reply(*("The dragon was called Thorold and he ruled a kingdom.\n" for _ in range(12))))
    send(qtbot, window, "Thanks. Name the dragon.")
    user = [w for w in window.chat_view.messages if w.role is Role.USER][-1]
    user.edit_btn.click()
    editor = user.editor
    assert editor is not None
    qtbot.waitUntil(lambda: _global_rect(editor).top() >= _global_rect(window.chat_view.viewport()).top())
    _settle()
    line = editor.fontMetrics().lineSpacing()
    # one line of text: MIN_LINES lines tall, not 190 px
    assert editor.height() <= (MIN_LINES + 1) * line + 16, editor.height()
    view = _global_rect(window.chat_view.viewport())
    assert view.contains(_global_rect(editor)), (view, _global_rect(editor))
    # it grows with the text, up to MAX_LINES, then scrolls inside
    editor.setPlainText("\n".join(f"line {i}" for i in range(6)))
    _settle()
    assert 6 * line <= editor.height() <= 8 * line + 16
    editor.setPlainText("\n".join(f"line {i}" for i in range(60)))
    _settle()
    assert editor.height() <= (MAX_LINES + 1) * line + 16 and editor.verticalScrollBar().maximum() > 0
