"""The model drawn (app/core/architecture.py) from the real models' GGUF headers, against known values."""

from __future__ import annotations

from app.core.architecture import DEFAULT_ROPE_BASE_SWA, describe_architecture
from app.core.gguf_info import read_gguf_info
from tests.support.models import llama_metadata, llama_tensors, write_gguf


def test_smollm2_anatomy(smollm2):
    arch = describe_architecture(read_gguf_info(smollm2))
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


def test_gemma3_anatomy_with_its_sliding_window_pattern(gemma):
    info = read_gguf_info(gemma)
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
