"""Flash attention and K / V cache types through the engine, on the real models: Glassbox's KV
formula against what llama.cpp allocates, and llama.cpp's own answer to a quantized V cache
without flash attention. Also the parameter count and size of the drawn architecture against
llama.cpp's ``llama_model_n_params`` / ``llama_model_size``."""

from __future__ import annotations

import llama_cpp
import pytest

from app.core import protocol as P
from app.core.chat.context import FlashAttention
from app.core.gguf.architecture import describe_architecture
from app.core.gguf.gguf_info import read_gguf_info
from app.core.hardware.memory import KVCacheType, compute_buffer_estimate, kv_cache_layout, n_ubatch_for
from app.engine.llama_context import GlassboxLlama
from tests.support.engine import SYSTEM, start_engine

MIB = 1024 * 1024
ROUNDING = 0.006 * MIB  # llama.cpp logs each KV buffer in MiB with two decimals


@pytest.mark.parametrize("flash_attn", [FlashAttention.AUTO, FlashAttention.ON])
def test_smollm2_q8_0_kv_cache_matches_llama_cpps_allocation(smollm2, flash_attn):
    eng = start_engine(smollm2, n_ctx=2048, flash_attn=flash_attn, type_k="q8_0", type_v="q8_0")
    try:
        ml = eng.loaded
        assert (ml.settings.type_k, ml.settings.type_v, ml.settings.flash_attn) == (
            KVCacheType.Q8_0,
            KVCacheType.Q8_0,
            flash_attn,
        )
        assert ml.flash_attn_active  # a quantized V cache runs with flash attention
        assert ml.kv_layout.type_k is KVCacheType.Q8_0 and ml.kv_layout.type_v is KVCacheType.Q8_0
        # 30 layers x 2048 cells x (K + V) x 6 blocks of 34 bytes
        assert ml.kv_allocated_bytes == 30 * 2048 * 2 * 6 * 34
        assert ml.kv_reported_bytes > 0 and abs(ml.kv_allocated_bytes - ml.kv_reported_bytes) <= ROUNDING
        # The compute buffer estimate holds with flash attention on too (the logits dominate).
        assert ml.compute_reported_bytes == pytest.approx(compute_buffer_estimate(ml.info, ml.n_ctx), rel=0.15)
        fin = eng.generate([SYSTEM, ("user", "Hello!")], temperature=0.0, max_tokens=8)
        assert isinstance(fin, P.Finished) and fin.stats.generated_tokens > 0
        assert fin.stats.kv_used_bytes == fin.stats.context_used * 30 * 2 * 6 * 34
    finally:
        eng.host.stop()


@pytest.mark.parametrize("swa_full", [True, False])
def test_gemma3_q8_0_kv_cache_matches_llama_cpps_allocation(gemma, swa_full):
    eng = start_engine(gemma, n_ctx=4096, swa_full=swa_full, flash_attn="auto", type_k="q8_0", type_v="q8_0")
    try:
        ml = eng.loaded
        expected = kv_cache_layout(
            ml.info, ml.n_ctx, n_ubatch=n_ubatch_for(ml.n_batch), swa_full=swa_full, type_k="q8_0", type_v="q8_0"
        )
        assert ml.kv_layout == expected
        cells = 18 * 4096 if swa_full else 3 * 4096 + 15 * 1024
        assert ml.kv_allocated_bytes == cells * 2 * 8 * 34  # 1 KV head of 256: 8 blocks of 34 bytes
        assert abs(ml.kv_allocated_bytes - ml.kv_reported_bytes) <= 2 * ROUNDING  # two caches: full + SWA
        fin = eng.generate([("user", "The capital of France is")], temperature=0.0, max_tokens=6)
        assert isinstance(fin, P.Finished) and fin.stats.generated_tokens > 0
    finally:
        eng.host.stop()


def test_a_quantized_k_cache_alone_loads_with_flash_attention_off(smollm2):
    eng = start_engine(smollm2, n_ctx=1024, flash_attn="off", type_k="q4_0", type_v="f16")
    try:
        ml = eng.loaded
        assert not ml.flash_attn_active
        assert ml.kv_allocated_bytes == 30 * 1024 * (6 * 18 + 192 * 2)
        assert abs(ml.kv_allocated_bytes - ml.kv_reported_bytes) <= ROUNDING
    finally:
        eng.host.stop()


def test_auto_flash_attention_is_settled_by_llama_cpp_and_reported(smollm2):
    eng = start_engine(smollm2, n_ctx=1024, flash_attn="auto")
    try:
        ml = eng.loaded
        assert ml.settings.flash_attn is FlashAttention.AUTO
        # The CPU backend runs the fused kernel, so llama.cpp's auto turns it on (resolve_fused_ops).
        assert ml.flash_attn_active
        off = eng.load(eng.loaded.info.path, n_ctx=1024, flash_attn="off")
        assert isinstance(off, P.ModelLoaded) and not off.flash_attn_active
    finally:
        eng.host.stop()


def test_a_quantized_v_cache_with_flash_attention_off_fails_with_a_clear_message(smollm2):
    eng = start_engine(smollm2, n_ctx=512)
    try:
        ev = eng.load(smollm2, n_ctx=512, flash_attn="off", type_k="q8_0", type_v="q8_0")
        assert isinstance(ev, P.Failed) and ev.kind is P.FailureKind.LOAD
        assert "q8_0 V cache needs flash attention" in ev.message and "auto or on" in ev.message
        # The engine keeps going: the next load works.
        ok = eng.load(smollm2, n_ctx=512, flash_attn="on", type_v="q8_0")
        assert isinstance(ok, P.ModelLoaded) and ok.flash_attn_active
    finally:
        eng.host.stop()


def test_llama_cpp_itself_refuses_a_quantized_v_cache_without_flash_attention(smollm2):
    """What the engine's check stands in for: llama_init_from_model returns no context."""
    with pytest.raises(ValueError, match="Failed to create llama_context"):
        GlassboxLlama(str(smollm2), n_ctx=256, flash_attn=FlashAttention.OFF, type_v=KVCacheType.Q8_0, verbose=False)


@pytest.mark.parametrize("which", ["smollm2", "gemma"])
def test_the_drawn_parameters_and_bytes_are_llama_cpps(which, request):
    path = request.getfixturevalue(which)
    arch = describe_architecture(read_gguf_info(path))
    llm = GlassboxLlama(str(path), n_ctx=256, n_batch=64, verbose=False)
    try:
        assert llama_cpp.llama_model_n_params(llm.model) == arch.n_params
        assert llama_cpp.llama_model_size(llm.model) == arch.n_bytes
        assert llama_cpp.llama_model_n_layer(llm.model) == arch.n_layer
        assert llama_cpp.llama_model_n_embd(llm.model) == arch.n_embd
        assert llama_cpp.llama_model_n_head(llm.model) == arch.blocks[0].attention.n_head
        assert llama_cpp.llama_model_n_head_kv(llm.model) == arch.blocks[0].attention.n_head_kv
        assert llama_cpp.llama_model_n_swa(llm.model) == max(b.attention.sliding_window for b in arch.blocks)
        # The struct reads as llama.cpp was given it: off by default, as llama-cpp-python's Llama() does.
        assert llm.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    finally:
        llm.close()
