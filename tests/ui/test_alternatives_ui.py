"""Every token's alternatives in the window (FakeEngine): kept with each reply, the chat's token view
(hover, click), the Tokens panel, the funnel opened on a token, and a branch from an alternative.
(The real engine's alternatives and branch: tests/engine/test_alternatives.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QToolTip

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.sampling.alternatives import TokenColour
from app.ui.chat.message import MessageAction
from app.ui.common import palette
from app.ui.common.token_alts import step_anchor
from tests.support.budgets import stream_budget_ms
from tests.support.fake_engine import reply
from tests.support.window import send


def _reply_widget(window):
    return next(w for w in reversed(window.chat_view.messages) if w.role is Role.ASSISTANT)


def test_every_reply_keeps_its_alternatives_and_shows_its_tokens(qtbot, window):
    window.settings_ctl.update(alternatives_per_token=7)
    window.engine.script(reply("The", " sea", " is", " deep", "."))
    send(qtbot, window, "sea?")
    gen = window.engine.sent(P.Generate)[-1]
    assert gen.alternatives == 7 and gen.reply_prefix == ()
    w = _reply_widget(window)
    alts = window.chat.store.alternatives(w.message_id)
    assert alts is not None and alts.per_token == 7 and alts.n_steps == 5
    assert [alts.texts[t] for t in alts.tokens] == ["The", " sea", " is", " deep", "."]
    assert not w.tokens_btn.isHidden() and w.token_text is None  # off by default: the Markdown text shows
    w.tokens_btn.click()
    tt = w.token_text
    assert tt is not None and w.body.isHidden() and not tt.isHidden()
    html = tt.text()
    assert all(step_anchor(i) in html for i in range(5))
    assert alts.p(0) is not None and 0.5 <= alts.p(0) < 0.8 and f"background-color:{palette.PROB_BG[1]}" in html
    # Click a token: its funnel is asked for, on the stored top-7 (the funnel panel comes to the front).
    menu = tt.open_token(3)
    asked = window.engine.sent(P.ComputeFunnel)[-1]
    assert asked.stored is None or asked.stored.step == 3
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel is not None, timeout=5000)
    assert window.funnel_panel.view.funnel.step == 3
    labels = [a.text() for a in menu.actions()]
    assert labels[0] == "Show token 4 in the funnel" and any("(drawn)" in x for x in labels)
    assert sum(1 for a in menu.actions() if a.data() is not None) == 7
    w.tokens_btn.click()  # back to the text
    assert w.token_text is None and not w.body.isHidden()


def test_a_stored_reply_opens_its_funnel_on_the_stored_candidates(qtbot, window):
    window.engine.script(reply("a", "b", "c"), reply("x", "y"))
    send(qtbot, window, "first")
    first = _reply_widget(window).message_id
    send(qtbot, window, "second")  # the engine now keeps the second reply's logits, not the first's
    window.chat.open_token_funnel(first, 1)
    asked = window.engine.sent(P.ComputeFunnel)[-1]
    assert asked.stored is not None and (asked.stored.reply_id, asked.stored.step) == (first, 1)
    assert asked.stored.drawn == 101 and len(asked.stored.ids) == window.settings.alternatives_per_token
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel is not None, timeout=5000)
    f = window.funnel_panel.view.funnel
    assert (f.reply_id, f.step, f.exact) == (first, 1, False)
    # A slider re-runs the stored step, with no generation.
    n_gen = len(window.engine.sent(P.Generate))
    window.sampler_panel.rows["temperature"].field.setValue(1.4)
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel.settings.temperature == 1.4, timeout=5000)
    assert window.engine.sent(P.ComputeFunnel)[-1].stored.step == 1
    assert len(window.engine.sent(P.Generate)) == n_gen


def test_branch_from_an_alternative_is_a_new_sibling_that_starts_with_the_prefix(qtbot, window):
    window.engine.script(reply("One", " two", " three", " four"), reply(" five", " six"))
    send(qtbot, window, "count")
    w = _reply_widget(window)
    old_id = w.message_id
    w.tokens_btn.click()
    menu = w.token_text.open_token(2)
    alt = next(a for a in menu.actions() if a.data() is not None and a.isEnabled())
    chosen = alt.data()
    alt.trigger()  # the chat is drawn again: the menu's widget goes
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=5000)
    gen = window.engine.sent(P.Generate)[-1]
    assert gen.reply_prefix == (100, 101, chosen)
    assert gen.messages[-1].role == Role.USER and gen.messages[-1].content == "count"
    new = _reply_widget(window)
    sib = window.chat.store.siblings(new.message_id)
    assert sib.count == 2 and old_id in sib.ids and new.message_id != old_id
    assert new.branch_label.text() == "2/2"
    stored = window.chat.store.get_message(new.message_id)
    alt_text = window.engine.vocab[chosen]
    assert stored.content == "One two" + alt_text + " five six"
    alts = window.chat.store.alternatives(new.message_id)
    assert alts is not None and alts.tokens[:3] == (100, 101, chosen) and alts.n_steps == 5
    assert window.turn.alternatives_offset == 3


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # the tooltip, offscreen
def test_tokens_panel_hover_click_and_colour_by_entropy(qtbot, window):
    window.tokens_dock.raise_()
    window.engine.script(reply("a", "b", "c", "d"))
    send(qtbot, window, "go")
    panel = window.tokens_panel
    qtbot.waitUntil(lambda: window.turn.alternatives is not None, timeout=5000)
    panel.refresh()
    html = panel.view.toHtml()
    assert "step:3" in html
    view = panel.step_view(2)
    assert view is not None and view.token_id == 102 and len(view.candidates) == window.settings.alternatives_per_token
    panel._hovered(QUrl(step_anchor(2)))
    shown = QToolTip.text()
    assert "token 3" in shown and "alt1" in shown and "entropy 0.20 bits" in shown
    assert f"background-color:{palette.PROB_BG[1]}" in html.replace(" ", "")  # by probability (~63 %)
    panel.by_entropy.setChecked(True)
    assert window.settings.token_colour is TokenColour.ENTROPY  # saved as the setting
    by_entropy = panel.view.toHtml().replace(" ", "")
    assert f"background-color:{palette.PROB_BG[0]}" in by_entropy  # the fake's steps are sure (< 1 bit)
    assert f"background-color:{palette.PROB_BG[1]}" not in by_entropy
    panel.per_token.setValue(12)
    assert window.settings.alternatives_per_token == 12
    menu = panel.open_token(1)
    assert menu is not None
    qtbot.waitUntil(lambda: window.funnel_panel.view.funnel is not None, timeout=5000)
    assert window.funnel_panel.view.funnel.step == 1
    branch = next(a for a in menu.actions() if a.data() is not None and a.isEnabled())
    chosen = branch.data()
    window.engine.script(reply(" z"))
    branch.trigger()
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=5000)
    assert window.engine.sent(P.Generate)[-1].reply_prefix == (100, chosen)


def test_message_action_payloads_reach_the_controller(qtbot, window):
    window.engine.script(reply("p", "q"))
    send(qtbot, window, "hi")
    w = _reply_widget(window)
    seen = []
    window.chat.funnel_step_requested.connect(seen.append)
    w.action_requested.emit(MessageAction.TOKEN_FUNNEL, w.message_id, 1)
    assert len(seen) == 1 and seen[0].stored.step == 1


def test_a_new_reply_follows_its_newest_token_after_a_stored_one_was_shown(qtbot, window):
    window.funnel_dock.raise_()
    window.engine.script(reply("a", "b", "c"), reply("p", "q"), reply("x", "y", "z", "w"))
    send(qtbot, window, "first")
    first = _reply_widget(window).message_id
    send(qtbot, window, "second")
    window.chat.open_token_funnel(first, 0)  # an older reply: its stored candidates
    assert window.funnel.stored is not None and not window.funnel_panel.follow.isChecked()
    send(qtbot, window, "third")
    assert window.funnel.stored is None and window.funnel.step == -1 and window.funnel_panel.follow.isChecked()
    qtbot.waitUntil(
        lambda: window.funnel_panel.view.funnel is not None and window.funnel_panel.view.funnel.step == 3, timeout=5000
    )


def _chips_per_block(doc) -> list[int]:
    """How many generated-token links (``step:`` anchors) each paragraph of a Tokens view holds."""
    out = []
    block = doc.begin()
    while block.isValid():
        hrefs = set()
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor() and fmt.anchorHref().startswith("step:"):
                hrefs.add(fmt.anchorHref())
            it += 1
        out.append(len(hrefs))
        block = block.next()
    return out


def _send_long(qtbot, window, text: str, n_tokens: int) -> None:
    """Send ``text`` and wait until the window shows the reply of ``n_tokens`` as over: the budget is
    3x the time such a reply normally takes to stream, not the fixed guard of a short reply."""
    send(qtbot, window, text, timeout=stream_budget_ms(n_tokens))


def _no_max_tokens(window) -> None:
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), max_tokens=-1), emit=True)


def test_tokens_panel_appends_in_short_paragraphs_and_keeps_its_chips_when_the_reply_ends(qtbot, window, monkeypatch):
    """A paragraph is laid out whole on every append: the generated chips go in paragraphs of at
    most BLOCK_CHIPS, one per line of the reply; and the alternatives arriving at the end do not
    draw the same chips again (by probability, the colours do not change)."""
    from app.ui.panels.tokens import BLOCK_CHIPS

    window.tokens_dock.raise_()
    _no_max_tokens(window)
    pieces = [f" w{i}" for i in range(150)] + [f" v{i}" + ("\n" if i % 10 == 9 else "") for i in range(50)]
    window.engine.script(reply(*pieces))
    panel = window.tokens_panel
    clears: list[int] = []
    real_clear = panel.view.clear
    monkeypatch.setattr(panel.view, "clear", lambda: (clears.append(len(window.turn.tokens)), real_clear()))
    send(qtbot, window, "go")
    qtbot.waitUntil(lambda: window.turn.alternatives is not None, timeout=10000)
    for _ in range(3):
        panel.refresh()
    assert len(clears) == 1 and clears[0] < 200  # once, as the turn began; not again when the reply ended
    chips = _chips_per_block(panel.view.document())
    assert BLOCK_CHIPS == 64
    # The prompt's paragraph, 150 words in paragraphs of 64, then a paragraph per line of 10.
    assert chips == [0, 64, 64, 22 + 10, 10, 10, 10, 10, 0]  # and the empty one after the last line
    panel.by_entropy.setChecked(True)  # a new colour: drawn again, all of it
    for _ in range(3):
        panel.refresh()
    assert sum(_chips_per_block(panel.view.document())) == 200 and len(clears) == 2


def test_tokens_panel_draws_a_long_reply_again_over_several_ticks(qtbot, window):
    """Drawing a long reply's chips again (by entropy) adds at most CHIPS_PER_REFRESH per tick of the
    repaint clock, so the window never stalls for the whole reply at once."""
    from app.ui.panels.tokens import CHIPS_PER_REFRESH

    window.tokens_dock.raise_()
    _no_max_tokens(window)
    n = CHIPS_PER_REFRESH * 2 + 50
    window.engine.script(reply(*[f" t{i}" for i in range(n)]))
    _send_long(qtbot, window, "go", n)
    panel = window.tokens_panel
    assert window.turn.alternatives is not None  # they come with Finished: the reply is over, drawn
    window.clock.stop()  # the test ticks it
    panel.by_entropy.setChecked(True)
    assert sum(_chips_per_block(panel.view.document())) == CHIPS_PER_REFRESH
    panel.refresh()
    panel.refresh()
    assert sum(_chips_per_block(panel.view.document())) == n
