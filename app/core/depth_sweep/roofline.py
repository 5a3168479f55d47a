"""What the roofline predicts at each depth of a sweep: decode and prefill tok/s on this machine.

Decode reads the weights once per token and the KV cache view the token attends over, which grows
with the depth; at the machine's measured bandwidth (:mod:`app.core.hardware.bandwidth`) the bound is

    decode tok/s ≤ bandwidth / (weight bytes + KV bytes read at that depth)

with both byte counts from :mod:`app.core.hardware.speed_bound` (``decode_weight_bytes``,
``mean_kv_read_bytes`` over the ``n_gen`` steps timed, the first with ``depth + 1`` tokens in the
cache). Prefill of ``n_prompt`` tokens after ``depth`` is bound by the slower of its arithmetic and
its memory traffic (the roofline model: Williams, Waterman and Patterson 2009, CACM 52(4)):

    prefill tok/s ≤ n_prompt / max(compute seconds, bytes / bandwidth)

with ``prefill_bytes`` of the same module and the compute seconds from the FLOPs of
``prefill_flops`` (2 per active weight per token, the attention, the LM head once per call) each at
the peak rate llama.cpp's own kernels reach for it here (:func:`prefill_compute_s`): the weights of
each ggml type at the rate ``ggml_mul_mat`` measured for that type on the model's own shape, with
the context's prefill threads and the prefill's tokens per call (``app/engine/matmul_roof.py``, sent
with the sweep's events), the attention at the fastest of those rates. A float32 BLAS figure is no
roof for llama.cpp's integer dot-product kernels: with it the measured prefill beat the "bound"
(review 27 §2: SmolLM2 Q4_1 at 180.8 tok/s above a 130 tok/s line from numpy's 30 GFLOP/s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.core.gguf.architecture import Architecture
from app.core.gguf.gguf_facts import GGUFInfo
from app.core.hardware.memory import KVCacheLayout
from app.core.hardware.speed_bound import (
    active_block_params,
    decode_weight_bytes,
    mean_kv_read_bytes,
    prefill_bytes,
    prefill_flops,
)


@dataclass(frozen=True)
class DepthBound:
    """The roofline at one depth.

    Attributes:
        depth: tokens in the KV cache.
        weight_bytes: weights one decode step reads, bytes.
        kv_bytes: KV cache one decode step reads there (mean over the timed steps), bytes.
        decode_tok_s: bandwidth / (weight_bytes + kv_bytes), tok/s (0: bandwidth not measured).
        prefill_tok_s: n_prompt / max(compute seconds, bytes / bandwidth), tok/s (0: not measured or
            no prefill timed).
    """

    depth: int
    weight_bytes: int
    kv_bytes: float
    decode_tok_s: float
    prefill_tok_s: float


def _head_type(info: GGUFInfo) -> str:
    """The LM head's ggml type: ``output.weight``'s, else the tied ``token_embd.weight``'s (empty if neither)."""
    types = {t.name: t.type_name for t in info.tensors}
    return types.get("output.weight") or types.get("token_embd.weight", "")


def prefill_compute_s(
    info: GGUFInfo, arch: Architecture, start: int, n_tokens: int, n_batch: int, rates: Mapping[str, float]
) -> float:
    """Least seconds the arithmetic of a prefill of ``n_tokens`` after ``start`` cached ones can take.

    Each block weight's ``2 × elements × n_tokens`` FLOPs (MoE: the active experts' share) at the
    rate of its ggml type, the LM head's ``2 × n_embd × n_vocab`` per llama_decode call at its type's,
    the attention's (the rest of :func:`~app.core.hardware.speed_bound.prefill_flops`) at the fastest.
    A type not in ``rates`` counts at the fastest (the bound stays one).

    Args:
        info, arch: the model's GGUF facts and anatomy.
        start, n_tokens, n_batch: tokens already cached, evaluated, and per call.
        rates: ggml type name -> FLOP/s of llama.cpp's matrix multiply here (``DepthSwept.matmul_flop_s``).

    Returns:
        Seconds; 0 when ``rates`` is empty or ``n_tokens`` is 0.
    """
    top = max(rates.values(), default=0.0)
    if top <= 0 or n_tokens <= 0:
        return 0.0
    seconds = 0.0
    for b in arch.blocks:
        for t in b.tensors:
            n = t.n_elements
            if "_exps." in t.name and b.ffn.n_expert:
                n = n * min(b.ffn.n_expert_used, b.ffn.n_expert) // b.ffn.n_expert
            seconds += 2.0 * n * n_tokens / (rates.get(t.type_name) or top)
    n_vocab = arch.embedding.n_vocab if arch.embedding else 0
    calls = -(-max(n_tokens - 1, 0) // max(1, n_batch)) + 1
    head = 2.0 * arch.n_embd * n_vocab * calls
    seconds += head / (rates.get(_head_type(info)) or top)
    attention = prefill_flops(arch, start, n_tokens, n_batch) - 2.0 * active_block_params(arch) * n_tokens - head
    return seconds + max(attention, 0.0) / top


def depth_bounds(
    info: GGUFInfo,
    arch: Architecture,
    layout: KVCacheLayout,
    depths: tuple[int, ...],
    n_prompt: int,
    n_gen: int,
    n_batch: int,
    bandwidth_bytes_s: float,
    rates: Mapping[str, float],
) -> tuple[DepthBound, ...]:
    """The roofline's prediction at each of ``depths`` (see the module docstring).

    Args:
        info, arch, layout: the loaded model's GGUF facts, anatomy and KV cache layout.
        depths: tokens in the KV cache.
        n_prompt, n_gen: the tokens timed at each depth.
        n_batch: prompt tokens per llama_decode call.
        bandwidth_bytes_s: the machine's measured bandwidth, bytes/s (0: not measured).
        rates: ggml type name -> FLOP/s of llama.cpp's matrix multiply here, on the sweep's prefill
            threads (empty: not measured; no prefill bound).
    """
    weights = decode_weight_bytes(info)
    out = []
    for d in depths:
        kv = mean_kv_read_bytes(layout, d + 1, max(n_gen, 1))
        decode = bandwidth_bytes_s / (weights + kv) if bandwidth_bytes_s > 0 else 0.0
        prefill = 0.0
        compute = prefill_compute_s(info, arch, d, n_prompt, n_batch, rates) if n_prompt > 0 else 0.0
        if compute > 0 and bandwidth_bytes_s > 0:
            t = max(compute, prefill_bytes(info, layout, d, n_prompt, n_batch) / bandwidth_bytes_s)
            prefill = n_prompt / t
        out.append(DepthBound(d, weights, kv, decode, prefill))
    return tuple(out)
