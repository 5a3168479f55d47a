"""Issue 21 §2, the window: the Library's "Quantize…" and the "Make a quantization" dialog on a scripted job host
(tests/ui_model/test_quantize_real.py runs it on llama.cpp)."""

from __future__ import annotations

import threading
from pathlib import Path

from app.core import protocol as P
from app.core.gguf.gguf_info import read_gguf_info
from app.core.quant.plan import plan_quantization
from app.core.quant.types import QuantType
from app.ui.quant.quantize_dialog import QuantizeDialog
from app.ui.quant.quantize_job import QuantizeJob, part_file
from tests.support.job_host import ScriptedJobHost
from tests.support.models import write_tiny_model
from tests.support.window import close_window, make_window


def _made(req, emit, _cancelled) -> None:  # type: ignore[no-untyped-def]
    """A quantization that writes its .part, reports three tensors, then the whole file."""
    dest = Path(req.dest)
    part_file(dest).write_bytes(b"x" * 300)
    for i in (1, 2, 3):
        emit(P.QuantizeProgress(req.request_id, i, 3, 100 * i, 300, 0.1 * i))
    part_file(dest).unlink()
    write_tiny_model(dest, name="Made Here")
    emit(P.Quantized(req.request_id, str(dest), req.qtype, dest.stat().st_size, 1000, 3, True, 0.3, 2))


def _dialog(qtbot, source: Path, folder: Path, script) -> QuantizeDialog:  # type: ignore[no-untyped-def]
    dialog = QuantizeDialog(
        plan_quantization([read_gguf_info(source)]), folder, QuantizeJob(lambda: ScriptedJobHost(script))
    )
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_the_dialog_offers_the_types_with_sizes_and_warns_of_requantization(qtbot, smollm2, tmp_path):
    dialog = _dialog(qtbot, smollm2, tmp_path, _made)
    rows = [dialog.types.topLevelItem(i) for i in range(dialog.types.topLevelItemCount())]
    assert [r.text(0) for r in rows] == [q.value for q in QuantType]
    assert rows[0].text(1) == "138.1 MiB" and rows[0].text(2) == "8.51"  # Q8_0: llama.cpp's figure
    assert dialog.notice.isVisible() and "requantization" in dialog.notice.plain
    assert not dialog.refused_label.isVisible()
    assert dialog.name_edit.text() == "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf"
    dialog.select_type(QuantType.Q2_K)
    assert dialog.name_edit.text() == "SmolLM2-135M-Instruct.Q4_1.Q2_K.gguf"
    dialog.name_edit.textEdited.emit("mine")
    dialog.name_edit.setText("mine")
    dialog.select_type(QuantType.Q4_0)  # a typed name is kept
    assert dialog.destination == tmp_path / "mine.gguf"


def test_a_type_the_source_already_has_is_named_and_not_offered(qtbot, gemma, tmp_path):
    dialog = _dialog(qtbot, gemma, tmp_path, _made)
    offered = {dialog.types.topLevelItem(i).text(0) for i in range(dialog.types.topLevelItemCount())}
    assert "Q4_K_M" not in offered and len(offered) == 6
    assert dialog.refused_label.isVisible() and "already Q4_K_M" in dialog.refused_label.text()


def test_a_quantization_runs_reports_progress_and_offers_the_comparison(qtbot, smollm2, tmp_path):
    dialog = _dialog(qtbot, smollm2, tmp_path, _made)
    statuses: list = []
    dialog.job.progressed.connect(statuses.append)
    with qtbot.waitSignal(dialog.quantized, timeout=10_000) as made:
        dialog.start_button.click()
    dest = tmp_path / "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf"
    assert made.args == [dest] and dest.is_file() and not part_file(dest).exists()
    assert [s.tensors_done for s in statuses] == [1, 2, 3] and statuses[-1].fraction == 1.0
    assert "Tensor 3 of 3" in dialog.status.text()
    assert dialog.message.kind.value == "info" and dest.name in dialog.message.plain
    assert "2 of 3 tensors another type" in dialog.message.plain
    assert dialog.compare_button.isVisible() and dialog.start_button.text() == "Make another"
    with qtbot.waitSignal(dialog.compare_requested, timeout=1000) as compare:
        dialog.compare_button.click()
    assert compare.args == [smollm2, dest]


def test_a_failure_is_shown_in_words_and_a_taken_name_is_refused_before_starting(qtbot, smollm2, tmp_path):
    def fails(req, emit, _cancelled):  # type: ignore[no-untyped-def]
        part_file(Path(req.dest)).write_bytes(b"half")
        emit(P.Failed(req.request_id, P.FailureKind.QUANTIZE, f"The disk holding {tmp_path} is full."))

    dialog = _dialog(qtbot, smollm2, tmp_path, fails)
    taken = tmp_path / dialog.name_edit.text()
    taken.write_bytes(b"mine")
    dialog.start_button.click()
    assert dialog.message.kind.value == "error" and "already exists" in dialog.message.plain
    assert not dialog.job.running and taken.read_bytes() == b"mine"
    dialog.name_edit.setText("other")
    with qtbot.waitSignal(dialog.job.failed, timeout=10_000):
        dialog.start_button.click()
    assert "is full" in dialog.message.plain and dialog.start_button.isVisible()
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.name]  # the .part is gone


def test_cancel_kills_the_job_and_removes_its_part_file(qtbot, smollm2, tmp_path):
    release = threading.Event()

    def hangs(req, emit, _cancelled):  # type: ignore[no-untyped-def]
        part_file(Path(req.dest)).write_bytes(b"half")
        emit(P.QuantizeProgress(req.request_id, 1, 272, 4, 100, 0.1))
        release.wait(30)  # like llama_model_quantize: never looks at the flag

    hosts: list[ScriptedJobHost] = []

    def make() -> ScriptedJobHost:
        hosts.append(ScriptedJobHost(hangs))
        return hosts[-1]

    dialog = QuantizeDialog(plan_quantization([read_gguf_info(smollm2)]), tmp_path, QuantizeJob(make))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.start_button.click()
    qtbot.waitUntil(lambda: "Tensor 1 of 272" in dialog.status.text(), timeout=10_000)
    assert dialog.cancel_button.isVisible() and not dialog.close_button.isEnabled()
    with qtbot.waitSignal(dialog.job.cancelled, timeout=5000):
        dialog.cancel_button.click()
    release.set()
    assert hosts[0].killed and list(tmp_path.iterdir()) == []
    assert "Cancelled" in dialog.message.plain and dialog.start_button.isVisible()


def test_the_librarys_quantize_opens_the_dialog_and_selects_the_result(qtbot, smollm2, tmp_path):
    win = make_window(qtbot)
    try:
        models = win.models
        models.quantize_hosts = lambda: ScriptedJobHost(_made)
        source = write_tiny_model(models.paths.models_dir / "Source-Q4_1.gguf", name="Source", file_type=3)
        tab = models.library_tab
        with qtbot.waitSignal(tab.entries_changed, timeout=10_000):
            tab.refresh()
        assert tab.select_path(source) and tab.quantize_button.isEnabled()
        tab.quantize_button.click()
        dialog = models.findChild(QuantizeDialog)
        assert dialog is not None and dialog.isVisible() and dialog.folder == models.paths.models_dir
        compared: list = []
        models.compare_requested.connect(lambda a, b: compared.append((a, b)))
        dialog.select_type(QuantType.Q4_0)
        with qtbot.waitSignal(tab.entries_changed, timeout=10_000):
            dialog.start_button.click()
        made = models.paths.models_dir / "Source-Q4_1.Q4_0.gguf"
        qtbot.waitUntil(lambda: tab.selected_entry() is not None and tab.selected_entry().path == made, timeout=10_000)
        dialog.compare_button.click()
        assert compared == [(source, made)]
        dialog.close()
    finally:
        close_window(win)
