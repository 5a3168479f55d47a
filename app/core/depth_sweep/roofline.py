"""What the roofline predicts at each depth of a sweep: decode and prefill tok/s on this machine.

Decode reads the weights once per token and the KV cache view the token attends over, which grows
with the depth; at the machine's measured bandwidth (:mod:`app.core.hardware.bandwidth`) the bound is

    decode tok/s ≤ bandwidth / (weight bytes + KV bytes read at that depth)

with both byte counts from :mod:`app.core.hardware.speed_bound` (``decode_weight_bytes``,
``mean_kv_read_bytes`` over the ``n_gen`` steps timed, the first with ``depth + 1`` tokens in the
cache). Prefill of ``n_prompt`` tokens after ``depth`` is bound by the slower of its arithmetic and
its memory traffic (the roofline model: Williams, Waterman and Patterson 2009, CACM 52(4)):

    prefill tok/s ≤ n_prompt / max(FLOPs / FLOP/s, bytes / bandwidth)

with ``prefill_flops`` and ``prefill_bytes`` of the same module. The machine's FLOP/s is a float32
BLAS figure, so the prefill bound is an estimate (see :mod:`app.core.hardware.bandwidth`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.gguf.architecture import Architecture
from app.core.gguf.gguf_facts import GGUFInfo
from app.core.hardware.memory import KVCacheLayout
from app.core.hardware.speed_bound import decode_weight_bytes, mean_kv_read_bytes, prefill_bytes, prefill_flops


@dataclass(frozen=True)
class DepthBound:
    """The roofline at one depth.

    Attributes:
        depth: tokens in the KV cache.
        weight_bytes: weights one decode step reads, bytes.
        kv_bytes: KV cache one decode step reads there (mean over the timed steps), bytes.
        decode_tok_s: bandwidth / (weight_bytes + kv_bytes), tok/s (0: bandwidth not measured).
        prefill_tok_s: n_prompt / max(FLOPs / FLOP/s, bytes / bandwidth), tok/s (0: not measured or
            no prefill timed).
    """

    depth: int
    weight_bytes: int
    kv_bytes: float
    decode_tok_s: float
    prefill_tok_s: float


def depth_bounds(
    info: GGUFInfo,
    arch: Architecture,
    layout: KVCacheLayout,
    depths: tuple[int, ...],
    n_prompt: int,
    n_gen: int,
    n_batch: int,
    bandwidth_bytes_s: float,
    flop_s: float,
) -> tuple[DepthBound, ...]:
    """The roofline's prediction at each of ``depths`` (see the module docstring).

    Args:
        info, arch, layout: the loaded model's GGUF facts, anatomy and KV cache layout.
        depths: tokens in the KV cache.
        n_prompt, n_gen: the tokens timed at each depth.
        n_batch: prompt tokens per llama_decode call.
        bandwidth_bytes_s: the machine's measured bandwidth, bytes/s (0: not measured).
        flop_s: its measured FLOP/s (0: not measured).
    """
    weights = decode_weight_bytes(info)
    out = []
    for d in depths:
        kv = mean_kv_read_bytes(layout, d + 1, max(n_gen, 1))
        decode = bandwidth_bytes_s / (weights + kv) if bandwidth_bytes_s > 0 else 0.0
        prefill = 0.0
        if n_prompt > 0 and bandwidth_bytes_s > 0 and flop_s > 0:
            t = max(
                prefill_flops(arch, d, n_prompt, n_batch) / flop_s,
                prefill_bytes(info, layout, d, n_prompt, n_batch) / bandwidth_bytes_s,
            )
            prefill = n_prompt / t if t > 0 else 0.0
        out.append(DepthBound(d, weights, kv, decode, prefill))
    return tuple(out)
