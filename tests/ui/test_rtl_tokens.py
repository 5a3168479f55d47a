"""Right-to-left tokens (Arabic, Hebrew) keep their place next to the text around them: the lens cell
reads "token, then probability", the chips keep context order with each id after its token, the funnel
row and the token menu keep the mark and the probability where they belong. Checked on where Qt
draws each character (tests/support/bidi.py), and that the token text is isolated (FSI … PDI)."""

from __future__ import annotations

from dataclasses import replace

from app.core.inspection.token_inspection import LensCell
from app.core.sampling.alternatives import Candidate, StepView
from app.ui.common.token_alts import alternatives_menu, menu_text, tooltip_html
from app.ui.common.token_label import FSI, PDI, isolate
from app.ui.funnel.panel import visible_token
from app.ui.inspect.panel import InspectWindow, lens_cell_text
from tests.support.bidi import drawn_before, plain
from tests.support.fake_engine import reply
from tests.support.inspection import synthetic_inspection
from tests.support.window import send

ARABIC = "مرحبا"  # "hello"
HEBREW = "שלום"  # "peace"
HEBREW_2 = "עולם"  # "world"


def test_the_bidi_check_sees_the_reordering_it_guards_against(qapp):
    """Without isolates an RTL token's probability is drawn on its left (the defect); with them, after it."""
    assert not drawn_before(f"'{ARABIC}' 37%", ARABIC, "37%")
    assert not drawn_before(f"'{HEBREW}' → '{HEBREW_2}'", HEBREW, HEBREW_2)
    assert drawn_before(f"{isolate(repr(ARABIC))} 37%", ARABIC, "37%")


def test_a_lens_cell_reads_token_then_probability_then_rank(qapp):
    for token in (ARABIC, HEBREW, " " + HEBREW):
        text = lens_cell_text(token, 0.37, 4)
        assert text.startswith(FSI) and PDI in text
        assert drawn_before(text, token.strip(), "37%"), text
        assert drawn_before(text, "37%", "#4"), text


def _rtl_inspection():
    ins = synthetic_inspection(6, 42, n_layer=3)
    lens = ins.lens
    cells = tuple(
        tuple(LensCell(((100, ARABIC, 0.37), (200, HEBREW, 0.2)), 4, 0.01) for _ in line) for line in lens.cells
    )
    lens = replace(
        lens,
        cells=cells,
        tokens=tuple((t, HEBREW) for t, _ in lens.tokens),
        next_tokens=tuple((t, HEBREW_2) for t, _ in lens.next_tokens),
    )
    att = replace(ins.attention, key_texts=tuple(ARABIC for _ in ins.attention.key_texts))
    emb = replace(ins.embedding, neighbours=((7, ARABIC, 0.9), (8, HEBREW, 0.8)), hidden_neighbours=((9, HEBREW, 0.7),))
    return replace(ins, text=ARABIC, lens=lens, attention=att, embedding=emb)


def test_the_inspect_views_keep_rtl_tokens_in_place(qtbot):
    win = InspectWindow()
    qtbot.addWidget(win)
    ins = _rtl_inspection()
    win.show_inspection(ins)
    table = win.lens.table
    for r in range(table.rowCount()):
        for c in range(table.columnCount()):
            cell = table.item(r, c).text()
            assert drawn_before(cell, ARABIC, "37%") and drawn_before(cell, "37%", "#4"), cell
    # Column headers: "▶ 6: 'שלום' → 'עולם'": the token at the position, then the one that came next.
    head = table.horizontalHeaderItem(1).text()
    assert drawn_before(head, "6:", HEBREW) and drawn_before(head, HEBREW, "→") and drawn_before(head, "→", HEBREW_2)
    # The lens cell's tooltip: each candidate, then its id and probability.
    tip = table.item(0, 0).toolTip().splitlines()[1]
    assert drawn_before(tip, ARABIC, "(100)") and drawn_before(tip, "(100)", "37.00%"), tip
    # Attention: the most attended tokens, each followed by its position and weight.
    strip = plain(win.attention.strip.text())
    assert FSI + ARABIC + PDI in strip
    first_sub = strip[strip.index(PDI) + 1 :].split(" ")[0]  # "<position>: <weight>%"
    assert drawn_before(strip, ARABIC, first_sub), strip
    # Embedding: the neighbours, each then its id and cosine.
    near = win.embedding.near.item(0).text()
    assert drawn_before(near, ARABIC, "(7)") and drawn_before(near, "(7)", "0.900"), near
    # The header and the captions name the token isolated.
    assert FSI + ARABIC + PDI in plain(win.header.text())


def test_tokens_panel_chips_keep_context_order_with_each_id_after_its_token(qtbot, window):
    window.engine.script(reply(ARABIC, " " + HEBREW, " 42"))
    send(qtbot, window, "hi")
    panel = window.tokens_panel
    panel.show_ids.setChecked(True)
    panel.refresh()
    text = panel.view.toPlainText()
    ids = [t.token_id for t in window.turn.tokens]
    reply_line = text[text.index(FSI + ARABIC) :]
    assert drawn_before(reply_line, ARABIC, str(ids[0])), reply_line  # a chip's id is drawn after it
    assert drawn_before(reply_line, str(ids[0]), HEBREW)  # chips in context order
    assert drawn_before(reply_line, HEBREW, str(ids[1]))
    assert drawn_before(reply_line, str(ids[1]), "42")


def test_token_menu_hover_and_funnel_rows_keep_rtl_tokens_in_place(qapp):
    view = StepView(0, 100, ARABIC, 0.37, 1.0, (Candidate(100, ARABIC, 0.37), Candidate(200, HEBREW, 0.2)), 0.43)
    item = f"{menu_text(HEBREW)}    20.0%"  # as alternatives_menu writes a candidate
    assert drawn_before(item, HEBREW, "20.0%"), item
    hover = plain(tooltip_html(view))
    assert drawn_before(hover.splitlines()[0], ARABIC, "37.0%"), hover
    row = "▶" + visible_token(HEBREW)  # the funnel's row label: the drawn mark, then the token
    assert row == f"▶{FSI}{HEBREW}{PDI}"
    assert drawn_before(row, "▶", HEBREW)


def test_the_token_menu_names_a_drawn_token_outside_the_kept_candidates(qapp):
    """Issue 20 review (low): a red token's menu listed its top 10 but not the token drawn; a green one's
    showed it '(drawn)'. Drawn from below them, it comes first, disabled, with where it ranked."""
    kept = (Candidate(200, "a", 0.5), Candidate(300, "b", 0.2))
    menu = alternatives_menu(None, StepView(4, 100, "zz", None, 2.0, kept, 0.3), lambda _s: None, lambda _s, _t: None)
    items = [a for a in menu.actions() if a.data() is not None]
    assert [a.data() for a in items] == [100, 200, 300]
    assert items[0].text().endswith("below 20.0%   (drawn; not among the 2 kept)") and not items[0].isEnabled()
    assert items[1].isEnabled() and items[2].isEnabled()
    green = alternatives_menu(None, StepView(4, 200, "a", 0.5, 2.0, kept, 0.3), lambda _s: None, None)
    assert [a.data() for a in green.actions() if a.data() is not None] == [200, 300]  # drawn among them: once


def _blocks_ltr(doc) -> list[bool]:
    from PySide6.QtCore import Qt

    out, block = [], doc.firstBlock()
    while block.isValid():
        if block.text().strip():
            out.append(block.textDirection() == Qt.LayoutDirection.LeftToRight)
        block = block.next()
    return out


def test_token_lines_that_start_with_an_rtl_token_are_laid_out_left_to_right(qtbot, window):
    """Review of issue 20: a Tokens line starting with an Arabic token (Gemma) was right-aligned (Qt takes a
    paragraph's direction from its first strong letter). Token lines read left to right, whatever the script."""
    from PySide6.QtGui import QTextDocument

    from app.ui.chat.message import MessageAction

    window.engine.script(reply(ARABIC, " " + HEBREW, "\n", ARABIC, " 42"))
    send(qtbot, window, "hi")
    panel = window.tokens_panel
    qtbot.waitUntil(lambda: window.turn.alternatives is not None)
    panel.refresh()
    lines = _blocks_ltr(panel.view.document())
    assert len(lines) >= 3 and all(lines), lines  # the prompt, the reply's first line, the line after ⏎
    # the chat's reply as its tokens (its Tokens button), laid out as its label lays it out
    w = window.chat_view.messages[-1]
    window.chat_view.action_requested.emit(MessageAction.TOKENS, w.message_id, True)
    label = w.token_text
    assert label is not None
    doc = QTextDocument()
    doc.setHtml(label.text())
    assert doc.toPlainText().lstrip().startswith(ARABIC) and all(_blocks_ltr(doc)), _blocks_ltr(doc)
