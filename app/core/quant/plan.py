"""What making each :class:`~app.core.quant.types.QuantType` from a GGUF would give: the simple part, before
llama.cpp says.

For the dialog: which types are offered from the source (and why one is not), whether a result measures
requantization, the default name and the name checks, and a rough size for each type until llama.cpp's own
dry run answers (:class:`~app.core.protocol.requests.PlanQuantize`, :mod:`app.engine.quant.dry_run`), or when
it fails: each weight's elements × the type's base bits per weight (:attr:`QuantType.base_bits_per_weight`),
the other tensors as they are, plus the source's header. It knows none of llama.cpp's per-tensor rules (the
mix, the output tensor, the fallbacks): the dry run's figures are exact, these are "about".
:func:`fallback_note` turns the dry run's fallback tensors into one sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.core.gguf.gguf_facts import GGUFInfo, TensorInfo
from app.core.protocol.answers import FallbackTensor, QuantizePlanned
from app.core.quant.types import UNQUANTIZED_FILE_TYPES, UNQUANTIZED_TENSOR_TYPES, QuantType

_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


@dataclass(frozen=True)
class QuantOption:
    """One type as the dialog offers it.

    Attributes:
        qtype: the type.
        refusal: why it is not offered from this source ("" when it is): a sentence naming the type.
        expected_bytes: the result's size, bytes: llama.cpp's dry run's when :attr:`exact`, else the rough
            estimate (see the module docstring).
        bits_per_weight: the weights' bytes × 8 over the model's weights (llama.cpp's BPW when :attr:`exact`).
        exact: the figures are llama.cpp's dry run's (:func:`with_dry_run`), not the rough estimate.
        fallback_tensors: tensors llama.cpp gives another type because their rows are not a whole number of
            the chosen type's blocks (its "N of M tensor(s) required fallback quantization"); 0 until the dry
            run says.
        fallback_note: the sentence saying so, for people ("" when none falls back, or before the dry run).
    """

    qtype: QuantType
    refusal: str
    expected_bytes: int
    bits_per_weight: float
    exact: bool = False
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
    of a split model, first part first; a single file: one), with rough sizes (see the module docstring).

    Raises:
        ValueError: ``parts`` is empty.
    """
    if not parts:
        raise ValueError("plan_quantization needs the source's GGUF header")
    first = parts[0]
    tensors = [t for p in parts for t in p.tensors]
    n_params = sum(t.n_elements for t in tensors)
    file_type = first.metadata.get("general.file_type")
    options = []
    for q in QuantType:
        weights = sum(_rough_bytes(t, q) for t in tensors)
        refusal = ""
        if isinstance(file_type, int) and file_type == q.ftype:
            refusal = f"{q.value}: the source is already {q.value}; the result would be a copy of it."
        bpw = 8.0 * weights / n_params if n_params else 0.0
        options.append(QuantOption(q, refusal, first.data_offset + weights, bpw))
    return QuantPlan(
        source=first.path,
        source_type=first.quant_type,
        source_bytes=sum(p.file_size for p in parts),
        n_tensors=len(tensors),
        requantization=is_requantization(first),
        options=tuple(options),
    )


def with_dry_run(plan: QuantPlan, answer: QuantizePlanned) -> QuantPlan:
    """``plan`` with llama.cpp's figures for each type its dry run sized (``answer``): the size, the bits per
    weight, the fallbacks and their sentence, :attr:`QuantOption.exact` set; a type llama.cpp refused gets its
    reason as the refusal; a type the answer does not list keeps its rough figures."""
    by_type = {p.qtype: p for p in answer.options}
    options = []
    for o in plan.options:
        p = by_type.get(o.qtype)
        if p is None or not o.allowed:
            options.append(o)
        elif p.refusal:
            options.append(replace(o, refusal=p.refusal))
        else:
            note = fallback_note(o.qtype, p.fallbacks, p.n_tensors) if p.fallbacks else ""
            options.append(
                replace(
                    o,
                    expected_bytes=p.bytes,
                    bits_per_weight=p.bits_per_weight,
                    exact=True,
                    fallback_tensors=len(p.fallbacks),
                    fallback_note=note,
                )
            )
    return replace(plan, options=tuple(options))


def default_destination(source: Path, qtype: QuantType, folder: Path) -> Path:
    """``<folder>/<source stem>.<type>.gguf`` (a split model's ``-0000n-of-0000m`` left out of the stem):
    ``SmolLM2-135M-Instruct.Q4_1.gguf`` → ``SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf``, so the name says what
    it was made from."""
    stem = _SPLIT_SUFFIX.sub("", source.stem)
    return folder / f"{stem}.{qtype.value}.gguf"


def fallback_note(qtype: QuantType, fallbacks: Sequence[FallbackTensor], n_tensors: int) -> str:
    """Why a ``qtype`` result is larger than its bits per weight suggest: ``fallbacks`` (of ``n_tensors``;
    llama.cpp's dry run's ``tensor_type_fallback`` warnings) get another type because their rows are not a
    whole number of the chosen type's blocks. One sentence naming the commonest row length, the types and
    the block sizes: "180 of 272 tensors fall back to Q4_0: their rows of 576 weights are not a whole number
    of Q2_K or Q3_K blocks (256 weights), so the file is larger than Q2_K's 2.62 bits per weight suggest."
    """
    widths = Counter(f.row_weights for f in fallbacks)
    rows = f"{widths.most_common(1)[0][0]} weights" + (" (and other lengths)" if len(widths) > 1 else "")
    chosen = sorted({f.chosen for f in fallbacks})
    blocks = ", ".join(str(b) for b in sorted({f.block_weights for f in fallbacks}))
    one = len(fallbacks) == 1
    # The output head gets its own type in llama.cpp's mix (src/llama-quant.cpp llama_tensor_get_type_impl: Q6_K
    # for the output tensor, or token_embd when the head is tied to it, unless the file is Q8_0): said, or a Q6_K
    # in a Q4_0 file is a mystery (review 27 §7).
    heads = sorted({(f.name, f.chosen) for f in fallbacks if f.name in _HEADS and f.chosen != qtype.base_type})
    head = "".join(f"; llama.cpp gives the output head ({name}) {t} in a {qtype.value} file" for name, t in heads)
    return (
        f"{len(fallbacks)} of {n_tensors} tensors {'falls' if one else 'fall'} back to "
        f"{' or '.join(sorted({f.given for f in fallbacks}))}: {'its' if one else 'their'} rows of {rows} "
        f"are not a whole number of {' or '.join(chosen)} blocks ({blocks} weights{head}), so the file is larger "
        f"than {qtype.value}'s {qtype.base_bits_per_weight:.2f} bits per weight suggest."
    )


_HEADS = ("output.weight", "token_embd.weight")  # the LM head: its own tensor, or tied to the embeddings


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


def _rough_bytes(t: TensorInfo, qtype: QuantType) -> int:
    """``t``'s rough bytes as ``qtype``: a weight of 2 or more dimensions at the type's base bits per weight,
    any other tensor (norms, biases) as it is."""
    if len([d for d in t.shape if d > 1]) >= 2 and t.name.endswith("weight"):
        return round(t.n_elements * qtype.base_bits_per_weight / 8)
    return t.n_bytes
