"""Speculative decoding in the window (issue 22 §3), on the scripted engine: the Model panel's settings
reaching LoadModel and remembered for the file, the draft model picked and its memory, a refused draft's
reason, the drafted tokens marked in a reply with the rejected draft on hover, the footer and Details,
the Speculation view's bars, and "Measure speed-up" sending its two greedy requests without touching the
chat. (The engine's own speculation on real models: the engine helper's tests.)"""

from __future__ import annotations

import shutil
from dataclasses import replace

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as QtGui_Qt
from PySide6.QtGui import QTextDocument

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.gguf.gguf_info import format_bytes
from app.core.hardware.speed_bound import decode_weight_bytes
from app.core.speculative.settings import Drafter, SpeculationSettings
from app.core.speculative.stats import RoundEnd
from app.ui.speculative.draft_memory import COMPUTE_MEANS
from app.ui.speculative.figures import cost_sentence, position_bars, visible_draft
from app.ui.speculative.measure import PAIRS
from app.ui.speculative.position_plot import MAX_HEIGHT_PX
from tests.support import scripted_answers as answers
from tests.support.fake_engine import reply
from tests.support.window import WAIT_MS, banner_button, send

PIECES = ("def", " add", "(a", ",", " b", "):", " return", " a", " +", " b")
REFUSAL = "different vocabulary: token 1,234 is 'foo' in one and 'bar' in the other"


def _apply(qtbot, window, **fields) -> P.LoadModel:
    """Set the panel's speculation fields as a person would, press Apply, wait for the load; the LoadModel sent."""
    box = window.model_panel.speculation
    if not box.enabled.isChecked():
        box.enabled.click()
    if "draft_max" in fields:
        box.draft_max.setValue(fields["draft_max"])
    if "ngram" in fields:
        box.ngram.setValue(fields["ngram"])
    with qtbot.waitSignal(window.engine.model_loaded, timeout=WAIT_MS):
        window.model_panel.apply_btn.click()
    return window.engine.sent(P.LoadModel)[-1]


def _shown(label) -> str:
    """A QLabel's text as it reads on screen (rich text rendered, plain text as is)."""
    doc = QTextDocument()
    text = label.text()
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and QtGui_Qt.mightBeRichText(text)
    )
    doc.setHtml(text) if rich else doc.setPlainText(text)
    return doc.toPlainText()


def _reply_widget(window):
    return next(w for w in reversed(window.chat_view.messages) if w.role is Role.ASSISTANT)


def test_the_settings_reach_load_model_and_are_remembered_for_the_file(qtbot, window, tiny_model):
    box = window.model_panel.speculation
    assert box.fields.isHidden()  # off by default: only the switch shows
    load = _apply(qtbot, window, draft_max=5, ngram=2)
    assert load.settings.speculation == SpeculationSettings(True, Drafter.PROMPT_LOOKUP, 5, 0.75, 2, "")
    assert window.settings.load_for(str(tiny_model)).speculation.draft_max == 5  # remembered for the file
    assert box.adaptive.isChecked() and not box.adaptive.isHidden()
    box.adaptive.setChecked(False)  # fixed lengths, as llama.cpp drafts
    assert box.settings().adaptive is False
    box.set_settings(SpeculationSettings(True, adaptive=True))
    assert box.adaptive.isChecked()
    facts = window.model_panel.facts
    rows = {facts.itemAt(i, facts.ItemRole.LabelRole).widget().text(): i for i in range(facts.rowCount())}
    value = facts.itemAt(rows["speculation"], facts.ItemRole.FieldRole).widget().text()
    assert value == "prompt lookup · draft_max 5 · n-gram 2"
    assert not box.ngram.isHidden() and box.p_min.isHidden()  # prompt lookup: the n-gram size, no p_min
    assert box.note.text() == "Prompt lookup needs no second model: no extra memory."


def test_a_draft_model_from_the_library_and_its_memory(qtbot, window, tiny_model, tmp_path_factory):
    # A folder name that wraps as a person's does (the test's own tmp_path is one long unbreakable word).
    draft = tmp_path_factory.mktemp("drafts") / "Tiny-Draft-Q4_1.gguf"
    shutil.copy(tiny_model, draft)
    box = window.model_panel.speculation
    least = window.model_panel.minimumSizeHint().width()  # speculation off
    box.set_sources(lambda: [("Tiny-Draft · Q4_1", str(draft))], lambda: None)
    box.enabled.click()
    menu = box.open_menu()
    [pick] = [a for a in menu.actions() if a.data() == str(draft)]
    pick.trigger()
    assert box.settings().drafter is Drafter.DRAFT_MODEL and box.draft_name.text() == draft.name
    # Cut in the middle, so Q4_1 and Q8_0 drafts stay told apart at a 1366x768 dock's width (was "Tiny-Dr…").
    box.draft_name.resize(box.draft_name.fontMetrics().horizontalAdvance("Tiny-D…Q4_1.gguf") + 2, 20)
    elided = box.draft_name.elided_text()
    assert "…" in elided and elided.endswith("Q4_1.gguf") and elided.startswith("Tiny"), elided
    assert box.drafter.minimumWidth() >= box.drafter.sizeHint().width()  # "draft model" whole, never "draft mode"
    lay = window.model_panel.speculation.parentWidget().layout()
    assert lay.indexOf(box) < lay.indexOf(window.model_panel.rpc)  # above the RPC servers field
    assert not box.p_min.isHidden() and box.ngram.isHidden()
    # The file's row widens the Model panel no further (beside the label column it did, past a 1366x768 dock).
    assert window.model_panel.minimumSizeHint().width() <= least
    assert box.note.text().startswith(f"Draft model {draft.name} at these settings: weights")
    before = box.note.text()
    assert "with the draft model" in window.model_panel.estimate.text()  # counted with the model's memory
    load = _apply(qtbot, window)
    assert load.settings.speculation.draft_model == str(draft)
    assert load.settings.speculation.drafter is Drafter.DRAFT_MODEL
    qtbot.waitUntil(lambda: box.note.text().startswith(f"Draft model loaded: {draft.name}"), timeout=WAIT_MS)
    # One way of counting before Apply and once loaded: weights + KV cache + compute buffer, said what it is.
    for note in (before, box.note.text()):
        assert " + KV cache " in note and " + compute " in note and note.endswith(COMPUTE_MEANS), note
    assert window.model_panel.minimumSizeHint().width() <= least  # the facts name no file either


def test_a_draft_whose_header_differs_is_refused_before_apply(qtbot, window, tiny_model, gemma):
    # Gemma 3's SentencePiece vocabulary for the tiny byte-level BPE model: refused at once, nothing unloaded.
    box, panel = window.model_panel.speculation, window.model_panel
    loads = len(window.engine.sent(P.LoadModel))
    box.enabled.click()
    box.choose(str(gemma))
    assert box.refusal.isVisible() and not panel.apply_btn.isEnabled()
    assert (
        f"{gemma.name} cannot be the draft model of {tiny_model.name}: different tokenizers: {tiny_model.name} "
        f"uses byte-level BPE, {gemma.name} uses SentencePiece (SPM)."
    ) in box.refusal.text()
    assert window.engine.model is not None and len(window.engine.sent(P.LoadModel)) == loads
    box.drafter.setCurrentIndex(box.drafter.findData(Drafter.PROMPT_LOOKUP.value))  # another drafter: Apply again
    assert box.refusal.isHidden() and panel.apply_btn.isEnabled()


def test_a_refused_draft_reloads_the_model_as_it_was_and_offers_loading_without(qtbot, window, tiny_model, tmp_path):
    draft = tmp_path / "Other-Vocab.gguf"
    shutil.copy(tiny_model, draft)
    box = window.model_panel.speculation
    before = window.engine.sent(P.LoadModel)[-1].settings
    assert not before.speculation.enabled
    box.enabled.click()
    box.choose(str(draft))
    window.engine.fail_next_load(REFUSAL, P.FailureKind.INCOMPATIBLE)  # the engine's full check refuses it
    with qtbot.waitSignal(window.engine.model_load_failed, timeout=WAIT_MS):
        window.model_panel.apply_btn.click()
    # The model comes back with its last settings that worked, not left unloaded.
    qtbot.waitUntil(lambda: window.engine.model is not None, timeout=WAIT_MS)
    assert window.engine.sent(P.LoadModel)[-1].settings == before
    assert window.model_panel.apply_btn.isEnabled()
    assert not window.settings.load_for(str(tiny_model)).speculation.enabled  # the refused settings forgotten
    assert box.refusal.isVisible() and box.refusal.text() == f"The draft model was refused: {REFUSAL}"
    shown = _shown(window.banner.text)
    assert f"{tiny_model.name} is loaded again with its last settings that worked: {REFUSAL}" in shown
    assert "&#x27;" not in shown  # escaped once: 'foo', not &#x27;foo&#x27;
    with qtbot.waitSignal(window.engine.model_loaded, timeout=WAIT_MS):
        banner_button(window, "Load without speculation").click()
    load = window.engine.sent(P.LoadModel)[-1]
    assert not load.settings.speculation.enabled and load.settings.speculation.draft_model == str(draft)
    assert not window.settings.load_for(str(tiny_model)).speculation.enabled  # remembered off
    assert box.refusal.isHidden()


def test_the_drafted_tokens_are_marked_and_the_rejected_draft_is_on_hover(qtbot, window):
    _apply(qtbot, window, draft_max=4)
    window.engine.script(reply(*PIECES))
    fin = send(qtbot, window, "write add")
    spec = fin.stats.speculation
    assert spec == answers.speculation(
        len(PIECES), window.engine.model.speculation, list(PIECES), window.engine.model.info.tensor_bytes, 0.02
    )
    w = _reply_widget(window)
    assert f"drafts {spec.accepted}/{spec.drafted} accepted" in w.footer.text()
    assert "speculative decoding: prompt lookup, draft_max 4" in w.how_made
    assert f"{spec.mean_accepted_per_round:.2f} accepted per round" in w.how_made
    w.tokens_btn.click()
    tt, bar = w.token_text, w.drafts_bar
    assert tt is not None and bar is not None and bar.check.isChecked()
    chips = tt.text().split("<a href=")[1:]
    underlined = {i for i, c in enumerate(chips) if "text-decoration:underline" in c}
    assert underlined == set(spec.accepted_tokens) and underlined  # e.g. tokens 0 and 1: round 1 accepted two
    flagged = {i for i, c in enumerate(chips) if "▾" in c}
    assert flagged == {i for i, _t in spec.rejected}
    step, drafted = spec.rejected[0]
    assert drafted == "~" + PIECES[step]
    assert f"proposed “{visible_draft(drafted)}”" in tt.hover_html(step)  # "~·add": white space shown
    assert "accepted" in tt.hover_html(spec.accepted_tokens[0])
    assert f"({len(spec.accepted_tokens)} of {len(PIECES)} tokens)" in bar.legend.text()
    bar.check.click()  # the toggle: marks off
    assert "underline" not in tt.text() and "▾" not in tt.text()
    assert "proposed" not in tt.hover_html(step)


def test_the_speculation_view_follows_the_reply_shown(qtbot, window):
    view = window.panels.speculation_panel
    window.model_panel.speculation.view_btn.click()  # "Speculation view" in the Model panel opens the dock
    assert window.panels.speculation_dock.isVisible()
    window.engine.script(reply("plain", " reply"))
    send(qtbot, window, "hi")
    qtbot.waitUntil(lambda: view.advice.isVisible() and "Turn on" in view.advice.text(), timeout=WAIT_MS)
    assert view.details.isHidden()
    view.settings_btn.click()  # what to do: the Model panel's switch, in view and focused
    assert window.model_dock.isVisible() and window.model_panel.speculation.enabled.hasFocus()
    _apply(qtbot, window, draft_max=3)
    window.engine.script(reply(*PIECES))
    fin = send(qtbot, window, "again")
    spec = fin.stats.speculation
    qtbot.waitUntil(lambda: view.spec == spec, timeout=WAIT_MS)
    assert not view.details.isHidden() and view.advice.isHidden()
    bars = position_bars(spec)
    assert view.positions.heights == [100.0 * b.rate for b in bars]
    assert view.positions.heights[0] == 100.0 * spec.accepted_at[0] / spec.drafted_at[0]
    assert view.positions.labels[0] == f"{spec.accepted_at[0]}/{spec.drafted_at[0]}"
    for end in RoundEnd:
        assert view.end_counts[end].text() == f"{spec.ended(end):,}"
    assert spec.ended(RoundEnd.MISMATCH) > 0
    assert f"drafted <b>{spec.drafted:,}</b>" in view.headline.text()
    assert f"{fin.stats.decode_tok_s:,.1f} tok/s" in view.headline.text()
    plain = decode_weight_bytes(window.engine.model.info)
    assert view.roofline.text().startswith(f"{format_bytes(int(spec.weight_bytes_per_token))} speculated, ")
    assert f"{format_bytes(plain)} plain (÷{plain / spec.weight_bytes_per_token:.2f})" in view.roofline.text()
    assert spec.drafted > 0 and view.cost.text() == cost_sentence(spec)
    assert view.cost.text().startswith("Drafts of ") or view.cost.text().startswith("Verifying ")


def test_measure_speed_up_sends_alternating_greedy_pairs_and_keeps_the_chat(qtbot, window):
    _apply(qtbot, window, draft_max=4)
    window.engine.script(*[reply(*PIECES)] * (1 + 2 * PAIRS))
    send(qtbot, window, "write add")
    view = window.panels.speculation_panel
    window.panels.speculation_dock.show()
    n_messages = len(window.chat_view.messages)
    before = len(window.engine.sent(P.Generate))
    measure = window.speculation.measure
    qtbot.waitUntil(view.measure_btn.isEnabled, timeout=WAIT_MS)
    view.measure_btn.click()
    qtbot.waitUntil(lambda: measure.result is not None, timeout=WAIT_MS)
    runs = window.engine.sent(P.Generate)[before:]
    assert [r.speculate for r in runs] == [False, True, True, False, False, True]  # P S, S P, P S
    plain, spec = runs[:2]
    assert plain.external and spec.external and plain.messages == spec.messages
    assert plain.messages[-1] == replace(plain.messages[-1], role=Role.USER, content="write add")
    assert plain.sampler.temperature == 0.0 == spec.sampler.temperature
    result = measure.result
    assert result.parted_at == -1 and result.spec is not None and result.ratio > 1.0
    assert len(result.ratios) == PAIRS and "median of 3 pairs, range ×" in result.sentence()
    assert view.measure_text.text() == result.sentence() and "×" in view.measure_text.text()
    assert len(window.chat_view.messages) == n_messages  # a measurement, not a new reply
    send(qtbot, window, "another")  # another reply shown: the measurement was not of it
    qtbot.waitUntil(view.measure_text.isHidden, timeout=WAIT_MS)


def test_a_measurement_stays_with_the_reply_it_measured_when_another_is_sent_meanwhile(qtbot, window):
    """Review of issue 22: Measure speed-up, then "Say hi." while it ran: the result showed under the new reply."""
    _apply(qtbot, window, draft_max=4)
    window.engine.script(*[reply(*PIECES)] * (2 + 2 * PAIRS))
    send(qtbot, window, "write add")
    view = window.panels.speculation_panel
    window.panels.speculation_dock.show()
    measure = window.speculation.measure
    qtbot.waitUntil(view.measure_btn.isEnabled, timeout=WAIT_MS)
    view.measure_btn.click()
    send(qtbot, window, "Say hi.")  # goes first; the measurement's requests wait behind it
    qtbot.waitUntil(lambda: measure.result is not None, timeout=WAIT_MS)
    assert view.measure_text.isHidden() and view.measure_text.text() == ""


def test_a_reply_being_speculated_says_so_while_it_streams(qtbot, window):
    """Review of issue 22: while a speculated reply streamed, the view said it "was not speculated"."""
    from tests.support.fake_engine import Endless

    _apply(qtbot, window, draft_max=4)
    view = window.panels.speculation_panel
    window.panels.speculation_dock.show()
    window.engine.script(Endless("1 "))
    box = window.composer.box
    box.setFocus()
    qtbot.keyClicks(box, "count")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "being written" in view.advice.text(), timeout=WAIT_MS)
    assert "not speculated" not in view.advice.text() and view.settings_btn.isHidden()
    tokens: list = []
    window.engine.token_received.connect(tokens.append)
    qtbot.waitUntil(lambda: len(tokens) >= 5, timeout=WAIT_MS)  # drafted rounds to show when it ends
    assert "being written" in view.advice.text()
    with qtbot.waitSignal(window.engine.generation_finished, timeout=WAIT_MS):
        window.chat.stop()
    qtbot.waitUntil(lambda: view.spec is not None, timeout=WAIT_MS)  # over: its figures
    assert view.advice.isHidden() and not view.details.isHidden()


def test_the_position_chart_fits_at_1366x768_with_draft_max_8(qtbot, window):
    """Review of issue 22: at 1366x768 with draft_max 8 the bar labels ran together ("32/3219/19…") and the
    position axis was cut below the dock's edge."""
    window.resize(1366, 768)
    _apply(qtbot, window, draft_max=8)
    view = window.panels.speculation_panel
    window.panels.speculation_dock.show()
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), max_tokens=-1), emit=True)
    window.engine.script(reply(*(PIECES * 60)))  # 600 tokens: two-digit counts at every position
    fin = send(qtbot, window, "write add many times")
    qtbot.waitUntil(lambda: view.spec == fin.stats.speculation, timeout=WAIT_MS)
    plot = view.positions
    qtbot.waitUntil(lambda: plot.view.isVisible() and plot.view.height() > 0, timeout=WAIT_MS)
    qtbot.wait(50)  # a layout pass at the new size
    assert len(plot.labels) == 8 and all(len(t) >= 5 for t in plot.labels)  # "15/15"
    drawn = [
        plot.view.mapFromScene(item.sceneBoundingRect()).boundingRect()
        for item in plot.view.getPlotItem().items
        if isinstance(item, pg.TextItem) and item.isVisible()
    ]
    assert all(not a.intersects(b) for i, a in enumerate(drawn) for b in drawn[i + 1 :]), drawn
    for b in position_bars(fin.stats.speculation):  # every count is still at hand, on hover
        assert f"position {b.position}: {b.accepted}/{b.drafted} accepted" in plot.toolTip()
    axis = plot.view.getPlotItem().getAxis("bottom")
    axis_rect = plot.view.mapFromScene(axis.sceneBoundingRect()).boundingRect()
    # The chart no taller than fits in the dock at 1366x768 (where the review's dock showed about 190 px below
    # the figures), its axis inside it; before, it stretched to the tall right column's height.
    assert plot.height() <= MAX_HEIGHT_PX < view.details.height()
    assert axis_rect.top() >= 0 and axis_rect.bottom() <= plot.view.rect().bottom(), (plot.view.rect(), axis_rect)


def test_the_top_bar_names_the_measurement_not_api_requests(qtbot, window):
    """Review of issue 22: during Measure speed-up the top bar read "answering an API request, 3 waiting"."""
    _apply(qtbot, window, draft_max=4)
    window.engine.script(*[reply(*PIECES)] * (1 + 2 * PAIRS))
    send(qtbot, window, "write add")
    view = window.panels.speculation_panel
    window.panels.speculation_dock.show()
    label = window.top_bar.state_label
    seen: list[str] = []
    # what the bar reads as each run goes (the measurement says so once its runs are queued, and at each run's start)
    window.speculation.measure.progressed.connect(lambda *_a: seen.append(label.full_text))
    qtbot.waitUntil(view.measure_btn.isEnabled, timeout=WAIT_MS)
    view.measure_btn.click()
    qtbot.waitUntil(lambda: window.speculation.measure.result is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: label.full_text == "● ready", timeout=WAIT_MS)
    during = [t for t in seen if t != "● ready"]
    assert during and all("API request" not in t for t in during), during
    assert f"● measuring speed-up, {2 * PAIRS} runs left" in during and "● measuring speed-up, 1 run left" in during


def test_the_top_bar_counts_api_requests_beside_the_measurement():
    from app.ui.window.top_bar import api_text

    own = ("measuring speed-up", 3)
    assert api_text(1, 2, own) == "measuring speed-up, 3 runs left"
    assert api_text(1, 4, own) == "measuring speed-up, 3 runs left; 2 API requests waiting"
    assert (
        api_text(2, 2, ("measuring speed-up", 1))
        == "measuring speed-up, 1 run left; answering an API request, 2 waiting"
    )
    assert api_text(1, 2) == "answering an API request, 2 waiting"


def test_a_branch_from_a_token_marks_only_its_own_request_and_counts_as_the_footer(qtbot, window):
    """Review of issue 22: a branch read "(24 of 41 tokens)" while the footer said 33, and its kept tokens
    carried marks of the branch's request shifted onto them."""
    _apply(qtbot, window, draft_max=4)
    window.engine.script(reply(*PIECES), reply(*PIECES[:6]))
    send(qtbot, window, "write add")
    old = _reply_widget(window).message_id
    assert window.chat.branch_from_alternative(old, 2, 7)  # keeps steps 0-1 and a new token 2: 3 steps
    qtbot.waitUntil(lambda: not window.chat.busy and _reply_widget(window).message_id != old, timeout=WAIT_MS)
    w = _reply_widget(window)
    qtbot.waitUntil(lambda: w.footer.text() != "", timeout=WAIT_MS)
    spec = window.chat.store.get_message(w.message_id).meta.stats.speculation
    assert spec is not None and spec.accepted_tokens
    w.tokens_btn.click()
    tt, bar = w.token_text, w.drafts_bar
    assert tt is not None and bar is not None
    n_steps = tt.alts.n_steps
    kept = n_steps - len(PIECES[:6])
    assert kept == 3
    chips = tt.text().split("<a href=")[1:]
    underlined = {i for i, c in enumerate(chips) if "text-decoration:underline" in c}
    assert underlined == {kept + i for i in spec.accepted_tokens}  # the request's own tokens, none kept
    assert all(tt.hover_html(i).count("Drafted by") == 0 for i in range(kept))
    legend = bar.legend.text()
    assert f"({len(spec.accepted_tokens)} of the {len(PIECES[:6])} tokens of the last request" in legend
    assert f"{len(PIECES[:6])} tokens" in w.footer.text()  # one count, the footer's


def test_a_continued_reply_says_its_figures_are_the_last_requests(qtbot, window):
    """Review of issue 22: after Continue the view counted only the continued part without saying so (the
    earlier part's counts are not kept with the reply, so the whole reply's cannot be summed)."""
    _apply(qtbot, window, draft_max=4)
    view = window.panels.speculation_panel
    window.panels.speculation_dock.show()
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), max_tokens=4), emit=True)
    window.engine.script(reply(*PIECES[:4]), reply(*PIECES[4:]))
    send(qtbot, window, "write add")
    qtbot.waitUntil(lambda: view.spec is not None, timeout=WAIT_MS)
    assert "the last request's only" not in view.headline.text()
    panel.set_settings(replace(panel.settings(), max_tokens=-1), emit=True)
    w = _reply_widget(window)
    with qtbot.waitSignal(window.engine.generation_finished, timeout=WAIT_MS):
        assert window.chat.continue_reply(w.message_id)
    rest = len(PIECES) - 4
    qtbot.waitUntil(lambda: f"over {rest:,} tokens" in view.headline.text(), timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: "the reply's first 4 tokens came from an earlier one" in view.headline.text(), timeout=WAIT_MS
    )
