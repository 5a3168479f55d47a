"""The quantization types Glassbox offers to make, with llama.cpp's numbers for them.

Each :class:`QuantType` is one ``enum llama_ftype`` value of llama.cpp (include/llama.h,
``LLAMA_FTYPE_MOSTLY_*``), the number ``llama_model_quantize_params.ftype`` takes and the number a GGUF's
``general.file_type`` records. ``base_type`` is the ggml tensor type llama.cpp gives most weights for it
(``llama_ftype_get_default_type`` in src/llama-quant.cpp); the ``_M`` mixes give some tensors more bits.
"""

from __future__ import annotations

import enum

import gguf

#: ``general.file_type`` values of files whose weights are not quantized (LLAMA_FTYPE_ALL_F32,
#: LLAMA_FTYPE_MOSTLY_F16, LLAMA_FTYPE_MOSTLY_BF16): quantizing those is quantization from the original weights.
UNQUANTIZED_FILE_TYPES = frozenset({0, 1, 32})
#: ggml tensor types that are not quantized (a weight of one of these is an original weight).
UNQUANTIZED_TENSOR_TYPES = frozenset({"F32", "F16", "BF16", "F64"})


class QuantType(str, enum.Enum):
    """A type ``llama_model_quantize`` can make, largest first; the value is its usual name."""

    Q8_0 = "Q8_0"
    Q6_K = "Q6_K"
    Q5_K_M = "Q5_K_M"
    Q4_K_M = "Q4_K_M"
    Q4_0 = "Q4_0"
    Q3_K_M = "Q3_K_M"
    Q2_K = "Q2_K"

    @property
    def ftype(self) -> int:
        """llama.cpp's ``LLAMA_FTYPE_MOSTLY_*`` number (include/llama.h)."""
        return _FTYPES[self]

    @property
    def base_type(self) -> str:
        """The ggml type most weights get (``llama_ftype_get_default_type``), e.g. ``Q4_K`` for Q4_K_M."""
        return _BASE_TYPES[self]

    @property
    def base_bits_per_weight(self) -> float:
        """Bits per weight of :attr:`base_type`: its block's bytes × 8 / its block's weights
        (gguf's ``GGML_QUANT_SIZES``): 8.5 for Q8_0, 4.5 for Q4_K."""
        return bits_per_weight(self.base_type)


_FTYPES = {
    QuantType.Q8_0: 7,
    QuantType.Q6_K: 18,
    QuantType.Q5_K_M: 17,
    QuantType.Q4_K_M: 15,
    QuantType.Q4_0: 2,
    QuantType.Q3_K_M: 12,
    QuantType.Q2_K: 10,
}
_BASE_TYPES = {
    QuantType.Q8_0: "Q8_0",
    QuantType.Q6_K: "Q6_K",
    QuantType.Q5_K_M: "Q5_K",
    QuantType.Q4_K_M: "Q4_K",
    QuantType.Q4_0: "Q4_0",
    QuantType.Q3_K_M: "Q3_K",
    QuantType.Q2_K: "Q2_K",
}


def type_bytes(type_name: str, n_elements: int) -> int:
    """Bytes ``n_elements`` weights take in the ggml type ``type_name`` (whole blocks; ``n_elements``
    a multiple of the type's block).

    Raises:
        KeyError: not a ggml type gguf knows.
    """
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    return n_elements // block * size


def bits_per_weight(type_name: str) -> float:
    """Bits per weight of the ggml type ``type_name`` (block bytes × 8 / block weights).

    Raises:
        KeyError: not a ggml type gguf knows.
    """
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    return 8.0 * size / block
