"""app/core/quant: the types' llama.cpp numbers, the requantization judgement, the size estimates."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from app.core.gguf.gguf_info import read_gguf_info
from app.core.quant.plan import (
    default_destination,
    is_requantization,
    name_problem,
    plan_quantization,
    requantization_notice,
)
from app.core.quant.tensor_choice import choose_types
from app.core.quant.types import QuantType
from tests.support.models import write_gguf


def test_each_type_carries_llama_cpps_file_type_number_and_base_type():
    for q in QuantType:
        assert gguf.LlamaFileType[f"MOSTLY_{q.value}"] == q.ftype
    assert [q.base_type for q in QuantType] == ["Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0", "Q3_K", "Q2_K"]
    assert QuantType.Q8_0.base_bits_per_weight == 8.5 and QuantType.Q4_K_M.base_bits_per_weight == 4.5


def test_a_q4_1_source_is_a_requantization_with_every_type_offered(smollm2):
    plan = plan_quantization([read_gguf_info(smollm2)])
    assert plan.requantization and plan.source_type == "Q4_1" and plan.n_tensors == 272
    assert all(o.allowed for o in plan.options)
    assert "already quantized (Q4_1)" in plan.notice and "requantization" in plan.notice
    # Q8_0: every quantized tensor Q8_0 (8.5 bits per weight), the norms F32: llama.cpp's 8.51 BPW
    assert plan.option(QuantType.Q8_0).bits_per_weight == pytest.approx(8.51, abs=0.01)
    sizes = [o.expected_bytes for o in plan.options]
    assert sizes[0] > sizes[1] > sizes[2]  # Q8_0 > Q6_K > Q5_K_M
    # Q2_K of SmolLM2: its 576-wide rows fall back to Q4_0: llama.cpp's dry run says 5.14 BPW, not 2.6
    assert plan.option(QuantType.Q2_K).bits_per_weight == pytest.approx(5.14, abs=0.006)


# llama-quantize --dry-run --allow-requantize <model> <type> (llama-cpp-python 0.3.36's llama.cpp):
# (quant size MiB, BPW, "N of M tensor(s) required fallback quantization")
_SMOLLM2_DRY_RUN = {
    QuantType.Q8_0: (136.40, 8.51, 0),
    QuantType.Q6_K: (130.27, 8.12, 180),
    QuantType.Q5_K_M: (105.21, 6.56, 180),
    QuantType.Q4_K_M: (98.87, 6.17, 180),
    QuantType.Q4_0: (85.77, 5.35, 1),
    QuantType.Q3_K_M: (87.48, 5.46, 180),
    QuantType.Q2_K: (82.41, 5.14, 180),
}
_GEMMA_DRY_RUN = {
    QuantType.Q8_0: (271.81, 8.50, 0),
    QuantType.Q6_K: (263.64, 8.25, 90),
    QuantType.Q5_K_M: (241.76, 7.56, 90),
    QuantType.Q4_K_M: (235.16, 7.36, 90),
    QuantType.Q4_0: (224.00, 7.01, 1),
    QuantType.Q3_K_M: (224.53, 7.03, 90),
    QuantType.Q2_K: (219.87, 6.88, 90),
}


@pytest.mark.parametrize("model", ["smollm2", "gemma"])
def test_each_types_tensor_bytes_and_fallbacks_are_llama_cpps_dry_run(model, request):
    """The mix's rules (attention V, FFN down, attention output, the tied output) as llama.cpp's quantizer
    applies them: every type's size to the dry run's 0.01 MiB, its BPW and its fallback count exactly."""
    info = read_gguf_info(request.getfixturevalue(model))
    dry = _SMOLLM2_DRY_RUN if model == "smollm2" else _GEMMA_DRY_RUN
    plan = plan_quantization([info])
    for q, (mib, bpw, fallbacks) in dry.items():
        o = plan.option(q)
        assert o.weight_bytes / 2**20 == pytest.approx(mib, abs=0.005), q
        assert round(o.bits_per_weight, 2) == bpw and o.fallback_tensors == fallbacks, q
        assert o.expected_bytes == info.data_offset + sum(
            (c.n_bytes + 31) // 32 * 32 for c in choose_types(info, info.tensors, q)
        )
        assert (o.fallback_note != "") == (fallbacks > 0)


def test_the_fallback_note_names_the_rows_and_the_types(smollm2, gemma):
    smol = plan_quantization([read_gguf_info(smollm2)])
    assert smol.option(QuantType.Q2_K).fallback_note == (
        "180 of 272 tensors fall back to Q4_0: their rows of 576 weights are not a whole number of Q2_K or Q3_K "
        "blocks (256 weights), so the file is larger than Q2_K's 2.62 bits per weight suggest."
    )
    assert smol.option(QuantType.Q4_0).fallback_note.startswith("1 of 272 tensors falls back to Q8_0: its rows")
    g = plan_quantization([read_gguf_info(gemma)]).option(QuantType.Q4_K_M).fallback_note
    assert g.startswith("90 of 236 tensors fall back to ") and "640 weights" in g


def test_a_name_must_be_a_plain_file_name():
    assert name_problem("SmolLM2.Q2_K.gguf") == "" and name_problem("mine") == ""
    assert name_problem("  ") == "Type a name for the quantization."
    for bad in ("../escape", "sub/x.gguf", "/abs.gguf", "a\\b", "..", "."):
        assert "is not a file name" in name_problem(bad), bad


def test_a_type_the_source_already_is_is_refused_naming_it(gemma):
    plan = plan_quantization([read_gguf_info(gemma)])
    refused = [o for o in plan.options if not o.allowed]
    assert [o.qtype for o in refused] == [QuantType.Q4_K_M]
    assert "already Q4_K_M" in refused[0].refusal
    # llama.cpp's dry run (quant size, BPW) of Gemma 3 270M: Q8_0 8.50, Q6_K 8.25, Q4_0 7.01; Q2_K 6.88
    bpw = {o.qtype: o.bits_per_weight for o in plan.options}
    assert bpw[QuantType.Q8_0] == pytest.approx(8.50, abs=0.006)
    assert bpw[QuantType.Q6_K] == pytest.approx(8.25, abs=0.006)
    assert bpw[QuantType.Q4_0] == pytest.approx(7.01, abs=0.006)
    assert bpw[QuantType.Q2_K] == pytest.approx(6.88, abs=0.006)


def test_a_source_of_original_weights_is_not_a_requantization(tmp_path: Path):
    meta = {"general.architecture": "llama", "general.file_type": 1}  # LLAMA_FTYPE_MOSTLY_F16
    tensors = [("token_embd.weight", (64, 32), "F16"), ("blk.0.attn_norm.weight", (64,), "F32")]
    info = read_gguf_info(write_gguf(tmp_path / "f16.gguf", meta, tensors))
    assert not is_requantization(info)
    plan = plan_quantization([info])
    assert plan.notice == "" and all(o.allowed for o in plan.options)
    # without general.file_type the tensors decide
    quantized = read_gguf_info(
        write_gguf(tmp_path / "q.gguf", {"general.architecture": "llama"}, [("token_embd.weight", (64, 32), "Q8_0")])
    )
    assert is_requantization(quantized)
    assert "Q8_0" in requantization_notice("Q8_0")


def test_the_default_destination_names_the_source_and_the_type(tmp_path: Path):
    assert (
        default_destination(Path("/m/SmolLM2.Q4_1.gguf"), QuantType.Q8_0, tmp_path)
        == tmp_path / "SmolLM2.Q4_1.Q8_0.gguf"
    )
    split = Path("/m/big-Q4_K_M-00001-of-00003.gguf")
    assert default_destination(split, QuantType.Q2_K, tmp_path).name == "big-Q4_K_M.Q2_K.gguf"
