"""KV cache and memory math (app/core/memory.py) on the real models' metadata."""

from __future__ import annotations

import pytest

from app.core.gguf_info import read_gguf_info
from app.core.memory import compute_buffer_estimate, estimate_memory, ggml_row_size, kv_cache_layout, pad

MIB = 1024 * 1024


def test_row_sizes():
    assert ggml_row_size("f16", 192) == 384
    assert ggml_row_size("q8_0", 256) == 272  # 34 bytes per block of 32
    with pytest.raises(ValueError, match="unknown ggml type 'f17'"):
        ggml_row_size("f17", 32)


def test_smollm2_kv_by_hand(smollm2):
    info = read_gguf_info(smollm2)
    lay = kv_cache_layout(info, 4096)
    # 30 layers x 3 KV heads x 64 dims x (K + V) x 2 bytes (f16) per token
    assert lay.bytes_per_token == 30 * 3 * 64 * 2 * 2 == 23040
    assert lay.allocated_bytes == 4096 * 23040 == 90 * MIB
    assert lay.used_bytes(100) == 100 * 23040
    assert lay.used_bytes(10_000) == lay.allocated_bytes
    assert kv_cache_layout(info, 1000).n_ctx == 1024  # llama.cpp pads n_ctx to 256


def test_gemma_kv_with_and_without_full_swa_cache(gemma):
    info = read_gguf_info(gemma)
    full = kv_cache_layout(info, 4096, swa_full=True)
    small = kv_cache_layout(info, 4096, swa_full=False, n_ubatch=512)
    per_layer = 256 * 1 * 2 * 2  # head dim 256, 1 KV head, K+V, f16
    assert full.allocated_bytes == 18 * 4096 * per_layer
    # SWA layers keep pad(512 + 512, 256) = 1024 cells when swa_full is off
    assert small.allocated_bytes == 3 * 4096 * per_layer + 15 * 1024 * per_layer
    assert small.used_bytes(3000) == 3 * 3000 * per_layer + 15 * 1024 * per_layer
    assert small.n_swa_layers == 15


def test_memory_estimate_and_compute(smollm2):
    info = read_gguf_info(smollm2)
    est = estimate_memory(info, 4096)
    assert est.weights == info.tensor_bytes
    assert est.kv_cache == 90 * MIB
    assert est.total == est.weights + est.kv_cache + est.compute
    # logits of one ubatch dominate for SmolLM2: 49152 x 512 x 4 bytes
    assert compute_buffer_estimate(info, 4096) >= 49152 * 512 * 4
    assert "KV cache 90.0 MiB" in est.breakdown()


def test_pad():
    assert pad(1, 256) == 256 and pad(256, 256) == 256 and pad(257, 256) == 512
