"""Issue 8, section 2, on the FakeEngine: what the person does during a reply (browse other chats,
New chat, delete the chat, switch model, quit, Esc from anywhere) never writes text where it
cannot be found again; banners go with their cause; Undo for a deleted message; Continue when
the context is full; what an edited or continued reply's figures cover; a chat's system prompt."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.core import protocol as P
from app.core.chat.context import ChatMessage, ContextPolicy, StopReason
from app.ui.engine.client import EngineState
from app.ui.window.notices import NoticeTopic
from app.ui.window.pages import Page
from tests.support.fake_engine import Endless, reply
from tests.support.window import WAIT_MS, banner_button, close_window, load, make_window, reply_over, send


def _start_endless(qtbot, window, text: str = "Count to a million.", n_tokens: int = 5) -> int:
    """Send ``text`` whose reply never ends until Stop; wait for ``n_tokens``; returns the reply's id."""
    window.engine.script(Endless("1 "))
    tokens: list = []
    window.engine.token_received.connect(tokens.append)
    box = window.composer.box
    box.setFocus()
    qtbot.keyClicks(box, text)
    qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(tokens) >= n_tokens, timeout=WAIT_MS)
    window.engine.token_received.disconnect(tokens.append)
    return window.chat_view.messages[-1].message_id


def _stop(qtbot, window) -> P.Finished:
    with qtbot.waitSignal(window.engine.generation_finished, timeout=WAIT_MS) as b:
        window.chat.stop()
    qtbot.waitUntil(lambda: reply_over(window), timeout=WAIT_MS)
    return b.args[0]


def _list_ids(window) -> list[int]:
    lst = window.chats_panel.list
    return [lst.item(i).data(Qt.ItemDataRole.UserRole) for i in range(lst.count())]


def _selected_id(window) -> int | None:
    item = window.chats_panel.list.currentItem()
    return None if item is None or not item.isSelected() else item.data(Qt.ItemDataRole.UserRole)


# ------------------------------------------------------------------------------ during a reply
def test_deleting_the_chat_that_is_generating_keeps_its_text_for_undo_and_writes_nothing_into_it(qtbot, window):
    reply_id = _start_endless(qtbot, window)
    conv = window.chat.conversation_id
    with qtbot.waitSignal(window.engine.generation_ended, timeout=WAIT_MS):
        window.chats_panel.delete(conv)
    qtbot.waitUntil(lambda: reply_over(window), timeout=WAIT_MS)
    # The deleted chat is off screen; the reply was stopped and its text kept with the chat.
    assert window.chat.conversation_id is None and window.chat_view.messages == []
    kept = window.conversations.get_message(reply_id)
    assert kept.content.startswith("1 1 ") and not kept.complete
    # The next message starts a new chat: nothing is written into the deleted one.
    n_before = len(window.conversations.messages(conv))
    send(qtbot, window, "A new question.")
    assert window.chat.conversation_id not in (None, conv)
    assert len(window.conversations.messages(conv)) == n_before
    assert conv not in _list_ids(window)


def test_ctrl_n_during_a_reply_opens_a_new_chat_and_the_reply_goes_on_in_its_own(qtbot, window):
    reply_id = _start_endless(qtbot, window)
    conv = window.chat.conversation_id
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=WAIT_MS)
    qtbot.keyClick(window.composer.box, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    # A new, empty chat is shown; the reply has not been stopped.
    assert window.chat.conversation_id is None and window.chat_view.messages == []
    assert window.engine.generating and window.chat.reply_conversation_id == conv
    # It says so, with a way back and a way to stop; the list marks the chat being written.
    assert window.banner.isVisible() and window.notices.topic is NoticeTopic.REPLY
    assert "goes on" in window.banner.text.text()
    assert _selected_id(window) is None
    row = _list_ids(window).index(conv)
    assert "writing a reply" in window.chats_panel.list.item(row).text()
    # Sending now is refused with a reason; the text stays in the box.
    n_gen = len(window.engine.sent(P.Generate))
    qtbot.keyClicks(window.composer.box, "Wait for me")
    qtbot.keyClick(window.composer.box, Qt.Key.Key_Return)
    assert len(window.engine.sent(P.Generate)) == n_gen
    assert window.composer.box.toPlainText() == "Wait for me"
    assert "being written" in window.banner.text.text()
    # The reply streamed on into its own stored message.
    window.chat.flush()
    grown = window.conversations.get_message(reply_id).content
    qtbot.waitUntil(lambda: (window.chat.flush(), window.conversations.get_message(reply_id).content)[1] != grown)
    fin = _stop(qtbot, window)
    assert window.conversations.get_message(reply_id).content == fin.text
    assert not window.banner.isVisible() or window.notices.topic is not NoticeTopic.REPLY


def test_browsing_other_chats_during_a_reply_keeps_list_and_view_in_step(qtbot, window):
    window.engine.script(reply("Paris ", "is ", "the ", "capital."))
    send(qtbot, window, "Capital of France?")
    first = window.chat.conversation_id
    window.new_chat()
    reply_id = _start_endless(qtbot, window, "Count sheep.")
    second = window.chat.conversation_id
    # Open the first chat from the list, as a click does.
    row = _list_ids(window).index(first)
    lst = window.chats_panel.list
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualItemRect(lst.item(row)).center())
    assert window.chat.conversation_id == first and _selected_id(window) == first
    texts = [w.text for w in window.chat_view.messages]
    assert texts == ["Capital of France?", "Paris is the capital."]
    # Tokens keep coming, and the chat's text is repainted after them: none of them reaches the chat shown.
    tokens: list = []
    window.engine.token_received.connect(tokens.append)
    repainted_after: list[int] = []
    window.clock.text_due.connect(lambda: repainted_after.append(len(tokens)))
    qtbot.waitUntil(lambda: any(n >= 3 for n in repainted_after), timeout=3000)
    assert [w.text for w in window.chat_view.messages] == texts
    assert window.engine.generating
    # Back to the reply through the banner: it is shown streaming, with what came meanwhile.
    banner_button(window, "Show it").click()
    assert window.chat.conversation_id == second and _selected_id(window) == second
    live = window.chat_view.messages[-1]
    assert live.message_id == reply_id and live.badge.text() == "writing…"
    n = len(live.text)
    qtbot.waitUntil(lambda: len(window.chat_view.messages[-1].text) > n, timeout=WAIT_MS)
    fin = _stop(qtbot, window)
    assert window.chat_view.messages[-1].text == fin.text
    assert window.conversations.get_message(reply_id).content == fin.text
    assert window.chat_view.messages[-1].badge.text() == "stopped"


def test_esc_stops_the_reply_from_anywhere_in_the_window(qtbot, window):
    _start_endless(qtbot, window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=WAIT_MS)
    lst = window.chats_panel.list
    lst.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is lst, timeout=WAIT_MS)
    with qtbot.waitSignal(window.engine.generation_finished, timeout=WAIT_MS) as b:
        qtbot.keyClick(lst, Qt.Key.Key_Escape)
    assert b.args[0].stats.stop_reason == StopReason.CANCELLED.value


def test_switching_model_during_a_reply_shows_loading_refuses_enter_and_records_the_model(qtbot, window, tiny_model):
    reply_id = _start_endless(qtbot, window)
    states: list = []
    window.engine.state_changed.connect(states.append)
    window.engine.hold_loads()  # the scripted host answers in milliseconds: hold the load to look at "loading"
    with qtbot.waitSignal(window.engine.generation_ended, timeout=WAIT_MS):
        assert window.load_model(str(tiny_model))
    # The reply is over, the new model is not loaded yet: "loading", never "ready" in between.
    assert window.engine.state == EngineState.LOADING and EngineState.READY not in states
    assert "ready" not in window.top_bar.state_label.text()
    qtbot.keyClicks(window.composer.box, "Are you there?")
    qtbot.keyClick(window.composer.box, Qt.Key.Key_Return)
    assert window.composer.box.toPlainText() == "Are you there?"
    assert window.chat_view.messages[-1].message_id == reply_id  # nothing was added
    stopped = window.conversations.get_message(reply_id)
    assert stopped.meta.model_path == str(tiny_model) and stopped.content
    window.engine.release_loads()
    qtbot.waitUntil(lambda: window.engine.state == EngineState.READY, timeout=WAIT_MS)
    window.composer.box.clear()
    send(qtbot, window, "Now?")
    assert window.conversations.get_message(window.chat_view.messages[-1].message_id).meta.model_path


def test_quitting_during_a_reply_stores_its_text(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    reply_id = _start_endless(qtbot, win)
    shown = win.chat_view.messages[-1]
    win.close()
    try:
        stored = win.conversations.get_message(reply_id)
        assert stored.content == shown.text and stored.content.startswith("1 1 ") and not stored.complete
    finally:
        close_window(win)


# ------------------------------------------------------------------------------ banners
def test_no_model_banner_goes_when_a_model_loads(qtbot, tiny_model):
    win = make_window(qtbot)
    try:
        qtbot.keyClicks(win.composer.box, "Hello?")
        qtbot.keyClick(win.composer.box, Qt.Key.Key_Return)
        assert win.banner.isVisible() and "No model is loaded" in win.banner.text.text()
        load(qtbot, win, tiny_model)
        assert not win.banner.isVisible()
    finally:
        close_window(win)


def test_a_models_page_notice_stays_on_the_models_page(qtbot, window):
    window.show_page(Page.MODELS)
    window.models.notice.emit("error", "broken.gguf is not a GGUF file.")
    assert window.banner.isVisible()  # shown where the action was
    window.show_page(Page.CHAT)
    assert not window.banner.isVisible()


def test_a_load_error_from_the_models_page_shows_on_the_models_page(qtbot, window, tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"hello, I am text")
    window.show_page(Page.MODELS)
    window.models_actions.load_from_library(str(bad))
    assert window.pages.currentIndex() == 1
    assert window.banner.isVisible() and window.banner.severity.value == "error"
    load(qtbot, window, window.engine.model.info.path)  # a good model loads: the error goes
    assert not window.banner.isVisible()


def test_undo_banner_shows_a_chat_title_as_text(qtbot, window):
    send(qtbot, window, "Hello.")
    conv = window.chat.conversation_id
    window.conversations.rename(conv, "<b>x</b> a & b")
    window.chats_panel.delete(conv)
    shown = window.banner.text
    assert window.banner.isVisible()
    assert "&lt;b&gt;x&lt;/b&gt; a &amp; b" in shown.text()
    banner_button(window, "Undo").click()
    assert conv in _list_ids(window)


# ------------------------------------------------------------------------------ message actions
def test_deleting_a_message_can_be_undone(qtbot, window):
    send(qtbot, window, "First question.")
    send(qtbot, window, "Second question.")
    conv = window.chat.conversation_id
    before = [(m.id, m.content) for m in window.conversations.active_path(conv)]
    second_q = window.chat_view.messages[2]
    second_q.action_requested.emit("delete", second_q.message_id, None)
    assert [w.message_id for w in window.chat_view.messages] == [i for i, _ in before[:2]]
    assert "1 message(s) after it" in window.banner.text.text()
    banner_button(window, "Undo").click()
    assert [(m.id, m.content) for m in window.conversations.active_path(conv)] == before
    assert [w.text for w in window.chat_view.messages] == [c for _, c in before]
    assert not window.banner.isVisible()
    # Undo is offered until the chat changes: a new message takes it away
    second_q = window.chat_view.messages[2]
    second_q.action_requested.emit("delete", second_q.message_id, None)
    assert window.banner.isVisible() and "Deleted the message" in window.banner.text.text()
    send(qtbot, window, "A new question instead.")
    assert not (window.banner.isVisible() and "Deleted the message" in window.banner.text.text())


def _brightest_text(button) -> int:
    from PySide6.QtGui import QColor

    img = button.grab().toImage()
    return max(QColor(img.pixel(x, y)).lightness() for x in range(img.width()) for y in range(img.height()))


def test_continue_is_disabled_with_a_reason_when_the_context_is_full(qtbot, window):
    window.engine.script(reply("Too ", "long.", context_full=True))
    send(qtbot, window, "Write a book.")
    w = window.chat_view.messages[-1]
    assert w.badge.text() == "context full"
    assert w.continue_btn.isVisible() and not w.continue_btn.isEnabled()
    assert "n_ctx" in w.continue_btn.toolTip()
    # and it looks disabled: its text is drawn darker than an enabled action's
    assert _brightest_text(w.continue_btn) < _brightest_text(w.regen_btn) - 20
    window.open_conversation(window.chat.conversation_id)  # the same after a reload from the store
    w = window.chat_view.messages[-1]
    assert not w.continue_btn.isHidden() and not w.continue_btn.isEnabled()
    # A reply cut by max_tokens can be continued.
    window.engine.script(reply(*(f"w{i} " for i in range(60))))
    send(qtbot, window, "Go on.")
    w = window.chat_view.messages[-1]
    assert w.badge.text() == "max_tokens reached" and w.continue_btn.isEnabled()


def test_an_edited_reply_says_its_figures_are_the_originals(qtbot, window):
    window.engine.script(reply("Blue ", "is ", "nice."))
    send(qtbot, window, "A colour?")
    w = window.chat_view.messages[-1]
    assert "edited" not in w.footer.text()
    w.action_requested.emit("edit", w.message_id, "Green is nicer.")
    w = window.chat_view.messages[-1]
    assert w.text == "Green is nicer."
    assert w.footer.text().startswith("edited · figures of the generated original: 3 tokens")


def test_a_continued_reply_counts_the_whole_reply(qtbot, window):
    window.sampler_panel.set_settings(replace(window.sampler_panel.settings(), max_tokens=4), emit=True)
    window.engine.script(reply("a ", "b ", "c ", "d ", "e "), reply("f ", "g "))
    send(qtbot, window, "Letters.")
    w = window.chat_view.messages[-1]
    assert w.footer.text().startswith("4 tokens")
    with qtbot.waitSignal(window.engine.generation_finished, timeout=WAIT_MS):
        w.action_requested.emit("continue", w.message_id, None)
    qtbot.waitUntil(lambda: reply_over(window), timeout=WAIT_MS)
    footer = window.chat_view.messages[-1].footer.text()
    assert footer.startswith("continued: 6 tokens in all (4 before Continue) · last part: 2 tokens")
    window.open_conversation(window.chat.conversation_id)
    assert window.chat_view.messages[-1].footer.text() == footer


def test_editing_a_chats_system_prompt_leaves_the_default_alone_unless_asked(qtbot, window):
    default = window.settings.system_prompt
    send(qtbot, window, "Hello.")
    conv = window.chat.conversation_id
    window.system_bar.set_text("Answer like a pirate.")
    assert window.conversations.get_conversation(conv).system_prompt == "Answer like a pirate."
    assert window.settings.system_prompt == default
    assert window.notices.topic is NoticeTopic.SYSTEM_PROMPT and window.banner.isVisible()
    window.new_chat()
    assert window.system_bar.text() == default
    gen = send(qtbot, window, "Hi.")
    assert gen is not None
    assert window.conversations.get_conversation(window.chat.conversation_id).system_prompt == default
    # Asked explicitly: the chat's prompt becomes the default for new chats.
    window.open_conversation(conv)
    window.system_bar.set_text("Answer like a parrot.")
    banner_button(window, "Use for new chats too").click()
    assert window.settings.system_prompt == "Answer like a parrot."
    window.new_chat()
    assert window.system_bar.text() == "Answer like a parrot."


def test_a_reply_in_another_chat_is_not_sent_the_chat_shown(qtbot, window):
    """The engine is sent the chat the reply belongs to, whatever is on screen later."""
    send(qtbot, window, "About apples.")
    window.new_chat()
    _start_endless(qtbot, window, "About pears.")
    gen = window.engine.sent(P.Generate)[-1]
    assert [m.content for m in gen.messages if m.role == "user"] == ["About pears."]
    assert all(isinstance(m, ChatMessage) for m in gen.messages)
    _stop(qtbot, window)


def test_choosing_drop_oldest_turns_enables_continue_and_takes_the_context_full_banner_away(qtbot, window):
    window.engine.script(reply("Too ", "long.", context_full=True))
    send(qtbot, window, "Write a book.")
    w = window.chat_view.messages[-1]
    assert not w.continue_btn.isEnabled()
    assert window.banner.isVisible() and window.notices.topic is NoticeTopic.CONTEXT
    window.model_panel.policy.setCurrentIndex(window.model_panel.policy.findData(ContextPolicy.ROLLING.value))
    assert w.continue_btn.isEnabled() and not window.banner.isVisible()
    # The context-full advice is about this chat: it does not follow the person to another one.
    window.engine.script(reply("Too ", "long.", context_full=True))
    window.model_panel.policy.setCurrentIndex(window.model_panel.policy.findData(ContextPolicy.STOP.value))
    send(qtbot, window, "Another book.")
    assert window.banner.isVisible() and window.notices.topic is NoticeTopic.CONTEXT
    window.new_chat()
    assert not window.banner.isVisible()


def test_a_question_whose_reply_was_deleted_offers_reply(qtbot, window):
    window.engine.script(reply("Paris", "."))
    send(qtbot, window, "Capital of France?")
    question, answer = window.chat_view.messages
    assert not question.regen_btn.isVisible()  # answered: nothing to offer
    answer.action_requested.emit("delete", answer.message_id, None)
    [question] = window.chat_view.messages
    assert question.regen_btn.isVisible() and question.regen_btn.text() == "Reply"
    window.engine.script(reply("Paris", " again", "."))
    with qtbot.waitSignal(window.engine.generation_finished, timeout=10_000):
        question.regen_btn.click()
    qtbot.waitUntil(lambda: reply_over(window) and len(window.chat_view.messages) == 2)
    conv = window.chat.conversation_id
    path = window.conversations.active_path(conv)
    assert [m.content for m in path] == ["Capital of France?", "Paris again."]
    assert path[1].parent_id == path[0].id
    assert not window.chat_view.messages[0].regen_btn.isVisible()


def test_deleting_the_last_reply_takes_its_figures_off_the_stats_panel(qtbot, window):
    window.engine.script(reply("One", "."))
    first = send(qtbot, window, "First?")
    window.engine.script(reply("Two", " words", "."))
    send(qtbot, window, "Second?")
    answer = window.chat_view.messages[-1]
    answer.action_requested.emit("delete", answer.message_id, None)
    window.stats_panel.refresh()
    # the panel now shows the chat's last reply still there (the first), stored
    assert window.stats_panel.phase.text().startswith("✓ Last reply in this chat (stored)")
    assert window.stats_panel.turn.generated == first.stats.generated_tokens == 2
    only_q = window.chat_view.messages[0]
    only_q.action_requested.emit("delete", only_q.message_id, None)
    window.stats_panel.refresh()
    assert window.stats_panel.phase.text() == "No reply yet"
