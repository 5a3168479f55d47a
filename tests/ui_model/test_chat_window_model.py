"""The window on the real model: chat, live stats, sampler, Stop, errors, crash, settings."""

from __future__ import annotations

import os
import signal
from dataclasses import replace

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from app.core import protocol as P
from app.core.chat import StopReason
from app.ui.chat.view import CodeBlock, MessageWidget
from tests.ui.conftest import load, make_window, send


def test_a_message_gets_a_streamed_reply_and_live_stats(qtbot, window):
    tokens: list = []
    window.engine.token_received.connect(tokens.append)
    fin = send(qtbot, window, "Say hello to me in one short sentence.")
    assert isinstance(fin, P.Finished) and fin.text.strip()
    msgs = window.chat_view.messages
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].text == fin.text
    assert len(tokens) >= 2, "the reply was not streamed token by token"
    # Stats panel: non-zero TTFT and tok/s, from the engine's clock
    ttft = window.stats_panel.tiles["ttft"][0].text()
    decode = window.stats_panel.tiles["decode"][0].text()
    assert ttft.endswith("ms") and float(ttft.split()[0].replace(",", "")) > 0
    assert decode.endswith("tok/s") and float(decode.split()[0].replace(",", "")) > 0
    assert fin.stats.decode_tok_s > 0 and fin.stats.ttft_s > 0
    assert "tok/s" in msgs[1].footer.text() and "TTFT" in msgs[1].footer.text()
    cached, evaluated, generated = window.stats_panel.ctx_bar.parts
    assert evaluated == fin.stats.evaluated_tokens and generated > 0
    assert "reused" in window.stats_panel.ctx_label.text()
    # Tokens panel shows the chat template's special tokens and the generated tokens.
    html = window.tokens_panel.view.toPlainText()
    assert "<|im_start|>" in html
    # The sampler panel shows the candidates of the last token.
    assert window.sampler_panel.bars.rows
    assert "seed used by the last reply: " + str(fin.stats.seed) == window.sampler_panel.seed_used.text()


def test_a_slider_change_reaches_the_next_request(qtbot, window):
    sent: list = []
    real_send = window.engine._send
    window.engine._send = lambda req: (sent.append(req), real_send(req))[1]
    panel = window.sampler_panel
    panel.rows["temperature"].slider.setValue(0)  # temperature 0 (greedy)
    panel.rows["top_k"].field.setValue(0)  # top_k off
    panel.rows["max_tokens"].field.setValue(12)
    send(qtbot, window, "Name a fruit.")
    gen = [r for r in sent if isinstance(r, P.Generate)][-1]
    assert gen.sampler.temperature == 0.0 and gen.sampler.top_k == 0 and gen.sampler.max_tokens == 12
    assert gen.messages[0].role == "system" and gen.messages[-1].content == "Name a fruit."
    # Greedy: the preview keeps exactly one candidate.
    assert sum(r.kept for r in panel.bars.rows) == 1
    # A preset applies to the next reply too.
    panel.apply_preset("Creative")
    send(qtbot, window, "Another fruit?")
    gen2 = [r for r in sent if isinstance(r, P.Generate)][-1]
    assert gen2.sampler.temperature == 1.1 and gen2.sampler.max_tokens == 12


def _start_runaway_reply(qtbot, window, run_ms: int):
    """Send a prompt that runs on (no max_tokens), and let it stream for ``run_ms``."""
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), max_tokens=-1, temperature=0.0, repeat_penalty=1.0), emit=True)
    box = window.composer.box
    qtbot.keyClicks(box, "Write the numbers from 1 to 3000, one per line.")
    with qtbot.waitSignal(window.engine.token_received, timeout=60_000):
        qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.wait(run_ms)
    return panel, box


def test_escape_stops_the_reply_within_a_second(qtbot, window):
    import time

    panel, box = _start_runaway_reply(qtbot, window, 800)
    assert window.composer.button.text() == "Stop"
    t0 = time.monotonic()
    with qtbot.waitSignal(window.engine.generation_finished, timeout=3000) as blocker:
        qtbot.keyClick(box, Qt.Key.Key_Escape)
    assert time.monotonic() - t0 < 1.0
    fin = blocker.args[0]
    assert fin.stats.stop_reason == StopReason.CANCELLED.value
    reply = window.chat_view.messages[-1]
    qtbot.wait(60)
    assert reply.text == fin.text and fin.text.strip()
    assert reply.badge.text() == "stopped" and reply.badge.isVisible()
    assert window.composer.button.text() == "Send"
    # The box works again.
    panel.set_settings(replace(panel.settings(), max_tokens=16), emit=True)
    fin2 = send(qtbot, window, "Hi")
    assert fin2.stats.stop_reason != StopReason.CANCELLED.value


def test_a_file_that_is_not_a_model_gives_one_clear_message(qtbot, window, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("shopping list: eggs, milk\n")
    assert window.load_model(str(bad)) is False
    assert window.banner.isVisible()
    assert "notes.gguf" in window.banner.text.text() and "not a GGUF model" in window.banner.text.text()
    # The loaded model is untouched and still answers.
    assert window.engine.model is not None
    fin = send(qtbot, window, "Say yes.")
    assert fin.text.strip()


def test_dropping_a_gguf_loads_it(qtbot, window, smollm2):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(smollm2))])
    ev = QDropEvent(
        QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    with qtbot.waitSignal(window.engine.model_loaded, timeout=60_000):
        window.dropEvent(ev)
    assert window.engine.model.info.path == str(smollm2.resolve())


def test_engine_crash_keeps_the_conversation_and_restarts(qtbot, window):
    panel, box = _start_runaway_reply(qtbot, window, 500)
    assert window.engine.generating
    pid = window.engine._host.process.pid
    with qtbot.waitSignal(window.engine.engine_crashed, timeout=10_000):
        os.kill(pid, signal.SIGKILL)
    qtbot.wait(60)
    msgs = window.chat_view.messages
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].text.strip(), "the partial reply was lost"
    assert msgs[1].badge.text() == "engine stopped"
    text = window.banner.text.text()
    assert "SIGKILL" in text and "conversation is kept" in text
    # The banner's button restarts the engine and reloads the model; chatting goes on.
    buttons = [window.banner._actions.itemAt(i).widget() for i in range(window.banner._actions.count())]
    restart = next(b for b in buttons if b.text() == "Restart engine")
    with qtbot.waitSignal(window.engine.model_loaded, timeout=60_000):
        restart.click()
    panel.set_settings(replace(panel.settings(), max_tokens=16), emit=True)
    fin = send(qtbot, window, "Hello again.")
    assert fin.text.strip()
    assert len(window.chat_view.messages) == 4


def test_new_chat_empties_the_view_and_the_context(qtbot, window):
    send(qtbot, window, "My name is Zanzibar.")
    window.new_chat()
    assert window.chat_view.messages == []
    fin = send(qtbot, window, "Hello.")
    assert fin.stats.cached_tokens == 0


def test_settings_survive_a_restart(qtbot, smollm2):
    win = make_window(qtbot)
    load(qtbot, win, smollm2)
    win.sampler_panel.rows["temperature"].field.setValue(0.35)
    win.sampler_panel.seed_fixed.setChecked(True)
    win.sampler_panel.seed_field.setValue(777)
    win.system_bar.set_text("Answer in French.")
    win.model_panel.n_ctx.setValue(2048)
    win.model_panel.policy.setCurrentIndex(1)
    win.close()
    win.conversations.close()
    win2 = make_window(qtbot)
    try:
        s = win2.sampler_panel.settings()
        assert s.temperature == 0.35 and s.seed == 777
        assert win2.system_bar.text() == "Answer in French."
        assert win2.model_panel.load_settings().n_ctx == 2048
        assert win2.model_panel.load_settings().context_policy == "rolling"
        assert win2.settings.recent_models[0] == str(smollm2.resolve())
    finally:
        win2.close()
        win2.conversations.close()


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


def test_e4_a_message_longer_than_the_context_is_given_back_and_the_next_works(qtbot, smollm2):
    from app.core.chat import LoadSettings

    win = make_window(qtbot)
    try:
        with qtbot.waitSignal(win.engine.model_loaded, timeout=60_000):
            win.load_model(str(smollm2), LoadSettings(n_ctx=512))
        panel = win.sampler_panel
        panel.set_settings(replace(panel.settings(), max_tokens=12, temperature=0.0), emit=True)
        long_msg = " ".join(f"word{i}" for i in range(350))
        box = win.composer.box
        box.setPlainText(long_msg)
        with qtbot.waitSignal(win.engine.generation_failed, timeout=60_000):
            qtbot.keyClick(box, Qt.Key.Key_Return)
        qtbot.wait(30)
        text = win.banner.text.text()
        assert "512" in text and "n_ctx" in text and "Raise n_ctx" in text
        assert box.toPlainText() == long_msg  # nothing lost
        assert win.chat_view.messages == []
        box.clear()
        fin = send(qtbot, win, "Say hi.")
        assert isinstance(fin, P.Finished) and fin.text.strip()
        assert [m.role for m in win.chat_view.messages] == ["user", "assistant"]
    finally:
        win.close()
        win.conversations.close()


def test_engine_dying_while_loading_is_not_restarted_into_the_same_crash(qtbot, smollm2):
    win = make_window(qtbot)
    try:
        with qtbot.waitSignal(win.engine.engine_ready, timeout=60_000):
            pass
        with qtbot.waitSignal(win.engine.engine_crashed, timeout=10_000):
            win.load_model(str(smollm2))
            os.kill(win.engine._host.process.pid, signal.SIGKILL)
        text = win.banner.text.text()
        assert "SIGKILL" in text and "while loading" in text and smollm2.name in text
        with qtbot.waitSignal(win.engine.engine_ready, timeout=60_000):
            win.restart_engine()
        qtbot.wait(200)
        assert win.engine.model is None and win.engine.state.value == "no model"
    finally:
        win.close()
        win.conversations.close()


def test_e5_context_policy_applies_to_the_next_reply_without_a_reload(qtbot, smollm2):
    from app.core.chat import LoadSettings

    win = make_window(qtbot)
    try:
        with qtbot.waitSignal(win.engine.model_loaded, timeout=60_000):
            win.load_model(str(smollm2), LoadSettings(n_ctx=256, context_policy="stop"))
        panel = win.sampler_panel
        panel.set_settings(replace(panel.settings(), max_tokens=-1, temperature=0.0, repeat_penalty=1.0), emit=True)
        fin = send(qtbot, win, "Tell me a very long story about a dragon and a knight.")
        assert fin.stats.stop_reason == StopReason.CONTEXT_FULL.value
        reply = win.chat_view.messages[-1]
        assert reply.badge.text() == "context full" and reply.text == fin.text
        assert "context is full" in win.banner.text.text()
        # Stop policy: the conversation no longer fits, so the next message is refused...
        box = win.composer.box
        box.setPlainText("Go on.")
        with qtbot.waitSignal(win.engine.generation_failed, timeout=60_000):
            qtbot.keyClick(box, Qt.Key.Key_Return)
        assert box.toPlainText() == "Go on."
        # ...until the policy changes; no reload is needed.
        loads: list = []
        win.engine.model_loaded.connect(loads.append)
        win.model_panel.policy.setCurrentIndex(win.model_panel.policy.findData("rolling"))
        assert not win.model_panel.apply_btn.property("pending")
        panel.set_settings(replace(panel.settings(), max_tokens=16), emit=True)
        box.clear()
        fin2 = send(qtbot, win, "Go on.")
        assert isinstance(fin2, P.Finished) and fin2.stats.dropped_messages >= 1
        assert loads == []
        assert win.settings.load.context_policy == "rolling"
    finally:
        win.close()
        win.conversations.close()


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
        reply = view.add_message("assistant", "", message_id=2 * i + 2)
        reply.set_text("\n\n".join([para] * 8))
        view.refresh()
        qtbot.wait(20)
    qtbot.wait(50)
    inner, last = view.widget(), view.messages[-1]
    assert inner.height() - last.geometry().bottom() < 40
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum()  # following the newest text, which is on screen
    assert last.geometry().bottom() - bar.value() <= view.viewport().height() + 40


def test_long_panel_texts_never_force_the_window_wider(qtbot, window):
    send(qtbot, window, "Write one sentence about the sea.")
    window.tokens_panel.refresh()
    window.stats_panel.refresh()
    qtbot.wait(50)
    # Fits a 1366-pixel-wide laptop screen with room to spare.
    assert window.minimumSizeHint().width() <= 1300, window.minimumSizeHint()


def test_the_token_inspector_is_only_asked_for_while_it_is_shown(qtbot, window):
    sent: list = []
    real = window.engine._send
    window.engine._send = lambda req: (sent.append(req), real(req))[1]
    send(qtbot, window, "Hi.")
    assert [r for r in sent if isinstance(r, P.Generate)][-1].top_candidates == 20
    window.sampler_dock.hide()
    window.tokens_dock.hide()
    send(qtbot, window, "Hi again.")
    assert [r for r in sent if isinstance(r, P.Generate)][-1].top_candidates == 0
