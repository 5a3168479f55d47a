"""What making each :class:`~app.core.quant.types.QuantType` from a GGUF would give, before llama.cpp runs.

For the dialog: which types are offered from the source (and why one is not), each one's expected size
and bits per weight, and whether the result measures requantization. The figures are estimates from the
GGUF's tensor list by llama.cpp's main rules (src/llama-quant.cpp): a tensor is quantized when
``tensor_allows_quantization`` says so (2-D or 3-D, its name ends in ``weight``, not a norm...); it gets
the type's base type (``llama_ftype_get_default_type``), or its fallback when its row length is not a
multiple of the block (``tensor_type_fallback``: Q2_K, Q3_K → Q4_0, Q4_K → Q5_0, Q5_K → Q5_1,
Q6_K → Q8_0; F16 when that does not divide either); the output tensor (or the token embedding when the
output is tied to it) gets Q6_K, or Q8_0 for Q8_0 and for rows the block does not divide
(``llama_tensor_get_type_impl``). The ``_M`` mixes' extra bits on some attention V and FFN down tensors
are not counted, so their estimate is a little low. The engine's dry run gives llama.cpp's own figure
once a quantization starts (:class:`~app.core.protocol.progress.QuantizeProgress`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.core.gguf.gguf_facts import GGUFInfo, TensorInfo
from app.core.quant.types import (
    UNQUANTIZED_FILE_TYPES,
    UNQUANTIZED_TENSOR_TYPES,
    QuantType,
    block_size,
    type_bytes,
)

#: GGUF's default data alignment (GGUF_DEFAULT_ALIGNMENT): each tensor's data is padded to it, bytes.
ALIGNMENT = 32
#: The fallback llama.cpp gives a tensor whose row length the base type's block does not divide.
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
#: Substrings of weight names llama.cpp never quantizes (tensor_allows_quantization, the common ones).
_KEPT = (
    "_norm.weight",
    "ffn_gate_inp.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "attn_rel_b.weight",
    "position_embd",
    "token_types.weight",
    "time_mix_",
)
_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


@dataclass(frozen=True)
class QuantOption:
    """One type as the dialog offers it.

    Attributes:
        qtype: the type.
        refusal: why it is not offered from this source ("" when it is): a sentence naming the type.
        expected_bytes: the estimated size of the result, bytes (see the module docstring).
        bits_per_weight: the weights' estimated bytes × 8 over the model's parameters (the BPW llama.cpp's
            quantizer reports: metadata and padding not counted).
    """

    qtype: QuantType
    refusal: str
    expected_bytes: int
    bits_per_weight: float

    @property
    def allowed(self) -> bool:
        return not self.refusal


@dataclass(frozen=True)
class QuantPlan:
    """What quantizing one GGUF would give, by type.

    Attributes:
        source: the source file (the first part of a split model).
        source_type: the source's quantization as its header says (``Q4_1``, ``F16``...).
        source_bytes: the source's size, all parts, bytes.
        n_tensors: the source's tensors, all parts.
        requantization: the source's weights are already quantized, so a result measures
            requantization, not quantization from the original weights (:func:`is_requantization`).
        options: one per :class:`QuantType`, in its order.
    """

    source: str
    source_type: str
    source_bytes: int
    n_tensors: int
    requantization: bool
    options: tuple[QuantOption, ...]

    def option(self, qtype: QuantType) -> QuantOption:
        """The option for ``qtype``."""
        return next(o for o in self.options if o.qtype is qtype)

    @property
    def notice(self) -> str:
        """The requantization warning for people ("" for a source with original weights)."""
        return requantization_notice(self.source_type) if self.requantization else ""


def is_requantization(info: GGUFInfo) -> bool:
    """Whether ``info``'s weights are already quantized: its ``general.file_type`` is not F32, F16 or BF16
    (LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_BF16); without that key, whether any 2-D weight has a
    quantized type. llama.cpp needs ``allow_requantize`` for such a source."""
    ft = info.metadata.get("general.file_type")
    if isinstance(ft, int) and not isinstance(ft, bool):
        return (ft & ~1024) not in UNQUANTIZED_FILE_TYPES  # 1024: LLAMA_FTYPE_GUESSED
    return any(len(t.shape) >= 2 and t.type_name not in UNQUANTIZED_TENSOR_TYPES for t in info.tensors)


def requantization_notice(source_type: str) -> str:
    """The sentence the dialog shows for a quantized source."""
    return (
        f"The source is already quantized ({source_type}). The result measures requantization: "
        f"{source_type} weights quantized again, not a quantization from the original weights, so it "
        f"keeps every error {source_type} made and adds its own; a type with more bits cannot bring back "
        "what was lost."
    )


def plan_quantization(parts: Sequence[GGUFInfo]) -> QuantPlan:
    """The options for quantizing the model whose file(s) are ``parts`` (one :class:`GGUFInfo` per part
    of a split model, first part first; a single file: one).

    Raises:
        ValueError: ``parts`` is empty.
    """
    if not parts:
        raise ValueError("plan_quantization needs the source's GGUF header")
    first = parts[0]
    tensors = [t for p in parts for t in p.tensors]
    n_params = sum(t.n_elements for t in tensors)
    source_type = first.quant_type
    file_type = first.metadata.get("general.file_type")
    # the token embedding is also the output when there is no output tensor (tied embeddings)
    output = "output.weight" if any(t.name == "output.weight" for t in tensors) else "token_embd.weight"
    options = []
    for q in QuantType:
        sizes = [_tensor_bytes(t, q, output) for t in tensors]
        weights = sum(sizes)
        size = first.data_offset + sum(_padded(b) for b in sizes)
        refusal = ""
        if isinstance(file_type, int) and file_type == q.ftype:
            refusal = f"{q.value}: the source is already {q.value}; the result would be a copy of it."
        options.append(QuantOption(q, refusal, size, 8.0 * weights / n_params if n_params else 0.0))
    return QuantPlan(
        source=first.path,
        source_type=source_type,
        source_bytes=sum(p.file_size for p in parts),
        n_tensors=len(tensors),
        requantization=is_requantization(first),
        options=tuple(options),
    )


def default_destination(source: Path, qtype: QuantType, folder: Path) -> Path:
    """``<folder>/<source stem>.<type>.gguf`` (a split model's ``-0000n-of-0000m`` left out of the stem):
    ``SmolLM2-135M-Instruct.Q4_1.gguf`` → ``SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf``, so the name says what
    it was made from."""
    stem = _SPLIT_SUFFIX.sub("", source.stem)
    return folder / f"{stem}.{qtype.value}.gguf"


def _quantized(t: TensorInfo) -> bool:
    return len(t.shape) >= 2 and t.name.endswith("weight") and not any(k in t.name for k in _KEPT)


def _tensor_bytes(t: TensorInfo, q: QuantType, output: str) -> int:
    """Bytes of ``t`` quantized to ``q``; ``output`` is the name of the tensor llama.cpp treats as the output."""
    if not _quantized(t):
        return t.n_bytes
    target = q.base_type
    ncols = t.shape[0]
    if t.name == output:
        target = "Q8_0" if (ncols % block_size(target) or target == "Q8_0") else "Q6_K"
    if ncols % block_size(target):
        target = _FALLBACK.get(target, target)
        if ncols % block_size(target):
            target = "F16"
    return type_bytes(target, t.n_elements)


def _padded(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
