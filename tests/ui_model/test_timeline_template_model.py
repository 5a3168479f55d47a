"""The Timeline panel and the chat template override with the real engine: SmolLM2's timeline
on the engine's clock; a Gemma 3 override (its test GGUF has no template) used by the reply."""

from __future__ import annotations

from dataclasses import replace

from app.core.chat.context import StopReason
from tests.engine.test_chat_template import GEMMA_TEMPLATE
from tests.support.window import WindowEngine, close_window, load, make_window, send


def test_a_real_reply_keeps_its_timeline(qtbot, window):
    window.timeline_dock.raise_()
    fin = send(qtbot, window, "Name three colours.")
    meta = window.conversations.get_message(window.chat_view.messages[-1].message_id).meta
    t = meta.timeline
    assert t is not None
    assert len(t.token_times_s) == fin.stats.generated_tokens
    assert abs(t.ttft_s - fin.stats.ttft_s) < 1e-6
    assert sum(s.tokens for s in t.slices if not s.rebuild) == fin.stats.evaluated_tokens
    assert t.template_s > 0 and t.tokenize_s > 0 and t.prepared_s < t.slices[0].end_s <= t.ttft_s
    assert t.token_times_s == tuple(sorted(t.token_times_s)) and t.end_s >= t.token_times_s[-1]
    assert t.stop_reason is StopReason(fin.stats.stop_reason)
    # decode_s spans first to last token, as the engine counts it
    assert abs((t.token_times_s[-1] - t.token_times_s[0]) - fin.stats.decode_s) < 1e-6
    panel = window.timeline_panel
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.token_ids == t.token_ids, timeout=5000)
    assert f"decode: {len(t.token_times_s) - 1} steps" in "\n".join(panel.lines)


def test_a_gemma_override_is_checked_kept_and_used_by_the_reply(qtbot, gemma):
    win = make_window(qtbot, WindowEngine.REAL)
    try:
        load(qtbot, win, gemma)
        dialog = win.show_template()
        assert dialog is not None
        qtbot.waitUntil(lambda: dialog.rendered is not None, timeout=30_000)
        assert "no chat template" in dialog.source_label.text() and "User:" in dialog.rendered.text
        dialog.editor.setPlainText(GEMMA_TEMPLATE)
        dialog.use_button.click()
        path = win.engine.model.info.path
        qtbot.waitUntil(lambda: win.settings_ctl.settings.chat_template_for(path) == GEMMA_TEMPLATE, timeout=30_000)
        qtbot.waitUntil(lambda: "<start_of_turn>" in dialog.rendered.text, timeout=30_000)
        assert any(p.special and p.text == "<start_of_turn>" for p in dialog.rendered.pieces)
        dialog.close()
        win.sampler_panel.set_settings(replace(win.sampler_panel.settings(), temperature=0.0, max_tokens=8), emit=True)
        send(qtbot, win, "What is the capital of France?", timeout=60_000)
        prompt = win.turn.prompt
        assert prompt is not None and prompt.prompt_text.startswith("<bos><start_of_turn>user\n")
        assert prompt.prompt_text.endswith("What is the capital of France?<end_of_turn>\n<start_of_turn>model\n")
        meta = win.conversations.get_message(win.chat_view.messages[-1].message_id).meta
        assert meta.chat_template == GEMMA_TEMPLATE
    finally:
        close_window(win)
