"""A message the engine refuses (issue 20 §4.3: a 50,000-character paste over n_ctx), on the scripted
engine: it makes no chat, its text stays the draft of the chat it was sent in, drafts belong to their
chat, and the banner about it goes when another chat is shown."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.core import protocol as P
from app.ui.window.notices import NoticeTopic
from tests.support.fake_engine import Refuse
from tests.support.window import reply_over, send

REFUSAL = "The message is 12,501 tokens; with the system prompt it does not fit n_ctx (4,096 tokens)."
PASTE = ("A pasted log line that goes on and on, " * 1300)[:50_000]


def _send_refused(qtbot, window, text: str = PASTE) -> None:
    """Paste ``text`` and press Enter; the scripted engine refuses it before any token."""
    window.engine.script(Refuse(P.FailureKind.CONTEXT_OVERFLOW, REFUSAL))
    box = window.composer.box
    box.setPlainText(text)
    box.setFocus()
    with qtbot.waitSignal(window.engine.generation_failed):
        qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: reply_over(window))


def _titles(window) -> list[str]:
    return [c.title for c in window.conversations.list_conversations()]


def test_a_refused_first_message_makes_no_chat_and_stays_in_the_box(qtbot, window):
    send(qtbot, window, "Hi.")
    older = window.chat.conversation_id
    window.new_chat()
    before = _titles(window)
    _send_refused(qtbot, window)
    # No chat titled with the refused text: the chat the send made is gone, from the list too.
    assert _titles(window) == before and len(before) == 1
    assert window.chat.conversation_id is None and window.chat_view.messages == []
    lst = window.chats_panel.list
    assert [lst.item(i).data(Qt.ItemDataRole.UserRole) for i in range(lst.count())] == [older]
    # The text is back in the box, whole; the banner says why, about this send.
    assert window.composer.box.toPlainText() == PASTE
    assert window.banner.isVisible() and window.banner.text.text() == REFUSAL
    assert window.notices.showing(NoticeTopic.SEND)


def test_the_draft_and_the_banner_stay_with_the_chat_the_message_was_sent_in(qtbot, window):
    send(qtbot, window, "Hi.")
    other = window.chat.conversation_id
    window.new_chat()
    _send_refused(qtbot, window)
    assert window.banner.isVisible()
    # Another chat: its own (empty) draft, and no banner about a send made elsewhere.
    window.open_conversation(other)
    assert window.composer.box.toPlainText() == ""
    assert not window.banner.isVisible()
    qtbot.keyClicks(window.composer.box, "A draft for the first chat")
    # Back to the new chat: the refused text is its draft; then the first chat's is its own.
    window.new_chat()
    assert window.composer.box.toPlainText() == PASTE
    window.open_conversation(other)
    assert window.composer.box.toPlainText() == "A draft for the first chat"
    assert window.chat.drafts.draft_of(None) == PASTE


def test_a_message_refused_in_a_chat_with_messages_leaves_that_chat_as_it_was(qtbot, window):
    send(qtbot, window, "Hi.")
    conv = window.chat.conversation_id
    path = [m.id for m in window.conversations.active_path(conv)]
    _send_refused(qtbot, window, "Go on.")
    assert window.chat.conversation_id == conv
    assert [m.id for m in window.conversations.active_path(conv)] == path
    assert window.composer.box.toPlainText() == "Go on."


def test_a_refusal_that_comes_while_another_chat_is_shown_goes_to_its_own_chat(qtbot, window):
    send(qtbot, window, "Hi.")
    other = window.chat.conversation_id
    window.new_chat()
    window.engine.script(Refuse(P.FailureKind.CONTEXT_OVERFLOW, REFUSAL))
    window.engine.pause()  # the engine is slow to answer: the person opens another chat meanwhile
    box = window.composer.box
    box.setPlainText(PASTE)
    box.setFocus()
    qtbot.keyClick(box, Qt.Key.Key_Return)
    made = window.chat.conversation_id
    assert made is not None and made != other and box.toPlainText() == ""
    window.open_conversation(other)
    qtbot.keyClicks(box, "Typed here")
    with qtbot.waitSignal(window.engine.generation_failed):
        window.engine.resume()
    qtbot.waitUntil(lambda: reply_over(window))
    # The chat shown and its draft are untouched; the refused chat is gone, its text the new chat's draft.
    assert window.chat.conversation_id == other and box.toPlainText() == "Typed here"
    assert made not in [c.id for c in window.conversations.list_conversations(include_deleted=True)]
    window.new_chat()
    assert box.toPlainText() == PASTE
