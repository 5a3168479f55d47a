"""Inspect a token, window side, on the FakeEngine: a click on a Tokens-panel chip asks for the right
context position, and the inspect window shows the four views of the answer (the real
inspection: tests/engine/test_inspect_token.py)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextCursor

from app.core import protocol as P
from app.ui.common.token_label import FSI
from app.ui.inspect.panel import CAUSATION_NOTE, InspectWindow
from tests.support.fake_engine import reply
from tests.support.inspection import synthetic_inspection
from tests.support.models import llama_metadata, llama_tensors, write_gguf
from tests.support.window import TINY_TEMPLATE, load, send


def _anchors(view) -> list[tuple[str, int]]:
    """Every link in the Tokens view with the document position of its first character."""
    out = []
    block = view.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            href = frag.charFormat().anchorHref()
            if href and (not out or out[-1][0] != href):
                out.append((href, frag.position()))
            it += 1
        block = block.next()
    return out


def _click(qtbot, view, doc_pos: int) -> None:
    """Click just right of the left edge of the link's first character (the isolate mark FSI that
    opens a chip's text is not drawn: after it)."""
    doc = view.document()
    while doc.characterAt(doc_pos) in (FSI, "\u200a"):
        doc_pos += 1
    cur = QTextCursor(doc)
    cur.setPosition(doc_pos + 1)
    view.setTextCursor(cur)
    view.ensureCursorVisible()
    rect = view.cursorRect(cur)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(rect.left() - 2, rect.center().y()))


def test_clicking_a_token_inspects_its_context_position(qtbot, window):
    window.engine.script(reply("one", " two", " three"))
    send(qtbot, window, "count")
    panel = window.tokens_panel
    panel.refresh()
    prompt = window.turn.prompt
    links = _anchors(panel.view)
    n_prompt_chips = len(prompt.new_tokens)
    assert len(links) == n_prompt_chips + 3  # every prompt chip and every reply token
    # A reply token opens its menu (alternatives, funnel, branch) with Inspect: its position is the
    # prompt's length plus its index.
    href, _at = links[n_prompt_chips + 1]
    assert href == "step:1"
    qtbot.waitUntil(lambda: window.turn.alternatives is not None, timeout=5000)
    menu = panel.open_token(1)
    assert menu is not None
    [inspect] = [a for a in menu.actions() if a.text().startswith("Inspect this token")]
    inspect.trigger()
    qtbot.waitUntil(lambda: bool(window.engine.sent(P.InspectToken)), timeout=5000)
    req = window.engine.sent(P.InspectToken)[-1]
    assert (req.position, req.token_id, req.turn_start) == (
        prompt.prompt_tokens + 1,
        window.turn.tokens[1].token_id,
        prompt.cached_tokens,
    )
    win = window.token_inspect.window
    qtbot.waitUntil(lambda: win.inspection is not None, timeout=5000)
    assert win.isVisible() and win.tabs.isEnabled()
    # One numbering, both where both matter: the reply's token 2 (as the Funnel counts) is the
    # context's position prompt_tokens + 1 (as the engine counts).
    assert f"Token 2 of the reply · context position {req.position}:" in win.header.text()
    win.show_pending(5, 42)  # the next one asked: the previous token's figures are greyed meanwhile
    assert not win.tabs.isEnabled() and "Inspecting context position 5 " in win.header.text()
    win.show_inspection(win.inspection)
    assert win.tabs.isEnabled()
    assert win.inspection.position == req.position
    assert f"Context position {req.position}:" in win.header.text()  # as a prompt token's is
    assert win.lens.table.rowCount() == win.inspection.n_layer
    assert "0.0123" in win.lens.check.text()  # the self-check's figure is shown
    # A prompt chip links to Inspect: positions count from the first new prompt token.
    first = prompt.prompt_tokens - len(prompt.new_tokens)
    assert links[2][0] == f"inspect:{first + 2}:{prompt.new_tokens[2][0]}"
    before = len(window.engine.sent(P.InspectToken))
    _click(qtbot, panel.view, links[2][1])
    qtbot.waitUntil(lambda: len(window.engine.sent(P.InspectToken)) > before, timeout=5000)
    assert window.engine.sent(P.InspectToken)[-1].position == first + 2


def test_a_failed_inspection_says_why(qtbot, window):
    window.engine.script(reply("a"))
    send(qtbot, window, "hi")
    ctl = window.token_inspect
    ctl.inspect(-1, 5)
    qtbot.waitUntil(lambda: "does not hold" in ctl.window.header.text(), timeout=5000)
    assert ctl.window.inspection is None


def test_the_four_views(qtbot):
    win = InspectWindow()
    qtbot.addWidget(win)
    dense = synthetic_inspection(6, 42, n_layer=4, n_head=4, n_head_kv=2)
    win.show_inspection(dense)
    assert [win.tabs.tabText(i) for i in range(4)] == ["Lens", "Attention", "Embedding", "Experts"]
    # Lens: last layer on top, one column per position, the next token's rank in the cell.
    assert win.lens.table.verticalHeaderItem(0).text() == "L3"
    assert win.lens.table.columnCount() == 3
    assert "#4" in win.lens.table.item(0, 1).text()
    # Attention: the warning, GQA and sliding-window layers named, one row per head.
    assert CAUSATION_NOTE in win.findChild(type(win.header), "causationNote").text()
    assert "4 query heads share 2 KV heads: GQA 2:1" in win.attention.caption.text()
    assert "sliding-window" in win.attention.caption.text()
    assert win.attention.heads._img.height() == 4
    assert win.attention.average._img.height() == 4
    assert "tok6" in win.attention.strip.text()
    # Embedding: the strip is the vector, the neighbours are listed.
    assert win.embedding.strip._img.width() == 16
    assert win.embedding.near.count() == 2 and "seven" in win.embedding.near.item(0).text()
    assert win.embedding.hidden.count() == 1
    # Experts: a dense model says in one line why the tab is empty, and no empty table fills the tab.
    ex = win.experts
    assert "dense" in ex.caption.text() and "mixture-of-experts models (expert_count in the GGUF)" in ex.caption.text()
    assert ex.table.rowCount() == 0
    assert not any(w.isVisibleTo(ex) for w in (ex.table, ex.load_caption, ex.load))
    moe = synthetic_inspection(6, 42, n_layer=3, moe=True)
    win.show_inspection(moe)
    assert all(w.isVisibleTo(ex) for w in (ex.table, ex.load_caption, ex.load))
    assert win.experts.table.rowCount() == 3 and win.experts.table.columnCount() == 2
    assert win.experts.table.item(1, 0).text() == "expert 1: 0.70"
    assert win.experts.load._img.height() == 3 and win.experts.load._img.width() == 4
    # The load covers the turn up to this token, not the whole turn: the caption says which positions.
    assert "positions of this turn up to this token" in win.experts.load_caption.text()
    win.show_inspection(dense)  # a dense model's token after an MoE one: the tables go again
    assert not ex.table.isVisibleTo(ex) and not ex.load.isVisibleTo(ex) and "dense" in ex.caption.text()


def test_attention_over_more_positions_than_columns_keeps_every_position_binned():
    """A long conversation's attention is drawn over every earlier position (the first token and the
    sliding window's edge stay visible): runs of positions are summed into the columns."""
    import numpy as np

    from app.ui.inspect.panel import MAX_KEY_COLUMNS, bin_columns

    n = 1655
    w = np.zeros((2, n), dtype=np.float32)
    w[0, 0] = 0.84  # a global layer's weight on <bos>
    w[0, -1] = 0.16
    w[1, n - 512 :] = 1.0 / 512  # a sliding-window layer: the last 512 positions only
    binned, k = bin_columns(w)
    assert binned.shape[1] <= MAX_KEY_COLUMNS and k == -(-n // MAX_KEY_COLUMNS)
    assert binned[0, 0] == np.float32(0.84)  # <bos> is drawn, not cut off
    assert np.allclose(binned.sum(axis=1), w.sum(axis=1))  # no position lost
    edge = (n - 512) // k
    assert binned[1, :edge].sum() == 0 and binned[1, edge + 1 :].min() > 0  # the window's edge shows
    short, one = bin_columns(w[:, :300])
    assert one == 1 and short.shape == (2, 300)


def test_hovering_a_token_prepares_the_engine_once_per_model(qtbot, window, tiny_model):
    """The pointer on a chip is the first sign of an inspection: the engine is asked to build its
    tables then (PrepareInspect), once per loaded model, not on every hover."""
    window.engine.script(reply("one", " two"))
    send(qtbot, window, "count")
    panel = window.tokens_panel
    panel.refresh()
    links = _anchors(panel.view)
    assert not window.engine.sent(P.PrepareInspect)
    doc = panel.view.document()
    for _href, at in links[:3]:
        while doc.characterAt(at) in (FSI, "\u200a"):  # the chip's text starts after these (as _click)
            at += 1
        cur = QTextCursor(doc)
        cur.setPosition(at + 1)
        rect = panel.view.cursorRect(cur)
        qtbot.mouseMove(panel.view.viewport(), QPoint(rect.left() - 2, rect.center().y()))
        qtbot.waitUntil(lambda: bool(window.engine.sent(P.PrepareInspect)), timeout=2000)
    assert len(window.engine.sent(P.PrepareInspect)) == 1
    load(qtbot, window, tiny_model)  # a model loads again: its tables are new
    assert window.engine.prepare_inspect() is True
    assert window.engine.prepare_inspect() is False
    assert len(window.engine.sent(P.PrepareInspect)) == 2


def test_another_model_loading_clears_the_previous_models_inspection(qtbot, window, tmp_path, monkeypatch):
    """The inspect window showed the previous model's lens, attention and embedding after a switch:
    a load clears it with a note, and an answer asked of the previous model is dropped."""
    window.engine.script(reply("one", " two"))
    send(qtbot, window, "count")
    ctl = window.token_inspect
    win = ctl.window
    prompt = window.turn.prompt
    ctl.inspect(prompt.prompt_tokens, window.turn.tokens[0].token_id, prompt.cached_tokens)
    qtbot.waitUntil(lambda: win.inspection is not None, timeout=5000)
    assert win.lens.table.rowCount() > 0 and win.embedding.near.count() > 0
    assert win.attention.average._img is not None and win.tabs.isEnabled()
    other = write_gguf(
        tmp_path / "Other-Chat-Q4_1.gguf",
        llama_metadata(name="Other Chat", file_type=3, extra={"tokenizer.chat_template": TINY_TEMPLATE}),
        llama_tensors(qtype="Q4_1"),
    )
    load(qtbot, window, other)
    assert win.inspection is None and not win.tabs.isEnabled()
    assert win.header.text() == (
        "Other Chat was loaded: the previous model's inspection was cleared. Click a token to inspect it."
    )
    assert (win.lens.table.rowCount(), win.lens.table.columnCount(), win.lens.check.text()) == (0, 0, "")
    assert win.attention.average._img is None and win.attention.heads._img is None
    assert win.attention.caption.text() == "" and win.attention.strip.text() == ""
    assert win.embedding.near.count() == 0 and win.embedding.hidden.count() == 0 and win.embedding.strip._img is None
    assert win.experts.table.rowCount() == 0
    # An inspection asked of the previous model and answered after the switch is not shown.
    stale = synthetic_inspection(3, 7)
    monkeypatch.setattr(window.engine, "inspect_token", lambda *_a: 777)
    ctl.inspect(3, 7)
    load(qtbot, window, other)
    window.engine.token_inspected.emit(P.TokenInspected(777, stale))
    assert win.inspection is None and "was loaded" in win.header.text()


def test_the_funnel_and_inspect_name_a_token_by_both_numberings(qtbot, window):
    """The Funnel said "token 302 of 312" and Inspect "Position 319" for the same token: both now say
    both, labelled (the Funnel in its token field's tooltip, when the context position is known)."""
    window.funnel_dock.raise_()
    panel = window.funnel_panel
    window.engine.script(reply("The", " sea", " is", " deep", "."), reply("x", "y"))
    send(qtbot, window, "sea?")
    first = next(w for w in reversed(window.chat_view.messages) if w.message_id is not None).message_id
    prompt = window.turn.prompt
    settled = lambda: panel.view.funnel is not None and window.funnel._in_flight is None  # noqa: E731
    qtbot.waitUntil(lambda: settled() and panel.view.funnel.step == 4, timeout=5000)
    last = prompt.prompt_tokens + 4
    assert panel.step_field.value() == 5 and panel.of_label.text() == "of 5"
    assert panel.step_field.toolTip().startswith(f"Token 5 of the reply · context position {last} ")
    # Inspect of the same token says the same two numbers.
    qtbot.waitUntil(lambda: window.turn.alternatives is not None, timeout=5000)
    menu = window.tokens_panel.open_token(4)
    [inspect] = [a for a in menu.actions() if a.text().startswith("Inspect this token")]
    inspect.trigger()
    win = window.token_inspect.window
    assert f"Inspecting token 5 of the reply · context position {last} " in win.header.text()
    qtbot.waitUntil(lambda: win.inspection is not None, timeout=5000)
    assert win.header.text().startswith(f"Token 5 of the reply · context position {last}:")
    # A reply that is no longer the turn shown has no known context position: the reply's count alone.
    send(qtbot, window, "again")
    window.chat.open_token_funnel(first, 1)
    qtbot.waitUntil(lambda: settled() and panel.view.funnel.reply_id == first, timeout=5000)
    assert panel.step_field.toolTip().startswith("Token 2 of the reply.\n")
