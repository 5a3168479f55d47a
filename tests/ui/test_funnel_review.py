"""The Funnel panel after a new user's review on the FakeEngine: what-if or as drawn, the
token count of a stored reply, the empty state, following the branch shown, the "newest" box."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.sampling.funnel import Funnel, FunnelStage, FunnelStageKind
from app.core.sampling.params import SamplerSettings
from app.ui.common import palette
from app.ui.funnel.panel import AS_DRAWN, LEGEND, WHAT_IF, visible_token, wrappable
from tests.support.fake_engine import reply
from tests.support.window import send


def _reply_id(window) -> int:
    return next(w for w in reversed(window.chat_view.messages) if w.role is Role.ASSISTANT).message_id


def test_the_header_says_as_drawn_or_what_if_and_the_reply_settings_come_back(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c"))
    send(qtbot, window, "letters")
    panel = window.funnel_panel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and window.funnel._in_flight is None, timeout=5000)
    assert panel.mode_label.text() == AS_DRAWN and panel.own_button.isHidden()
    assert "order llama.cpp ran them" not in panel.view.toolTip() or "what-if" in panel.view.toolTip()
    assert panel.view.toolTip() == LEGEND and "▶ = the token the reply drew" in LEGEND
    assert "green bar in the draw column" in LEGEND
    drawn_with = window.engine.sent(P.Generate)[-1].sampler
    window.sampler_panel.rows["temperature"].field.setValue(1.6)
    qtbot.waitUntil(lambda: panel.view.funnel.settings.temperature == 1.6, timeout=5000)
    assert panel.mode_label.text() == WHAT_IF and not panel.own_button.isHidden()
    panel.own_button.click()
    qtbot.waitUntil(lambda: panel.view.funnel.settings.temperature == drawn_with.temperature, timeout=5000)
    assert panel.mode_label.text() == AS_DRAWN and panel.own_button.isHidden()
    assert window.sampler_panel.settings().temperature == 1.6  # the Sampler panel keeps its own
    assert window.engine.sent(P.ComputeFunnel)[-1].sampler.temperature == drawn_with.temperature


def test_a_stored_reply_counts_all_its_tokens_and_any_can_be_chosen(qtbot, window):
    window.engine.script(reply("a", "b", "c", "d", "e"), reply("x", "y"))
    send(qtbot, window, "first")
    first = _reply_id(window)
    send(qtbot, window, "second")  # the engine keeps the second reply's logits: the first is stored only
    window.chat.open_token_funnel(first, 1)
    panel = window.funnel_panel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.view.funnel.step == 1, timeout=5000)
    assert panel.of_label.text() == "of 5" and panel.step_field.maximum() == 5
    assert "candidates stored with the reply" in panel.status.text()  # never taken for the chain's own figures
    panel.step_field.setValue(4)
    qtbot.waitUntil(lambda: panel.view.funnel.step == 3, timeout=5000)
    asked = window.engine.sent(P.ComputeFunnel)[-1]
    assert asked.stored is not None and (asked.stored.reply_id, asked.stored.step) == (first, 3)
    assert panel.view.funnel.drawn == 103 and panel.of_label.text() == "of 5"


def test_a_reply_made_with_the_panel_hidden_shows_its_last_token_when_the_panel_is_shown(qtbot, window):
    window.stats_dock.raise_()  # the Funnel tab is behind Stats
    window.engine.script(reply("a", "b", "c", "d"))
    send(qtbot, window, "letters")
    assert window.engine.sent(P.ComputeFunnel) == []
    window.funnel_dock.raise_()
    panel = window.funnel_panel
    qtbot.waitUntil(lambda: panel.view.funnel is not None, timeout=5000)
    assert panel.view.funnel.step == 3 and panel.of_label.text() == "of 4" and panel.step_field.value() == 4
    assert "Send a message with this panel open" not in panel.view.message


def test_the_funnel_follows_the_branch_shown(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("One", " two", " three", " four"), reply(" five", " six"))
    send(qtbot, window, "count")
    old = _reply_id(window)
    window.chat.open_token_funnel(old, 1)
    ctl, panel = window.funnel, window.funnel_panel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.view.funnel.step == 1, timeout=5000)
    assert window.chat.branch_from_alternative(old, 2, 7)
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=5000)
    new = _reply_id(window)
    assert new != old
    # The new branch streams: its newest token (the engine counts the request's own 2 tokens).
    # (Until its first funnel comes, the panel says no reply: the old branch's token is off the path.)
    qtbot.waitUntil(
        lambda: (
            panel.view.funnel is not None and (panel.view.funnel.reply_id, panel.view.funnel.step) == (ctl.reply_id, 1)
        ),
        timeout=5000,
    )
    assert ctl.stored is None and panel.follow.isChecked()
    # Counted as the reply's tokens (3 from the prefix, then the branch's 2), as the Tokens panel counts them.
    assert panel.of_label.text() == "of 5" and panel.step_field.value() == 5
    window.chat.switch_branch(old)  # back to the first branch: its last token, from its stored candidates
    qtbot.waitUntil(lambda: ctl.stored is not None and panel.view.funnel.reply_id == old, timeout=5000)
    assert ctl.message_id == old and panel.view.funnel.step == 3 and panel.of_label.text() == "of 4"


def test_newest_is_unticked_when_a_token_is_picked_and_ticking_goes_back(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c", "d"))
    send(qtbot, window, "letters")
    panel = window.funnel_panel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.view.funnel.step == 3, timeout=5000)
    assert panel.follow.isChecked()
    window.chat.open_token_funnel(_reply_id(window), 1)  # a click on the reply's second token
    qtbot.waitUntil(lambda: panel.view.funnel.step == 1, timeout=5000)
    assert not panel.follow.isChecked()
    panel.follow.setChecked(True)
    qtbot.waitUntil(lambda: panel.view.funnel.step == 3, timeout=5000)
    assert panel.step_field.value() == 4


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # the tooltip at the field, offscreen
def test_a_value_out_of_range_is_refused_with_a_message_and_changes_nothing(qtbot, window):
    sp = window.sampler_panel
    before = sp.settings()
    field = sp.rows["temperature"].field
    for typed, shown in (("30", "30"), ("7", "7")):
        field.lineEdit().setText(typed)
        field.interpretText()  # what Enter does (the field tracks no keystrokes)
        assert sp.settings() == before and not sp.value_error.isHidden()
        msg = sp.value_error.text()
        assert f"temperature {shown} is out of range" in msg and "between 0 and 5" in msg
        assert "Nothing was changed" in msg and field.value() == before.temperature
    field.stepBy(1000)  # the arrows stay within the range
    assert field.value() == 5.0 and sp.settings().temperature == 5.0 and sp.value_error.isHidden()
    k = sp.rows["top_k"].field
    k.lineEdit().setText("500")
    k.interpretText()
    assert "top_k 500 is out of range: it must be between 0 and 200" in sp.value_error.text()
    assert sp.settings().top_k == before.top_k


def test_a_logit_bias_beyond_the_vocabulary_is_refused(qtbot, window):
    sp = window.sampler_panel
    n_vocab = window.engine.model.info.n_vocab
    assert sp.n_vocab == n_vocab > 0
    before = sp.settings()
    sp.bias_field.setText("99999999:ban")
    sp.bias_field.editingFinished.emit()
    assert sp.settings() == before and not sp.bias_error.isHidden()
    msg = sp.bias_error.text()
    assert "99999999" in msg and f"ids 0 to {n_vocab - 1:,}" in msg and "Nothing was changed" in msg
    sp.bias_field.setText(f"{n_vocab - 1}:ban")
    sp.bias_field.editingFinished.emit()
    assert sp.settings().logit_bias == ((n_vocab - 1, float("-inf")),) and sp.bias_error.isHidden()


def test_mirostat_greys_out_the_stages_it_replaces(qtbot, window):
    rows = window.sampler_panel.rows
    assert all(rows[n].slider.isEnabled() for n in ("top_k", "top_p", "min_p"))
    rows["mirostat"].field.setValue(2)
    for name in ("top_k", "top_p", "min_p", "typical_p", "xtc_probability", "dry_multiplier", "repeat_penalty"):
        r = rows[name]
        assert not r.slider.isEnabled() and not r.field.isEnabled(), name
        assert "mirostat" in r.slider.toolTip() and "does not run" in r.field.toolTip()
    for name in ("temperature", "mirostat_tau", "mirostat_eta", "max_tokens"):
        assert rows[name].slider.isEnabled(), name
    assert window.funnel_panel.order_label.text() == wrappable("temp→mirostat 2")
    rows["mirostat"].field.setValue(0)
    assert rows["top_p"].slider.isEnabled() and rows["top_p"].slider.toolTip() == rows["top_p"].slider_help
    assert rows["top_p"].slider_help.startswith(rows["top_p"].spec.help) and rows["top_p"].field.isEnabled()


def _funnel(*stages: tuple[FunnelStageKind, int]):
    return Funnel(
        1,
        0,
        ((5, "a"), (6, "b")),
        tuple(FunnelStage(k, (1.0, 0.0), n, 0.0, 0.0, 5 if k.is_draw else -1) for k, n in stages),
        5,
        SamplerSettings(),
        1,
        100,
        True,
        0.001,
    )


def test_the_note_says_why_temperature_can_do_nothing_and_names_only_stages_that_cut(qtbot, window):
    panel = window.funnel_panel
    m, k, p, min_p, xtc, t, d = (
        FunnelStageKind.MODEL,
        FunnelStageKind.TOP_K,
        FunnelStageKind.TOP_P,
        FunnelStageKind.MIN_P,
        FunnelStageKind.XTC,
        FunnelStageKind.TEMPERATURE,
        FunnelStageKind.DIST,
    )
    panel.show_funnel(_funnel((m, 100), (k, 40), (p, 26), (min_p, 1), (t, 1), (d, 1)), True)
    assert panel.note.text() == "only 1 token survived min_p: temperature has nothing to reshape."
    panel.show_funnel(_funnel((m, 100), (k, 40), (p, 40), (xtc, 40), (t, 40), (d, 40)), True)
    assert panel.note.text() == "top_k cut before temperature: it only reshapes the survivors."
    assert "xtc" not in panel.note.text() and "top_p" not in panel.note.text()
    panel.show_funnel(_funnel((m, 100), (k, 100), (t, 100), (d, 100)), True)
    assert panel.note.isHidden()


def test_by_entropy_recolours_the_chat_token_view_with_the_tokens_panel(qtbot, window):
    window.engine.script(reply("a", "b", "c", "d"))
    send(qtbot, window, "go")
    w = next(w for w in reversed(window.chat_view.messages) if w.role is Role.ASSISTANT)
    w.tokens_btn.click()
    before = w.token_text.text().replace(" ", "")
    assert f"background-color:{palette.PROB_BG[1]}" in before  # by probability (~63 %)
    window.tokens_panel.by_entropy.setChecked(True)
    after = w.token_text.text().replace(" ", "")
    assert f"background-color:{palette.PROB_BG[0]}" in after and f"background-color:{palette.PROB_BG[1]}" not in after


def test_the_timeline_counts_a_branch_s_tokens_as_the_tokens_panel_does(qtbot, window):
    window.engine.token_s = 0.02
    window.engine.script(reply("One", " two", " three", " four"), reply(" five", " six"))
    window.timeline_dock.raise_()
    send(qtbot, window, "count")
    old = _reply_id(window)
    assert window.chat.branch_from_alternative(old, 2, 7)  # the reply's tokens 1-3 are the prefix
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=5000)
    new = _reply_id(window)
    alts = window.chat.store.alternatives(new)
    assert alts.view(4).text == " six"  # the Tokens panel's token 5
    stored = window.conversations.get_message(new).meta.timeline
    assert stored is not None and stored.first_token == 3 and stored.token_pieces == (" five", " six")
    panel = window.timeline_panel
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.token_ids == stored.token_ids, timeout=5000)
    assert panel.hover_at(stored.token_times_s[1] - 0.001) == 1
    assert "token 5 <b>‘·six’</b>" in panel.hover_label.text()


def test_a_branch_s_prefix_token_is_shown_from_its_stored_candidates(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("One", " two", " three", " four"), reply(" five", " six"))
    send(qtbot, window, "count")
    assert window.chat.branch_from_alternative(_reply_id(window), 2, 7)
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=5000)
    new, ctl, panel = _reply_id(window), window.funnel, window.funnel_panel

    def newest_shown() -> None:  # assert-style: a timeout names what the panel and the controller held
        state = (panel.step_field.value(), panel.of_label.text(), ctl._in_flight, ctl.reply_id, ctl.n_steps)
        assert state[:3] == (5, "of 5", None), (state, new, ctl.offset, ctl._last_shown)

    qtbot.waitUntil(newest_shown, timeout=5000)
    panel.step_field.setValue(4)  # the branch's first own token: the engine's step 0
    qtbot.waitUntil(lambda: panel.view.funnel.step == 0 and ctl.stored is None, timeout=5000)
    assert window.engine.sent(P.ComputeFunnel)[-1].step == 0 and panel.step_field.value() == 4
    panel.step_field.setValue(2)  # in the prefix: the stored candidates
    qtbot.waitUntil(lambda: ctl.stored is not None and panel.view.funnel.step == 1, timeout=5000)
    assert ctl.stored.reply_id == new and panel.of_label.text() == "of 5" and panel.step_field.value() == 2


def test_one_space_marker_everywhere():
    """One marker for white space in every panel; where a token sits among other text (chips, cells,
    menus) it is also isolated (FSI…PDI: a right-to-left token keeps its place)."""
    from app.ui.common import token_alts
    from app.ui.common.token_label import isolate
    from app.ui.funnel import panel as funnel
    from app.ui.inspect import panel as inspect
    from app.ui.panels import timeline, tokens

    piece = " a\tb\n"
    want = "·a→b⏎"
    assert timeline.piece_text(piece) == want
    assert funnel.visible_token(piece) == isolate(want) and token_alts.visible(piece) == isolate(want)
    assert tokens._chip_text(piece) == isolate(want) and inspect._strip_text(piece) == isolate(want)
    assert token_alts.menu_text(" &") == isolate("·&&")
    assert funnel.visible_token("") == isolate("∅") and token_alts.visible("<b>") == isolate("&lt;b&gt;")


def test_the_temperature_slider_gives_most_of_its_track_to_0_to_2(qtbot, window):
    row = window.sampler_panel.rows["temperature"]
    s = row.slider
    assert row.position(2.0) == round(0.8 * s.maximum()) and row.position(5.0) == s.maximum()
    for v in (0.0, 0.05, 0.8, 1.37, 2.0, 3.33, 5.0):
        assert row.value_at(row.position(v)) == pytest.approx(v, abs=0.01)
    # The reviewer's drag: 40 px of a 90 px track from 0.80 (was 0.80 -> 3.33).
    s.setValue(row.position(0.8) + round(40 / 90 * s.maximum()))
    assert 1.5 < window.sampler_panel.settings().temperature < 2.0
    s.setValue(s.maximum())
    assert window.sampler_panel.settings().temperature == 5.0  # still reaches 5
    row.field.setValue(1.23)  # the exact field is unchanged
    assert window.sampler_panel.settings().temperature == 1.23 and row.value_at(s.value()) == 1.23


def test_narrow_panels_keep_the_chain_headers_and_dry_fields_readable(qtbot, window):
    from PySide6.QtWidgets import QGridLayout

    from app.core.sampling.params import GROUPS

    # The DRY fields sit under their own heading, not under REPETITION.
    label = window.sampler_panel.rows["dry_multiplier"].label
    grid = next(g for g in window.sampler_panel.findChildren(QGridLayout) if g.indexOf(label) >= 0)
    heads = {}
    for i in range(grid.count()):
        w = grid.itemAt(i).widget()
        if w is not None and w.objectName() == "sectionTitle":
            heads[w.text()] = grid.getItemPosition(i)[0]
    line_of = {n: grid.getItemPosition(grid.indexOf(r.label))[0] for n, r in window.sampler_panel.rows.items()}
    more, mirostat = heads[GROUPS["more"]], heads[GROUPS["mirostat"]]
    for name in ("dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n"):
        assert more < line_of[name] < mirostat, name
    # A long chain wraps after an arrow instead of being cut.
    panel = window.funnel_panel
    chain = "bias→penalties→dry→top_k→top_p→min_p→xtc→temp→draw"
    panel.order_label.setText(wrappable(chain))
    one_line = panel.order_label.fontMetrics().height()
    assert panel.order_label.heightForWidth(200) >= 2 * one_line
    # Stage names never run together: every other one goes a row lower when the columns are narrow.
    kinds = [FunnelStageKind(k) for k in ("model", "logit_bias", "penalties", "top_k", "top_p", "min_p", "xtc")]
    f = _funnel(*[(k, 10) for k in kinds], (FunnelStageKind.TEMPERATURE, 10), (FunnelStageKind.DIST, 10))
    view = panel.view
    view.show_funnel(f)
    view.resize(view.name_w() + 9 * 26, view.height())
    assert view.header_rows() == 2
    view.resize(view.name_w() + 9 * 80, view.height())
    assert view.header_rows() == 1


def test_the_token_column_widens_for_long_tokens_and_a_row_s_tooltip_shows_it_whole(qtbot, window):
    from PySide6.QtGui import QFontMetrics

    view = window.funnel_panel.view
    kinds = (FunnelStageKind.MODEL, FunnelStageKind.TOP_K, FunnelStageKind.TEMPERATURE, FunnelStageKind.DIST)
    short = _funnel(*[(k, 2) for k in kinds])
    view.resize(600, view.height())
    view.show_funnel(short)
    assert view.name_w() == int(view.NAME_W * view.scale)  # "a", "b": the least width (at the table's scale)
    long = Funnel(1, 0, ((5, " understanding"), (6, "b")), short.stages, 5, SamplerSettings(), 1, 100, True, 0.001)
    view.show_funnel(long)
    fm = QFontMetrics(view._font())
    assert view.name_w() >= fm.horizontalAdvance("▶·understanding")  # not elided at 600 px
    assert view.name_w() <= view.MAX_NAME_W * view.scale
    view.resize(view.NAME_W + 4 * 30, view.height())  # no room: the stage columns keep 30 px
    assert view.scale == 1.0 and view.name_w() == view.NAME_W
    # A row's tooltip names the whole token and its id; a cell says its figure; the corner keeps the legend.
    view.resize(600, view.height())
    y = (view.header_rows() + 0.5) * view.rh
    assert view.row_at(y) == 0
    assert view.tooltip_at(5, y) == visible_token(" understanding") + "  (token id 5)"
    cell = view.tooltip_at(view.name_w() + 10, y)  # the model column's cell
    assert (
        cell
        == visible_token(" understanding")
        + " (token id 5): 100.00 % under the raw model, renormalised over the 2 survivors."
    )
    assert view.tooltip_at(5, 2) == LEGEND  # the header's corner, over the token column


def test_the_tokens_panel_line_fits_two_lines_and_its_help_is_in_the_tooltip(qtbot, window):
    window.tokens_dock.raise_()
    window.engine.script(reply("a", "b", "c"))
    send(qtbot, window, "go")
    panel = window.tokens_panel
    qtbot.waitUntil(lambda: window.turn.alternatives is not None, timeout=5000)
    panel.refresh()
    text, tip = panel.summary.text(), panel.summary.toolTip()
    assert "generated: 3 (green = likely … red = unlikely)" in text and "hover" not in text.lower()
    assert "Hover a token for its alternatives; click it for the funnel" in tip and "end-of-turn token" in tip
    one_line = panel.summary.fontMetrics().lineSpacing()
    assert panel.summary.heightForWidth(600) <= 2 * one_line + 4  # the bottom dock's line at 1366x768


def test_a_narrow_dock_scrolls_to_the_draw_column_instead_of_cutting_it(qtbot, window):
    kinds = [FunnelStageKind(k) for k in ("model", "penalties", "top_k", "top_p", "min_p", "temperature", "dist")]
    view = window.funnel_panel.view
    view.show_funnel(_funnel(*[(k, 2) for k in kinds]))
    assert view.minimumWidth() == view.NAME_W + len(kinds) * view.MIN_COL_W
    # The dock's scroll area takes the panel's layout minimum, which now includes every stage column.
    scroll = window.funnel_dock.widget()
    scroll.fit_panel()
    assert scroll.widget().minimumWidth() >= view.minimumWidth()


def test_a_stored_reply_names_the_model_that_wrote_it_so_the_engine_can_recompute_it(qtbot, window, monkeypatch):
    """Issue 20 review, M1: an older reply's token is sent with the model file that wrote it (the engine
    recomputes its logits when that file is loaded), but not when the reply's context shifted (its
    positions moved: the prompt kept is not what the model saw)."""
    window.engine.script(reply("a", "b", "c"), reply("x", "y"))
    send(qtbot, window, "first")
    first = _reply_id(window)
    send(qtbot, window, "second")
    window.chat.open_token_funnel(first, 1)
    qtbot.waitUntil(lambda: any(r.stored is not None for r in window.engine.sent(P.ComputeFunnel)), timeout=5000)
    asked = [r for r in window.engine.sent(P.ComputeFunnel) if r.stored is not None][-1]
    made_by = window.chat.store.get_message(first).meta.model_path
    assert made_by and asked.stored.model_path == made_by
    # The scripted engine never recomputes: the panel says who wrote the reply and when it would be.
    name = made_by.rsplit("/", 1)[-1]
    panel = window.funnel_panel
    qtbot.waitUntil(lambda: f"(written by {name}: recomputed whole only with that file loaded)" in panel.status.text())
    store = window.chat.store
    message = store.get_message(first)
    shifted = replace(message, meta=replace(message.meta, stats=replace(message.meta.stats, context_shifts=1)))
    real = store.get_message
    monkeypatch.setattr(store, "get_message", lambda mid: shifted if mid == first else real(mid))
    target = window.chat.alternatives.step_target(first, 1)
    assert target is not None and target.stored.model_path == ""
    # A continued reply: its first part's tokens are recomputable, its later part's not (re-tokenized text).
    continued = replace(message, meta=replace(message.meta, earlier_tokens=2))
    monkeypatch.setattr(store, "get_message", lambda mid: continued if mid == first else real(mid))
    assert window.chat.alternatives.step_target(first, 1).stored.model_path == made_by
    assert window.chat.alternatives.step_target(first, 2).stored.model_path == ""
