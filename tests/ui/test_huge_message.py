"""A message of megabytes (an imported chat, a pasted log) opens at once: the chat lays out its first
SHOWN_CHARS characters and offers the whole text in a plain-text window; nothing of it is lost."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.core.chat.context import Role
from app.ui.chat.message import SHOWN_CHARS, shown_part
from tests.support.chat_view import building_stopped

LINE = "the cache keeps keys and values of every token " * 2 + "\n"
HUGE = LINE * 20_000  # 1.9 MB: 38 x SHOWN_CHARS


def test_shown_part_cuts_at_a_line_break_near_the_limit_and_keeps_short_texts_whole():
    assert shown_part("short") == "short"
    part = shown_part(HUGE)
    assert part.endswith(LINE[:-1]) and HUGE.startswith(part)
    assert SHOWN_CHARS * 4 // 5 <= len(part) <= SHOWN_CHARS
    assert shown_part("x" * (SHOWN_CHARS + 10)) == "x" * SHOWN_CHARS  # no line break: cut at the limit


def test_a_huge_message_shows_its_start_and_the_whole_text_is_one_click_away(qtbot, window):
    store = window.conversations
    conv = store.create_conversation(system_prompt="")
    first = store.add_message(conv, None, Role.USER, HUGE)
    store.add_message(conv, first, Role.ASSISTANT, "## Reply\n\n" + HUGE)
    store.add_message(conv, first, Role.ASSISTANT, "A short reply.")  # another version
    store.flush()
    window.chats_panel.refresh()
    window.open_conversation(conv)
    view = window.chat_view
    qtbot.waitUntil(lambda: building_stopped(view), timeout=60_000)
    user = view.messages[0]
    assert user.role is Role.USER and user.text == HUGE  # the message keeps its whole text
    assert user.more.isVisible()
    assert f"{len(shown_part(HUGE)):,} of {len(HUGE):,} characters" in user.more_label.text()
    assert len(user.body.text()) < 2 * SHOWN_CHARS  # the label holds the part (as HTML), not 1.9 MB
    user.more_button.click()
    dialog = user.whole_dialog
    assert dialog is not None and dialog.text_box.toPlainText() == HUGE
    user.copy_btn.click()
    assert QGuiApplication.clipboard().text() == HUGE  # Copy copies it all
    dialog.close()
    # The other version of the reply is short: it shows whole, without the note.
    reply = view.messages[1]
    assert reply.role is Role.ASSISTANT and not reply.more.isVisible()
    reply.action_requested.emit("branch_step", reply.message_id, -1)
    qtbot.waitUntil(lambda: view.messages[1].text.startswith("## Reply"), timeout=10_000)
    QApplication.processEvents()
    qtbot.waitUntil(lambda: view.messages[1].more.isVisible(), timeout=10_000)
