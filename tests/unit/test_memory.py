"""KV cache and memory math (app/core/hardware/memory.py) on the real models' metadata."""

from __future__ import annotations

import pytest

from app.core.gguf.gguf_info import read_gguf_info
from app.core.hardware.memory import (
    KVCacheType,
    compute_buffer_estimate,
    estimate_memory,
    ggml_row_size,
    kv_cache_layout,
    mha_kv_bytes,
    pad,
)

MIB = 1024 * 1024


def test_row_sizes():
    assert ggml_row_size("f16", 192) == 384
    assert ggml_row_size("q8_0", 256) == 272  # 34 bytes per block of 32
    with pytest.raises(ValueError, match="unknown ggml type 'f17'"):
        ggml_row_size("f17", 32)


def test_smollm2_kv_by_hand(smollm2_twin):
    info = read_gguf_info(smollm2_twin.path)
    lay = kv_cache_layout(info, 4096)
    # 30 layers x 3 KV heads x 64 dims x (K + V) x 2 bytes (f16) per token
    assert lay.bytes_per_token == 30 * 3 * 64 * 2 * 2 == 23040
    assert lay.allocated_bytes == 4096 * 23040 == 90 * MIB
    assert lay.used_bytes(100) == 100 * 23040
    assert lay.used_bytes(10_000) == lay.allocated_bytes
    assert kv_cache_layout(info, 1000).n_ctx == 1024  # llama.cpp pads n_ctx to 256


def test_gemma_kv_with_and_without_full_swa_cache(gemma_twin):
    info = read_gguf_info(gemma_twin.path)
    full = kv_cache_layout(info, 4096, swa_full=True)
    small = kv_cache_layout(info, 4096, swa_full=False, n_ubatch=512)
    per_layer = 256 * 1 * 2 * 2  # head dim 256, 1 KV head, K+V, f16
    assert full.allocated_bytes == 18 * 4096 * per_layer
    # SWA layers keep pad(512 + 512, 256) = 1024 cells when swa_full is off
    assert small.allocated_bytes == 3 * 4096 * per_layer + 15 * 1024 * per_layer
    assert small.used_bytes(3000) == 3 * 3000 * per_layer + 15 * 1024 * per_layer
    assert small.n_swa_layers == 15


def test_memory_estimate_and_compute(smollm2_twin):
    info = read_gguf_info(smollm2_twin.path)
    est = estimate_memory(info, 4096)
    assert est.weights == info.tensor_bytes
    assert est.kv_cache == 90 * MIB
    assert est.total == est.weights + est.kv_cache + est.compute
    # logits of one ubatch dominate for SmolLM2: 49152 x 512 x 4 bytes
    assert compute_buffer_estimate(info, 4096) >= 49152 * 512 * 4
    assert "KV cache 90.0 MiB" in est.breakdown()


def test_pad():
    assert pad(1, 256) == 256 and pad(256, 256) == 256 and pad(257, 256) == 512


def test_cache_types_are_llama_cpps_with_ggmls_block_sizes():
    # common/arg.cpp kv_cache_types, in ggml's names and enum numbers (ggml.h)
    assert {t.value for t in KVCacheType} == {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}
    assert (KVCacheType.F16.ggml_type, KVCacheType.Q8_0.ggml_type, KVCacheType.Q4_0.ggml_type) == (1, 8, 2)
    assert [t for t in KVCacheType if not t.quantized] == [KVCacheType.F16, KVCacheType.BF16, KVCacheType.F32]
    assert all(t.block_size == 32 for t in KVCacheType if t.quantized)
    assert (KVCacheType.F16.bits_per_value, KVCacheType.Q8_0.bits_per_value, KVCacheType.Q4_0.bits_per_value) == (
        16.0,
        8.5,
        4.5,
    )
    assert KVCacheType.parse("Q8_0") is KVCacheType.Q8_0 and KVCacheType.parse("q2_k") is KVCacheType.F16
    assert f"{KVCacheType.Q8_0}" == "q8_0"


def test_quantized_kv_cache_bytes_by_hand(smollm2_twin, gemma_twin):
    info = read_gguf_info(smollm2_twin.path)
    # A row of 3 KV heads x 64 = 192 values: 6 blocks of 32; q8_0 blocks are 34 bytes, q4_0 18.
    q8 = kv_cache_layout(info, 4096, type_k="q8_0", type_v=KVCacheType.Q8_0)
    assert q8.bytes_per_token == 30 * 2 * 6 * 34 and q8.allocated_bytes == 4096 * 30 * 2 * 204
    assert (q8.type_k, q8.type_v) == (KVCacheType.Q8_0, KVCacheType.Q8_0)
    mixed = kv_cache_layout(info, 4096, type_k="q4_0", type_v="f16")
    assert mixed.bytes_per_token == 30 * (6 * 18 + 192 * 2)
    g = kv_cache_layout(read_gguf_info(gemma_twin.path), 4096, swa_full=False, type_k="q8_0", type_v="q8_0")
    # 1 KV head of 256: 8 blocks of 34 bytes each for K and V; 3 full layers x 4096 + 15 SWA x 1024 cells
    assert g.allocated_bytes == (3 * 4096 + 15 * 1024) * 2 * 8 * 34
    assert estimate_memory(info, 4096, type_k="q8_0", type_v="q8_0").kv_cache == q8.allocated_bytes
    with pytest.raises(ValueError, match="unknown KV cache type"):
        kv_cache_layout(info, 4096, type_k="q3_k")
    with pytest.raises(ValueError, match="do not fill whole q8_0 blocks"):
        ggml_row_size("q8_0", 48)


def test_what_the_kv_cache_would_take_with_one_kv_head_per_query_head(smollm2_twin, gemma_twin):
    # SmolLM2: 9 query heads share 3 KV heads (GQA 3:1): multi-head attention would take 3x.
    info = read_gguf_info(smollm2_twin.path)
    lay = kv_cache_layout(info, 4096)
    assert mha_kv_bytes(info, lay) == 30 * 9 * 64 * 2 * 2 * 4096 == 3 * lay.allocated_bytes
    q8 = kv_cache_layout(info, 4096, type_k=KVCacheType.Q8_0, type_v=KVCacheType.Q8_0)
    assert mha_kv_bytes(info, q8) == 3 * q8.allocated_bytes  # the same types, the same cells
    # Gemma 3 270M: 4 query heads, 1 KV head (multi-query), sliding-window layers keep their cells.
    g = read_gguf_info(gemma_twin.path)
    small = kv_cache_layout(g, 4096, swa_full=False, n_ubatch=512)
    assert g.n_head == 4 and mha_kv_bytes(g, small) == 4 * small.allocated_bytes
