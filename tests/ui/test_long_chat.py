"""A long conversation in the window: opened with only the messages near the view built,
older ones built as the person scrolls up (what is shown stays put), and everything a
message does working on one built late: search jump and marks, branch ‹ n/m ›, Copy, Delete."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication, QLabel

from app.core.chat.context import Role
from app.ui.chat.conversations import ROLE_MESSAGE
from app.ui.chat.message import MessageWidget
from app.ui.common.highlight import HIT_OPEN
from tests.support.chat_view import building_stopped, settled

N_MESSAGES = 200  # over three times what a view builds around it (at most 60); more only makes the tests slower
OLD_WORD = "quetzalcoatlus"  # only in the oldest message


def _text(i: int) -> str:
    words = ("the cache keeps keys and values of every token so a later turn evaluates only what is new " * 3).split()
    body = " ".join(words[(i * 7) % 20 :][:40])
    return f"Message {i}. {body.capitalize()}."


def _long_chat(win) -> tuple[int, list[int]]:
    """A stored chat of N_MESSAGES alternating messages; the reply to the first has two versions
    (the second one on the active path). Returns the chat and its active path's ids, oldest first."""
    store = win.conversations
    conv = store.create_conversation(system_prompt="")
    first = store.add_message(conv, None, Role.USER, f"Tell me about the {OLD_WORD}, please. " + _text(0))
    store.add_message(conv, first, Role.ASSISTANT, "The first version of the answer.")
    parent = store.add_message(conv, first, Role.ASSISTANT, "The second version of the answer. " + _text(1))
    ids = [first, parent]
    for i in range(2, N_MESSAGES):
        parent = store.add_message(conv, parent, Role.USER if i % 2 == 0 else Role.ASSISTANT, _text(i))
        ids.append(parent)
    store.flush()
    win.chats_panel.refresh()
    return conv, ids


def _on_screen(view, w) -> bool:
    """``w`` (a message or one of its labels) lies wholly or partly inside the viewport."""
    top = w.mapTo(view.widget(), QPoint(0, 0)).y()
    bar = view.verticalScrollBar()
    return top < bar.value() + view.viewport().height() and top + w.height() > bar.value()


def _scroll_to_the_first(qtbot, view, first_id: int) -> None:
    """PageUp on the view (as the person would) until the first message is built and shown at the top."""
    view.setFocus()

    def at_top() -> bool:
        qtbot.keyClick(view, Qt.Key.Key_PageUp)
        return bool(view.messages) and view.messages[0].message_id == first_id and view.verticalScrollBar().value() == 0

    qtbot.waitUntil(at_top, timeout=120_000)


def test_a_long_chat_opens_with_only_the_messages_near_the_view_built(qtbot, window):
    conv, ids = _long_chat(window)
    window.open_conversation(conv)
    view = window.chat_view
    qtbot.waitUntil(lambda: building_stopped(view))  # the background building fills its margin above the view
    built = view.findChildren(MessageWidget)
    assert 3 <= len(built) <= 60, len(built)
    assert [w.message_id for w in view.messages] == ids[-len(view.messages) :]
    assert view.unbuilt_count >= N_MESSAGES - 60
    newest = view.messages[-1]
    assert newest.text == _text(N_MESSAGES - 1)
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum() and _on_screen(view, newest)  # the newest text is shown at the bottom


def test_scrolling_up_builds_older_messages_in_place_down_to_the_first(qtbot, window):
    conv, ids = _long_chat(window)
    window.open_conversation(conv)
    view = window.chat_view
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 2 * view.viewport().height())
    for _ in range(3):
        qtbot.keyClick(view, Qt.Key.Key_PageUp)
    # What is shown stays where it is on screen while older messages are built above it.
    anchor = next(w for w in view.messages if _on_screen(view, w))
    y0 = anchor.mapTo(view.viewport(), QPoint(0, 0)).y()
    built0 = len(view.messages)
    qtbot.waitUntil(lambda: len(view.messages) > built0 + 3)
    qtbot.waitUntil(lambda: building_stopped(view))
    assert anchor.mapTo(view.viewport(), QPoint(0, 0)).y() == y0
    _scroll_to_the_first(qtbot, view, ids[0])
    assert view.unbuilt_count == 0
    assert [w.message_id for w in view.messages] == ids
    QApplication.processEvents()
    first = view.messages[0]
    assert first.isVisible() and _on_screen(view, first) and OLD_WORD in first.text
    assert view.findChild(QLabel, "userText").isVisible()


def test_a_search_hit_in_the_oldest_message_is_built_marked_and_shown(qtbot, window):
    conv, ids = _long_chat(window)
    window.new_chat()
    panel = window.chats_panel
    panel.search.setText(OLD_WORD)
    panel.refresh()
    hits = [panel.list.item(i) for i in range(panel.list.count())]
    (title_hit,) = [h for h in hits if h.data(ROLE_MESSAGE) is None]  # the title holds the first message's words
    assert title_hit.text().startswith(window.chat.store.get_conversation(conv).title)
    panel.list.itemClicked.emit(title_hit)  # a title hit opens the chat where it ends
    assert window.chat.conversation_id == conv and window.chat_view.messages[-1].message_id == ids[-1]
    window.new_chat()
    panel.refresh()
    hits = [panel.list.item(i) for i in range(panel.list.count())]
    hit = next(h for h in hits if h.data(ROLE_MESSAGE) is not None and OLD_WORD in h.text())
    panel.list.itemClicked.emit(hit)  # as a click on the hit does
    assert window.chat.conversation_id == conv
    view = window.chat_view
    oldest = view.messages[0]
    assert oldest.message_id == ids[0] and view.unbuilt_count == 0
    # Built from the hit down as far as fills the view; the newer messages wait below (their ids in order).
    assert [w.message_id for w in view.messages] == ids[: len(view.messages)]
    assert len(view.messages) + view.unbuilt_below_count == len(ids)
    marked = [lab for lab in [oldest.body, *oldest.body.findChildren(QLabel)] if HIT_OPEN in lab.text()]
    assert marked and f"{HIT_OPEN}{OLD_WORD}</span>" in marked[0].text()
    qtbot.waitUntil(lambda: _on_screen(view, marked[0]))
    qtbot.waitUntil(lambda: settled(view))  # the match stays on screen once the view is done
    assert _on_screen(view, marked[0])
    # The chat's newest message is there when asked for (an action on it, a reply).
    newest = view.widget_for(ids[-1])
    assert newest is not None and view.messages[-1] is newest and view.unbuilt_below_count == 0
    assert [w.message_id for w in view.messages] == ids


@pytest.mark.timeout(90)  # 18 s in the suite on this machine (tests/ durations, 2 cores)
def test_actions_work_on_a_message_built_while_scrolling(qtbot, window):
    conv, ids = _long_chat(window)
    window.open_conversation(conv)
    view = window.chat_view
    _scroll_to_the_first(qtbot, view, ids[0])
    reply = view.messages[1]
    assert reply.message_id == ids[1]
    # Copy
    reply.copy_btn.click()
    assert QApplication.clipboard().text() == reply.text
    # Branch ‹ 2/2 ›: the previous version of the first answer (the path ends there).
    assert reply.branch_label.text() == "2/2" and reply.prev_btn.isVisible() and reply.prev_btn.isEnabled()
    reply.prev_btn.click()
    qtbot.waitUntil(lambda: len(view.messages) == 2)
    assert view.messages[1].text == "The first version of the answer."
    assert view.messages[1].branch_label.text() == "1/2"
    # ... and back to the long branch: the chat is shown from its newest messages again.
    view.messages[1].next_btn.click()
    qtbot.waitUntil(lambda: view.messages and view.messages[-1].message_id == ids[-1])
    assert view.unbuilt_count > 0
    # Delete on a message built late (after scrolling up to it): it and what follows it go.
    _scroll_to_the_first(qtbot, view, ids[0])
    target = view.messages[4]
    assert target.message_id == ids[4] and target.delete_btn.isVisible()
    target.delete_btn.click()
    qtbot.waitUntil(lambda: len(view.messages) == 4)
    assert [m.id for m in window.conversations.active_path(conv)] == ids[:4]
    assert [w.message_id for w in view.messages] == ids[:4]


def test_a_reply_streams_into_a_long_chat_and_the_view_follows_it(qtbot, window, tiny_model):
    from dataclasses import replace

    from tests.support.fake_engine import reply
    from tests.support.window import load, send

    # n_ctx for the whole chat (the fake engine's tokens are words).
    big = replace(window.settings.load_for(None), n_ctx=65536)
    window.settings_ctl.apply(lambda s: s.with_load_for(str(tiny_model.resolve()), big))
    load(qtbot, window, tiny_model)
    conv, ids = _long_chat(window)
    window.open_conversation(conv)
    view = window.chat_view
    qtbot.waitUntil(lambda: building_stopped(view))
    window.engine.script(reply("A new ", "answer ", "at the end."))
    send(qtbot, window, "One more question.")
    assert [w.text for w in view.messages[-2:]] == ["One more question.", "A new answer at the end."]
    path = window.conversations.active_path(conv)
    assert [m.id for m in path[:-2]] == ids and path[-1].content == "A new answer at the end."
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum() and _on_screen(view, view.messages[-1]))
    assert len(view.findChildren(MessageWidget)) <= 62 and view.unbuilt_count > 0


def test_tab_goes_through_messages_built_while_scrolling_in_the_order_shown(qtbot, window):
    conv, ids = _long_chat(window)
    window.open_conversation(conv)
    view = window.chat_view
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    opened = len(view.messages)
    view.setFocus()
    qtbot.waitUntil(lambda: qtbot.keyClick(view, Qt.Key.Key_PageUp) or len(view.messages) >= opened + 12)
    start = view.messages[0]  # built after the newer ones below it
    start.copy_btn.setFocus()
    qtbot.waitUntil(start.copy_btn.hasFocus)
    seen: list[int] = []
    for _ in range(60):
        focus = QApplication.focusWidget()
        msg = next((m for m in view.messages if m.isAncestorOf(focus)), None)
        assert msg is not None, focus
        if not seen or seen[-1] != msg.message_id:
            seen.append(msg.message_id)
        qtbot.keyClick(focus, Qt.Key.Key_Tab)
    assert len(seen) >= 4
    assert seen == ids[ids.index(seen[0]) : ids.index(seen[0]) + len(seen)]  # each next message, oldest first


def test_messages_built_in_the_background_are_kept_out_of_full_garbage_collections(qtbot, window):
    import gc

    conv, _ids = _long_chat(window)
    window.open_conversation(conv)
    view = window.chat_view
    frozen_before = gc.get_freeze_count()
    built_before = len(view.messages)
    qtbot.waitUntil(lambda: len(view.messages) > built_before + 2, timeout=30_000)
    # each message built in the background is frozen with what it made (a full collection
    # would otherwise walk every message built so far, mid-scroll)
    assert gc.get_freeze_count() > frozen_before
