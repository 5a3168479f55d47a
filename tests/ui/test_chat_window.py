"""The window's own logic on the scripted engine: chat, live stats, sampler requests, Stop, errors,
context full, settings. (A reply with its stats, a crash and Restart, a dying load and a message longer
than n_ctx run on both engines in tests/ui_model/test_chat_window_model.py; real tokens and timings there too.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.gguf.gguf_info import format_bytes
from app.ui.chat.view import CodeBlock, MessageWidget
from app.ui.engine.client import EngineState
from tests.support.budgets import stream_budget_ms
from tests.support.fake_engine import Endless, Refuse, reply
from tests.support.window import banner_button, close_window, load, make_window, reply_over, send


def _number(label: str) -> float:
    return float(label.split()[0].replace(",", ""))


def test_opening_a_chat_shows_its_last_reply_in_the_stats_panel(qtbot, window):
    window.engine.script(reply("First", " chat", "."))
    fin_a = send(qtbot, window, "Chat A, please.")
    conv_a = window.chat.conversation_id
    window.chat.new_chat()
    window.stats_panel.refresh()
    assert window.stats_panel.phase.text() == "No reply yet"
    window.engine.script(reply("Second", "."))
    send(qtbot, window, "Chat B, please.")
    window.chat.open_conversation(conv_a)
    window.stats_panel.refresh()
    assert window.stats_panel.phase.text().startswith("✓ Last reply in this chat (stored)")
    ttft = window.stats_panel.tiles["ttft"][0].text()
    assert _number(ttft) == round(fin_a.stats.ttft_s * 1000)
    assert window.stats_panel.turn.generated == fin_a.stats.generated_tokens == 3
    s = fin_a.stats
    assert window.stats_panel.tiles["tokens"][0].text() == f"{s.prompt_tokens} → 3" and s.prompt_tokens > 0
    assert window.stats_panel.ctx_bar.parts[:3] == (s.cached_tokens, s.evaluated_tokens, 3)
    assert window.stats_panel.ctx_label.text().startswith(f"{s.context_used} / ")
    window.chat.new_chat()
    window.stats_panel.refresh()
    assert window.stats_panel.phase.text() == "No reply yet"


def test_a_slider_change_reaches_the_next_request(qtbot, window):
    window.funnel_dock.raise_()
    panel = window.sampler_panel
    panel.rows["temperature"].slider.setValue(panel.rows["temperature"].position(0.0))  # temperature 0 (greedy)
    panel.rows["top_k"].field.setValue(0)  # top_k off
    panel.rows["max_tokens"].field.setValue(12)
    send(qtbot, window, "Name a fruit.")
    gen = window.engine.sent(P.Generate)[-1]
    assert gen.sampler.temperature == 0.0 and gen.sampler.top_k == 0 and gen.sampler.max_tokens == 12
    assert gen.messages[0].role == "system" and gen.messages[-1].content == "Name a fruit."
    # Greedy: the funnel's last stage is greedy and keeps exactly one candidate.
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel is not None, timeout=5000)
    funnel = window.engine.sent(P.ComputeFunnel)[-1]
    assert funnel.sampler.temperature == 0.0 and funnel.reply_id == gen.request_id
    last = window.funnel_panel.view.funnel.stages[-1]
    assert last.kind.value == "greedy" and sum(p > 0 for p in last.probs) == 1
    # A preset applies to the next reply too.
    panel.apply_preset("Creative")
    send(qtbot, window, "Another fruit?")
    gen2 = window.engine.sent(P.Generate)[-1]
    assert gen2.sampler.temperature == 1.1 and gen2.sampler.max_tokens == 12


def _start_endless_reply(qtbot, window, n_tokens: int = 5):
    """Send a message whose reply never ends until Stop; wait until ``n_tokens`` have streamed."""
    window.engine.script(Endless("1\n"))
    tokens: list = []
    window.engine.token_received.connect(tokens.append)
    box = window.composer.box
    qtbot.keyClicks(box, "Write the numbers from 1 to 3000, one per line.")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(tokens) >= n_tokens)
    return box


def _assert_stopped(qtbot, window, fin) -> None:
    assert fin.stats.stop_reason == StopReason.CANCELLED.value
    qtbot.waitUntil(lambda: reply_over(window))
    reply_w = window.chat_view.messages[-1]
    assert reply_w.text == fin.text and fin.text.strip()
    assert reply_w.badge.text() == "stopped" and reply_w.badge.isVisible()
    assert window.conversations.get_message(reply_w.message_id).content == fin.text
    assert window.engine.state == EngineState.READY


# Case E3 (docs/field-cases.md): Stop keeps the partial reply, marked stopped; the box works again.
def test_escape_stops_the_reply_and_the_box_works_again(qtbot, window):
    box = _start_endless_reply(qtbot, window)
    assert window.composer.button.text() == "Stop" and window.engine.generating
    with qtbot.waitSignal(window.engine.generation_finished) as blocker:
        qtbot.keyClick(box, Qt.Key.Key_Escape)
    _assert_stopped(qtbot, window, blocker.args[0])
    assert window.composer.button.text() == "Send"
    # The box works again.
    fin2 = send(qtbot, window, "Hi")
    assert fin2.stats.stop_reason != StopReason.CANCELLED.value


def test_the_stop_button_stops_the_reply(qtbot, window):
    _start_endless_reply(qtbot, window)
    assert window.composer.button.text() == "Stop"
    with qtbot.waitSignal(window.engine.generation_finished) as blocker:
        window.composer.button.click()
    _assert_stopped(qtbot, window, blocker.args[0])
    assert window.composer.button.text() == "Send"


# Case E6 (docs/field-cases.md).
def test_a_file_that_is_not_a_model_gives_one_clear_message(qtbot, window, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("shopping list: eggs, milk\n")
    loads_before = len(window.engine.sent(P.LoadModel))
    assert window.load_model(str(bad)) is False
    assert window.banner.isVisible()
    assert "notes.gguf" in window.banner.text.text() and "not a GGUF model" in window.banner.text.text()
    # Nothing was asked of the engine; the loaded model is untouched and still answers.
    assert len(window.engine.sent(P.LoadModel)) == loads_before
    assert window.engine.model is not None and window.engine.state == EngineState.READY
    fin = send(qtbot, window, "Say yes.")
    assert fin.text.strip()


def test_a_load_the_engine_refuses_shows_its_message_and_leaves_no_model(qtbot, window, tiny_model):
    window.engine.fail_next_load(f"{tiny_model.name}: llama.cpp could not load this model.")
    with qtbot.waitSignal(window.engine.model_load_failed):
        assert window.load_model(str(tiny_model))
    assert window.engine.model is None and window.engine.state == EngineState.NO_MODEL
    assert window.banner.isVisible() and window.banner.text.text() == (
        f"{tiny_model.name}: llama.cpp could not load this model."
    )
    banner_button(window, "Open another model…")
    # A message now is kept in the box, with a word about the missing model.
    box = window.composer.box
    box.setPlainText("Hello?")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert box.toPlainText() == "Hello?" and window.engine.sent(P.Generate) == []
    assert "No model is loaded" in window.banner.text.text()


def test_dropping_a_gguf_loads_it(qtbot, window, tiny_model):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(tiny_model))])
    ev = QDropEvent(
        QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    with qtbot.waitSignal(window.engine.model_loaded):
        window.dropEvent(ev)
    assert window.engine.model.info.path == str(tiny_model.resolve())
    assert window.engine.sent(P.LoadModel)[-1].path == str(tiny_model.resolve())


def test_new_chat_empties_the_view_and_the_context(qtbot, window):
    send(qtbot, window, "My name is Zanzibar.")
    first = window.chat.conversation_id
    window.new_chat()
    assert window.chat_view.messages == []
    assert len(window.engine.sent(P.ResetContext)) == 1
    fin = send(qtbot, window, "Hello.")
    assert fin.stats.cached_tokens == 0
    gen = window.engine.sent(P.Generate)[-1]
    assert all("Zanzibar" not in m.content for m in gen.messages)
    assert window.chat.conversation_id != first


def test_settings_survive_a_restart(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    win.sampler_panel.rows["temperature"].field.setValue(0.35)
    win.sampler_panel.seed_fixed.setChecked(True)
    win.sampler_panel.seed_field.setValue(777)
    win.system_bar.set_text("Answer in French.")
    banner_button(win, "Use for new chats too").click()  # an edit alone is for this chat only
    win.model_panel.n_ctx.setValue(2048)
    with qtbot.waitSignal(win.engine.model_loaded, timeout=5000):
        win.model_panel.apply_btn.click()  # remembered for the file once applied
    win.model_panel.policy.setCurrentIndex(1)  # the context policy: remembered at once (no reload)
    close_window(win)
    win2 = make_window(qtbot)
    try:
        s = win2.sampler_panel.settings()
        assert s.temperature == 0.35 and s.seed == 777
        assert win2.system_bar.text() == "Answer in French."
        load(qtbot, win2, tiny_model)  # remembered for this file
        assert win2.model_panel.load_settings().n_ctx == 2048
        assert win2.model_panel.load_settings().context_policy == "rolling"
        assert win2.settings.recent_models[0] == str(tiny_model.resolve())
    finally:
        close_window(win2)


def test_markdown_and_code_blocks_render(qtbot):
    w = MessageWidget("assistant")
    qtbot.addWidget(w)
    src = "Here:\n\n```python\nprint('hi')\n```\n\nDone with **bold**."
    for i in range(1, len(src) + 1, 7):  # streamed in pieces
        w.set_text(src[:i])
        w.refresh()
    w.set_text(src)
    w.refresh()
    blocks = w.findChildren(CodeBlock)
    assert len(blocks) == 1 and blocks[0].code == "print('hi')" and blocks[0].lang.text() == "python"
    labels = [lbl.text() for lbl in w.body.findChildren(type(w.footer)) if "bold" in lbl.text()]
    assert labels and "<strong>bold</strong>" in labels[-1]


def test_e5_context_full_then_the_policy_applies_to_the_next_reply_without_a_reload(qtbot, window):
    window.engine.script(reply("Once ", "upon ", "a ", "time", context_full=True))
    fin = send(qtbot, window, "Tell me a very long story about a dragon and a knight.")
    assert fin.stats.stop_reason == StopReason.CONTEXT_FULL.value
    reply_w = window.chat_view.messages[-1]
    assert reply_w.badge.text() == "context full" and reply_w.text == fin.text
    assert reply_w.continue_btn.isVisible()
    assert "context is full" in window.banner.text.text() and f"{fin.stats.n_ctx:,} tokens" in window.banner.text.text()
    # Stop policy: the engine refuses the next message, which stays in the box...
    window.engine.script(Refuse(P.FailureKind.CONTEXT_OVERFLOW, "The conversation no longer fits in n_ctx."))
    box = window.composer.box
    box.setPlainText("Go on.")
    with qtbot.waitSignal(window.engine.generation_failed):
        qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: reply_over(window))
    assert box.toPlainText() == "Go on."
    assert [m.role for m in window.chat_view.messages] == ["user", "assistant"]
    # ...until the policy changes; no reload is needed, the next request carries it.
    loads = len(window.engine.sent(P.LoadModel))
    window.model_panel.policy.setCurrentIndex(window.model_panel.policy.findData("rolling"))
    assert not window.model_panel.apply_btn.property("pending")
    box.clear()
    fin2 = send(qtbot, window, "Go on.")
    assert isinstance(fin2, P.Finished)
    assert window.engine.sent(P.Generate)[-1].context_policy == "rolling"
    assert len(window.engine.sent(P.LoadModel)) == loads
    assert window.loader.current_load.context_policy == "rolling"  # remembered for this file


def test_the_chat_column_is_as_tall_as_its_messages(qtbot):
    """Word-wrapped replies must not leave the view scrolled into blank space below them."""
    from app.ui.chat.view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.resize(800, 540)
    view.show()
    para = "Rome has been home to many peoples through its history, with different languages and customs. " * 3
    for i in range(3):
        view.add_message("user", f"Question {i}?", message_id=2 * i + 1)
        reply_w = view.add_message("assistant", "", message_id=2 * i + 2)
        reply_w.set_text("\n\n".join([para] * 8))
        view.refresh()
    inner, last = view.widget(), view.messages[-1]
    bar = view.verticalScrollBar()
    # The layout settles on the event loop: wait for it, then check it.
    qtbot.waitUntil(lambda: inner.height() - last.geometry().bottom() < 40 and bar.value() == bar.maximum() > 0)
    assert last.geometry().bottom() - bar.value() <= view.viewport().height() + 40


def test_long_panel_texts_never_force_the_window_wider(qtbot, window):
    window.engine.script(reply(*(["Theseaisdeepandwideandverylong" * 4 + " "] * 6)))
    send(qtbot, window, "Write one sentence about the sea.")
    window.tokens_panel.refresh()
    window.stats_panel.refresh()
    # Fits a 1366-pixel-wide laptop screen with room to spare.
    assert window.minimumSizeHint().width() <= 1300, window.minimumSizeHint()


def test_the_token_inspector_is_only_asked_for_while_it_is_shown(qtbot, window):
    send(qtbot, window, "Hi.")
    assert window.engine.sent(P.Generate)[-1].top_candidates == 20
    window.sampler_dock.hide()
    window.tokens_dock.hide()
    send(qtbot, window, "Hi again.")
    assert window.engine.sent(P.Generate)[-1].top_candidates == 0


def test_a_reply_that_fills_n_ctx_ends_with_context_full_and_can_be_continued(qtbot, tiny_model):
    from app.core.chat.context import LoadSettings

    win = make_window(qtbot)
    try:
        with qtbot.waitSignal(win.engine.model_loaded):
            win.load_model(str(tiny_model), LoadSettings(n_ctx=256, context_policy="stop"))
        assert win.engine.model.n_ctx == 256
        win.engine.script(Endless("word "))
        win.sampler_panel.set_settings(replace(win.sampler_panel.settings(), max_tokens=-1), emit=True)
        fin = send(qtbot, win, "Tell me a very long story.", timeout=stream_budget_ms(256))  # until n_ctx is full
        assert fin.stats.stop_reason == StopReason.CONTEXT_FULL.value and fin.stats.context_used == 256
        reply_w = win.chat_view.messages[-1]
        assert reply_w.badge.text() == "context full" and reply_w.continue_btn.isVisible()
        assert reply_w.text == fin.text and fin.text.count("word") == fin.stats.generated_tokens
        assert "context is full (256 tokens, n_ctx)" in win.banner.text.text()
    finally:
        close_window(win)


def test_with_no_model_the_empty_chat_offers_the_librarys_models_and_loads_one_on_click(qtbot, tmp_path):
    from tests.support.models import write_tiny_model

    win = make_window(qtbot)
    try:
        assert win.engine.model is None
        path = write_tiny_model(win.paths.models_dir / "pick-me-Q4_0.gguf", name="Pick Me")
        with qtbot.waitSignal(win.models.library_tab.entries_changed, timeout=10_000):
            win.models.library_tab.refresh()
        qtbot.waitUntil(lambda: "Load pick-me-Q4_0" in win.chat_view.placeholder.text(), timeout=10_000)
        link = f"load:{path}"
        assert f"href='{link}'" in win.chat_view.placeholder.text()
        with qtbot.waitSignal(win.engine.model_loaded, timeout=10_000):
            win.chat_view.placeholder.linkActivated.emit(link)
        assert win.engine.model.info.path == str(path)
    finally:
        close_window(win)


def test_the_empty_chats_links_work_from_the_keyboard(qtbot):
    from PySide6.QtTest import QTest

    win = make_window(qtbot)
    try:
        label = win.chat_view.placeholder
        assert "Open a GGUF file" in label.text()
        label.setFocus()
        qtbot.waitUntil(label.hasFocus, timeout=5_000)
        activated: list[str] = []
        label.linkActivated.connect(activated.append)
        win.chat_view.blockSignals(True)  # the window would open a (modal) file dialog
        QTest.keyClick(label, Qt.Key.Key_Tab)  # the first link gets the focus
        QTest.keyClick(label, Qt.Key.Key_Return)
        win.chat_view.blockSignals(False)
        assert activated == ["open"]
    finally:
        close_window(win)


def test_details_and_copy_stay_in_place_when_a_reply_ends(qtbot, window):
    """Edit, Regenerate and ✕ appear when a reply ends: they must not push Details and Copy
    from under the pointer (a click meant for Details regenerated the reply)."""
    _start_endless_reply(qtbot, window)
    reply_w = window.chat_view.messages[-1]
    qtbot.waitUntil(lambda: reply_w.copy_btn.isVisible())
    during = reply_w.copy_btn.mapTo(reply_w, QPoint(0, 0)).x()
    with qtbot.waitSignal(window.engine.generation_finished, timeout=5_000):
        window.chat.stop()
    qtbot.waitUntil(lambda: reply_over(window) and reply_w.regen_btn.isVisible())
    assert reply_w.copy_btn.mapTo(reply_w, QPoint(0, 0)).x() == during


@pytest.mark.qt_log_ignore("This plugin does not support")  # raise(), propagateSizeHints() offscreen
def test_a_model_handed_over_by_a_second_start_shows_the_chat(qtbot, tiny_model):
    from app.ui.window.compose import receive_second_start

    win = make_window(qtbot)
    try:
        win.show_page("models")
        with qtbot.waitSignal(win.engine.model_loaded, timeout=10_000):
            receive_second_start(win, [str(tiny_model)], str(tiny_model.parent))
        assert win.pages.currentIndex() == 0  # the chat, where the model is used
    finally:
        close_window(win)


def test_a_stored_reply_keeps_showing_after_a_reload_against_its_own_n_ctx(qtbot, window, tiny_model):
    """A model (re)load leaves the chat on screen: the Stats panel shows its last stored reply (not
    "No reply yet"), and its context bar is drawn against the n_ctx that reply ran with."""
    from dataclasses import replace as dc_replace

    from tests.support.window import load

    window.engine.script(reply("First", " chat", "."))
    fin = send(qtbot, window, "Chat A, please.")
    window.loader.remember(dc_replace(window.loader.current_load, n_ctx=fin.stats.n_ctx * 2))
    load(qtbot, window, tiny_model)
    window.stats_panel.refresh()
    assert window.stats_panel.phase.text().startswith("✓ Last reply in this chat (stored)")
    assert window.stats_panel.n_ctx == fin.stats.n_ctx * 2  # the loaded model's
    assert window.stats_panel.ctx_bar.n_ctx == fin.stats.n_ctx  # the reply's own
    assert f"/ {fin.stats.n_ctx:,} tokens" in window.stats_panel.ctx_label.text()


def test_a_stored_reply_s_stats_name_its_model_and_keep_its_own_kv_figures_after_another_model_loads(qtbot, window):
    """Issue 20 review (low): after another model loaded, Stats showed the old reply's tokens against the new
    model's KV cache layout ("1.6 MiB used of 72.0 MiB": Gemma's bytes per token for SmolLM2's 91 tokens)."""
    window.engine.script(reply("First", " chat", "."))
    fin = send(qtbot, window, "Chat A, please.")
    window.engine.model_loaded.emit(window.engine.model)  # a model (re)loaded: the live turn ends
    window.stats_panel.set_model(8192, window.stats_panel.layout_kv)  # its n_ctx and KV cache layout
    window.stats_panel.refresh()
    made_by = window.chat.store.get_message(window.chat_view.messages[-1].message_id).meta.model_path
    panel = window.stats_panel
    assert panel.phase.text().startswith("✓ Last reply in this chat (stored)")
    assert panel.phase.text().endswith(f" · written by {made_by.rsplit('/', 1)[-1]}")
    s = fin.stats
    assert s.kv_allocated_bytes > 0
    assert panel.kv_label.text() == (
        f"{format_bytes(s.kv_used_bytes)} used of {format_bytes(s.kv_allocated_bytes)} allocated when this reply was written"
    )
