"""The banner above the chat (issue 20 §4.9): it takes its own place and pushes the chat down, and a
click on the place where a banner just vanished does not fall through to the button that moved
there (it regenerated a reply)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QPoint, QRect, Qt

from app.ui.chat.message import MessageAction
from app.ui.common.severity import Severity
from app.ui.window.notices import NoticeTopic
from tests.support.window import reply_over, send

TALL = "<br>".join(f"Line {i} of a long notice." for i in range(12))


def _global_rect(widget) -> QRect:
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def _settle_layout() -> None:
    for _ in range(3):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


def test_the_banner_pushes_the_chat_down_and_covers_no_message(qtbot, window):
    send(qtbot, window, "Hi.")
    first = window.chat_view.messages[0]
    top_before = _global_rect(first).top()
    window.notices.show(NoticeTopic.GENERAL, Severity.ERROR, TALL, [("Retry", lambda: None)])
    qtbot.waitUntil(lambda: window.banner.isVisible() and _global_rect(first).top() > top_before)
    banner, view = _global_rect(window.banner), _global_rect(window.chat_view.viewport())
    assert not banner.intersects(view) and banner.bottom() < view.top()
    # The first message is pushed down by the banner's height, whole and under it.
    assert _global_rect(first).top() - top_before == banner.height()
    assert view.contains(_global_rect(first)) and _global_rect(first).top() > banner.bottom()


def test_a_click_where_a_banner_just_vanished_does_not_reach_the_button_beneath(qtbot, window):
    send(qtbot, window, "Hi.")
    asked: list[object] = []
    window.chat_view.action_requested.connect(lambda action, _mid, _payload: asked.append(action))
    window.notices.show(NoticeTopic.REPLY, Severity.INFO, TALL, [("Stop", lambda: None)])
    qtbot.waitUntil(window.banner.more.isVisible)
    window.banner.more.click()  # unfolded: the whole tall notice
    qtbot.waitUntil(lambda: window.banner.isVisible() and window.banner.height() > 150)
    was = _global_rect(window.banner)
    # The reply ends and its notice goes just as the person clicks on it: the chat moves up.
    window.notices.clear(NoticeTopic.REPLY)
    _settle_layout()
    regen = window.chat_view.messages[-1].regen_btn
    under = _global_rect(regen).intersected(was)
    assert regen.isVisible() and not under.isEmpty(), (was, _global_rect(regen))
    at = regen.mapFromGlobal(under.center())
    qtbot.mouseClick(regen, Qt.MouseButton.LeftButton, pos=at)
    assert asked == [] and window.banner.guard.swallowed == 1
    # Soon after, the button works as ever.
    qtbot.waitUntil(lambda: not window.banner.guard.armed)
    with qtbot.waitSignal(window.engine.generation_finished):
        qtbot.mouseClick(regen, Qt.MouseButton.LeftButton, pos=at)
    assert asked == [MessageAction.REGENERATE]
    qtbot.waitUntil(lambda: reply_over(window))


def test_a_banner_shown_again_in_that_place_takes_its_clicks_at_once(qtbot, window):
    send(qtbot, window, "Hi.")
    window.notices.show(NoticeTopic.DELETED_MESSAGE, Severity.INFO, "Deleted the message.", [("Undo", lambda: None)])
    qtbot.waitUntil(window.banner.isVisible)
    window.notices.clear(NoticeTopic.DELETED_MESSAGE)  # a new turn starts...
    assert window.banner.guard.armed
    pressed: list[str] = []
    # ...and is refused at once: the new banner's button is where the person clicks.
    window.notices.show(
        NoticeTopic.GENERAL, Severity.ERROR, "Refused.", [("Merge them", lambda: pressed.append("merge"))]
    )
    qtbot.waitUntil(window.banner.isVisible)
    _settle_layout()
    button = next(b for label, b in window.banner.action_buttons() if label == "Merge them")
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert pressed == ["merge"] and window.banner.guard.swallowed == 0


def test_a_long_notice_in_the_lab_at_1366x768_leaves_the_last_replys_action_row_in_view(qtbot, window):
    """Review of issue 20: the base-model notice (seven lines in the lab's chat column) pushed a short
    reply's action row out of the view, under the banner. A banner is at most MAX_LINES lines; More shows
    the rest."""
    from app.core.settings import Workspace
    from app.ui.window.banner import MAX_LINES
    from app.ui.window.base_model import NO_TEMPLATE_TEXT
    from tests.support.fake_engine import reply

    window.resize(1366, 768)
    window.workspaces.show(Workspace.SAMPLING)
    qtbot.waitUntil(lambda: window.size().toTuple() == (1366, 768))
    names = ("The Feline God", "The Dachshund", "The Golden Lion", "The Shadowcat", "The Leap", "The Eagle", "The Lion")
    window.engine.script(reply(*(f"{i}. {n}\n" for i, n in enumerate(names, 1))))
    send(qtbot, window, "Name five heroes.")
    window.notices.show(NoticeTopic.BASE_MODEL, Severity.INFO, NO_TEMPLATE_TEXT, [("Template…", lambda: None)])
    qtbot.waitUntil(window.banner.isVisible)
    _settle_layout()
    text, folded = window.banner.text, window.banner.folded_height()
    assert MAX_LINES * text.fontMetrics().lineSpacing() <= folded <= MAX_LINES * text.fontMetrics().height() + 8
    assert text.height() <= folded < text.heightForWidth(text.width())
    assert window.banner.more.isVisible()  # the rest is a click away
    view = _global_rect(window.chat_view.viewport())
    row = _global_rect(window.chat_view.messages[-1].regen_btn)
    assert view.contains(row), (view, row)
    assert not _global_rect(window.banner).intersects(view)
    # More shows the whole notice (the chat gives it the room), Less folds it again.
    window.banner.more.click()
    _settle_layout()
    assert text.height() >= text.heightForWidth(text.width()) and window.banner.more.text() == "Less"
    window.banner.more.click()
    _settle_layout()
    assert text.height() <= folded
