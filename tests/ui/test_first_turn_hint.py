"""The first turn's hint in the empty chat ("send a message, then click a red token"): shown with a model
loaded until the person says not to show it again, then never again, after a restart too."""

from __future__ import annotations

from app.ui.chat.placeholder import HINT_DONE_LINK
from tests.support.window import close_window, load, make_window


def test_the_first_turn_hint_goes_for_good_once_dismissed(qtbot, tiny_model):
    win = make_window(qtbot)
    try:
        label = win.chat_view.placeholder
        assert "Your first turn" not in label.text()  # no model yet: how to get one, not how to use it
        load(qtbot, win, tiny_model)
        qtbot.waitUntil(lambda: "Your first turn" in label.text(), timeout=5000)
        assert "click a red token" in label.text() and f"href='{HINT_DONE_LINK}'" in label.text()
        label.linkActivated.emit(HINT_DONE_LINK)
        assert "Your first turn" not in label.text() and "Ask anything" in label.text()
        assert win.settings.first_turn_hint is False
    finally:
        close_window(win)
    again = make_window(qtbot)  # a restart on the same data folder
    try:
        load(qtbot, again, tiny_model)
        qtbot.waitUntil(lambda: "Ask anything" in again.chat_view.placeholder.text(), timeout=5000)
        assert "Your first turn" not in again.chat_view.placeholder.text()
    finally:
        close_window(again)
