"""The Compare window on the real engine: SmolLM2 compared with itself, through the window (issue 21 §1).

A real JobRunner starts a real engine process that loads the file twice and scores a passage; two
copies of one file must agree everywhere: KL divergence 0 at every scored token, the same top-1 at
every one, a PPL ratio of 1. The window's logic on canned comparisons is tests/ui/test_compare_window.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ui.quant.compare_window import make_compare_window

PASSAGE = (
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step. "
    "All that glitters is not gold, and not all those who wander are lost. "
) * 6


@pytest.mark.timing
@pytest.mark.timeout(120)
def test_smollm2_against_itself_agrees_at_every_token(qtbot, smollm2: Path) -> None:  # type: ignore[no-untyped-def]
    win = make_compare_window(lambda: [], lambda: None, lambda: None, lambda _p: None)
    qtbot.addWidget(win)
    win.prepare()
    win.set_pair(smollm2, smollm2)
    win.setup.passage.setPlainText(PASSAGE)
    win.setup.n_ctx.setValue(128)
    win.show()
    failed: list[str] = []
    win.controller.failed.connect(failed.append)
    with qtbot.waitSignal(win.controller.ended, timeout=60_000):
        win.setup.start.click()
    assert not failed
    run = win.controller.run
    s = run.summary
    assert s is not None and s.n_scored == len(run.tokens) > 50
    assert all(run.is_scored(i) for i in run.tokens) and not run.is_scored(0)
    assert max(t.kl for t in run.tokens.values()) < 1e-6
    assert all(t.same_top1 and t.p_a == pytest.approx(t.p_b, abs=1e-6) for t in run.tokens.values())
    assert s.same_top1 == 1.0 and s.ppl_ratio == pytest.approx(1.0, abs=1e-6)
    assert s.a.decode_tok_s > 0 and s.a.prefill_tok_s > 0 and s.a.file_bytes == smollm2.stat().st_size
    # One file twice: the same decode speed in both columns. Measured in turns (A, B, B, A...), so the window's
    # work after the last chunk, or any other program, slows both alike; timed one after the other, A read
    # about half of B (26.4 vs 47.9 tok/s on a 744-token passage). 0.7 leaves room for a loaded machine's noise.
    assert 0.7 < s.a.decode_tok_s / s.b.decode_tok_s < 1 / 0.7, (s.a.decode_tok_s, s.b.decode_tok_s)
    # The window shows it: the summary, every scored token in the strip, no top-1 flip.
    assert win.summary.values["same_top1"].text().startswith("100.00")
    assert "0 top-1 flips" in win.status.text()
    assert win.worst.rowCount() == min(200, len(run.tokens))
    assert win.controller.pid is None  # the job's process is gone
