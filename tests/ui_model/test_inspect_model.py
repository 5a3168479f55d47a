"""Through the window on the real engine: a Tokens-panel chip of the second turn (a prompt token after
the reused prefix, and a reply token) is the context position the engine inspects."""

from __future__ import annotations

from app.core import protocol as P
from app.core.inspection.token_inspection import InspectPath
from tests.support.window import send
from tests.ui.test_inspect_window import _anchors


def _inspect_link(qtbot, window, href: str) -> P.TokenInspected:
    got: list = []
    window.engine.token_inspected.connect(got.append)
    window.engine.inspection_failed.connect(got.append)
    _scheme, pos, tid = href.split(":")
    window.tokens_panel.inspect_requested.emit(int(pos), int(tid), window.turn.prompt.cached_tokens)
    qtbot.waitUntil(lambda: bool(got), timeout=120_000)
    ev = got[0]
    assert isinstance(ev, P.TokenInspected), ev
    return ev


def test_chips_of_a_second_turn_inspect_their_own_tokens(qtbot, window):
    send(qtbot, window, "Name three colours.")
    send(qtbot, window, "And three animals?")
    prompt = window.turn.prompt
    assert prompt.cached_tokens > 0  # the first turn is reused: positions start after it
    window.tokens_panel.refresh()
    links = _anchors(window.tokens_panel.view)
    n_prompt = len(prompt.new_tokens)
    win = window.token_inspect.window
    reply_href = f"inspect:{prompt.prompt_tokens + 1}:{window.turn.tokens[1].token_id}"  # what its menu's Inspect asks
    assert links[n_prompt + 1][0] == "step:1"  # a reply token opens its menu (alternatives, funnel, Inspect)
    for href in (links[n_prompt - 2][0], reply_href):  # a prompt token, a reply token
        ev = _inspect_link(qtbot, window, href)
        ins = ev.inspection
        _s, pos, tid = href.split(":")
        assert (ins.position, ins.token_id) == (int(pos), int(tid))  # the engine found that token there
        assert ins.path is InspectPath.CACHE_REUSE, ins.fallback_reason
        assert ins.lens.last_layer_max_abs_diff < 0.05
        qtbot.waitUntil(lambda ins=ins: win.inspection is ins, timeout=5000)
        assert f"context position {ins.position}:" in win.header.text().lower()
