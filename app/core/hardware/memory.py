"""Memory math: weights, KV cache and compute buffer, in bytes. One formula, one place.

The engine uses it for the live "KV cache used / allocated" figures, the Model
panel for what a reload would cost, and the Hub browser for "will it fit".

KV cache (source: llama.cpp src/llama-kv-cache.cpp, src/llama-kv-cache-iswa.cpp,
src/llama-context.cpp)::

    n_ctx_cells  = pad(n_ctx, 256)                          # llama_context pads n_ctx
    cells(layer) = n_ctx_cells                              # full-attention layer
                 = pad(min(n_ctx_cells, n_swa * n_seq + n_ubatch), 256)   # SWA layer, swa_full off
                 = n_ctx_cells                              # SWA layer, swa_full on (default)
    bytes        = sum over layers of cells(layer) * (row(type_k, n_embd_head_k * n_head_kv(layer))
                                                     + row(type_v, n_embd_head_v * n_head_kv(layer)))

where ``row(type, n)`` is ggml_row_size: n / block_size * type_size (f16: 2 bytes).
A test holds this against what llama.cpp reports it allocated, for SmolLM2
(30 full layers) and Gemma 3 270M (15 SWA + 3 full layers), with and without
swa_full.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import gguf

from app.core.gguf.gguf_info import GGUFInfo, format_bytes

CTX_PAD = 256  # llama_context pads n_ctx to a multiple of 256 (src/llama-context.cpp)
SWA_PAD = 256  # the SWA cache is padded to 256 cells (src/llama-kv-cache-iswa.cpp)

DEFAULT_N_UBATCH = 512  # llama_context_default_params().n_ubatch, and llama-cpp-python's Llama(n_ubatch=512)


class KVCacheType(str, enum.Enum):
    """A K or V cache type llama.cpp accepts (``type_k`` / ``type_v`` in ``llama_context_params``).

    The list llama.cpp's own tools offer (common/arg.cpp ``kv_cache_types``). Values are ggml's
    type names; :attr:`ggml_type` is the ``enum ggml_type`` number. A quantized type stores
    blocks of 32 values (``GGML_QUANT_SIZES``): f16 takes 2 bytes a value, q8_0 34 bytes per 32
    (1.06 a value), q4_0 18 per 32 (0.56).
    """

    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    Q8_0 = "q8_0"
    Q4_0 = "q4_0"
    Q4_1 = "q4_1"
    Q5_0 = "q5_0"
    Q5_1 = "q5_1"
    IQ4_NL = "iq4_nl"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def ggml_type(self) -> int:
        """The ``enum ggml_type`` value (ggml/include/ggml.h, also ``gguf.GGMLQuantizationType``)."""
        return int(gguf.GGMLQuantizationType[self.value.upper()])

    @property
    def quantized(self) -> bool:
        """Stored in blocks with a scale (llama.cpp's ``ggml_is_quantized``): f16, bf16 and f32 are not."""
        return self not in (KVCacheType.F16, KVCacheType.BF16, KVCacheType.F32)

    @property
    def block_size(self) -> int:
        """Values per block (1 for the float types, 32 for the quantized ones)."""
        return int(gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[self.value.upper()]][0])

    @property
    def bits_per_value(self) -> float:
        """Bits one cached value takes, block scales included (f16: 16; q8_0: 8.5; q4_0: 4.5)."""
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[self.value.upper()]]
        return 8.0 * size / block

    @classmethod
    def parse(cls, value: object) -> KVCacheType:
        """The member for a stored value (any case); anything unknown reads as :attr:`F16`."""
        try:
            return cls(str(value).lower())
        except ValueError:
            return cls.F16


KV_CACHE_TYPES = tuple(t.value for t in KVCacheType)


def pad(n: int, multiple: int) -> int:
    """Round ``n`` up to a multiple (GGML_PAD)."""
    return (n + multiple - 1) // multiple * multiple


def n_ubatch_for(n_batch: int, n_ctx: int | None = None) -> int:
    """The physical batch (n_ubatch, tokens) llama.cpp runs for a logical batch of ``n_batch`` tokens.

    Glassbox loads with ``n_ubatch = min(n_batch, 512)``: llama.cpp's default
    n_ubatch is 512 and n_ubatch may not exceed n_batch. With causal attention
    llama.cpp also caps n_batch at n_ctx (``llama_context::llama_context``:
    ``cparams.n_batch = min(cparams.n_ctx, params.n_batch)``, then
    ``cparams.n_ubatch = min(cparams.n_batch, params.n_ubatch)``; llama-cpp-python
    0.3.36's ``Llama.__init__`` applies the same two mins before creating the
    context), so n_ubatch never exceeds n_ctx.

    Args:
        n_batch: logical batch, tokens (prompt tokens per llama_decode call).
        n_ctx: the context, tokens; None or 0: no cap (the context is not known yet).
    """
    n_ubatch = min(n_batch, DEFAULT_N_UBATCH)
    if n_ctx:
        n_ubatch = min(n_ubatch, n_ctx)
    return n_ubatch


def ggml_row_size(type_name: str, n: int) -> int:
    """Bytes of ``n`` values of ggml type ``type_name`` (ggml.c ggml_row_size: n / block size x
    bytes per block; ``n`` a multiple of the block size, as llama.cpp requires of a cache row).

    Raises:
        ValueError: unknown type name, or ``n`` not a multiple of the type's block size.
    """
    try:
        qtype = gguf.GGMLQuantizationType[str(type_name).upper()]
    except KeyError:
        raise ValueError(f"unknown ggml type '{type_name}'; expected one of {', '.join(KV_CACHE_TYPES)}") from None
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if n % block:
        raise ValueError(f"{n} values do not fill whole {type_name} blocks of {block}")
    return n // block * size


@dataclass(frozen=True)
class KVCacheLayout:
    """How a model's KV cache is laid out for one context configuration.

    Attributes:
        n_ctx: cells of the full-attention cache (n_ctx padded to 256), tokens.
        n_swa: sliding window of the SWA layers, tokens (0: none).
        layer_cells: cells allocated per layer, tokens.
        layer_bytes_per_cell: K + V bytes per cell per layer.
        layer_is_swa: per layer, True for a sliding-window layer.
        type_k, type_v: cache types (:class:`KVCacheType`; a value given as text is parsed).
    """

    n_ctx: int
    n_swa: int
    layer_cells: tuple[int, ...]
    layer_bytes_per_cell: tuple[int, ...]
    layer_is_swa: tuple[bool, ...]
    type_k: KVCacheType = KVCacheType.F16
    type_v: KVCacheType = KVCacheType.F16

    def __post_init__(self) -> None:
        for name in ("type_k", "type_v"):
            given: object = getattr(self, name)
            if not isinstance(given, KVCacheType):
                object.__setattr__(self, name, KVCacheType(str(given).lower()))

    @property
    def allocated_bytes(self) -> int:
        """Bytes llama.cpp allocates for the KV cache."""
        return sum(c * b for c, b in zip(self.layer_cells, self.layer_bytes_per_cell, strict=True))

    @property
    def bytes_per_token(self) -> int:
        """Bytes one more token adds while every layer still has room."""
        return sum(self.layer_bytes_per_cell)

    def used_bytes(self, n_tokens: int) -> int:
        """Bytes holding data when ``n_tokens`` tokens are in the context.

        A sliding-window layer holds at most its cell count however long the
        context grows; full layers grow by one cell per token.
        """
        n = max(0, n_tokens)
        return sum(min(n, c) * b for c, b in zip(self.layer_cells, self.layer_bytes_per_cell, strict=True))

    @property
    def n_swa_layers(self) -> int:
        return sum(self.layer_is_swa)


def kv_cache_layout(
    info: GGUFInfo,
    n_ctx: int,
    *,
    n_ubatch: int = DEFAULT_N_UBATCH,
    swa_full: bool = True,
    type_k: KVCacheType | str = KVCacheType.F16,
    type_v: KVCacheType | str = KVCacheType.F16,
    n_seq: int = 1,
) -> KVCacheLayout:
    """The KV cache llama.cpp will allocate for ``info`` at ``n_ctx`` tokens.

    Args:
        info: the model's GGUF facts.
        n_ctx: requested context length, tokens (0: the trained length).
        n_ubatch: physical batch size, tokens (SWA cache size depends on it).
        swa_full: keep full-size caches for sliding-window layers (llama.cpp's
            default; needed to reuse a cached prefix longer than the window).
        type_k, type_v: KV cache types (:class:`KVCacheType` or its value: ``f16``, ``q8_0``...).
            A quantized row holds ``n_embd_head * n_head_kv`` values in blocks of 32
            (ggml_row_size; llama-kv-cache.cpp makes K ``[n_embd_k_gqa, kv_size]`` of type_k).
        n_seq: parallel sequences (1 in Glassbox).

    Returns:
        A :class:`KVCacheLayout`; ``allocated_bytes`` is the total.

    Raises:
        ValueError: unknown cache type, a head size the type's blocks do not divide
            (llama.cpp refuses such a context too), or a model without attention shape
            metadata.
    """
    try:
        type_k = KVCacheType(str(type_k).lower())
        type_v = KVCacheType(str(type_v).lower())
    except ValueError:
        raise ValueError(
            f"unknown KV cache type in {type_k!s}/{type_v!s}; expected one of {', '.join(KV_CACHE_TYPES)}"
        ) from None
    if info.n_layer <= 0 or info.n_head <= 0:
        raise ValueError(f"{info.name}: the file has no attention shape (block_count / head_count) to size a KV cache")
    n_ctx_req = n_ctx if n_ctx > 0 else (info.context_length or 4096)
    cells_full = pad(n_ctx_req, CTX_PAD)
    n_swa = info.sliding_window
    is_swa = info.swa_layers()
    if any(is_swa) and not swa_full:
        n_ubatch = min(n_ubatch, cells_full)  # llama.cpp caps n_ubatch at n_ctx
        cells_swa = pad(min(cells_full, n_swa * n_seq + n_ubatch), SWA_PAD)
    else:
        cells_swa = cells_full
    cells = []
    per_cell = []
    for il in range(info.n_layer):
        n_kv = info.n_head_kv_layer(il)
        k = ggml_row_size(type_k, info.n_embd_head_k * n_kv)
        v = ggml_row_size(type_v, info.n_embd_head_v * n_kv)
        cells.append(cells_swa if is_swa[il] else cells_full)
        per_cell.append(k + v)
    return KVCacheLayout(
        n_ctx=cells_full,
        n_swa=n_swa,
        layer_cells=tuple(cells),
        layer_bytes_per_cell=tuple(per_cell),
        layer_is_swa=tuple(is_swa),
        type_k=type_k,
        type_v=type_v,
    )


def mha_kv_bytes(info: GGUFInfo, layout: KVCacheLayout) -> int:
    """Bytes the same KV cache (cells per layer, K and V types) would take with multi-head attention:
    one K/V head per query head (n_head) in every layer, instead of the file's n_head_kv (grouped-query
    or multi-query attention). ``mha_kv_bytes / layout.allocated_bytes`` is the memory GQA saves:
    n_head / n_head_kv for a model with the same heads in every layer (SmolLM2: 9 / 3 = 3). A layer
    without KV heads (a recurrent layer) counts 0 either way.
    """
    total = 0
    for il, cells in enumerate(layout.layer_cells):
        if info.n_head_kv_layer(il) == 0:
            continue
        k = ggml_row_size(layout.type_k, info.n_embd_head_k * info.n_head)
        v = ggml_row_size(layout.type_v, info.n_embd_head_v * info.n_head)
        total += cells * (k + v)
    return total


def compute_buffer_estimate(info: GGUFInfo, n_ctx: int, *, n_ubatch: int = DEFAULT_N_UBATCH) -> int:
    """Estimated bytes of llama.cpp's compute buffer.

    The graph allocator reuses memory, so the largest intermediate dominates:
    the f32 logits of one ubatch (n_vocab * n_ubatch * 4) or the attention
    scores of one layer (n_ctx * n_ubatch * n_head * 4), plus a few
    activations (3 * n_ubatch * n_embd * 4). An estimate, checked against the
    buffer llama.cpp reports (within 15% on SmolLM2 and Gemma 3 270M). With flash
    attention on, the attention scores are never formed, but the logits dominate on
    both test models (n_ctx 4096: SmolLM2 98.25 MiB reported with it on, 99.38 off,
    99.38 estimated; Gemma 3 514.5 either way, 515.75 estimated).
    """
    cells = pad(n_ctx if n_ctx > 0 else (info.context_length or 4096), CTX_PAD)
    n_ubatch = min(n_ubatch, cells)  # llama.cpp caps n_batch (and n_ubatch) at n_ctx
    logits = info.n_vocab * n_ubatch * 4
    kq = cells * n_ubatch * max(info.n_head, 1) * 4
    return max(logits, kq) + 3 * n_ubatch * info.n_embd * 4


@dataclass(frozen=True)
class MemoryEstimate:
    """What loading a model at a context length costs, in bytes."""

    weights: int
    kv_cache: int
    compute: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute

    def breakdown(self) -> str:
        return (
            f"weights {format_bytes(self.weights)} + KV cache {format_bytes(self.kv_cache)} "
            f"+ compute {format_bytes(self.compute)} = {format_bytes(self.total)}"
        )


def estimate_memory(
    info: GGUFInfo,
    n_ctx: int,
    *,
    n_ubatch: int = DEFAULT_N_UBATCH,
    swa_full: bool = True,
    type_k: KVCacheType | str = KVCacheType.F16,
    type_v: KVCacheType | str = KVCacheType.F16,
    weights_bytes: int | None = None,
) -> MemoryEstimate:
    """Weights + KV cache + compute buffer for ``info`` at ``n_ctx`` tokens, in bytes.

    Args:
        weights_bytes: the tensor bytes of all parts of a split model (each part's
            header lists only its own tensors); default: this file's tensor bytes.
    """
    kv = kv_cache_layout(info, n_ctx, n_ubatch=n_ubatch, swa_full=swa_full, type_k=type_k, type_v=type_v)
    return MemoryEstimate(
        weights=info.tensor_bytes if weights_bytes is None else weights_bytes,
        kv_cache=kv.allocated_bytes,
        compute=compute_buffer_estimate(info, n_ctx, n_ubatch=n_ubatch),
    )
