"""app/core/quant: the types' llama.cpp numbers, the requantization judgement, the size estimates."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from app.core.gguf.gguf_info import read_gguf_info
from app.core.quant.plan import default_destination, is_requantization, plan_quantization, requantization_notice
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
    # Q2_K of SmolLM2: its 576-wide rows fall back to Q4_0: llama.cpp's dry run says 5.14 BPW, not 2.6;
    # the estimate leaves out the mix's extra bits (attention V, FFN down), within 5 %
    assert plan.option(QuantType.Q2_K).bits_per_weight == pytest.approx(5.14, rel=0.05)


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
    assert bpw[QuantType.Q2_K] == pytest.approx(6.88, rel=0.05)


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
