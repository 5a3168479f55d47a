"""A chat the model's template cannot render: the banner names the problem and repairs it in one click.

The refusal is the engine's (tests/engine/test_template_repair.py checks it on the
real engine); here the FakeEngine refuses with kind ``template`` and the window's
logic is what is tested: the message just sent is kept, the banner offers
"Merge them" / "Delete the earlier one", and the repair asks for the reply.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.core import protocol as P
from app.core.chat.context import Role
from app.ui.chat.message import MessageAction
from tests.support.fake_engine import Refuse, reply
from tests.support.window import banner_button, reply_over, send

REFUSAL = (
    "The model's chat template rejected this conversation: Conversation roles must alternate "
    "user/assistant/user/assistant/... This model's template needs user and assistant messages to take "
    "turns, and this conversation has two user messages in a row (messages 1 and 2)."
)


def refused_after_a_deleted_reply(qtbot, window) -> None:
    """Ask, delete the reply, ask again: the template refuses two user messages in a row."""
    send(qtbot, window, "Name a colour.")
    reply_id = window.chat_view.messages[-1].message_id
    window.chat_view.action_requested.emit(MessageAction.DELETE, reply_id, None)
    assert [m.role for m in window.chat_view.messages] == [Role.USER]
    window.engine.script(Refuse(P.FailureKind.TEMPLATE, REFUSAL))
    box = window.composer.box
    qtbot.keyClicks(box, "Name a fruit.")
    with qtbot.waitSignal(window.engine.generation_failed):
        qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: reply_over(window) and window.banner.isVisible())


def test_the_refusal_keeps_the_message_and_offers_both_repairs(qtbot, window) -> None:
    refused_after_a_deleted_reply(qtbot, window)
    assert window.banner.text.text() == REFUSAL
    assert banner_button(window, "Merge them") and banner_button(window, "Delete the earlier one")
    # Nothing lost and nothing hidden: both messages stay, on screen and stored.
    path = window.conversations.active_path(window.chat.conversation_id)
    assert [(m.role, m.content) for m in path] == [(Role.USER, "Name a colour."), (Role.USER, "Name a fruit.")]
    assert [m.text for m in window.chat_view.messages] == ["Name a colour.", "Name a fruit."]


@pytest.mark.parametrize(
    ("button", "asked", "said"),
    [
        ("Merge them", "Name a colour.\n\nName a fruit.", "Merged the two user messages into one."),
        ("Delete the earlier one", "Name a fruit.", "Deleted the earlier user message: “Name a colour.”."),
    ],
)
def test_one_click_repairs_the_chat_and_gets_the_reply(qtbot, window, button: str, asked: str, said: str) -> None:
    refused_after_a_deleted_reply(qtbot, window)
    window.engine.script(reply("Apple", "."))
    with qtbot.waitSignal(window.engine.generation_finished) as blocker:
        qtbot.mouseClick(banner_button(window, button), Qt.MouseButton.LeftButton)
    assert blocker.args[0].text == "Apple."
    qtbot.waitUntil(lambda: reply_over(window))
    gen = window.engine.sent(P.Generate)[-1]
    assert [(m.role, m.content) for m in gen.messages if m.role is not Role.SYSTEM] == [(Role.USER, asked)]
    path = window.conversations.active_path(window.chat.conversation_id)
    assert [(m.role, m.content) for m in path] == [(Role.USER, asked), (Role.ASSISTANT, "Apple.")]
    assert [m.text for m in window.chat_view.messages] == [asked, "Apple."]
    assert window.banner.text.text() == said
    # The chat goes on.
    fin = send(qtbot, window, "Thanks.")
    assert isinstance(fin, P.Finished)
