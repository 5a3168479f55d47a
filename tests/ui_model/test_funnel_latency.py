"""Slider move → funnel repaint on the real engine and SmolLM2, during a stream and after it.

The latency is measured (printed, and kept in the window's FunnelController.latencies_s), not
asserted against a clock: this machine's load decides it. What is asserted: every move is
answered from the stored logits (no new Generate), each repaint shows the moved value, and
the funnel follows the stream while it runs.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from app.core import protocol as P
from tests.support.window import WindowEngine, capture_requests, close_window, load, make_window, reply_over, send


@pytest.fixture(params=["smollm2", "gemma"])
def model_window(request, qtbot):
    win = make_window(qtbot, WindowEngine.REAL)
    load(qtbot, win, request.getfixturevalue(request.param))
    yield request.param, win
    close_window(win)


def test_slider_moves_repaint_the_funnel_from_stored_logits(qtbot, model_window):
    name, window = model_window
    window.funnel_dock.raise_()
    sent = capture_requests(window)
    sp = window.sampler_panel
    sp.set_settings(replace(sp.settings(), max_tokens=40, seed=5), emit=True)
    fin = send(qtbot, window, "Write two sentences about the sea.")
    assert isinstance(fin, P.Finished)
    funnels_during = [r for r in sent if isinstance(r, P.ComputeFunnel)]
    assert funnels_during, "the funnel did not follow the stream"
    panel = window.funnel_panel
    qtbot.waitUntil(lambda: panel.view.funnel is not None and panel.view.funnel.step == fin.stats.generated_tokens - 1)
    n_generate = sum(isinstance(r, P.Generate) for r in sent)
    ctl = window.funnel
    ctl.latencies_s.clear()
    for v in (0.2, 0.5, 0.9, 1.3, 1.8, 2.5, 3.5, 1.0):
        sp.rows["temperature"].field.setValue(v)
        qtbot.waitUntil(lambda v=v: panel.view.funnel.settings.temperature == v, timeout=10_000)
    for v in (0.5, 0.8, 0.95, 1.0):
        sp.rows["top_p"].field.setValue(v)
        qtbot.waitUntil(lambda v=v: panel.view.funnel.settings.top_p == v, timeout=10_000)
    assert sum(isinstance(r, P.Generate) for r in sent) == n_generate  # no new generation
    assert len(ctl.latencies_s) == 12
    # An earlier token (it kept its top 64): evaluated again, exact, then the same on the step picked.
    panel.step_field.setValue(3)
    qtbot.waitUntil(
        lambda: panel.view.funnel.step == 2 and panel.view.funnel.exact and panel.view.funnel.recomputed,
        timeout=10_000,
    )
    for v in (0.3, 0.1, 0.0):
        sp.rows["min_p"].field.setValue(v)
        qtbot.waitUntil(lambda v=v: panel.view.funnel.settings.min_p == v, timeout=10_000)
    assert len(ctl.latencies_s) == 15
    ms = sorted(x * 1000 for x in ctl.latencies_s)
    print(
        f"slider move -> funnel repaint ({name}, {len(ms)} moves): median {statistics.median(ms):.1f} ms, "
        f"max {ms[-1]:.1f} ms"
    )
    assert reply_over(window)


def test_slider_moves_during_a_stream(qtbot, window):
    """Dragging while the reply streams: the engine answers on its own thread between decode steps."""
    window.funnel_dock.raise_()
    sp = window.sampler_panel
    sp.set_settings(replace(sp.settings(), max_tokens=-1, temperature=0.0, repeat_penalty=1.0), emit=True)
    tokens: list = []
    window.engine.token_received.connect(tokens.append)
    window.chat.send("Count from 1 to 500, one number per line.")
    qtbot.waitUntil(lambda: len(tokens) >= 10, timeout=30_000)
    ctl = window.funnel
    ctl.latencies_s.clear()
    moved = 0
    for v in (0.3, 0.6, 0.9, 1.2, 1.5, 1.8):
        if reply_over(window):
            break
        sp.rows["temperature"].field.setValue(v)
        moved += 1
        qtbot.waitUntil(lambda v=v: window.funnel_panel.view.funnel.settings.temperature == v, timeout=10_000)
    assert moved >= 3 and not reply_over(window), "the reply ended before the slider moves"
    n_during = len(tokens)
    window.act_stop.trigger()
    qtbot.waitUntil(lambda: reply_over(window), timeout=10_000)
    assert len(ctl.latencies_s) == moved
    ms = sorted(x * 1000 for x in ctl.latencies_s)
    print(
        f"slider move -> funnel repaint during a stream (SmolLM2, {len(ms)} moves, {n_during} tokens): "
        f"median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms"
    )
