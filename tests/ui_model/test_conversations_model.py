"""Issue 4 in the window, on the real model: history, edit, regenerate, branches, continue,
search, delete with undo, export/import, and the context always matching the screen."""

from __future__ import annotations

import json
from dataclasses import replace

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog

from app.core import protocol as P
from app.core.chat import StopReason
from tests.ui.conftest import load, make_window, send


def _greedy(window, **kw) -> None:
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), temperature=0.0, **kw), emit=True)


def _capture_requests(window) -> list:
    sent: list = []
    real = window.engine._send
    window.engine._send = lambda req: (sent.append(req), real(req))[1]
    return sent


def _action(qtbot, window, widget, action: str, payload=None, finished: bool = True):
    if not finished:
        widget.action_requested.emit(action, widget.message_id, payload)
        return None
    with qtbot.waitSignal(window.engine.generation_finished, timeout=60_000) as b:
        widget.action_requested.emit(action, widget.message_id, payload)
    qtbot.wait(60)
    return b.args[0]


def test_regenerating_five_times_at_temperature_zero_gives_five_identical_replies(qtbot, window):
    _greedy(window, max_tokens=24)
    first = send(qtbot, window, "Name a colour and say why you like it.")
    texts = [first.text]
    for i in range(5):
        reply = window.chat_view.messages[-1]
        fin = _action(qtbot, window, reply, "regenerate")
        texts.append(fin.text)
        # The KV cache was rewound to the common prefix (the whole prompt) and nothing else:
        assert fin.stats.cached_tokens == fin.stats.prompt_tokens - 1
        assert fin.stats.evaluated_tokens == 1
    assert len(set(texts)) == 1, texts
    reply = window.chat_view.messages[-1]
    assert reply.branch_label.text() == "6/6" and reply.text == texts[0]
    # Earlier versions stay reachable with the arrows.
    reply.prev_btn.click()
    qtbot.wait(30)
    assert window.chat_view.messages[-1].branch_label.text() == "5/6"


def test_a_fact_told_in_one_chat_cannot_be_recalled_in_a_new_one(qtbot, window):
    _greedy(window, max_tokens=24)
    sent = _capture_requests(window)
    send(qtbot, window, "My secret word is PINEAPPLE. Reply with OK.")
    window.new_chat()
    fin = send(qtbot, window, "What is my secret word?")
    gen = [r for r in sent if isinstance(r, P.Generate)][-1]
    assert all("PINEAPPLE" not in m.content for m in gen.messages)
    assert fin.stats.cached_tokens == 0  # the KV cache was emptied by New chat
    assert "PINEAPPLE" not in fin.text.upper()


def test_c1_editing_the_first_reply_keeps_the_later_messages_as_a_branch(qtbot, window):
    _greedy(window, max_tokens=16)
    sent = _capture_requests(window)
    send(qtbot, window, "What is 2 + 2?")
    first_reply = send(qtbot, window, "And 3 + 3?")
    assert len(window.chat_view.messages) == 4
    old_first = window.chat_view.messages[1]
    old_text = old_first.text
    old_first.action_requested.emit("edit", old_first.message_id, "The answer is four.")
    qtbot.wait(30)
    msgs = window.chat_view.messages
    # The edit made a branch: the screen shows the edited reply, nothing after it...
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].text == "The answer is four." and msgs[1].branch_label.text() == "2/2"
    # ...and the two later messages were not deleted: the old branch is one click away.
    msgs[1].prev_btn.click()
    qtbot.wait(30)
    back = window.chat_view.messages
    assert len(back) == 4 and back[1].text == old_text and back[3].text == first_reply.text
    back[1].next_btn.click()
    qtbot.wait(30)
    # The next prompt uses the edited text, and the KV cache keeps only the common prefix.
    fin = send(qtbot, window, "Thanks.")
    gen = [r for r in sent if isinstance(r, P.Generate)][-1]
    assert [m.content for m in gen.messages if m.role == "assistant"] == ["The answer is four."]
    assert 0 < fin.stats.cached_tokens < fin.stats.prompt_tokens


def test_editing_a_question_asks_again_and_keeps_the_old_exchange(qtbot, window):
    _greedy(window, max_tokens=12)
    send(qtbot, window, "Name a fruit.")
    q = window.chat_view.messages[0]
    fin = _action(qtbot, window, q, "edit", "Name a vegetable.")
    msgs = window.chat_view.messages
    assert msgs[0].text == "Name a vegetable." and msgs[0].branch_label.text() == "2/2"
    assert msgs[1].text == fin.text
    msgs[0].prev_btn.click()
    qtbot.wait(30)
    assert window.chat_view.messages[0].text == "Name a fruit." and len(window.chat_view.messages) == 2


def test_continue_a_reply_that_was_cut_off(qtbot, window):
    _greedy(window, max_tokens=8, repeat_penalty=1.0)
    fin = send(qtbot, window, "Write a long poem about the sea.")
    assert fin.stats.stop_reason == StopReason.MAX_TOKENS.value
    reply = window.chat_view.messages[-1]
    assert reply.badge.text() == "max_tokens reached" and reply.continue_btn.isVisible()
    mid, before = reply.message_id, reply.text
    more = _action(qtbot, window, reply, "continue")
    reply = window.chat_view.messages[-1]
    assert reply.message_id == mid  # the same message grew
    assert reply.text == before + more.text and len(reply.text) > len(before)
    # Continuing reuses the whole cached context: only the template glue is new, if anything.
    assert more.stats.cached_tokens >= more.stats.prompt_tokens - 2
    stored = window.conversations.get_message(mid)
    assert stored.content == reply.text


def test_list_search_rename_delete_and_undo(qtbot, window):
    _greedy(window, max_tokens=8)
    send(qtbot, window, "Tell me about zebras.")
    first_id = window.chat.conversation_id
    window.new_chat()
    send(qtbot, window, "Tell me about penguins.")
    second_id = window.chat.conversation_id
    panel = window.chats_panel
    ids = [panel.list.item(i).data(256) for i in range(panel.list.count())]
    assert ids == [second_id, first_id]  # newest first
    assert "penguins" in panel.list.item(0).text()
    # Search across all messages of all chats, then open the hit.
    panel.search.setText("zebras")
    panel.refresh()
    hits = [panel.list.item(i).data(256) for i in range(panel.list.count())]
    assert hits and set(hits) == {first_id}  # the question (and maybe the reply) of the zebra chat only
    panel._activated(panel.list.item(0))
    assert window.chat.conversation_id == first_id
    assert window.chat_view.messages[0].text == "Tell me about zebras."
    panel.search.setText("")
    panel.refresh()
    # Rename, delete, undo.
    window.conversations.rename(first_id, "Zebra facts")
    panel.refresh()
    assert any(panel.list.item(i).text().startswith("Zebra facts") for i in range(panel.list.count()))
    panel.delete(first_id)
    assert all(panel.list.item(i).data(256) != first_id for i in range(panel.list.count()))
    assert window.banner.isVisible() and "Deleted" in window.banner.text.text()
    undo = window.banner._actions.itemAt(0).widget()
    assert undo.text() == "Undo"
    undo.click()
    assert any(panel.list.item(i).data(256) == first_id for i in range(panel.list.count()))


def test_export_markdown_and_json_then_import(qtbot, window, tmp_path, monkeypatch):
    _greedy(window, max_tokens=10)
    send(qtbot, window, "Say hello.")
    reply = window.chat_view.messages[-1]
    _action(qtbot, window, reply, "regenerate")  # two branches
    cid = window.chat.conversation_id
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(md), ""))
    window.export_conversation(cid, "markdown")
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(js), ""))
    window.export_conversation(cid, "json")
    text = md.read_text(encoding="utf-8")
    assert "Say hello." in text and window.chat_view.messages[-1].text.strip()[:20] in text
    assert "tok/s" in text
    data = json.loads(js.read_text(encoding="utf-8"))
    assistants = [m for m in data["messages"] if m["role"] == "assistant"]
    assert len(assistants) == 2  # all branches
    assert all(
        m["meta"]["stats"]["generated_tokens"] > 0 and m["meta"]["sampler"]["temperature"] == 0.0 for m in assistants
    )
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(js), ""))
    window.import_conversation()
    assert window.chat.conversation_id != cid
    assert window.chat_view.messages[0].text == "Say hello."
    assert window.chat_view.messages[-1].branch_label.text() == "2/2"
    # A bad file is refused with a message that names it, and nothing is imported.
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    n = len(window.conversations.list_conversations())
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(bad), ""))
    window.import_conversation()
    assert "bad.json" in window.banner.text.text()
    assert len(window.conversations.list_conversations()) == n


def test_every_reply_carries_how_it_was_made_and_copy_takes_visible_text(qtbot, window, smollm2):
    _greedy(window, max_tokens=12, seed=4242)
    fin = send(qtbot, window, "Say good morning.")
    reply = window.chat_view.messages[-1]
    meta = window.conversations.get_message(reply.message_id).meta
    assert meta.model_path == str(smollm2.resolve()) and meta.quant == "Q4_1"
    assert meta.sampler.temperature == 0.0 and meta.seed_used == 4242 == fin.stats.seed
    assert meta.stats.generated_tokens == fin.stats.generated_tokens and meta.stats.ttft_s > 0
    assert meta.reproduction_sampler().seed == 4242
    tip = reply.info_btn.toolTip()
    assert "seed 4242" in tip and "tok/s" in tip and "Q4_1" in tip
    reply.copy_btn.click()
    assert QGuiApplication.clipboard().text() == fin.text
    assert "<|im_end|>" not in QGuiApplication.clipboard().text()


def test_chats_survive_a_restart(qtbot, smollm2):
    win = make_window(qtbot)
    load(qtbot, win, smollm2)
    _greedy(win, max_tokens=10)
    fin = send(qtbot, win, "Remember me.")
    win.close()
    win.conversations.close()
    win2 = make_window(qtbot)
    try:
        msgs = win2.chat_view.messages
        assert [m.text for m in msgs] == ["Remember me.", fin.text]
        assert win2.chats_panel.list.count() == 1
    finally:
        win2.close()
        win2.conversations.close()
