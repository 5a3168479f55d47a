"""The Timeline panel (a reply on the engine's clock, stored with the reply) and the chat template
dialog (the prompt the model sees, the per-model override validated before use), on the FakeEngine."""

from __future__ import annotations

import pytest

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.core.inspection.timeline import PrefillSlice, TurnTimeline
from app.ui.panels.timeline import LIVE_ITEM
from tests.support.fake_engine import reply
from tests.support.window import TINY_TEMPLATE, close_window, load, make_window, send

OVERRIDE = "{% for m in messages %}[{{ m.role }}]{{ m.content }}\n{% endfor %}[assistant]"
BROKEN = "{% for m in messages %}\n{{ m.content | nosuchfilter }}\n{% endfor %}"


def test_a_reply_keeps_its_timeline_and_the_panel_shows_it_after_a_restart(qtbot, window, tiny_model):
    pieces = ("Paris", " is", " the", " capital", ".")
    window.engine.token_s = 0.02
    window.engine.script(reply(*pieces))
    window.timeline_dock.raise_()
    fin = send(qtbot, window, "What is the capital of France?")
    msg = window.chat_view.messages[-1]
    stored = window.conversations.get_message(msg.message_id).meta.timeline
    assert stored is not None
    assert stored.token_pieces == pieces and len(stored.token_times_s) == fin.stats.generated_tokens
    assert stored.ttft_s == pytest.approx(fin.stats.ttft_s)
    assert stored.step_latencies_ms() == pytest.approx([20.0] * 4, abs=1e-3)
    assert sum(s.tokens for s in stored.slices) == fin.stats.evaluated_tokens
    assert (stored.template_s, stored.tokenize_s, stored.reuse_s) == (0.0004, 0.0003, 0.0001)
    assert stored.stop_reason is StopReason.EOS and stored.end_s == pytest.approx(fin.elapsed_s)
    panel = window.timeline_panel
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.token_ids == stored.token_ids, timeout=5000)
    assert panel.picker.currentText().startswith("Reply 1 · Paris is the capital.")
    shown = "\n".join(panel.lines)
    assert "first token (TTFT)" in shown and "decode: 4 steps, median 20.0 ms" in shown
    # Hovering the third step names its token.
    assert panel.hover_at(stored.token_times_s[2] + 0.001) == 3
    assert "token 4 <b>‘·capital’</b>" in panel.hover_label.text() and "20.0 ms step" in panel.hover_label.text()
    conv = window.chat.conversation_id
    close_window(window)
    again = make_window(qtbot)
    try:
        load(qtbot, again, tiny_model)
        again.open_conversation(conv)
        again.timeline_dock.raise_()
        shown = again.timeline_panel.shown
        assert shown is not None and shown.token_pieces == pieces
        assert shown.token_times_s == pytest.approx(stored.token_times_s, abs=1e-6)
    finally:
        close_window(again)


def test_the_panel_follows_the_reply_in_flight_then_the_stored_one(qtbot, window):
    window.engine.script(reply("One", " two"), reply("Three", " four", " five"))
    window.timeline_dock.raise_()
    send(qtbot, window, "First.")
    panel = window.timeline_panel
    started: list = []
    window.engine.generation_started.connect(lambda _rid: started.append(panel.picker.currentData()))
    send(qtbot, window, "Second.")
    assert started == [LIVE_ITEM]  # while it streamed, the reply in flight was followed
    assert [panel.picker.itemText(i).split(" · ")[0] for i in range(panel.picker.count())] == ["Reply 1", "Reply 2"]
    assert panel.shown is not None and panel.shown.token_pieces == ("Three", " four", " five")
    panel.picker.setCurrentIndex(0)
    assert panel.shown.token_pieces == ("One", " two")


def test_slow_steps_stand_out_and_name_their_token(qtbot, window):
    times = (0.4, 0.41, 0.42, 0.47, 0.48, 0.49)
    t = TurnTimeline(
        template_s=0.001,
        tokenize_s=0.0005,
        reuse_s=0.0002,
        prepared_s=0.002,
        prompt_tokens=40,
        cached_tokens=10,
        slices=(PrefillSlice(0.002, 0.3, 29), PrefillSlice(0.3, 0.39, 1)),
        token_times_s=times,
        token_ids=tuple(range(6)),
        token_pieces=("A", " b", " c", " slow", " d", "."),
        end_s=0.5,
        stop_reason=StopReason.EOS,
    )
    panel = window.timeline_panel
    panel.set_replies([(7, "Reply 1", t)], live=False)
    shown = "\n".join(panel.lines)
    assert panel.shown is t and "1 slow (> 2× median)" in shown and "&gt;" in panel.details.toHtml()
    assert "slowest 50.0 ms (token 4 ‘·slow’)" in shown
    assert "  slice 1: 29 tokens" in shown and "  slice 2: 1 tokens" in shown
    assert panel.hover_at(0.45) == 3 and "— slow" in panel.hover_label.text()
    assert panel.hover_at(0.475) == 4 and "slow" not in panel.hover_label.text()
    assert panel.hover_at(0.1) is None  # prefill, not a decode step
    panel.set_replies([(8, "Reply 1", None)], live=False)
    assert panel.shown is None and "no timeline" in panel.picker.currentText()


def _dialog(qtbot, window):
    dialog = window.show_template()
    assert dialog is not None
    qtbot.waitUntil(lambda: dialog.rendered is not None, timeout=5000)
    return dialog


def test_the_template_dialog_shows_the_prompt_tokens_and_the_template_source(qtbot, window):
    window.engine.script(reply("Hi", "!"))
    send(qtbot, window, "Hello there")
    dialog = _dialog(qtbot, window)
    try:
        assert dialog.editor.toPlainText() == TINY_TEMPLATE
        ev = dialog.rendered
        assert ev.source is P.TemplateSource.GGUF and not ev.sample
        assert "<|user|>Hello there" in ev.text and "<|assistant|>Hi!" in ev.text
        assert "the GGUF's chat template" in dialog.tokens_label.text()
        html = dialog.prompt_view.toHtml()
        assert "&lt;|user|&gt;" in html and "Hello" in html
        dialog.sample.setChecked(True)
        qtbot.waitUntil(lambda: dialog.rendered.sample, timeout=5000)
        assert "What is the capital of France?" in dialog.rendered.text
    finally:
        dialog.close()


def test_a_broken_override_names_its_line_and_changes_nothing(qtbot, window, tiny_model):
    dialog = _dialog(qtbot, window)
    try:
        before = window.settings_ctl.settings
        dialog.editor.setPlainText(BROKEN)
        dialog.use_button.click()
        qtbot.waitUntil(lambda: "Not used, nothing was changed" in dialog.error.text(), timeout=5000)
        assert "line 2" in dialog.error.text()
        assert dialog.editor.textCursor().blockNumber() == 1  # the cursor is put on line 2
        assert window.settings_ctl.settings == before
        assert window.settings_ctl.settings.chat_template_for(str(tiny_model)) is None
    finally:
        dialog.close()


def test_an_override_is_kept_for_the_model_sent_with_each_reply_and_reset(qtbot, window, tiny_model):
    path = str(tiny_model)
    dialog = _dialog(qtbot, window)
    sent: list = []
    window.engine.request_sent.connect(sent.append)
    try:
        dialog.editor.setPlainText(OVERRIDE)
        dialog.use_button.click()
        qtbot.waitUntil(lambda: window.settings_ctl.settings.chat_template_for(path) == OVERRIDE, timeout=5000)
        assert "your chat template" in dialog.source_label.text() and dialog.reset_button.isEnabled()
        # The check ran on the sample conversation, with the override.
        checks = [r for r in sent if isinstance(r, P.RenderPrompt) and r.chat_template == OVERRIDE and not r.messages]
        assert checks
        qtbot.waitUntil(lambda: dialog.rendered.source is P.TemplateSource.OVERRIDE, timeout=5000)
        window.engine.script(reply("Ok", "."))
        send(qtbot, window, "Use it.")
        gen = [r for r in sent if isinstance(r, P.Generate)]
        assert gen[-1].chat_template == OVERRIDE
        meta = window.conversations.get_message(window.chat_view.messages[-1].message_id).meta
        assert meta.chat_template == OVERRIDE
        assert "chat template: your override" in window.chat_view.messages[-1].how_made
        dialog.reset_button.click()
        assert window.settings_ctl.settings.chat_template_for(path) is None
        assert dialog.editor.toPlainText() == TINY_TEMPLATE and not dialog.reset_button.isEnabled()
        window.engine.script(reply("Back", "."))
        send(qtbot, window, "And now?")
        assert [r for r in sent if isinstance(r, P.Generate)][-1].chat_template is None
    finally:
        dialog.close()


def test_the_model_panels_template_link_opens_the_same_dialog(qtbot, window):
    from app.ui.panels.template import TemplateDialog

    button = window.model_panel.template_btn
    assert button.isVisibleTo(window.model_panel)  # shown for any loaded model (an override is set there)
    button.click()
    (dialog,) = window.findChildren(TemplateDialog)
    try:
        qtbot.waitUntil(lambda: dialog.rendered is not None, timeout=5000)
        assert dialog.editor.toPlainText() == TINY_TEMPLATE
    finally:
        dialog.close()


def test_the_step_lane_draws_every_step_and_marks_the_slow_ones(window):
    """The steps are two filled step curves over the token times (one item each, whatever the
    reply's length): each step as tall as its latency, the slow one (over 2x the median) in the
    red curve only."""
    times = (*(0.1 + 0.01 * i for i in range(300)), 3.2)  # 299 steps of 10 ms, then one of 110 ms
    t = TurnTimeline(prepared_s=0.05, token_times_s=times, token_ids=tuple(range(301)), token_pieces=("x",) * 301)
    panel = window.timeline_panel
    items_before = len(panel.steps.items)
    panel._draw(t)
    panel._draw(t)  # drawn again (the live redraw): no item added
    assert len(panel.steps.items) == items_before
    x, y = panel.step_curve.getData()
    _sx, sy = panel.slow_curve.getData()
    assert len(x) == 301 and len(y) == 300
    assert y[:299] == pytest.approx([10.0] * 299, abs=1e-6) and y[299] == 0.0
    assert sy[299] == pytest.approx(110.0, abs=1e-6)
    assert not sy[:299].any() and panel.slow_curve.isVisible()
    assert panel.median_line.value() == pytest.approx(10.0)
