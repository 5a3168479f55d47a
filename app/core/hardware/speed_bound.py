"""What bounds a turn's speed: bytes decode reads per token, prefill's FLOPs, one sentence.

Decode (one token per llama_decode) is bound by memory bandwidth on a CPU: every step reads
the weights it multiplies by once, and the attention reads the KV cache, while the
arithmetic per byte read is small (about 2 FLOPs per weight). So
``bytes per token × tok/s`` is the memory traffic decode achieved, comparable with the
machine's measured bandwidth (:mod:`app.core.hardware.bandwidth`). Prefill multiplies every token
of a llama_decode call by each weight it reads: its figure is FLOP/s, and what bounds it follows
from its arithmetic intensity, by the roofline model (Williams, Waterman and Patterson 2009,
"Roofline: An Insightful Visual Performance Model for Multicore Architectures", CACM 52(4)):
FLOPs per byte moved (:func:`prefill_flops` / :func:`prefill_bytes`) against the machine's ridge
point, its FLOP/s over its bytes/s (:attr:`~app.core.hardware.bandwidth.Bandwidth.ridge_flop_per_byte`).
Below the ridge, memory bandwidth bounds it: a prefill of one token does decode's work, about
2 FLOPs per weight read, a few FLOPs per byte; a batch of hundreds does hundreds of FLOPs per byte,
above any CPU's ridge, and arithmetic bounds it.

Bytes one decode step reads (:func:`decode_weight_bytes`, :func:`kv_read_bytes`):

- every tensor of the blocks, the output norm and the output head, whole;
- ``token_embd``: one row (the lookup of the token being evaluated); when the output head is
  tied to it (no ``output.weight``: llama.cpp reuses ``token_embd``, ``TENSOR_DUPLICATED`` in
  src/models/*.cpp) the whole table too, as the LM head;
- an MoE block's expert tensors (``*_exps``): the ``n_expert_used`` experts chosen of
  ``n_expert`` (llama.cpp's ``ggml_mul_mat_id`` multiplies only the selected experts' slices);
- the KV cache view each layer attends over: ``n_kv`` cells × the layer's K+V bytes per
  cell, where ``n_kv = min(cells, max(256, pad(used, 256)))`` (llama.cpp
  src/llama-kv-cache.cpp ``llama_kv_cache::get_n_kv``: the view is padded to 256 cells so the
  graph can be reused); the masked cells of a sliding-window layer are in that view.

The model's bytes are the GGUF's own tensor sizes (:class:`~app.core.gguf.gguf_facts.TensorInfo`
``n_bytes``, ggml's block sizes); a test holds the figure against them.

Bytes a prefill reads (:func:`prefill_bytes`): decode's weight bytes once per llama_decode call
(``n_batch`` tokens each; the batch's embedding rows counted as the one of decode, a row being
``n_embd`` values) plus each call's KV cache view, as above.

Prefill FLOPs (:func:`prefill_flops`), after Kaplan et al. 2020, "Scaling Laws for Neural
Language Models", Table 1 (``C_forward ≈ 2N + 2 n_layer n_ctx d_attn`` per token, N the
non-embedding parameters), with the attention's value reduction counted as well as its
logits, as Hoffmann et al. 2022 ("Training Compute-Optimal Large Language Models",
Appendix F) do:

- 2 FLOPs per block parameter per token (a multiply and an add; MoE: the active experts);
- per layer and token, ``2 × n_head × head_dim_k × n_seen`` for Q·Kᵀ plus
  ``2 × n_head × head_dim_v × n_seen`` for the weights × V, ``n_seen`` the positions the
  token attends to (its own and the earlier ones, at most the window on an SWA layer);
- the LM head, ``2 × n_embd × n_vocab``, once per llama_decode call (llama-cpp-python's
  ``Llama.eval`` asks logits for the last token of each batch only).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.chat.context import GenerationStats
from app.core.gguf.architecture import Architecture
from app.core.gguf.gguf_facts import GGUFInfo, format_bytes
from app.core.hardware.memory import KVCacheLayout, pad

KV_VIEW_PAD = 256  # llama_kv_cache::get_n_kv pads the attended view to at least 256 cells
MIB = 1024 * 1024
GB = 1e9  # bandwidths are decimal gigabytes per second, as memory is specified
# Above this share of the measured bandwidth, decode counts as bandwidth-bound.
BANDWIDTH_BOUND_SHARE = 0.6


def _expert_counts(info: GGUFInfo) -> tuple[int, int]:
    return int(info.arch_key("expert_count", 0) or 0), int(info.arch_key("expert_used_count", 0) or 0)


def decode_weight_bytes(info: GGUFInfo) -> int:
    """Bytes of weights one decode step reads (see the module docstring), from the tensor table.

    Returns:
        Bytes; for a dense model with an untied head, every tensor's bytes less the
        embedding table but one row.
    """
    n_expert, n_used = _expert_counts(info)
    has_output = any(t.name == "output.weight" for t in info.tensors)
    total = 0
    for t in info.tensors:
        if t.name == "token_embd.weight":
            n_vocab = t.shape[1] if len(t.shape) > 1 else 1
            total += t.n_bytes // max(1, n_vocab)
            if not has_output:
                total += t.n_bytes
        elif "_exps." in t.name and n_expert > 0:
            total += t.n_bytes * min(n_used, n_expert) // n_expert
        else:
            total += t.n_bytes
    return total


def kv_view_cells(cells: int, used: int) -> int:
    """Cells llama.cpp's attention reads from a layer of ``cells`` cells holding ``used`` tokens."""
    return min(cells, max(KV_VIEW_PAD, pad(max(used, 1), KV_VIEW_PAD)))


def kv_read_bytes(layout: KVCacheLayout, used: int) -> int:
    """Bytes of K and V one decode step reads with ``used`` tokens in the cache (all layers)."""
    return sum(kv_view_cells(c, used) * b for c, b in zip(layout.layer_cells, layout.layer_bytes_per_cell, strict=True))


def mean_kv_read_bytes(layout: KVCacheLayout, first: int, n_steps: int) -> float:
    """Mean of :func:`kv_read_bytes` over ``n_steps`` decode steps, the first with ``first`` tokens
    in the cache and one more each step (bytes, exact: summed by 256-cell runs)."""
    if n_steps <= 0:
        return float(kv_read_bytes(layout, first))
    total = 0
    used = first
    end = first + n_steps
    while used < end:
        run_end = min(end, pad(used, KV_VIEW_PAD) + 1)  # the view is the same up to the next multiple of 256
        total += kv_read_bytes(layout, used) * (run_end - used)
        used = run_end
    return total / n_steps


@dataclass(frozen=True)
class DecodeTraffic:
    """What decode read per token in one turn, and how fast.

    Attributes:
        weight_bytes: weights read per token, bytes.
        kv_bytes: KV cache read per token, bytes (mean over the turn's steps).
        tok_s: decode speed, tokens/s.
    """

    weight_bytes: int
    kv_bytes: float
    tok_s: float

    @property
    def bytes_per_token(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def achieved_bytes_s(self) -> float:
        """Memory traffic decode achieved, bytes/s."""
        return self.bytes_per_token * self.tok_s


def decode_traffic(info: GGUFInfo, layout: KVCacheLayout, stats: GenerationStats) -> DecodeTraffic | None:
    """Decode's traffic in a finished turn; None when the turn decoded fewer than 2 tokens.

    The steps counted are those in ``decode_tok_s``: each evaluates the token sampled before
    (the last one ending with ``context_used`` tokens in the cache, one fewer for the step
    before...) and samples the next.
    """
    n_steps = stats.generated_tokens - 1
    if n_steps <= 0 or stats.decode_tok_s <= 0:
        return None
    first = max(1, stats.context_used - n_steps + 1)
    return DecodeTraffic(decode_weight_bytes(info), mean_kv_read_bytes(layout, first, n_steps), stats.decode_tok_s)


def active_block_params(arch: Architecture) -> int:
    """Parameters of the blocks one token goes through (MoE: the routed experts only)."""
    total = 0
    for b in arch.blocks:
        for t in b.tensors:
            if "_exps." in t.name and b.ffn.n_expert:
                total += t.n_elements * min(b.ffn.n_expert_used, b.ffn.n_expert) // b.ffn.n_expert
            else:
                total += t.n_elements
    return total


def prefill_flops(arch: Architecture, start: int, n_tokens: int, n_batch: int = 512) -> float:
    """FLOPs of evaluating ``n_tokens`` prompt tokens after ``start`` cached ones (module docstring).

    Args:
        arch: the model (:func:`~app.core.gguf.architecture.describe_architecture`).
        start: tokens already in the KV cache, tokens.
        n_tokens: tokens evaluated.
        n_batch: prompt tokens per llama_decode call (the LM head runs once per call).
    """
    if n_tokens <= 0:
        return 0.0
    flops = 2.0 * active_block_params(arch) * n_tokens
    # Positions seen: token i (0-based in the whole context) attends to i + 1 positions.
    a, b = start + 1, start + n_tokens  # seen counts of the first and the last evaluated token
    full = (a + b) * n_tokens / 2
    for blk in arch.blocks:
        att = blk.attention
        w = att.sliding_window
        if w > 0:
            seen = _capped_sum(a, b, w)
        else:
            seen = full
        flops += 2.0 * att.n_head * (att.head_dim_k + att.head_dim_v) * seen
    n_vocab = arch.embedding.n_vocab if arch.embedding else 0
    calls = -(-max(n_tokens - 1, 0) // max(1, n_batch)) + 1
    flops += 2.0 * arch.n_embd * n_vocab * calls
    return flops


def prefill_bytes(info: GGUFInfo, layout: KVCacheLayout, start: int, n_tokens: int, n_batch: int = 512) -> float:
    """Bytes read evaluating ``n_tokens`` prompt tokens after ``start`` cached ones (module docstring).

    Args:
        info: the model's GGUF facts (tensor sizes).
        layout: its KV cache layout.
        start: tokens already in the KV cache, tokens.
        n_tokens: tokens evaluated.
        n_batch: prompt tokens per llama_decode call (the weights are read once per call).

    Returns:
        Bytes; 0 for no tokens.
    """
    weights = decode_weight_bytes(info)
    total = 0
    done = 0
    while done < n_tokens:
        done += min(max(1, n_batch), n_tokens - done)
        total += weights + kv_read_bytes(layout, start + done)
    return float(total)


def _capped_sum(a: int, b: int, w: int) -> float:
    """sum(min(s, w) for s in a..b), in closed form."""
    if b <= w:
        return (a + b) * (b - a + 1) / 2
    if a >= w:
        return float(w * (b - a + 1))
    return (a + w) * (w - a + 1) / 2 + w * (b - w)


@dataclass(frozen=True)
class SpeedBound:
    """One turn's speed against the machine.

    Attributes:
        decode: decode's traffic (None: fewer than 2 tokens decoded).
        bandwidth_bytes_s: the machine's measured memory bandwidth, bytes/s (0: not measured).
        prefill_flops: FLOPs of the turn's prefill.
        prefill_s: its seconds.
        prefill_tokens: tokens it evaluated.
        prefill_bytes: bytes it read (:func:`prefill_bytes`).
        flop_s: the machine's measured FLOP/s (float32 matrix product; 0: not measured).
    """

    decode: DecodeTraffic | None
    bandwidth_bytes_s: float
    prefill_flops: float
    prefill_s: float
    prefill_tokens: int
    prefill_bytes: float = 0.0
    flop_s: float = 0.0

    @property
    def bandwidth_share(self) -> float:
        """Decode's achieved traffic / the measured bandwidth (0 when either is unknown)."""
        if self.decode is None or self.bandwidth_bytes_s <= 0:
            return 0.0
        return self.decode.achieved_bytes_s / self.bandwidth_bytes_s

    @property
    def prefill_flop_s(self) -> float:
        return self.prefill_flops / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def prefill_intensity(self) -> float:
        """The prefill's arithmetic intensity: FLOPs per byte read (0 when the bytes are unknown)."""
        return self.prefill_flops / self.prefill_bytes if self.prefill_bytes > 0 else 0.0

    @property
    def ridge(self) -> float:
        """The machine's ridge point, FLOPs per byte: ``flop_s / bandwidth_bytes_s`` (0: either unmeasured)."""
        if self.flop_s <= 0 or self.bandwidth_bytes_s <= 0:
            return 0.0
        return self.flop_s / self.bandwidth_bytes_s

    @property
    def prefill_memory_bound(self) -> bool | None:
        """Whether memory bandwidth bounds the prefill (its intensity under the ridge); None when
        the ridge or the intensity is unknown."""
        if self.ridge <= 0 or self.prefill_intensity <= 0:
            return None
        return self.prefill_intensity < self.ridge

    def decode_sentence(self) -> str:
        """E.g. "Decode read 93.0 MiB per token (88.1 MiB of weights + 4.9 MiB of KV cache) at 66.0 tok/s:
        6.4 GB/s, 71% of the 9.0 GB/s this machine measured: memory bandwidth bounded it." ("" without decode)."""
        d = self.decode
        if d is None:
            return ""
        text = (
            f"Decode read {format_bytes(d.bytes_per_token)} per token ({format_bytes(d.weight_bytes)} of weights + "
            f"{format_bytes(d.kv_bytes)} of KV cache) at {d.tok_s:.1f} tok/s: {d.achieved_bytes_s / GB:.1f} GB/s"
        )
        if self.bandwidth_bytes_s <= 0:
            return text + " (this machine's bandwidth is not measured yet)."
        share = self.bandwidth_share
        text += f", {100 * share:.0f}% of the {self.bandwidth_bytes_s / GB:.1f} GB/s this machine measured"
        if share >= BANDWIDTH_BOUND_SHARE:
            return text + ": memory bandwidth bounded it."
        return text + ": below the bandwidth, so compute, threads or other programs held it back."

    def prefill_sentence(self) -> str:
        """E.g. "Prefill did 1.9 GFLOP/s (24.3 GFLOP over 90 tokens in 12.6 s), 150 FLOPs per byte read, above this
        machine's ridge point of 6.0 (54 GFLOP/s ÷ 9.0 GB/s): arithmetic bounds it, each weight read serves
        every token of the batch." ("" without prefill)."""
        n = self.prefill_tokens
        if n <= 0 or self.prefill_s <= 0:
            return ""
        text = (
            f"Prefill did {self.prefill_flop_s / 1e9:.1f} GFLOP/s ({self.prefill_flops / 1e9:.1f} GFLOP over "
            f"{n:,} token{'' if n == 1 else 's'} in {self.prefill_s:.2f} s)"
        )
        if self.prefill_intensity > 0:
            text += f", {self.prefill_intensity:,.1f} FLOPs per byte read"
        bound = self.prefill_memory_bound
        if bound is None:
            return text + " (this machine's FLOP/s and bandwidth are not measured yet)."
        ridge = (
            f"this machine's ridge point of {self.ridge:.1f} ({self.flop_s / 1e9:.0f} GFLOP/s ÷ "
            f"{self.bandwidth_bytes_s / GB:.1f} GB/s)"
        )
        if bound:
            return (
                f"{text}, under {ridge}: memory bandwidth bounds it, as it bounds decode; each weight read "
                f"serves {'only one token' if n == 1 else f'only {n:,} tokens'}."
            )
        return f"{text}, above {ridge}: arithmetic bounds it, each weight read serves every token of the batch."


def speed_bound(
    info: GGUFInfo,
    arch: Architecture,
    layout: KVCacheLayout,
    stats: GenerationStats,
    bandwidth_bytes_s: float,
    n_batch: int = 512,
    flop_s: float = 0.0,
) -> SpeedBound:
    """The turn's :class:`SpeedBound` (decode traffic, prefill FLOPs and bytes) against the machine's
    ``bandwidth_bytes_s`` and ``flop_s`` (0: not measured)."""
    return SpeedBound(
        decode=decode_traffic(info, layout, stats),
        bandwidth_bytes_s=bandwidth_bytes_s,
        prefill_flops=prefill_flops(arch, stats.cached_tokens, stats.evaluated_tokens, n_batch),
        prefill_s=stats.prefill_s,
        prefill_tokens=stats.evaluated_tokens,
        prefill_bytes=prefill_bytes(info, layout, stats.cached_tokens, stats.evaluated_tokens, n_batch),
        flop_s=flop_s,
    )


__all__ = [
    "BANDWIDTH_BOUND_SHARE",
    "MIB",
    "DecodeTraffic",
    "SpeedBound",
    "active_block_params",
    "decode_traffic",
    "decode_weight_bytes",
    "kv_read_bytes",
    "kv_view_cells",
    "mean_kv_read_bytes",
    "prefill_bytes",
    "prefill_flops",
    "speed_bound",
]
