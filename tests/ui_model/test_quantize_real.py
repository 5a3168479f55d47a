"""Issue 21 §2 on llama.cpp: the "Make a quantization" dialog driving a real job engine process."""

from __future__ import annotations

from pathlib import Path

from app.core.gguf.gguf_info import read_gguf_info
from app.core.quant.plan import plan_quantization
from app.core.quant.types import QuantType
from app.ui.common.fmt import format_bytes
from app.ui.quant.quantize_dialog import QuantizeDialog, Sizing
from app.ui.quant.quantize_job import QuantizeJob, part_file


def _dialog(qtbot, source: Path, folder: Path) -> QuantizeDialog:  # type: ignore[no-untyped-def]
    dialog = QuantizeDialog(plan_quantization([read_gguf_info(source)]), folder, QuantizeJob())
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_the_dialog_makes_a_q8_0_of_smollm2_with_llama_cpp(qtbot, smollm2, smollm2_q2_k, tmp_path):
    dialog = _dialog(qtbot, smollm2, tmp_path)
    # llama.cpp's dry run in the sizing job sizes each type before Start: to the byte the file it makes
    qtbot.waitUntil(lambda: dialog.sizing is not Sizing.SIZING, timeout=60_000)
    assert dialog.sizing is Sizing.EXACT
    q8, q2 = dialog.plan.option(QuantType.Q8_0), dialog.plan.option(QuantType.Q2_K)
    assert q8.exact and q2.exact and q2.expected_bytes == smollm2_q2_k.stat().st_size  # made by Quantize
    assert q2.fallback_tensors == 180 and dialog.types.topLevelItem(6).text(2) == "5.14"
    statuses: list = []
    dialog.job.progressed.connect(statuses.append)
    with qtbot.waitSignal(dialog.quantized, timeout=60_000) as made:
        dialog.start_button.click()
    dest = made.args[0]
    assert dest == tmp_path / "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf" and not part_file(dest).exists()
    info = read_gguf_info(dest)
    assert info.metadata["general.file_type"] == QuantType.Q8_0.ftype and info.quant_type == "Q8_0"
    assert statuses[-1].tensors_done == statuses[-1].tensors_total == 272
    assert statuses[-1].bytes_written == dest.stat().st_size == q8.expected_bytes
    assert dialog.types.topLevelItem(0).text(1) == format_bytes(dest.stat().st_size)
    assert "Made SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf" in dialog.message.plain and dialog.compare_button.isVisible()
    dialog.close()


def test_cancel_mid_quantization_leaves_neither_the_file_nor_its_part(qtbot, gemma, tmp_path):
    """Gemma 3 270M to Q8_0 takes a few seconds: cancelled after its first tensors, the process is killed."""
    dialog = _dialog(qtbot, gemma, tmp_path)
    dialog.select_type(QuantType.Q8_0)
    dest = dialog.destination
    dialog.start_button.click()
    qtbot.waitUntil(
        lambda: "Tensor 0 of" not in dialog.status.text() and "Tensor" in dialog.status.text(), timeout=60_000
    )
    assert part_file(dest).exists()
    with qtbot.waitSignal(dialog.job.cancelled, timeout=10_000):
        dialog.cancel_button.click()
    assert list(tmp_path.iterdir()) == []
    assert "Cancelled" in dialog.message.plain
    dialog.close()
