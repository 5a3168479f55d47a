"""KV cache bytes: Glassbox's formula (app/core/hardware/memory.py) against what llama.cpp allocates."""

from __future__ import annotations

import pytest

from app.core import protocol as P
from app.core.hardware.memory import compute_buffer_estimate, kv_cache_layout, n_ubatch_for
from tests.support.engine import SYSTEM, start_engine

MIB = 1024 * 1024
# llama.cpp logs buffer sizes in MiB with two decimals: allow that rounding per buffer.
ROUNDING = 0.006 * MIB


@pytest.mark.parametrize("n_ctx", [256, 512, 1000, 4096])
def test_smollm2_kv_allocation_matches_llama_cpp(smollm2, n_ctx):
    eng = start_engine(smollm2, n_ctx=n_ctx)
    try:
        ml = eng.loaded
        assert ml.n_ctx == -(-n_ctx // 256) * 256
        assert ml.kv_reported_bytes > 0, "llama.cpp's KV buffer line was not captured"
        assert abs(ml.kv_allocated_bytes - ml.kv_reported_bytes) <= ROUNDING
        assert ml.kv_layout.allocated_bytes == ml.kv_allocated_bytes
        assert ml.kv_layout.layer_cells == (ml.n_ctx,) * 30 and ml.kv_layout.n_swa_layers == 0
        est = compute_buffer_estimate(ml.info, ml.n_ctx)
        assert est == pytest.approx(ml.compute_reported_bytes, rel=0.15)
        # KV bytes in use grow with the context, by the per-token figure.
        fin = eng.generate([SYSTEM, ("user", "Hello!")], temperature=0.0, max_tokens=8)
        assert fin.stats.kv_allocated_bytes == ml.kv_allocated_bytes
        assert fin.stats.kv_used_bytes == fin.stats.context_used * 30 * 3 * 64 * 2 * 2
    finally:
        eng.host.stop()


@pytest.mark.parametrize("swa_full", [True, False])
def test_gemma3_sliding_window_kv_allocation_matches_llama_cpp(gemma, swa_full):
    eng = start_engine(gemma, n_ctx=4096, swa_full=swa_full)
    try:
        ml = eng.loaded
        assert abs(ml.kv_allocated_bytes - ml.kv_reported_bytes) <= 2 * ROUNDING  # two caches: full + SWA
        expected_mib = 72.0 if swa_full else 27.0  # 18 layers x 4096 cells, or 3 x 4096 + 15 x 1024
        assert ml.kv_allocated_bytes == expected_mib * MIB
        # The layout travels with ModelLoaded: the one the window used to recompute, SWA cells included.
        assert ml.kv_layout == kv_cache_layout(ml.info, ml.n_ctx, n_ubatch=n_ubatch_for(ml.n_batch), swa_full=swa_full)
        assert ml.kv_layout.allocated_bytes == ml.kv_allocated_bytes
        assert ml.kv_layout.n_swa_layers == 15
        assert set(ml.kv_layout.layer_cells) == ({4096} if swa_full else {4096, 1024})
        assert ml.compute_reported_bytes == pytest.approx(compute_buffer_estimate(ml.info, ml.n_ctx), rel=0.15)
        # A base model without a chat template still answers, through the plain transcript.
        assert ml.chat_template is None
        fin = eng.generate([("user", "The capital of France is")], temperature=0.0, max_tokens=6)
        assert isinstance(fin, P.Finished) and fin.stats.generated_tokens > 0
    finally:
        eng.host.stop()


@pytest.mark.timeout(65)  # 21 s in the suite on this machine (tests/ durations, 2 cores)
def test_gemma3_prefix_reuse_without_full_swa_cache(gemma):
    """Without swa_full, a prefix longer than the window cannot be kept: the engine starts over cleanly."""
    eng = start_engine(gemma, n_ctx=2048, swa_full=False)
    try:
        long = " ".join(f"sentence {i} about nothing in particular." for i in range(150))
        a = eng.generate([("user", long)], temperature=0.0, max_tokens=4)
        b = eng.generate([("user", long + " More.")], temperature=0.0, max_tokens=4)
        assert isinstance(b, P.Finished)
        assert b.stats.cached_tokens + b.stats.evaluated_tokens == b.stats.prompt_tokens
        assert a.stats.prompt_tokens > 700
    finally:
        eng.host.stop()
