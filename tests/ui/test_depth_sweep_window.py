"""The Speed vs context window on the scripted engine: run, progress, the chat held, cancel, runs kept, export."""

from __future__ import annotations

import csv
import json

import pytest
from PySide6.QtCore import Qt

from app.core.depth_sweep.store import FILE_NAME, SweepStore
from app.ui.window.notices import NoticeTopic
from tests.support.window import banner_button

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support raise")  # the sweep window raised, offscreen


def _open(window, qtbot):
    window.stats_panel.sweep_btn.click()  # from the Stats panel
    sweep = window.depth_sweep.window
    assert sweep is not None and sweep.isVisible()
    return sweep


def test_a_sweep_plots_one_point_per_depth_and_holds_the_chat_meanwhile(window, qtbot):
    sweep = _open(window, qtbot)
    sweep.depths.setText("0, 512, 1k")
    sweep.n_prompt.setValue(32)
    sweep.n_gen.setValue(8)
    sweep.reps.setValue(1)
    window.engine.pause()  # the engine is busy measuring: the chat must say so
    sweep.run_btn.click()
    qtbot.waitUntil(lambda: window.engine.sweeping)
    assert not window.composer.button.isEnabled()
    assert "cannot reply" in window.composer.button.toolTip()
    assert window.notices.topic is NoticeTopic.DEPTH_SWEEP and window.banner.isVisible()
    assert "measuring" in window.top_bar.state_label.full_text
    assert not sweep.run_btn.isEnabled() and sweep.cancel_btn.isEnabled()
    window.composer.box.setPlainText("hello")
    qtbot.keyClick(window.composer.box, Qt.Key.Key_Return)  # Enter while held: nothing is sent, the text stays
    assert window.composer.draft == "hello"
    assert not [r for r in window.engine.requests if type(r).__name__ == "Generate"]
    window.engine.resume()

    qtbot.waitUntil(lambda: not window.engine.sweeping, timeout=5000)
    assert window.composer.button.isEnabled() and not window.banner.isVisible()
    curve = sweep.plot.curves
    assert len(curve) == 1
    (prefill, decode) = next(iter(curve.values()))
    xs, ys = decode.getData()
    assert len(xs) == 3 and list(ys) == sorted(ys, reverse=True)  # decode slows with depth
    assert len(prefill.getData()[0]) == 3
    assert sweep.table.rowCount() == 3 and sweep.table.item(2, 0).text() == "1k"
    assert "Measured 3 depths" in sweep.status.text()
    # Kept: in the list (checked: it is drawn) and in the file under the data folder.
    assert sweep.runs.count() == 1
    kept = SweepStore(window.paths.data_dir / FILE_NAME).runs
    assert [p.depth for p in kept[0].points] == [0, 512, 1024] and kept[0].n_prompt == 32


def test_cancel_keeps_the_depths_measured_as_a_stopped_run(window, qtbot):
    sweep = _open(window, qtbot)
    sweep.depths.setText(", ".join(str(256 * i) for i in range(12)))
    # The chat's notice cancels it, once the first depth is in.
    sweep.controller.progressed.connect(lambda: banner_button(window, "Cancel sweep").click())
    sweep.run_btn.click()
    qtbot.waitUntil(lambda: not window.engine.sweeping, timeout=5000)
    assert "Stopped after" in sweep.status.text()
    run = window.depth_sweep.store.runs[-1]
    assert run.cancelled and 1 <= len(run.points) < 12
    assert sweep.table.rowCount() == len(run.points) and "stopped" in sweep.runs.item(0).text()
    assert window.composer.button.isEnabled()


def test_a_depth_past_n_ctx_is_refused_in_words(window, qtbot):
    sweep = _open(window, qtbot)
    sweep.depths.setText("0, 1m")
    sweep.run_btn.click()
    assert "not a depth" in sweep.status.text()
    sweep.depths.setText(f"0, {window.engine.model.n_ctx}")
    sweep.run_btn.click()
    assert "n_ctx" in sweep.status.text() and not window.engine.sweeping


def test_two_runs_overlay_and_export(window, qtbot, tmp_path):
    sweep = _open(window, qtbot)
    for n_gen in (8, 16):
        sweep.depths.setText("0, 512")
        sweep.n_gen.setValue(n_gen)
        sweep.run_btn.click()
        qtbot.waitUntil(lambda: not window.engine.sweeping and sweep.run_btn.isEnabled(), timeout=5000)
    assert sweep.runs.count() == 2 and len(sweep.checked_runs()) == 2
    assert len(sweep.plot.curves) == 2
    first = sweep.runs.item(0)
    assert first.data(Qt.ItemDataRole.DecorationRole) is not None  # the list is the plot's colour key
    first.setCheckState(Qt.CheckState.Unchecked)
    qtbot.waitUntil(lambda: len(sweep.plot.curves) == 1)
    assert sweep.runs.item(0).data(Qt.ItemDataRole.DecorationRole) is None
    sweep.runs.item(0).setCheckState(Qt.CheckState.Checked)
    qtbot.waitUntil(lambda: len(sweep.plot.curves) == 2)
    sweep.export_to(tmp_path / "runs.csv", "csv")
    rows = list(csv.DictReader((tmp_path / "runs.csv").read_text().splitlines()))
    assert [(r["n_gen"], r["depth"]) for r in rows] == [("16", "0"), ("16", "512"), ("8", "0"), ("8", "512")]
    sweep.export_to(tmp_path / "runs.json", "json")
    assert len(json.loads((tmp_path / "runs.json").read_text())["runs"]) == 2
