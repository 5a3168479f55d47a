"""Issue 4 in the window, on the real engine and SmolLM2: greedy regenerate is deterministic, and
the KV cache always matches the screen (New chat empties it, an edit keeps only the common prefix,
continue reuses it). Editing a reply into a branch and continuing a cut-off reply run on both engines
(the scripted one also checks the scripted texts). The rest of the bookkeeping is tested on the
scripted engine in tests/ui/test_conversations_ui.py."""

from __future__ import annotations

from dataclasses import replace

from app.core import protocol as P
from app.core.chat.context import StopReason
from tests.support.fake_engine import reply
from tests.support.window import WindowEngine, both_engines, capture_requests, reply_over, send, wait_ms

SCRIPTED = WindowEngine.SCRIPTED


def _greedy(window, **kw) -> None:
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), temperature=0.0, **kw), emit=True)


def _action(qtbot, window, widget, action: str, payload=None, finished: bool = True):
    if not finished:
        widget.action_requested.emit(action, widget.message_id, payload)
        return None
    with qtbot.waitSignal(window.engine.generation_finished, timeout=wait_ms(window)) as b:
        widget.action_requested.emit(action, widget.message_id, payload)
    fin = b.args[0]
    qtbot.waitUntil(lambda: reply_over(window) and window.chat_view.messages[-1].text.endswith(fin.text))
    return fin


def test_regenerating_five_times_at_temperature_zero_gives_five_identical_replies(qtbot, window):
    _greedy(window, max_tokens=24)
    first = send(qtbot, window, "Name a colour and say why you like it.")
    texts = [first.text]
    for _ in range(5):
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
    qtbot.waitUntil(lambda: window.chat_view.messages[-1].branch_label.text() == "5/6")


def test_a_fact_told_in_one_chat_cannot_be_recalled_in_a_new_one(qtbot, window):
    _greedy(window, max_tokens=24)
    sent = capture_requests(window)
    send(qtbot, window, "My secret word is PINEAPPLE. Reply with OK.")
    window.new_chat()
    fin = send(qtbot, window, "What is my secret word?")
    gen = [r for r in sent if isinstance(r, P.Generate)][-1]
    assert all("PINEAPPLE" not in m.content for m in gen.messages)
    assert fin.stats.cached_tokens == 0  # the KV cache was emptied by New chat
    assert "PINEAPPLE" not in fin.text.upper()


@both_engines
def test_c1_editing_the_first_reply_keeps_the_later_messages_as_a_branch(qtbot, window, window_engine):
    _greedy(window, max_tokens=16)
    if window_engine is SCRIPTED:
        window.engine.script(reply("Four."), reply("Six."), reply("You're welcome."))
    sent = capture_requests(window)
    send(qtbot, window, "What is 2 + 2?")
    first_reply = send(qtbot, window, "And 3 + 3?")
    assert len(window.chat_view.messages) == 4
    old_first = window.chat_view.messages[1]
    old_text = old_first.text
    if window_engine is SCRIPTED:
        assert old_text == "Four."
    old_first.action_requested.emit("edit", old_first.message_id, "The answer is four.")
    qtbot.waitUntil(lambda: len(window.chat_view.messages) == 2)
    msgs = window.chat_view.messages
    # The edit made a branch: the screen shows the edited reply, nothing after it...
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].text == "The answer is four." and msgs[1].branch_label.text() == "2/2"
    # Editing a reply asks for nothing.
    assert len([r for r in sent if isinstance(r, P.Generate)]) == 2
    # ...and the two later messages were not deleted: the old branch is one click away.
    msgs[1].prev_btn.click()
    qtbot.waitUntil(lambda: len(window.chat_view.messages) == 4)
    back = window.chat_view.messages
    assert len(back) == 4 and back[1].text == old_text and back[3].text == first_reply.text
    back[1].next_btn.click()
    qtbot.waitUntil(lambda: len(window.chat_view.messages) == 2)
    # The next prompt uses the edited text, and the KV cache keeps only the common prefix.
    fin = send(qtbot, window, "Thanks.")
    gen = [r for r in sent if isinstance(r, P.Generate)][-1]
    assert [m.content for m in gen.messages if m.role == "assistant"] == ["The answer is four."]
    assert [m.content for m in gen.messages if m.role == "user"] == ["What is 2 + 2?", "Thanks."]
    assert 0 < fin.stats.cached_tokens < fin.stats.prompt_tokens


@both_engines
def test_continue_a_reply_that_was_cut_off(qtbot, window, window_engine):
    _greedy(window, max_tokens=8, repeat_penalty=1.0)
    if window_engine is SCRIPTED:
        window.engine.script(reply(*(f"wave{i} " for i in range(20))), reply("and ", "the ", "shore."))
    sent = capture_requests(window)
    fin = send(qtbot, window, "Write a long poem about the sea.")
    assert fin.stats.stop_reason == StopReason.MAX_TOKENS.value and fin.stats.generated_tokens == 8
    reply_w = window.chat_view.messages[-1]
    assert reply_w.badge.text() == "max_tokens reached" and reply_w.continue_btn.isVisible()
    mid, before = reply_w.message_id, reply_w.text
    more = _action(qtbot, window, reply_w, "continue")
    gen = [r for r in sent if isinstance(r, P.Generate)][-1]
    assert gen.continue_last and gen.messages[-1].role == "assistant" and gen.messages[-1].content == before
    reply_w = window.chat_view.messages[-1]
    assert reply_w.message_id == mid  # the same message grew
    assert reply_w.text == before + more.text and len(reply_w.text) > len(before)
    assert reply_w.footer.text().startswith("continued: ")
    if window_engine is not SCRIPTED:
        # Continuing reuses the whole cached context: only the template glue is new, if anything.
        # (The scripted engine's KV cache holds pieces, not the words it tokenizes a prompt into.)
        assert more.stats.cached_tokens >= more.stats.prompt_tokens - 2
    stored = window.conversations.get_message(mid)
    assert stored.content == reply_w.text
