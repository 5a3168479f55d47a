"""The Speed vs context window on the scripted engine: run, progress, the chat held, cancel, runs kept, export."""

from __future__ import annotations

import csv
import json
import time
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt

from app.core.chat.context import KVCacheType
from app.core.depth_sweep.store import FILE_NAME, SweepRecord, SweepStore
from app.core.hardware import machine_load
from app.core.hardware.bandwidth import Bandwidth, machine_key
from app.ui.depth_sweep.plot import depth_x
from app.ui.depth_sweep.window import COLUMNS
from app.ui.window.notices import NoticeTopic
from tests.support.scripted_answers import SWEEP_ROOF
from tests.support.window import banner_button

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support raise")  # the sweep window raised, offscreen


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """A load average of 0 unless a test says otherwise: runs are not flagged by what else this machine runs."""
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (0.0, 0.0, 0.0))


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


def _bandwidth(gb_s: float) -> Bandwidth:
    return Bandwidth(gb_s * 1e9, 256 << 20, 2, 3, 1.0, time.time(), machine_key())


def _sweep(sweep, qtbot, window, depths: str) -> SweepRecord:
    sweep.depths.setText(depths)
    sweep.run_btn.click()
    qtbot.waitUntil(lambda: not window.engine.sweeping and sweep.run_btn.isEnabled(), timeout=5000)
    return window.depth_sweep.store.runs[-1]


def _roof_cells(sweep) -> list[str]:
    return [sweep.table.item(i, COLUMNS.index("roofline decode tok/s")).text() for i in range(sweep.table.rowCount())]


def test_each_run_keeps_the_roofline_it_was_measured_with_and_its_colour(window, qtbot):
    """Review 27 §3 and §5: kept runs' roofline columns were recomputed for the model loaded now and the latest
    bandwidth, one dashed line stopped at the current run's deepest depth, and every new run recoloured the others."""
    sweep = _open(window, qtbot)
    ctl = window.depth_sweep.controller
    ctl.set_bandwidth(_bandwidth(10.0))
    first = _sweep(sweep, qtbot, window, "0, 512")
    assert [b.depth for b in first.roofline] == [0, 512] and first.bandwidth_bytes_s == 10e9
    assert first.matmul_flop_s == SWEEP_ROOF and all(b.prefill_tok_s > 0 for b in first.roofline)
    color = sweep._colors()[first.run_id]
    cells = _roof_cells(sweep)
    assert cells[0] == f"{first.roofline[0].decode_tok_s:.1f}"
    # Another bandwidth measurement and another KV cache type: the kept run's roofline stays as it was.
    ctl.set_bandwidth(_bandwidth(20.0))
    with qtbot.waitSignal(window.engine.model_loaded, timeout=5000):
        window.loader.reload_with(replace(window.loader.current_load, type_k=KVCacheType.Q8_0))
    sweep._redraw()
    assert _roof_cells(sweep) == cells and "10.0 GB/s" in sweep.roof_line.text()
    second = _sweep(sweep, qtbot, window, "0, 512, 1024")
    assert second.bandwidth_bytes_s == 20e9 and second.key.type_k == "q8_0"
    stored = {r.run_id: r for r in SweepStore(window.paths.data_dir / FILE_NAME).runs}
    assert stored[first.run_id].roofline == first.roofline  # read back from the file as kept
    # Each run: its own dashed roofline, in its own colour, to its own deepest depth; colours unchanged.
    colors = sweep._colors()
    assert colors[first.run_id] == color and colors[second.run_id] != color
    for run, deepest in ((first, 512), (second, 1024)):
        decode_roof = sweep.plot.roofs[run.run_id][0]
        assert max(decode_roof.getData()[0]) == depth_x(deepest)
        assert decode_roof.opts["pen"].color().name() == colors[run.run_id].lower()
    # A run kept before runs kept their roofline says so instead of borrowing today's.
    old = {k: v for k, v in first.to_dict().items() if k not in ("roofline", "bandwidth_bytes_s", "matmul_flop_s")}
    legacy = SweepRecord.from_dict(old)
    assert not legacy.roofline and "no roofline kept" in legacy.roof_text()


def test_a_run_measured_under_load_is_flagged_in_the_list_the_status_and_the_export(
    window, qtbot, monkeypatch, tmp_path
):
    """Review 27 §4: figures taken while other work shared the CPUs were kept and shown like quiet ones."""
    sweep = _open(window, qtbot)
    ctl = window.depth_sweep.controller
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    quiet = _sweep(sweep, qtbot, window, "0, 512")
    assert not quiet.under_load and quiet.load_text() == "" and "under load" not in sweep.runs.item(0).text()
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # other programs busy
    busy = _sweep(sweep, qtbot, window, "0, 512")
    assert busy.under_load and busy.load_per_cpu > machine_load.UNDER_LOAD_PER_CPU
    assert "measured under load" in sweep.status.text() and sweep.runs.item(0).text().endswith("under load")
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(ctl, "_others", lambda: ("a comparison",))  # a Glassbox job ran meanwhile
    job = _sweep(sweep, qtbot, window, "0, 512")
    assert job.under_load and "a comparison ran meanwhile" in job.load_text()
    sweep.export_to(tmp_path / "runs.csv", "csv")
    rows = list(csv.DictReader((tmp_path / "runs.csv").read_text().splitlines()))
    flags = {r["under_load"] for r in rows}
    assert "" in flags and any("a comparison" in f for f in flags) and any("other work kept" in f for f in flags)
