"""Which ggml type llama.cpp's quantizer gives each tensor of a GGUF for one :class:`QuantType`.

Read from llama.cpp's src/llama-quant.cpp (llama-cpp-python 0.3.36's vendored copy), for the types Glassbox
offers only; the plan (:mod:`app.core.quant.plan`) adds the bytes up before llama.cpp runs, and the engine's dry
run (``llama_model_quantize`` with ``dry_run``) gives llama.cpp's own figure once a quantization starts.

- ``tensor_allows_quantization``: a tensor is quantized when it has 2 or 3 dimensions, its name ends in
  ``weight`` and it is not a norm, a router (``ffn_gate_inp``) or one of the small kept tensors; else it keeps
  its type.
- ``llama_tensor_get_type_impl``, the mix: the type's base type (``llama_ftype_get_default_type``), except
  the output tensor (the token embedding when there is no ``output.weight``: tied embeddings) gets Q6_K (Q8_0
  for Q8_0, for Falcon and for rows the base type's block does not divide); attention V (and QKV, KV_B) gets
  Q3_K in Q2_K (Q4_K when n_head / n_head_kv ≥ 4), Q5_K in Q3_K_M's first two layers and Q4_K after, Q6_K in
  Q4_K_M and Q5_K_M on ``use_more_bits`` layers; FFN down gets Q3_K in Q2_K, Q5_K / Q4_K in Q3_K_M, Q6_K in
  Q4_K_M and Q5_K_M on ``use_more_bits`` layers; attention output gets Q3_K in Q2_K and Q4_K in Q3_K_M
  (Q5_K with 8 experts); with 8 experts attention V and K get Q8_0.
- ``tensor_type_fallback``: a tensor whose row length (``ne[0]``) the chosen type's block does not divide
  gets Q4_0 for Q2_K and Q3_K, Q5_0 for Q4_K, Q5_1 for Q5_K, Q8_0 for Q6_K (a 32-weight type keeps its
  type), and F16 when that block does not divide it either; llama.cpp counts each such tensor
  ("N of M tensor(s) required fallback quantization").

Not followed: the 70B rule (attention V Q3_K / Q4_K → Q5_K for llama.cpp's ``LLM_TYPE_70B``, which it decides
from the architecture and layer count), GLM5-next's Q8_0 floor, and per-tensor overrides (Glassbox passes none).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.gguf.gguf_facts import GGUFInfo, TensorInfo
from app.core.quant.types import QuantType, block_size, type_bytes

#: ``tensor_type_fallback``: the type a tensor gets when the chosen type's block does not divide its rows.
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
#: Substrings of weight names llama.cpp never quantizes (``tensor_allows_quantization``, the common ones).
_KEPT = (
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "attn_rel_b.weight",
    "position_embd",
    "token_types.weight",
    "time_mix_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
)
_LAYER = re.compile(r"^blk\.(\d+)\.")


class Category(enum.Enum):
    """llama.cpp's ``tensor_category``, from the tensor's name (``tensor_get_category``)."""

    OUTPUT = "output"
    TOKEN_EMBD = "token_embd"
    ATTENTION_QKV = "attn_qkv"
    ATTENTION_KV_B = "attn_kv_b"
    ATTENTION_V = "attn_v"
    ATTENTION_K = "attn_k"
    ATTENTION_Q = "attn_q"
    ATTENTION_OUTPUT = "attn_output"
    FFN_UP = "ffn_up"
    FFN_GATE = "ffn_gate"
    FFN_DOWN = "ffn_down"
    OTHER = "other"


_ATTN_V_LIKE = (Category.ATTENTION_V, Category.ATTENTION_QKV, Category.ATTENTION_KV_B)
#: (substring, category) in llama.cpp's order (the first that matches decides).
_BY_NAME = (
    ("attn_qkv.weight", Category.ATTENTION_QKV),
    ("attn_kv_b.weight", Category.ATTENTION_KV_B),
    ("attn_v.weight", Category.ATTENTION_V),
    ("attn_k.weight", Category.ATTENTION_K),
    ("attn_q.weight", Category.ATTENTION_Q),
    ("attn_output.weight", Category.ATTENTION_OUTPUT),
    ("ffn_up", Category.FFN_UP),
    ("ffn_gate", Category.FFN_GATE),
    ("ffn_down", Category.FFN_DOWN),
)


def category(name: str) -> Category:
    """The category of the tensor named ``name`` (``tensor_get_category``)."""
    if name == "output.weight":
        return Category.OUTPUT
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return Category.TOKEN_EMBD
    return next((c for sub, c in _BY_NAME if sub in name), Category.OTHER)


@dataclass(frozen=True)
class TensorChoice:
    """The type one tensor gets.

    Attributes:
        tensor: the source's tensor.
        type_name: the ggml type it gets (its own when it is not quantized).
        chosen: the type the mix chose for it before the fallback ("" when it is not quantized).
        fallback: its row length (``tensor.shape[0]`` weights) is not a whole number of ``chosen``'s blocks,
            so it gets ``type_name`` instead (llama.cpp counts it as a fallback).
    """

    tensor: TensorInfo
    type_name: str
    chosen: str
    fallback: bool

    @property
    def n_bytes(self) -> int:
        """Its bytes in the result (its own bytes when it keeps its type)."""
        if not self.chosen:
            return self.tensor.n_bytes
        return type_bytes(self.type_name, self.tensor.n_elements)


def quantized(t: TensorInfo) -> bool:
    """Whether llama.cpp quantizes ``t`` (``tensor_allows_quantization``, the common rules)."""
    return _n_dims(t.shape) >= 2 and t.name.endswith("weight") and not any(k in t.name for k in _KEPT)


def choose_types(first: GGUFInfo, tensors: Sequence[TensorInfo], qtype: QuantType) -> list[TensorChoice]:
    """The type each of ``tensors`` (all parts of the model whose first part's header is ``first``) gets when
    quantized to ``qtype``, in llama.cpp's order (by layer, then by name: ``weight_name_comparer``)."""
    state = _State(first, tensors)
    return [_choose(t, qtype, state) for t in sorted(tensors, key=_order)]


class _State:
    """``quantize_state_impl``: the model's facts and the running layer counters."""

    def __init__(self, first: GGUFInfo, tensors: Sequence[TensorInfo]) -> None:
        self.arch = first.architecture
        heads, heads_kv = first.arch_key("attention.head_count", 0), first.arch_key("attention.head_count_kv")
        n_head = _first(heads)
        n_head_kv = _first(heads_kv) if heads_kv is not None else n_head
        self.n_gqa = n_head // n_head_kv if n_head_kv else 0  # llama_hparams::n_gqa(0)
        self.n_expert = int(first.arch_key("expert_count", 0) or 0)
        self.n_layer = int(first.arch_key("block_count", 0) or 0)  # n_ffn_down = n_layer_all
        self.tied = not any(t.name == "output.weight" for t in tensors)
        self.n_attention_wv = sum(category(t.name) in _ATTN_V_LIKE for t in tensors)
        self.i_attention_wv = 0
        self.i_ffn_down = 0

    def ffn_down_layer(self, name: str) -> int:
        """``layer_info``: the counter, or the name's layer with more than one expert."""
        i = self.i_ffn_down
        self.i_ffn_down += 1
        if max(1, self.n_expert) > 1 and (m := _LAYER.match(name)):
            return int(m.group(1))
        return i


def _choose(t: TensorInfo, qtype: QuantType, st: _State) -> TensorChoice:
    if not quantized(t):
        return TensorChoice(t, t.type_name, "", fallback=False)
    chosen = _mix(t, qtype, st)
    ncols = t.shape[0]
    if not ncols % block_size(chosen):
        return TensorChoice(t, chosen, chosen, fallback=False)
    got = _FALLBACK.get(chosen, chosen)
    return TensorChoice(t, "F16" if ncols % block_size(got) else got, chosen, fallback=True)


def _mix(t: TensorInfo, q: QuantType, st: _State) -> str:
    """``llama_tensor_get_type_impl`` for the offered types (see the module docstring)."""
    new = q.base_type
    cat = category(t.name)
    if cat is Category.OUTPUT or (st.tied and cat is Category.TOKEN_EMBD):
        if st.arch == "falcon" or t.shape[0] % block_size(new):
            return "Q8_0"
        return new if new == "Q8_0" else "Q6_K"
    if cat is Category.TOKEN_EMBD:
        return new
    if cat in _ATTN_V_LIKE:
        i = st.i_attention_wv
        st.i_attention_wv += 1
        if q is QuantType.Q2_K:
            new = "Q4_K" if st.n_gqa >= 4 else "Q3_K"
        elif q is QuantType.Q3_K_M:
            new = "Q5_K" if i < 2 else "Q4_K"
        elif q in (QuantType.Q4_K_M, QuantType.Q5_K_M) and _use_more_bits(i, st.n_attention_wv):
            new = "Q6_K"
        return "Q8_0" if st.n_expert == 8 else new
    if cat is Category.ATTENTION_K:
        return "Q8_0" if st.n_expert == 8 else new
    if cat is Category.FFN_DOWN:
        return _ffn_down(t.name, q, new, st)
    if cat is Category.ATTENTION_OUTPUT:
        if st.arch == "falcon":
            return new
        if st.n_expert == 8:
            return "Q5_K" if q in (QuantType.Q2_K, QuantType.Q3_K_M, QuantType.Q4_K_M) else new
        return {QuantType.Q2_K: "Q3_K", QuantType.Q3_K_M: "Q4_K"}.get(q, new)
    return new


def _ffn_down(name: str, q: QuantType, new: str, st: _State) -> str:
    i, n = st.ffn_down_layer(name), st.n_layer
    falcon = st.arch == "falcon"
    if q is QuantType.Q2_K:
        return "Q3_K"
    if q is QuantType.Q3_K_M:
        return "Q5_K" if i < n // 16 else "Q4_K" if not falcon or _use_more_bits(i, n) else "Q3_K"
    if q is QuantType.Q4_K_M:
        if falcon:
            return "Q6_K" if i < n // 16 else "Q5_K" if _use_more_bits(i, n) else "Q4_K"
        return "Q6_K" if _use_more_bits(i, n) else new
    if q is QuantType.Q5_K_M and _use_more_bits(i, n):
        return "Q6_K"
    return new


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama.cpp's ``use_more_bits``: the first and last eighth of the layers and every third between."""
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def _order(t: TensorInfo) -> tuple[int, str]:
    m = _LAYER.match(t.name)
    return (int(m.group(1)) if m else -1, t.name)


def _n_dims(shape: tuple[int, ...]) -> int:
    """``ggml_n_dims``: dimensions up to the last one longer than 1 (at least 1)."""
    n = len(shape)
    while n > 1 and shape[n - 1] == 1:
        n -= 1
    return n


def _first(v: object) -> int:
    """A per-layer key's layer-0 value (one number or a list; 0 when absent)."""
    if isinstance(v, (list, tuple)):
        v = v[0] if v else 0
    return int(v) if isinstance(v, (int, float)) else 0
