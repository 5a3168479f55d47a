"""The Funnel panel's window logic on the FakeEngine: when logits are kept, what a slider move
asks for, the step, the order, the bias field. (The real funnel: tests/engine/test_funnel.py;
the real slider-to-repaint latency: tests/ui_model/test_funnel_latency.py.)"""

from __future__ import annotations

import math
from dataclasses import replace

from PySide6.QtWidgets import QDialog

from app.core import protocol as P
from app.core.sampling.params import DEFAULT_ORDER, ORDER_NOTE, SamplerStage
from app.ui.funnel import panel as funnel_panel
from app.ui.funnel.panel import wrappable
from tests.support.fake_engine import reply
from tests.support.window import send


def test_hidden_funnel_keeps_nothing_and_asks_nothing(qtbot, window):
    window.stats_dock.raise_()  # the Funnel tab is behind Stats
    window.engine.script(reply("a", "b"))
    send(qtbot, window, "hi")
    assert window.engine.sent(P.Generate)[-1].keep_logits is False
    window.sampler_panel.rows["temperature"].field.setValue(1.3)
    assert window.engine.sent(P.ComputeFunnel) == []


def test_a_slider_move_re_runs_the_funnel_without_generating(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("one", " two", " three"))
    send(qtbot, window, "count")
    gen = window.engine.sent(P.Generate)[-1]
    assert gen.keep_logits is True
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel is not None, timeout=5000)
    n_generate = len(window.engine.sent(P.Generate))
    before = len(window.funnel.latencies_s)
    temp = window.sampler_panel.rows["temperature"]
    temp.slider.setValue(temp.position(1.5))
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel.settings.temperature == 1.5, timeout=5000)
    asked = window.engine.sent(P.ComputeFunnel)[-1]
    assert asked.reply_id == gen.request_id and asked.sampler.temperature == 1.5 and asked.step == -1
    assert len(window.engine.sent(P.Generate)) == n_generate  # no new generation
    assert len(window.funnel.latencies_s) == before + 1 and window.funnel.latencies_s[-1] > 0
    # Dragging: many moves while one request is out are sent as one when it returns.
    sent_before = len(window.engine.sent(P.ComputeFunnel))
    for v in range(151, 171):
        temp.slider.setValue(temp.position(v / 100))
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel.settings.temperature == 1.7, timeout=5000)
    assert len(window.engine.sent(P.ComputeFunnel)) - sent_before <= 2


def test_any_token_of_the_reply(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c", "d"))
    send(qtbot, window, "letters")
    panel = window.funnel_panel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.view.funnel.step == 3, timeout=5000)
    assert panel.of_label.text() == "of 4" and panel.step_field.value() == 4
    panel.step_field.setValue(2)  # the second token
    qtbot.waitUntil(lambda: panel.view.funnel.step == 1, timeout=5000)
    assert window.engine.sent(P.ComputeFunnel)[-1].step == 1 and not panel.follow.isChecked()
    assert panel.view.funnel.drawn == 101  # the fake's token id for index 1


def test_the_order_is_shown_explained_and_changeable(qtbot, window, monkeypatch):
    panel = window.funnel_panel
    assert panel.order_label.text() == wrappable("penalties→top_k→top_p→min_p→temp→draw")
    assert not panel.note.isHidden() and "top_k, top_p, min_p cut before temperature" in panel.note.text()
    assert panel.note.toolTip() == ORDER_NOTE
    new_order = (SamplerStage.TEMPERATURE, *DEFAULT_ORDER[:-1])

    class Chosen(funnel_panel.OrderDialog):
        def exec(self):
            self._fill(new_order)
            return QDialog.DialogCode.Accepted

    monkeypatch.setattr(funnel_panel, "OrderDialog", Chosen)
    panel.order_button.click()
    assert window.sampler_panel.settings().order == new_order
    assert window.settings.sampler.order == new_order  # saved with the settings
    assert panel.note.isHidden()  # temperature first: nothing surprising to explain
    window.engine.script(reply("x"))
    send(qtbot, window, "go")
    assert window.engine.sent(P.Generate)[-1].sampler.order == new_order  # and so in the reply's provenance


def test_bad_logit_bias_changes_nothing(qtbot, window):
    sp = window.sampler_panel
    before = sp.settings()
    sp.bias_field.setText("13:lots")
    sp.bias_field.editingFinished.emit()
    assert sp.settings() == before and not sp.bias_error.isHidden()
    assert "number or 'ban'" in sp.bias_error.text() and "Nothing was changed" in sp.bias_error.text()
    sp.bias_field.setText("13:ban, 42:+2")
    sp.bias_field.editingFinished.emit()
    assert sp.settings().logit_bias == ((13, -math.inf), (42, 2.0)) and sp.bias_error.isHidden()
    assert window.settings.sampler.logit_bias == sp.settings().logit_bias


def test_new_samplers_have_sliders_with_llama_cpp_off_values(qtbot, window):
    rows = window.sampler_panel.rows
    for name in ("dry_multiplier", "xtc_probability", "top_n_sigma", "dynatemp_range", "mirostat"):
        assert not rows[name].off.isHidden(), name  # off by default, and the badge says so
    rows["temperature"].field.setValue(3.0)  # past 2.0
    assert window.sampler_panel.settings().temperature == 3.0
    window.sampler_panel.apply_preset("DRY+XTC")
    s = window.sampler_panel.settings()
    assert s.dry_multiplier == 0.8 and s.xtc_probability == 0.5 and rows["dry_multiplier"].off.isHidden()
    assert "dry" in window.funnel_panel.order_label.text() and "xtc" in window.funnel_panel.order_label.text()


def test_following_asks_again_when_tokens_arrived_during_a_request(qtbot, window):
    """A funnel answered after more tokens arrived shows an older step: the newest is asked for again."""
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c", "d", "e", "f"))
    send(qtbot, window, "letters")
    ctl = window.funnel
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel is not None and ctl._in_flight is None, timeout=5000)
    shown = window.funnel_panel.view.funnel
    older = replace(shown, step=3, drawn=103)  # what the engine had when asked: 4 tokens
    ctl.n_steps = 6  # two more arrived meanwhile
    ctl._in_flight = -7
    ctl._computed(P.FunnelComputed(-7, older))
    assert window.funnel_panel.view.funnel.step == 3
    before = len(window.engine.sent(P.ComputeFunnel))
    ctl.tick()
    asked = window.engine.sent(P.ComputeFunnel)
    assert len(asked) == before + 1 and asked[-1].step == -1
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel.step == 5, timeout=5000)
