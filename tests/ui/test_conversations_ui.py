"""Issue 4 in the window, on the FakeEngine: history, edit, regenerate, branches ‹ n/m ›, continue,
search, rename, delete with undo, export/import, and what each reply records about how it was made.
(Greedy determinism and KV cache figures on the real model: tests/ui_model.)"""

from __future__ import annotations

import json
from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog

from app.core import protocol as P
from tests.support.fake_engine import reply
from tests.support.window import banner_button, close_window, load, make_window, reply_over, send


def _greedy(window, **kw) -> None:
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), temperature=0.0, **kw), emit=True)


def _action(qtbot, window, widget, action: str, payload=None):
    """Ask for ``action`` on a message as its buttons do; returns the Finished event of the reply it starts."""
    with qtbot.waitSignal(window.engine.generation_finished) as b:
        widget.action_requested.emit(action, widget.message_id, payload)
    fin = b.args[0]
    qtbot.waitUntil(lambda: reply_over(window) and window.chat_view.messages[-1].text.endswith(fin.text))
    return fin


def _click_item(qtbot, panel, row: int) -> None:
    lst = panel.list
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualItemRect(lst.item(row)).center())


def _ids(panel) -> list[int]:
    return [panel.list.item(i).data(256) for i in range(panel.list.count())]


def test_regenerating_keeps_every_version_as_a_branch(qtbot, window):
    _greedy(window, max_tokens=24)
    versions = [f"Version {i}." for i in range(6)]
    window.engine.script(*(reply(v) for v in versions))
    send(qtbot, window, "Name a colour and say why you like it.")
    for _ in range(5):
        _action(qtbot, window, window.chat_view.messages[-1], "regenerate")
    gens = window.engine.sent(P.Generate)
    # Every regenerate asks about the same conversation: the question, not the earlier replies.
    assert len(gens) == 6 and len({g.messages for g in gens}) == 1
    assert gens[-1].messages[-1].content == "Name a colour and say why you like it."
    msgs = window.chat_view.messages
    assert len(msgs) == 2 and msgs[-1].branch_label.text() == "6/6" and msgs[-1].text == versions[-1]
    # Earlier versions stay reachable with the arrows, and the choice is stored.
    msgs[-1].prev_btn.click()
    qtbot.waitUntil(lambda: window.chat_view.messages[-1].branch_label.text() == "5/6")
    assert window.chat_view.messages[-1].text == versions[-2]
    path = window.conversations.active_path(window.chat.conversation_id)
    assert [m.content for m in path] == ["Name a colour and say why you like it.", versions[-2]]


def test_a_new_chat_does_not_send_the_old_one(qtbot, window):
    _greedy(window, max_tokens=24)
    send(qtbot, window, "My secret word is PINEAPPLE. Reply with OK.")
    window.new_chat()
    assert len(window.engine.sent(P.ResetContext)) == 1
    fin = send(qtbot, window, "What is my secret word?")
    gen = window.engine.sent(P.Generate)[-1]
    assert all("PINEAPPLE" not in m.content for m in gen.messages)
    assert fin.stats.cached_tokens == 0
    assert len(window.conversations.list_conversations()) == 2


def test_editing_a_question_asks_again_and_keeps_the_old_exchange(qtbot, window):
    _greedy(window, max_tokens=12)
    window.engine.script(reply("Apple."), reply("Carrot."))
    send(qtbot, window, "Name a fruit.")
    q = window.chat_view.messages[0]
    fin = _action(qtbot, window, q, "edit", "Name a vegetable.")
    assert window.engine.sent(P.Generate)[-1].messages[-1].content == "Name a vegetable."
    msgs = window.chat_view.messages
    assert msgs[0].text == "Name a vegetable." and msgs[0].branch_label.text() == "2/2"
    assert msgs[1].text == fin.text == "Carrot."
    msgs[0].prev_btn.click()
    qtbot.waitUntil(lambda: window.chat_view.messages[0].text == "Name a fruit.")
    assert len(window.chat_view.messages) == 2 and window.chat_view.messages[1].text == "Apple."


def test_list_search_rename_delete_and_undo(qtbot, window):
    _greedy(window, max_tokens=8)
    send(qtbot, window, "Tell me about zebras.")
    first_id = window.chat.conversation_id
    window.new_chat()
    send(qtbot, window, "Tell me about penguins.")
    second_id = window.chat.conversation_id
    panel = window.chats_panel
    assert _ids(panel) == [second_id, first_id]  # newest first
    assert "penguins" in panel.list.item(0).text()
    # Search across all messages of all chats, then open the hit.
    panel.search.setText("zebras")
    panel.refresh()
    hits = _ids(panel)
    assert hits and set(hits) == {first_id}  # the question (and the reply) of the zebra chat only
    _click_item(qtbot, panel, 0)
    assert window.chat.conversation_id == first_id
    assert window.chat_view.messages[0].text == "Tell me about zebras."
    panel.search.setText("")
    panel.refresh()
    # Rename, delete, undo.
    window.conversations.rename(first_id, "Zebra facts")
    panel.refresh()
    assert any(panel.list.item(i).text().startswith("Zebra facts") for i in range(panel.list.count()))
    panel.delete(first_id)
    assert first_id not in _ids(panel)
    assert window.banner.isVisible() and "Deleted" in window.banner.text.text()
    assert window.chat.conversation_id is None  # it was shown: a new chat is shown instead
    banner_button(window, "Undo").click()
    assert first_id in _ids(panel)
    assert window.conversations.get_conversation(first_id).title == "Zebra facts"
    assert window.chat.conversation_id == first_id  # and Undo shows it again
    assert window.chat_view.messages[0].text == "Tell me about zebras."


def test_export_markdown_and_json_then_import(qtbot, window, tmp_path, monkeypatch):
    _greedy(window, max_tokens=10)
    window.engine.script(reply("Hello ", "there."), reply("Hi", "!"))
    send(qtbot, window, "Say hello.")
    _action(qtbot, window, window.chat_view.messages[-1], "regenerate")  # two branches
    cid = window.chat.conversation_id
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(md), ""))
    window.export_conversation(cid, "markdown")
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(js), ""))
    window.export_conversation(cid, "json")
    text = md.read_text(encoding="utf-8")
    assert "Say hello." in text and "Hi!" in text
    assert "tok/s" in text
    data = json.loads(js.read_text(encoding="utf-8"))
    assistants = [m for m in data["messages"] if m["role"] == "assistant"]
    assert len(assistants) == 2  # all branches
    assert sorted(m["content"] for m in assistants) == ["Hello there.", "Hi!"]
    assert all(
        m["meta"]["stats"]["generated_tokens"] > 0 and m["meta"]["sampler"]["temperature"] == 0.0 for m in assistants
    )
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(js)], ""))
    window.import_conversation()
    assert window.chat.conversation_id != cid
    assert window.chat_view.messages[0].text == "Say hello."
    assert window.chat_view.messages[-1].branch_label.text() == "2/2"
    # A bad file is refused with a message that names it, and nothing is imported.
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    n = len(window.conversations.list_conversations())
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(bad)], ""))
    window.import_conversation()
    assert "bad.json" in window.banner.text.text()
    assert len(window.conversations.list_conversations()) == n


def test_every_reply_carries_how_it_was_made_and_copy_takes_visible_text(qtbot, window, tiny_model):
    _greedy(window, max_tokens=12, seed=4242)
    window.engine.script(reply("Good ", "morning", "!"))
    fin = send(qtbot, window, "Say good morning.")
    reply_w = window.chat_view.messages[-1]
    meta = window.conversations.get_message(reply_w.message_id).meta
    assert meta.model_path == str(tiny_model.resolve()) and meta.quant == "Q4_1"
    assert meta.sampler.temperature == 0.0 and meta.seed_used == 4242 == fin.stats.seed
    assert meta.stats.generated_tokens == fin.stats.generated_tokens == 3 and meta.stats.ttft_s > 0
    assert meta.reproduction_sampler().seed == 4242
    tip = reply_w.info_btn.toolTip()
    assert "seed 4242" in tip and "tok/s" in tip and "Q4_1" in tip
    reply_w.copy_btn.click()
    assert QGuiApplication.clipboard().text() == fin.text == "Good morning!"


def test_chats_survive_a_restart(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    _greedy(win, max_tokens=10)
    fin = send(qtbot, win, "Remember me.")
    close_window(win)
    win2 = make_window(qtbot)
    try:
        msgs = win2.chat_view.messages
        assert [m.text for m in msgs] == ["Remember me.", fin.text]
        assert win2.chats_panel.list.count() == 1
    finally:
        close_window(win2)


def test_a_search_typed_just_before_the_history_closes_leaves_the_list_alone(qtbot, window):
    """The search box refreshes the list 200 ms after the last key; the history closing meanwhile
    (the window quitting) must not make that refresh read the closed database."""
    panel = window.chats_panel
    before = [panel.list.item(i).text() for i in range(panel.list.count())]
    # The debounce fires and its refresh runs (connected first, it runs before the wait ends);
    # an exception in the slot fails the test (pytest-qt).
    with qtbot.waitSignal(panel._search_timer.timeout, timeout=3000):
        panel.search.setText("zebras")
        window.conversations.close()
    assert [panel.list.item(i).text() for i in range(panel.list.count())] == before


def test_search_from_the_keyboard_enter_opens_the_first_hit_and_down_moves_into_the_list(qtbot, window):
    _greedy(window, max_tokens=8)
    send(qtbot, window, "Tell me about zebras.")
    zebra = window.chat.conversation_id
    window.new_chat()
    send(qtbot, window, "Tell me about penguins.")
    panel = window.chats_panel
    panel.search.setFocus()
    qtbot.keyClicks(panel.search, "zebras")
    qtbot.keyClick(panel.search, Qt.Key.Key_Return)  # before the 200 ms debounce: the hits are listed first
    assert window.chat.conversation_id == zebra
    panel.search.clear()
    qtbot.keyClicks(panel.search, "penguins")
    qtbot.keyClick(panel.search, Qt.Key.Key_Down)
    assert QGuiApplication.focusObject() is panel.list
    assert panel.list.currentItem() is not None and "penguins" in panel.list.currentItem().text().lower()
