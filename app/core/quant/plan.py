"""What making each :class:`~app.core.quant.types.QuantType` from a GGUF would give, before llama.cpp runs.

For the dialog: which types are offered from the source (and why one is not), each one's expected size
and bits per weight, how many tensors will get a fallback type (and why: the result is then larger than
the type's bits per weight suggest), and whether the result measures requantization. The figures add up
the type llama.cpp's quantizer gives each tensor (:mod:`app.core.quant.tensor_choice`, read from
src/llama-quant.cpp: the mix, the output tensor, the fallbacks) and the source's header, each tensor's
data padded to GGUF's alignment. For SmolLM2 and Gemma 3 every type's tensor bytes are llama.cpp's dry run's
"quant size" to its 0.01 MiB, with its BPW and fallback count (tests/unit/test_quant_plan.py), and the size
is the made file's to the byte (SmolLM2 Q8_0, Q4_K_M, Q2_K; tests/engine/test_quantize.py). The engine's dry
run checks the figure once a quantization starts (:func:`app.engine.quant.quantize.quantize`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.core.gguf.gguf_facts import GGUFInfo
from app.core.quant.tensor_choice import TensorChoice, choose_types
from app.core.quant.types import UNQUANTIZED_FILE_TYPES, UNQUANTIZED_TENSOR_TYPES, QuantType, block_size

#: GGUF's default data alignment (GGUF_DEFAULT_ALIGNMENT): each tensor's data is padded to it, bytes.
ALIGNMENT = 32
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
        weight_bytes: the tensors' bytes without the header and the padding (what llama.cpp's "quant size"
            adds up).
        fallback_tensors: tensors whose rows are not a whole number of the chosen type's blocks, so llama.cpp
            gives them another type (its "N of M tensor(s) required fallback quantization").
        fallback_note: the sentence saying so, for people ("" when none falls back).
    """

    qtype: QuantType
    refusal: str
    expected_bytes: int
    bits_per_weight: float
    weight_bytes: int = 0
    fallback_tensors: int = 0
    fallback_note: str = ""

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
    options = []
    for q in QuantType:
        choices = choose_types(first, tensors, q)
        sizes = [c.n_bytes for c in choices]
        weights = sum(sizes)
        size = first.data_offset + sum(_padded(b) for b in sizes)
        refusal = ""
        if isinstance(file_type, int) and file_type == q.ftype:
            refusal = f"{q.value}: the source is already {q.value}; the result would be a copy of it."
        bpw = 8.0 * weights / n_params if n_params else 0.0
        fallbacks = [c for c in choices if c.fallback]
        note = fallback_note(q, fallbacks, len(tensors)) if fallbacks else ""
        options.append(QuantOption(q, refusal, size, bpw, weights, len(fallbacks), note))
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


def fallback_note(qtype: QuantType, fallbacks: Sequence[TensorChoice], n_tensors: int) -> str:
    """Why a ``qtype`` result is larger than its bits per weight suggest: ``fallbacks`` (of ``n_tensors``)
    get another type because their rows are not a whole number of the chosen type's blocks (llama.cpp's
    ``tensor_type_fallback``). One sentence naming the commonest row length, the types and the block sizes:
    "180 of 272 tensors fall back to Q4_0: their rows of 576 weights are not a whole number of Q2_K or
    Q3_K blocks (256 weights), so the file is larger than Q2_K's 2.62 bits per weight suggest."
    """
    widths = Counter(c.tensor.shape[0] for c in fallbacks)
    rows = f"{widths.most_common(1)[0][0]} weights" + (" (and other lengths)" if len(widths) > 1 else "")
    chosen = sorted({c.chosen for c in fallbacks})
    blocks = ", ".join(str(b) for b in sorted({block_size(c) for c in chosen}))
    one = len(fallbacks) == 1
    return (
        f"{len(fallbacks)} of {n_tensors} tensors {'falls' if one else 'fall'} back to "
        f"{' or '.join(sorted({c.type_name for c in fallbacks}))}: {'its' if one else 'their'} rows of {rows} "
        f"are not a whole number of {' or '.join(chosen)} blocks ({blocks} weights), so the file is larger than "
        f"{qtype.value}'s {qtype.base_bits_per_weight:.2f} bits per weight suggest."
    )


def name_problem(name: str) -> str:
    """Why ``name`` cannot be the result's file name ("" when it can): it is empty, or it is not a plain
    file name (a ``/`` or ``\\``, ``.`` or ``..``, a NUL), which would put the file outside the folder the
    dialog names."""
    n = name.strip()
    if not n:
        return "Type a name for the quantization."
    if any(sep in n for sep in ("/", "\\", "\0")) or n in (".", ".."):
        return (
            f"“{n}” is not a file name: type a name without / or \\ (and not . or ..); "
            "choose the folder with the Folder… button."
        )
    return ""


def _padded(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
