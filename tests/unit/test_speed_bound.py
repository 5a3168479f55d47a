"""What bounds the speed (app/core/hardware/speed_bound.py) and the bandwidth probe (app/core/hardware/bandwidth.py)."""

from __future__ import annotations

import json
import threading

import pytest

from app.core.chat.context import GenerationStats
from app.core.gguf.architecture import describe_architecture
from app.core.gguf.gguf_info import read_gguf_info
from app.core.hardware import bandwidth as bw_mod
from app.core.hardware.bandwidth import (
    ProbeCancelled,
    cached_bandwidth,
    measure_bandwidth,
    measure_flop_s,
    save_bandwidth,
)
from app.core.hardware.memory import kv_cache_layout, pad
from app.core.hardware.speed_bound import (
    _capped_sum,
    decode_traffic,
    decode_weight_bytes,
    kv_read_bytes,
    mean_kv_read_bytes,
    prefill_bytes,
    prefill_flops,
    speed_bound,
)
from tests.unit.test_architecture import _moe_model

MIB = 1024 * 1024


@pytest.mark.parametrize("which", ["smollm2_twin", "gemma_twin"])
def test_decode_reads_every_tensor_and_one_embedding_row_plus_the_tied_head(which, request):
    """Held against the GGUF's own tensor sizes: both test models tie their head to token_embd."""
    info = read_gguf_info(request.getfixturevalue(which).path)
    embd = info.embedding_tensor
    assert embd is not None and not any(t.name == "output.weight" for t in info.tensors)
    row = embd.n_bytes // info.n_vocab
    assert decode_weight_bytes(info) == sum(t.n_bytes for t in info.tensors) + row
    assert decode_weight_bytes(info) == info.tensor_bytes + row


def test_an_untied_moe_model_reads_one_row_and_the_used_experts_only(tmp_path):
    info = _moe_model(tmp_path, tied=False)
    by = {t.name: t for t in info.tensors}
    exps = sum(t.n_bytes for n, t in by.items() if "_exps." in n)
    rest = sum(t.n_bytes for n, t in by.items() if "_exps." not in n and n != "token_embd.weight")
    row = by["token_embd.weight"].n_bytes // 80
    assert decode_weight_bytes(info) == rest + exps * 2 // 4 + row
    tied = _moe_model(tmp_path, tied=True)
    t_embd = next(t for t in tied.tensors if t.name == "token_embd.weight")
    assert decode_weight_bytes(tied) == rest - by["output.weight"].n_bytes + exps // 2 + row + t_embd.n_bytes


def test_kv_read_is_the_padded_view_of_each_layer(smollm2_twin, gemma_twin):
    info = read_gguf_info(smollm2_twin.path)
    lay = kv_cache_layout(info, 4096)
    per_cell = 30 * 3 * 64 * 2 * 2  # 30 layers, 3 KV heads of 64, K + V, f16
    assert kv_read_bytes(lay, 1) == 256 * per_cell
    assert kv_read_bytes(lay, 300) == 512 * per_cell
    assert kv_read_bytes(lay, 5000) == 4096 * per_cell  # never more than the cache
    # Mean over steps, summed by 256-cell runs, equals the step-by-step mean.
    for first, n in ((1, 1), (200, 100), (255, 2), (256, 1), (700, 900)):
        brute = sum(kv_read_bytes(lay, u) for u in range(first, first + n)) / n
        assert mean_kv_read_bytes(lay, first, n) == pytest.approx(brute)
    g = kv_cache_layout(read_gguf_info(gemma_twin.path), 4096, swa_full=False)
    # SWA layers hold pad(512 + 512, 256) = 1024 cells: their view stops there.
    per_layer_cell = 256 * 1 * 2 * 2
    assert kv_read_bytes(g, 3000) == 3 * pad(3000, 256) * per_layer_cell + 15 * 1024 * per_layer_cell


def test_decode_traffic_of_a_turn(smollm2_twin):
    info = read_gguf_info(smollm2_twin.path)
    lay = kv_cache_layout(info, 4096)
    stats = GenerationStats(
        prompt_tokens=250, evaluated_tokens=250, prefill_s=2.0, generated_tokens=21, decode_s=0.5, context_used=270
    )
    d = decode_traffic(info, lay, stats)
    assert d is not None and d.tok_s == pytest.approx(40.0)
    # The 20 timed steps ran with 250..269 tokens in the cache: a 256-cell view, then 512.
    per_cell = 30 * 3 * 64 * 2 * 2
    assert d.kv_bytes == pytest.approx((6 * 256 + 14 * 512) * per_cell / 20)
    assert d.achieved_bytes_s == pytest.approx((decode_weight_bytes(info) + d.kv_bytes) * 40.0)
    assert decode_traffic(info, lay, GenerationStats(generated_tokens=1, decode_s=0.0)) is None


def test_capped_sum_and_prefill_flops_by_brute_force(gemma_twin):
    for a, b, w in ((1, 10, 4), (3, 3, 5), (1, 600, 512), (600, 700, 512), (500, 520, 512)):
        assert _capped_sum(a, b, w) == sum(min(s, w) for s in range(a, b + 1))
    arch = describe_architecture(read_gguf_info(gemma_twin.path))
    start, n = 100, 700
    body = 2 * sum(b.n_params for b in arch.blocks) * n
    attn = 0
    for blk in arch.blocks:
        w = blk.attention.sliding_window
        seen = sum(min(i + 1, w) if w else i + 1 for i in range(start, start + n))
        attn += 2 * 4 * (256 + 256) * seen
    head = 2 * 640 * 262_144 * (-(-(n - 1) // 512) + 1)
    assert prefill_flops(arch, start, n, 512) == pytest.approx(body + attn + head)
    assert prefill_flops(arch, 0, 0) == 0.0


def test_the_sentences_carry_the_figures(smollm2_twin):
    info = read_gguf_info(smollm2_twin.path)
    arch = describe_architecture(info)
    lay = kv_cache_layout(info, 4096)
    stats = GenerationStats(
        prompt_tokens=250, evaluated_tokens=250, prefill_s=2.0, generated_tokens=21, decode_s=0.5, context_used=270
    )
    d = decode_traffic(info, lay, stats)
    assert d is not None
    fast = speed_bound(info, arch, lay, stats, bandwidth_bytes_s=d.achieved_bytes_s / 0.8)
    assert fast.bandwidth_share == pytest.approx(0.8)
    text = fast.decode_sentence()
    assert f"at 40.0 tok/s: {d.achieved_bytes_s / 1e9:.1f} GB/s, 80% of the" in text
    assert "memory bandwidth bounded it" in text
    slow = speed_bound(info, arch, lay, stats, bandwidth_bytes_s=d.achieved_bytes_s / 0.3)
    assert "30% of the" in slow.decode_sentence() and "held it back" in slow.decode_sentence()
    unknown = speed_bound(info, arch, lay, stats, bandwidth_bytes_s=0.0)
    assert "not measured yet" in unknown.decode_sentence()
    flops = prefill_flops(arch, 0, 250, 512)
    assert f"{flops / 2.0 / 1e9:.1f} GFLOP/s" in fast.prefill_sentence()
    assert "250 tokens" in fast.prefill_sentence()


def test_prefill_bytes_are_the_weights_once_per_call_and_each_calls_kv_view(smollm2_twin):
    info = read_gguf_info(smollm2_twin.path)
    lay = kv_cache_layout(info, 4096)
    w = decode_weight_bytes(info)
    assert prefill_bytes(info, lay, 30, 1) == w + kv_read_bytes(lay, 31)
    # 1200 tokens in calls of 512: three reads of the weights, each call's view as it ends.
    want = 3 * w + kv_read_bytes(lay, 100 + 512) + kv_read_bytes(lay, 100 + 1024) + kv_read_bytes(lay, 100 + 1200)
    assert prefill_bytes(info, lay, 100, 1200, 512) == want
    assert prefill_bytes(info, lay, 0, 0) == 0.0


@pytest.mark.parametrize("which", ["smollm2_twin", "gemma_twin"])
def test_a_one_token_prefill_is_memory_bound_and_a_long_one_compute_bound(which, request):
    """The roofline: FLOPs per byte read against the machine's ridge point (FLOP/s ÷ bytes/s).
    A 1-token prefill does decode's work (about 2 FLOPs per weight, a few per byte): memory-bound."""
    info = read_gguf_info(request.getfixturevalue(which).path)
    arch = describe_architecture(info)
    lay = kv_cache_layout(info, 4096)
    machine = {"bandwidth_bytes_s": 10e9, "flop_s": 100e9}  # ridge point 10 FLOPs per byte: a desktop CPU
    one = GenerationStats(prompt_tokens=31, cached_tokens=30, evaluated_tokens=1, prefill_s=0.02, generated_tokens=1)
    sb = speed_bound(info, arch, lay, one, **machine)
    assert sb.ridge == pytest.approx(10.0)
    assert sb.prefill_intensity == pytest.approx(prefill_flops(arch, 30, 1) / prefill_bytes(info, lay, 30, 1))
    assert 1.0 < sb.prefill_intensity < 4.0 and sb.prefill_memory_bound is True
    text = sb.prefill_sentence()
    assert "over 1 token in 0.02 s" in text and "1 tokens" not in text
    assert f"{sb.prefill_intensity:.1f} FLOPs per byte read, under this machine's ridge point of 10.0" in text
    assert "(100 GFLOP/s ÷ 10.0 GB/s): memory bandwidth bounds it" in text and "arithmetic" not in text
    assert text.endswith("each weight read serves only one token.")
    few = GenerationStats(prompt_tokens=33, cached_tokens=30, evaluated_tokens=3, prefill_s=0.03, generated_tokens=1)
    assert speed_bound(info, arch, lay, few, **machine).prefill_memory_bound is True
    assert "only 3 tokens" in speed_bound(info, arch, lay, few, **machine).prefill_sentence()
    long = GenerationStats(prompt_tokens=250, evaluated_tokens=250, prefill_s=2.0, generated_tokens=1)
    sb = speed_bound(info, arch, lay, long, **machine)
    assert sb.prefill_intensity > 100 and sb.prefill_memory_bound is False
    assert "over 250 tokens in 2.00 s" in sb.prefill_sentence()
    assert "above this machine's ridge point of 10.0" in sb.prefill_sentence()
    assert "arithmetic bounds it" in sb.prefill_sentence()
    # Unmeasured machine: the figures, no verdict.
    blind = speed_bound(info, arch, lay, one, bandwidth_bytes_s=10e9)
    assert blind.prefill_memory_bound is None and "bounds it" not in blind.prefill_sentence()
    assert "FLOP/s and bandwidth are not measured yet" in blind.prefill_sentence()


def test_the_bandwidth_probe_measures_and_caches(tmp_path):
    bw = measure_bandwidth(buffer_bytes=4 * MIB, threads=2, budget_s=0.05, flop_budget_s=0.05)
    assert bw.bytes_s > 0 and bw.buffer_bytes == 4 * MIB and bw.threads == 2 and bw.passes >= 3
    assert bw.gb_s == bw.bytes_s / 1e9
    assert bw.flop_s > 0 and bw.ridge_flop_per_byte == bw.flop_s / bw.bytes_s
    assert cached_bandwidth(tmp_path) is None
    save_bandwidth(tmp_path, bw)
    assert cached_bandwidth(tmp_path) == bw
    # Another machine's figure, or a damaged file, is not used.
    data = json.loads((tmp_path / bw_mod.CACHE_FILE).read_text())
    # A file from before the FLOP/s was measured: measured again (the ridge point needs it).
    (tmp_path / bw_mod.CACHE_FILE).write_text(json.dumps({k: v for k, v in data.items() if k != "flop_s"}))
    assert cached_bandwidth(tmp_path) is None
    data["machine"] = "another machine"
    (tmp_path / bw_mod.CACHE_FILE).write_text(json.dumps(data))
    assert cached_bandwidth(tmp_path) is None
    (tmp_path / bw_mod.CACHE_FILE).write_text("{not json")
    assert cached_bandwidth(tmp_path) is None
    with pytest.raises(ValueError, match="fits in a cache"):
        measure_bandwidth(buffer_bytes=1000)
    stop = threading.Event()
    stop.set()
    with pytest.raises(ProbeCancelled, match="while preparing its buffers"):
        measure_bandwidth(buffer_bytes=4 * MIB, stop=stop)
    with pytest.raises(ProbeCancelled, match="after 0 matrix products"):
        measure_flop_s(n=64, stop=stop)
    assert measure_flop_s(n=64, budget_s=0.01) > 0
