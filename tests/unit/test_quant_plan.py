"""app/core/quant: the types' llama.cpp numbers, the requantization judgement, the rough sizes, and the dry run's
figures merged in (tests/engine/test_quantize.py runs llama.cpp's dry run itself)."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from app.core import protocol as P
from app.core.gguf.gguf_info import read_gguf_info
from app.core.quant.plan import (
    default_destination,
    fallback_note,
    is_requantization,
    name_problem,
    plan_quantization,
    requantization_notice,
    with_dry_run,
)
from app.core.quant.types import QuantType
from tests.support.models import write_gguf


def test_each_type_carries_llama_cpps_file_type_number_and_base_type():
    for q in QuantType:
        assert gguf.LlamaFileType[f"MOSTLY_{q.value}"] == q.ftype
    assert [q.base_type for q in QuantType] == ["Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0", "Q3_K", "Q2_K"]
    assert QuantType.Q8_0.base_bits_per_weight == 8.5 and QuantType.Q4_K_M.base_bits_per_weight == 4.5


def test_a_q4_1_source_is_a_requantization_with_every_type_offered_and_rough_sizes(smollm2):
    info = read_gguf_info(smollm2)
    plan = plan_quantization([info])
    assert plan.requantization and plan.source_type == "Q4_1" and plan.n_tensors == 272
    assert all(o.allowed and not o.exact and o.fallback_note == "" for o in plan.options)
    assert "already quantized (Q4_1)" in plan.notice and "requantization" in plan.notice
    # rough: each 2-D weight at the type's base bits (8.5 for Q8_0), the norms as they are
    q8 = plan.option(QuantType.Q8_0)
    norms = sum(t.n_bytes for t in info.tensors if len(t.shape) == 1)
    weights = sum(t.n_elements for t in info.tensors if len(t.shape) >= 2)
    assert q8.expected_bytes == info.data_offset + norms + round(weights * 8.5 / 8)
    sizes = [o.expected_bytes for o in plan.options]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]  # largest type first
    # knowing no per-tensor rule, Q2_K's rough 2.6 bits per weight is far from llama.cpp's 5.14 (the fallbacks)
    assert plan.option(QuantType.Q2_K).bits_per_weight == pytest.approx(2.63, abs=0.02)


def _fallbacks(n: int, chosen: str, given: str, row: int = 576) -> tuple[P.FallbackTensor, ...]:
    return tuple(P.FallbackTensor(f"blk.{i}.attn_k.weight", row, 256, chosen, given) for i in range(n))


def test_the_dry_runs_figures_replace_the_rough_ones_with_the_fallback_sentence(smollm2):
    """llama.cpp's dry run (tests/engine/test_quantize.py) of SmolLM2's Q2_K: 88,201,792 bytes, 5.14 BPW,
    180 tensors falling back to Q4_0 (150 chose Q2_K, 30 Q3_K: the mix's FFN down and attention V)."""
    plan = plan_quantization([read_gguf_info(smollm2)])
    q2 = P.PlannedType(
        QuantType.Q2_K, 88_201_792, 5.139, 272, _fallbacks(150, "Q2_K", "Q4_0") + _fallbacks(30, "Q3_K", "Q4_0")
    )
    q4 = P.PlannedType(
        QuantType.Q4_0, 91_726_912, 5.349, 272, (P.FallbackTensor("token_embd.weight", 576, 256, "Q6_K", "Q8_0"),)
    )
    q8 = P.PlannedType(QuantType.Q8_0, 144_811_072, 8.506, 272)
    refused = P.PlannedType(QuantType.Q3_K_M, 0, 0.0, 272, refusal="Q3_K_M: llama.cpp refuses it: no.")
    sized = with_dry_run(plan, P.QuantizePlanned(1, str(smollm2), (q8, q4, refused, q2), 0.5))
    o = sized.option(QuantType.Q2_K)
    assert o.exact and o.expected_bytes == 88_201_792 and o.bits_per_weight == 5.139 and o.fallback_tensors == 180
    assert o.fallback_note == (
        "180 of 272 tensors fall back to Q4_0: their rows of 576 weights are not a whole number of Q2_K or Q3_K "
        "blocks (256 weights), so the file is larger than Q2_K's 2.62 bits per weight suggest."
    )
    assert sized.option(QuantType.Q4_0).fallback_note.startswith("1 of 272 tensors falls back to Q8_0: its rows")
    # Why a Q6_K block in a Q4_0 file at all: llama.cpp's mix gives the (tied) output head Q6_K (review 27 §7).
    assert "(256 weights; llama.cpp gives the output head (token_embd.weight) Q6_K in a Q4_0 file)" in (
        sized.option(QuantType.Q4_0).fallback_note
    )
    assert sized.option(QuantType.Q8_0).exact and sized.option(QuantType.Q8_0).fallback_note == ""
    assert not sized.option(QuantType.Q3_K_M).allowed and "refuses it" in sized.option(QuantType.Q3_K_M).refusal
    assert sized.option(QuantType.Q6_K) == plan.option(QuantType.Q6_K)  # not in the answer: rough, as it was


def test_the_fallback_note_says_other_lengths_and_both_types():
    mixed = _fallbacks(60, "Q4_K", "Q5_0", row=640) + _fallbacks(30, "Q4_K", "F16", row=100)
    note = fallback_note(QuantType.Q4_K_M, mixed, 236)
    assert note.startswith("90 of 236 tensors fall back to F16 or Q5_0: their rows of 640 weights (and other lengths)")


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
