"""Every panel follows the chat and turn shown (Tokens, Stats, Funnel, Timeline, Inspect), on the
FakeEngine: no panel shows another chat's data or a deleted reply's."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import Role
from tests.support.fake_engine import reply
from tests.support.window import banner_button, close_window, load, make_window, reply_over, send, short_replies


def _last_reply(window) -> int:
    return next(w for w in reversed(window.chat_view.messages) if w.role is Role.ASSISTANT).message_id


def _delete(window, message_id: int) -> None:
    w = window.chat_view.widget_for(message_id)
    w.action_requested.emit("delete", message_id, None)


def test_switching_chats_takes_the_other_chats_tokens_off_the_tokens_panel(qtbot, window):
    window.tokens_dock.raise_()
    window.funnel_dock.raise_()
    window.engine.script(reply("Alpha", "Beta", "Gamma"))
    send(qtbot, window, "chat A")
    chat_a, reply_a = window.chat.conversation_id, _last_reply(window)
    window.new_chat()
    window.engine.script(reply("Zulu", "Yankee"))
    send(qtbot, window, "chat B")
    panel = window.tokens_panel
    qtbot.waitUntil(lambda: window.turn.alternatives is not None, timeout=5000)
    panel.refresh()
    assert "Zulu" in panel.view.toPlainText() and panel.step_view(0) is not None
    window.open_conversation(chat_a)
    panel.refresh()
    # B's chips are gone: none is left on screen dead to hover and click; A's stored reply shows instead
    assert "Zulu" not in panel.view.toPlainText() and "Yankee" not in panel.view.toPlainText()
    assert [r.piece for r in panel.turn.tokens] == ["Alpha", "Beta", "Gamma"]
    assert panel.step_view(0) is not None and panel.step_view(0).candidates[0].text == "Alpha"
    # the Funnel shows A's newest token, from its stored candidates
    ctl = window.funnel
    fp = window.funnel_panel
    qtbot.waitUntil(lambda: fp.view.funnel is not None and fp.of_label.text() == "of 3", timeout=5000)
    assert ctl.message_id == reply_a and fp.view.funnel.step == 2


def test_undoing_a_deleted_reply_brings_its_figures_back_to_the_stats_panel(qtbot, window):
    window.engine.script(reply("One", "."))
    first = send(qtbot, window, "First?")
    window.engine.script(reply("Two", " more", " words", "."))
    second = send(qtbot, window, "Second?")
    stats = window.stats_panel
    _delete(window, _last_reply(window))
    stats.refresh()
    assert stats.turn.generated == first.stats.generated_tokens == 2  # the deleted reply's figures left
    banner_button(window, "Undo").click()
    stats.refresh()
    assert stats.turn.generated == second.stats.generated_tokens == 4  # the restored reply's, not the first's
    assert stats.turn.final == second.stats


def test_after_a_reload_the_funnel_shows_the_chats_stored_candidates(qtbot, window, tiny_model):
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c", "d"))
    send(qtbot, window, "letters")
    rid = _last_reply(window)
    panel, ctl = window.funnel_panel, window.funnel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.view.funnel.step == 3, timeout=5000)
    before = panel.view.funnel
    load(qtbot, window, tiny_model)  # the same model again: the engine kept no logits any more
    # the chat's newest token, from the candidates stored with it (not "No reply kept its candidates")
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.view.funnel is not before, timeout=5000)
    asked = window.engine.sent(P.ComputeFunnel)[-1]
    assert asked.stored is not None and (asked.stored.reply_id, asked.stored.step) == (rid, 3)
    assert ctl.message_id == rid and panel.view.funnel.step == 3 and panel.of_label.text() == "of 4"


def test_after_a_restart_the_funnel_shows_the_chats_stored_candidates(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    short_replies(win)
    win.funnel_dock.raise_()
    win.engine.script(reply("a", "b", "c", "d"))
    send(qtbot, win, "letters")
    rid = _last_reply(win)
    close_window(win)
    win2 = make_window(qtbot)
    try:
        win2.funnel_dock.raise_()
        panel, ctl = win2.funnel_panel, win2.funnel
        # Before a model is loaded: the stored reply's count and why its funnel waits, not "token 1 of 0".
        qtbot.waitUntil(lambda: panel.of_label.text() == "of 4", timeout=5000)
        assert panel.step_field.value() == 4 and panel.step_field.isEnabled()
        assert panel.view.funnel is None and "once a model is loaded" in panel.view.message
        assert not win2.engine.sent(P.ComputeFunnel)  # nothing the engine could only refuse
        load(qtbot, win2, tiny_model)
        qtbot.waitUntil(lambda: panel.view.funnel is not None, timeout=5000)
        asked = win2.engine.sent(P.ComputeFunnel)[-1]
        assert asked.stored is not None and (asked.stored.reply_id, asked.stored.step) == (rid, 3)
        assert ctl.message_id == rid and panel.view.funnel.step == 3 and panel.of_label.text() == "of 4"
    finally:
        close_window(win2)


def test_the_inspect_window_lets_go_of_a_chat_no_longer_shown(qtbot, window):
    window.engine.script(reply("one", " two"))
    send(qtbot, window, "count")
    ctl = window.token_inspect
    win = ctl.window
    prompt = window.turn.prompt
    ctl.inspect(prompt.prompt_tokens, window.turn.tokens[0].token_id, prompt.cached_tokens)
    qtbot.waitUntil(lambda: win.inspection is not None, timeout=5000)
    window.new_chat()
    assert win.inspection is None and not win.tabs.isEnabled()
    assert "another chat" in win.header.text()
    assert len(window.engine.sent(P.InspectToken)) == 1


def test_a_funnel_with_no_reply_counts_no_tokens(qtbot):
    win = make_window(qtbot)  # a first start: no chat, no model
    try:
        win.funnel_dock.raise_()
        panel = win.funnel_panel
        qtbot.waitUntil(lambda: "No reply kept its candidates yet" in panel.view.message, timeout=5000)
        assert panel.of_label.text() == "" and not panel.step_field.isEnabled() and not panel.follow.isEnabled()
    finally:
        close_window(win)


def test_a_new_chat_takes_the_last_chats_funnel_off_the_panel(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c"))
    send(qtbot, window, "letters")
    panel, ctl = window.funnel_panel, window.funnel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.of_label.text() == "of 3", timeout=5000)
    asked = len(window.engine.sent(P.ComputeFunnel))
    window.chat_page.new_chat()  # what Ctrl+N and the Chats panel's New do
    qtbot.waitUntil(lambda: panel.view.funnel is None and panel.of_label.text() == "", timeout=5000)
    assert "No reply kept its candidates yet" in panel.view.message and not panel.step_field.isEnabled()
    ctl.tick()  # the repaint clock: the other chat's reply is not asked for again
    assert len(window.engine.sent(P.ComputeFunnel)) == asked and ctl._in_flight is None


def test_deleting_the_reply_shown_takes_its_funnel_off_the_panel(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c"))
    send(qtbot, window, "letters")
    panel, ctl = window.funnel_panel, window.funnel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.of_label.text() == "of 3", timeout=5000)
    _delete(window, _last_reply(window))
    qtbot.waitUntil(lambda: panel.view.funnel is None and panel.of_label.text() == "", timeout=5000)
    ctl.tick()
    assert panel.view.funnel is None and ctl._in_flight is None


def _chips(panel) -> str:
    panel.refresh()
    return panel.view.toPlainText()


def test_the_tokens_panel_shows_a_stored_reply_after_a_restart_and_a_branch_switch(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    short_replies(win)
    win.engine.script(reply("Red", " sky"))
    send(qtbot, win, "colour?")
    first = _last_reply(win)
    win.engine.script(reply("Blue", " sea", "."))
    win.chat.regenerate(first)
    qtbot.waitUntil(lambda: reply_over(win) and _last_reply(win) != first, timeout=5000)
    second = _last_reply(win)
    close_window(win)
    win2 = make_window(qtbot)
    try:
        panel = win2.tokens_panel
        # after a restart: the chat's last reply (the second branch) as its stored tokens, not an empty box
        qtbot.waitUntil(lambda: "Blue" in _chips(panel), timeout=5000)
        assert [r.piece for r in panel.turn.tokens] == ["Blue", " sea", "."]
        assert panel.summary.text().startswith("Stored reply: 3 tokens")
        # a branch switch shows the other branch's tokens
        win2.chat.switch_branch(first)
        assert "Red" in _chips(panel) and "Blue" not in panel.view.toPlainText()
        # a stored token clicked: its funnel step is asked for the reply shown (no Inspect: no prompt kept)
        asked: list = []
        win2.chat.funnel_step_requested.connect(asked.append)
        menu = panel.open_token(1)
        assert menu is not None and not any("Inspect" in a.text() for a in menu.actions())
        assert asked and (asked[-1].stored.reply_id, asked[-1].stored.step) == (first, 1)
        assert second != first
    finally:
        close_window(win2)
