"""The model drawn (app/core/gguf/architecture.py) from the real models' GGUF headers, against known values."""

from __future__ import annotations

import pytest

from app.core.gguf.architecture import DEFAULT_ROPE_BASE_SWA, AttentionKind, attention_label, describe_architecture
from app.core.gguf.ffn_activation import FfnActivation, ffn_activation, ffn_name
from app.core.gguf.gguf_info import read_gguf_info
from tests.support.models import llama_metadata, llama_tensors, write_gguf


def test_smollm2_anatomy(smollm2_twin):
    arch = describe_architecture(read_gguf_info(smollm2_twin.path))
    # SmolLM2-135M (HuggingFaceTB's config.json): 30 layers, hidden 576, 9 heads, 3 KV heads,
    # intermediate 1536, vocabulary 49,152, rope_theta 100,000, tied embeddings.
    n_embd, n_ff, n_vocab, kv = 576, 1536, 49152, 3 * 64
    assert arch.n_layer == 30 and arch.n_embd == n_embd and arch.arch == "llama"
    emb = arch.embedding
    assert emb is not None and (emb.n_vocab, emb.n_embd, emb.type_name, emb.tied) == (n_vocab, n_embd, "Q8_0", True)
    assert emb.n_bytes == n_vocab * n_embd // 32 * 34 and emb.row_bytes == n_embd // 32 * 34
    assert arch.head.tied and arch.head.n_bytes == 0 and arch.head.n_params == n_embd  # output_norm only
    for b in arch.blocks:
        a = b.attention
        assert (a.n_head, a.n_head_kv, a.gqa_ratio, a.head_dim_k, a.head_dim_v) == (9, 3, 3, 64, 64)
        assert a.rope_base == 100_000.0 and a.rope_base_from_file and not a.is_swa
        assert (b.ffn.n_ff, b.ffn.is_moe, b.ffn.gated) == (n_ff, False, True)
        # q, k, v, o + gate, up, down + two norms, counted from the shapes
        per_block = 2 * n_embd * n_embd + 2 * n_embd * kv + 3 * n_embd * n_ff + 2 * n_embd
        assert b.n_params == per_block
        assert dict(b.bytes_by_type) == {
            "Q4_1": (2 * n_embd * n_embd + 2 * n_embd * kv + 3 * n_embd * n_ff) // 32 * 20,
            "F32": 2 * n_embd * 4,
        }
    assert arch.n_params == 134_515_008 == n_vocab * n_embd + 30 * per_block + n_embd
    assert arch.block_params + emb.n_params + arch.head.n_params == arch.n_params
    assert arch.block_groups() == [(0, 29)] and arch.n_swa_layers == 0 and not arch.is_moe
    assert arch.rope_dims == 64 and arch.rope_scaling == "none"


def test_gemma3_anatomy_with_its_sliding_window_pattern(gemma_twin):
    info = read_gguf_info(gemma_twin.path)
    arch = describe_architecture(info)
    # Gemma 3 270M: 18 layers, hidden 640, 4 heads, 1 KV head of 256, FFN 2048, 262,144 tokens,
    # every sixth layer global (5 local : 1 global), window 512, global rope_theta 1,000,000.
    assert arch.n_layer == 18 and arch.n_embd == 640
    assert [b.index for b in arch.blocks if not b.attention.is_swa] == [5, 11, 17]
    for b in arch.blocks:
        a = b.attention
        assert (a.n_head, a.n_head_kv, a.gqa_ratio, a.head_dim_k) == (4, 1, 4, 256)
        assert b.ffn.n_ff == 2048
        if a.is_swa:
            assert a.sliding_window == 512
            # No rope.freq_base_swa in this file: llama.cpp's default, and the view says so.
            assert "gemma3.rope.freq_base_swa" not in info.metadata
            assert (a.rope_base, a.rope_base_from_file) == (DEFAULT_ROPE_BASE_SWA, False)
        else:
            assert (a.sliding_window, a.rope_base, a.rope_base_from_file) == (0, 1_000_000.0, True)
    emb = arch.embedding
    assert emb is not None and (emb.n_vocab, emb.n_embd, emb.tied) == (262_144, 640, True)
    assert arch.n_params == 268_098_176 == info.n_params
    assert arch.n_bytes == info.tensor_bytes == sum(b.n_bytes for b in arch.blocks) + emb.n_bytes + 640 * 4
    # Q4_K_M mixes types per tensor: a block's bytes by type add up to its bytes.
    for b in arch.blocks:
        assert sum(n for _, n in b.bytes_by_type) == b.n_bytes
        assert {t for t, _ in b.bytes_by_type} >= {"Q5_0", "F32"}
    assert arch.n_swa_layers == 15


def _moe_model(tmp_path, tied: bool):
    n_layer, n_embd, n_vocab, n_expert, n_used, n_ff_exp = 2, 64, 80, 4, 2, 32
    md = llama_metadata(
        n_layer=n_layer,
        n_embd=n_embd,
        n_vocab=n_vocab,
        extra={
            "llama.expert_count": n_expert,
            "llama.expert_used_count": n_used,
            "llama.expert_feed_forward_length": n_ff_exp,
        },
    )
    tensors = [
        t
        for t in llama_tensors(n_layer=n_layer, n_embd=n_embd, n_vocab=n_vocab)
        if ".ffn_" not in t[0] or "norm" in t[0]
    ]
    for i in range(n_layer):
        tensors += [
            (f"blk.{i}.ffn_gate_inp.weight", (n_embd, n_expert), "F32"),
            (f"blk.{i}.ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), "Q4_0"),
            (f"blk.{i}.ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), "Q4_0"),
            (f"blk.{i}.ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), "Q4_0"),
        ]
    if not tied:
        tensors.append(("output.weight", (n_embd, n_vocab), "Q8_0"))
    return read_gguf_info(write_gguf(tmp_path / f"moe-{tied}.gguf", md, tensors))


def test_a_mixture_of_experts_block_is_told_apart_from_the_router(tmp_path):
    arch = describe_architecture(_moe_model(tmp_path, tied=False))
    assert arch.is_moe and not arch.head.tied and arch.head.type_name == "Q8_0"
    for b in arch.blocks:
        assert (b.ffn.n_expert, b.ffn.n_expert_used, b.ffn.n_ff_expert, b.ffn.n_ff) == (4, 2, 32, 0)
        assert b.ffn.gated
    assert arch.n_params == sum(t.n_elements for t in _moe_model(tmp_path, tied=False).tensors)


# --- attention and feed-forward named from the file and the architecture --------------------------------------


def test_attention_is_named_from_the_head_counts_in_the_file(smollm2_twin, gemma_twin, tmp_path):
    # SmolLM2-135M's GGUF: llama.attention.head_count 9, head_count_kv 3: three query heads per K/V head.
    smol = describe_architecture(read_gguf_info(smollm2_twin.path))
    assert {(b.attention.n_head, b.attention.n_head_kv) for b in smol.blocks} == {(9, 3)}
    assert {b.attention.label for b in smol.blocks} == {"GQA 3:1"}
    assert smol.blocks[0].attention.kind is AttentionKind.GROUPED_QUERY
    # Gemma 3 270M's GGUF: 4 query heads and one K/V head: multi-query, not "GQA 4:1".
    gem = describe_architecture(read_gguf_info(gemma_twin.path))
    assert {(b.attention.n_head, b.attention.n_head_kv) for b in gem.blocks} == {(4, 1)}
    assert {b.attention.label for b in gem.blocks} == {"multi-query attention (1 K/V head)"}
    assert gem.blocks[0].attention.kind is AttentionKind.MULTI_QUERY
    # As many K/V heads as query heads: plain multi-head attention.
    md = llama_metadata(n_head=4, n_head_kv=4)
    mha = describe_architecture(read_gguf_info(write_gguf(tmp_path / "mha.gguf", md, llama_tensors(n_head_kv=4))))
    assert mha.blocks[0].attention.label == "multi-head attention"
    assert mha.blocks[0].attention.kind is AttentionKind.MULTI_HEAD
    assert [attention_label(32, 8), attention_label(8, 8), attention_label(16, 1)] == [
        "GQA 4:1",
        "multi-head attention",
        "multi-query attention (1 K/V head)",
    ]


def test_the_feed_forward_is_named_from_the_architecture(smollm2_twin, gemma_twin, tmp_path):
    # llama (SmolLM2): llama.cpp builds ffn_gate/ffn_up with LLM_FFN_SILU, LLM_FFN_PAR: SwiGLU.
    smol = describe_architecture(read_gguf_info(smollm2_twin.path))
    assert {b.ffn.name for b in smol.blocks} == {"SwiGLU (SiLU-gated)"}
    # gemma3: LLM_FFN_GELU, LLM_FFN_PAR: GeGLU, not "SwiGLU/GeGLU".
    gem = describe_architecture(read_gguf_info(gemma_twin.path))
    assert {b.ffn.name for b in gem.blocks} == {"GeGLU (GELU-gated)"}
    assert [ffn_activation(a) for a in ("gemma", "gemma2", "gemma3", "llama", "qwen2", "gpt2")] == [
        FfnActivation.GELU,
        FfnActivation.GELU,
        FfnActivation.GELU,
        FfnActivation.SILU,
        FfnActivation.SILU,
        FfnActivation.GELU,
    ]
    assert ffn_name("gpt2", gated=False) == "GELU"  # up, GELU, down: no gate
    assert ffn_name("phi3", gated=False) == "SwiGLU (SiLU-gated)"  # gate and up fused in ffn_up
    # An architecture llama.cpp's table does not name: the file says gated, nothing more.
    md = {k.replace("llama.", "madeup.", 1): v for k, v in llama_metadata().items()}
    md["general.architecture"] = "madeup"
    unknown = describe_architecture(read_gguf_info(write_gguf(tmp_path / "madeup.gguf", md, llama_tensors())))
    assert unknown.arch == "madeup" and unknown.blocks[0].ffn.gated
    assert unknown.blocks[0].ffn.name == "gated FFN"
    assert ffn_activation("madeup") is None and ffn_name("madeup", gated=False) == "feed-forward"


@pytest.mark.parametrize(
    ("arch", "extra_tensor", "want"),
    [
        ("llama", None, "rope"),
        ("gpt2", "position_embd.weight", "learned"),
        ("bloom", None, "alibi"),
        ("mamba", None, "none"),
    ],
)
def test_positional_encoding_follows_llama_cpps_rope_type(tmp_path, arch, extra_tensor, want):
    """llama.cpp gives gpt2, bloom, mpt, mamba... no RoPE (llama_model_rope_type): the drawing and the
    How it works guide must not describe RoPE for them (it said 'RoPE base 10,000' for any model)."""
    from types import SimpleNamespace

    from app.core.gguf.architecture import Positions, describe_architecture, positions_of
    from app.core.gguf.gguf_info import read_gguf_info
    from app.core.inspection import pipeline_guide
    from app.ui.panels.architecture_view import attention_text
    from tests.support.models import llama_metadata, llama_tensors, write_gguf

    md = {
        (k.replace("llama.", f"{arch}.", 1) if k.startswith("llama.") else k): v
        for k, v in llama_metadata(name=f"Tiny {arch}").items()
    }
    md["general.architecture"] = arch
    tensors = llama_tensors()
    if extra_tensor:
        tensors.append((extra_tensor, (64, 2048), "F32"))
    path = write_gguf(tmp_path / f"{arch}.gguf", md, tensors)
    info = read_gguf_info(path)
    a = describe_architecture(info)
    assert a.positions is Positions(want) is positions_of(arch, {t.name for t in info.tensors})
    text = attention_text(a.blocks[0].attention, a.rope_dims, a.rope_scaling, a.positions)
    rows = dict(pipeline_guide._rope(SimpleNamespace(arch=a)))
    if want == "rope":
        assert "RoPE base" in text and "base" in rows and "rotated" in rows
    else:
        assert "RoPE base" not in text and "base" not in rows and "rotated" not in rows
        assert {"alibi": "ALiBi", "learned": "learned", "none": "no positional encoding"}[want] in text
        assert {"alibi": "ALiBi", "learned": "learned", "none": "none in attention"}[want] in rows["encoding"]
