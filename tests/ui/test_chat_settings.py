"""What applies to a chat (sampler, system prompt, stop strings) and the rule for new chats, in the
window on the FakeEngine: opening an old chat never changes the defaults; stop strings are kept
with each chat, restored after a restart, and recorded with each reply and its export."""

from __future__ import annotations

import json
from dataclasses import replace

from PySide6.QtWidgets import QFileDialog

from app.core import protocol as P
from tests.support.fake_engine import reply
from tests.support.window import close_window, load, make_window, send


def _set_temperature(window, t: float) -> None:
    """The person moves the temperature slider."""
    window.sampler_panel.rows["temperature"].field.setValue(t)


def _type_stops(window, text: str) -> None:
    """The person types ``text`` into the Sampler panel's stop strings field."""
    window.sampler_panel.stop_field.setText(text)


def _touch(qtbot, window, conv_id: int, text: str) -> None:
    """Send ``text`` in chat ``conv_id`` (so it is the newest chat, opened at start-up)."""
    window.open_conversation(conv_id)
    send(qtbot, window, text)


def test_opening_an_old_chat_never_changes_the_defaults_for_new_chats(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    _set_temperature(win, 0.3)  # no chat yet: the person's choice for new chats
    send(qtbot, win, "first chat")
    old = win.chat.conversation_id
    win.new_chat()
    _set_temperature(win, 1.4)
    send(qtbot, win, "second chat")
    assert win.settings.sampler.temperature == 1.4
    win.open_conversation(old)
    assert win.sampler_panel.settings().temperature == 0.3  # the chat's own settings are shown
    assert win.settings.sampler.temperature == 1.4  # and the defaults are left alone
    send(qtbot, win, "again in the first chat")
    assert win.engine.sent(P.Generate)[-1].sampler.temperature == 0.3  # its reply uses the chat's
    win.new_chat()
    assert win.sampler_panel.settings().temperature == 1.4
    send(qtbot, win, "third chat")
    assert win.engine.sent(P.Generate)[-1].sampler.temperature == 1.4
    _touch(qtbot, win, old, "the first chat is the newest now")
    close_window(win)
    win2 = make_window(qtbot)  # start-up opens the newest chat (the first): the defaults stay
    try:
        assert win2.chat.conversation_id == old
        assert win2.sampler_panel.settings().temperature == 0.3
        assert win2.settings.sampler.temperature == 1.4
        win2.new_chat()
        assert win2.sampler_panel.settings().temperature == 1.4
    finally:
        close_window(win2)


def test_an_edit_in_an_old_chat_carries_only_what_was_changed_to_new_chats(qtbot, window):
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), temperature=0.2, top_k=11), emit=True)
    send(qtbot, window, "made with top_k 11")
    old = window.chat.conversation_id
    window.new_chat()
    panel.set_settings(replace(panel.settings(), temperature=0.9, top_k=33), emit=True)
    window.open_conversation(old)
    _set_temperature(window, 0.5)  # the person changes the temperature in the old chat
    assert window.conversations.get_conversation(old).sampler.temperature == 0.5
    assert window.conversations.get_conversation(old).sampler.top_k == 11
    assert window.settings.sampler.temperature == 0.5  # what the person changed: the newest choice
    assert window.settings.sampler.top_k == 33  # what the person did not: the defaults' own


def test_stop_strings_are_kept_with_the_chat_restored_after_a_restart_and_recorded(
    qtbot, tiny_model, tmp_path, monkeypatch
):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    _type_stops(win, "END, STOP")
    win.engine.script(reply("Hello", " there"))
    send(qtbot, win, "with stops")
    conv = win.chat.conversation_id
    assert win.engine.sent(P.Generate)[-1].stop_strings == ("END", "STOP")
    answer = win.chat_view.messages[-1]
    meta = win.conversations.get_message(answer.message_id).meta
    assert meta.stop_strings == ("END", "STOP")  # the reply's provenance
    assert "stop strings: “END”, “STOP”" in answer.how_made
    js = tmp_path / "chat.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(js), ""))
    win.export_conversation(conv, "json")
    data = json.loads(js.read_text(encoding="utf-8"))
    assert data["conversation"]["stop_strings"] == ["END", "STOP"]
    assert [m["meta"]["stop_strings"] for m in data["messages"] if m["role"] == "assistant"] == [["END", "STOP"]]
    md = tmp_path / "chat.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(md), ""))
    win.export_conversation(conv, "markdown")
    assert "stop strings `END`, `STOP`" in md.read_text(encoding="utf-8")
    win.new_chat()
    _type_stops(win, "FIN")  # a new chat's stop strings: the default from now on
    send(qtbot, win, "other stops")
    assert win.engine.sent(P.Generate)[-1].stop_strings == ("FIN",)
    win.open_conversation(conv)
    assert win.sampler_panel.stop_strings() == ("END", "STOP")
    assert win.settings.stop_strings == ("FIN",)  # opening the old chat left the default alone
    close_window(win)
    win2 = make_window(qtbot)
    try:
        load(qtbot, win2, tiny_model)
        win2.open_conversation(conv)
        assert win2.sampler_panel.stop_strings() == ("END", "STOP")
        send(qtbot, win2, "after a restart")
        assert win2.engine.sent(P.Generate)[-1].stop_strings == ("END", "STOP")
        win2.new_chat()
        assert win2.sampler_panel.stop_strings() == ("FIN",)
    finally:
        close_window(win2)
