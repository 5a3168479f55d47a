"""The model's anatomy, read from its GGUF: embedding table, N blocks, output head.

:func:`describe_architecture` turns a :class:`~app.core.gguf.gguf_facts.GGUFInfo` (metadata and
tensor table) into an :class:`Architecture`: every figure comes from the file's keys and
tensor shapes, except where llama.cpp applies a default the file does not state (the RoPE
base of sliding-window layers), which is marked as such (``rope_base_swa_from_file``).

Keys read (llama.cpp's names, src/llama-arch.cpp ``LLM_KV_NAMES``; ``{arch}`` is
``general.architecture``): ``{arch}.embedding_length``, ``.block_count``,
``.feed_forward_length`` (one value or one per layer), ``.attention.head_count`` /
``.head_count_kv`` (same), ``.attention.key_length`` / ``.value_length``,
``.attention.sliding_window`` (+ the layer pattern of
:meth:`~app.core.gguf.gguf_facts.GGUFInfo.swa_layers`), ``.rope.freq_base``,
``.rope.freq_base_swa``, ``.rope.dimension_count``, ``.rope.scaling.type`` / ``.factor`` /
``.original_context_length``, ``.expert_count``, ``.expert_used_count``,
``.expert_feed_forward_length``, ``.expert_shared_count``, ``.final_logit_softcapping``,
``.attn_logit_softcapping``.

Tensors: ``token_embd.weight`` (the ``[n_vocab, n_embd]`` table), ``blk.N.*`` (block N),
``output_norm.weight``, ``output.weight`` (absent: the output head reuses ``token_embd``,
"tied", as llama.cpp does with ``TENSOR_DUPLICATED``); anything else is listed as "other".
A block is MoE when it has a router (``blk.N.ffn_gate_inp.weight``).

Parameters are counted as llama.cpp counts them (``llama_model_n_params``: the elements of
every tensor in the file, a tied output head not counted twice); a test holds the count and
the bytes against llama.cpp's ``llama_model_n_params`` and ``llama_model_size``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from app.core.gguf.ffn_activation import ffn_name
from app.core.gguf.gguf_facts import GGUFInfo, TensorInfo

# llama.cpp's default RoPE base of sliding-window layers when the file has no
# ``{arch}.rope.freq_base_swa`` (src/llama-hparams.h: ``rope_freq_base_train_swa = 10000.0f``).
DEFAULT_ROPE_BASE_SWA = 10000.0
# Architectures whose SWA layers use the global RoPE base in llama.cpp
# (src/models/*.cpp set ``rope_freq_base_train_swa = rope_freq_base_train``).
SWA_ROPE_SAME_AS_GLOBAL = frozenset(
    {"olmo2", "exaone4", "exaone-moe", "llama4", "gpt-oss", "afmoe", "cohere2moe", "spark2-5", "muse-glimmer"}
)

_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


def _per_layer(value: object, il: int, default: int = 0) -> int:
    """One layer's value of a key that is one number or one per layer."""
    if isinstance(value, (list, tuple)):
        if not value:
            return default
        return int(value[il] if il < len(value) else value[-1])
    if isinstance(value, (int, float)):
        return int(value)
    return default


def _bytes_by_type(tensors: list[TensorInfo]) -> tuple[tuple[str, int], ...]:
    """``((ggml type, bytes), ...)`` largest first."""
    acc: dict[str, int] = {}
    for t in tensors:
        acc[t.type_name] = acc.get(t.type_name, 0) + t.n_bytes
    return tuple(sorted(acc.items(), key=lambda kv: -kv[1]))


@dataclass(frozen=True)
class EmbeddingTable:
    """``token_embd.weight``: one row of ``n_embd`` values per token of the vocabulary.

    Attributes:
        n_vocab: rows (tokens).
        n_embd: values per row (the hidden size).
        type_name: ggml type of the table (e.g. ``Q8_0``).
        n_bytes: bytes of the whole table.
        tied: the output head reuses this table (the file has no ``output.weight``).
    """

    n_vocab: int
    n_embd: int
    type_name: str
    n_bytes: int
    tied: bool

    @property
    def n_params(self) -> int:
        return self.n_vocab * self.n_embd

    @property
    def row_bytes(self) -> int:
        """Bytes of one token's row (what the embedding lookup reads per token)."""
        return self.n_bytes // self.n_vocab if self.n_vocab else 0


class AttentionKind(str, enum.Enum):
    """How a layer's query heads share key/value heads."""

    MULTI_HEAD = "multi_head"  #: one K/V head per query head (n_head_kv == n_head)
    MULTI_QUERY = "multi_query"  #: one K/V head for all query heads (n_head_kv == 1)
    GROUPED_QUERY = "grouped_query"  #: groups of n_head / n_head_kv query heads share one K/V head


def attention_kind(n_head: int, n_head_kv: int) -> AttentionKind:
    """The sharing of ``n_head`` query heads over ``n_head_kv`` K/V heads.

    One query head with one K/V head is multi-head (nothing is shared).
    """
    if n_head_kv >= n_head or n_head_kv <= 0:
        return AttentionKind.MULTI_HEAD
    if n_head_kv == 1:
        return AttentionKind.MULTI_QUERY
    return AttentionKind.GROUPED_QUERY


def attention_label(n_head: int, n_head_kv: int) -> str:
    """``"multi-head attention"``, ``"multi-query attention (1 K/V head)"`` or ``"GQA 3:1"`` (query heads per K/V head)."""
    kind = attention_kind(n_head, n_head_kv)
    if kind is AttentionKind.MULTI_HEAD:
        return "multi-head attention"
    if kind is AttentionKind.MULTI_QUERY:
        return "multi-query attention (1 K/V head)"
    return f"GQA {n_head // n_head_kv}:1"


@dataclass(frozen=True)
class Attention:
    """One block's self-attention.

    Attributes:
        n_head: query heads.
        n_head_kv: key/value heads (as many as n_head: multi-head; fewer: grouped-query; one: multi-query).
        head_dim_k, head_dim_v: values per key / value head.
        rope_base: RoPE frequency base of this layer.
        rope_base_from_file: the base is the file's (False: llama.cpp's default for SWA layers).
        sliding_window: tokens this layer sees back (0: global, it sees the whole context).
    """

    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    rope_base: float
    rope_base_from_file: bool
    sliding_window: int

    @property
    def gqa_ratio(self) -> int:
        """Query heads per KV head (1: plain multi-head attention)."""
        return self.n_head // self.n_head_kv if self.n_head_kv else 0

    @property
    def kind(self) -> AttentionKind:
        """Multi-head, multi-query or grouped-query (:func:`attention_kind`)."""
        return attention_kind(self.n_head, self.n_head_kv)

    @property
    def label(self) -> str:
        """:func:`attention_label`: ``"GQA 3:1"``, ``"multi-query attention (1 K/V head)"``..."""
        return attention_label(self.n_head, self.n_head_kv)

    @property
    def is_swa(self) -> bool:
        return self.sliding_window > 0


@dataclass(frozen=True)
class FeedForward:
    """One block's feed-forward network: dense (``n_ff``) or mixture of experts.

    Attributes:
        n_ff: hidden size of the dense FFN (0 in an MoE block without one).
        n_expert: experts (0: dense).
        n_expert_used: experts each token is routed to.
        n_ff_expert: hidden size of each expert.
        n_expert_shared: experts every token goes through besides the routed ones.
        gated: the file has a gate (``ffn_gate``...): a gated FFN rather than up-activation-down.
        name: the FFN's name from the architecture and the gate (:func:`app.core.gguf.ffn_activation.ffn_name`:
            ``"SwiGLU (SiLU-gated)"`` for llama, ``"GeGLU (GELU-gated)"`` for gemma3, ``"gated FFN"``
            for an architecture whose activation is not known).
    """

    n_ff: int
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_expert: int = 0
    n_expert_shared: int = 0
    gated: bool = True
    name: str = "gated FFN"

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0


@dataclass(frozen=True)
class Block:
    """One transformer block (layer).

    Attributes:
        index: layer number, from 0.
        attention: its :class:`Attention`.
        ffn: its :class:`FeedForward`.
        n_params: elements of its tensors.
        n_bytes: bytes of its tensors.
        bytes_by_type: ``((ggml type, bytes), ...)`` largest first: the block's quantization mix.
        tensors: its tensors (names without the ``blk.N.`` prefix), in file order.
    """

    index: int
    attention: Attention
    ffn: FeedForward
    n_params: int
    n_bytes: int
    bytes_by_type: tuple[tuple[str, int], ...]
    tensors: tuple[TensorInfo, ...]


@dataclass(frozen=True)
class OutputHead:
    """The final norm and the LM head that turns the last hidden state into logits.

    Attributes:
        norm_type: ggml type of ``output_norm.weight`` ("" when absent).
        type_name: ggml type of ``output.weight``, or of ``token_embd`` when tied.
        n_bytes: bytes of ``output.weight`` (0 when tied: the embedding table's bytes serve).
        n_params: elements of ``output.weight`` and ``output_norm.weight`` (the tied table not counted again).
        tied: the head reuses the embedding table.
        final_logit_softcap: ``final_logit_softcapping`` (0: none).
    """

    norm_type: str
    type_name: str
    n_bytes: int
    n_params: int
    tied: bool
    final_logit_softcap: float


class Positions(str, enum.Enum):
    """How the model knows token order (llama.cpp's ``llama_model_rope_type``, src/llama-model.cpp)."""

    ROPE = "rope"  #: rotary position embedding on Q and K
    ALIBI = "alibi"  #: a linear distance penalty added to the attention scores (no rotation)
    LEARNED = "learned"  #: a learned ``position_embd`` table added to the token embedding
    NONE = "none"  #: no positional encoding in attention (recurrent and hybrid models: order lives in the state)


# Architectures llama.cpp gives no RoPE (``LLAMA_ROPE_TYPE_NONE`` in llama_model_rope_type, names
# from src/llama-arch.cpp), and of those the ones whose graph adds ALiBi (src/models/*.cpp: bloom,
# jais, jina-bert-v2, mpt, refact build_attn with ``hparams.f_max_alibi_bias``).
NO_ROPE_ARCHS = frozenset(
    {
        "clip", "gpt2", "gptj", "mpt", "refact", "bloom", "mamba", "mamba2", "jamba", "jina-bert-v2", "t5",
        "t5encoder", "jais", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "wavtokenizer-dec", "nemotron_h",
        "nemotron_h_moe", "kimi-linear", "kimi-k3", "glm5-next",
    }
)  # fmt: skip
ALIBI_ARCHS = frozenset({"bloom", "jais", "jina-bert-v2", "mpt", "refact"})


def positions_of(arch: str, tensor_names: set[str] | frozenset[str]) -> Positions:
    """The positional encoding of architecture ``arch`` whose file holds ``tensor_names``.

    RoPE unless llama.cpp gives the architecture none; then ALiBi, a learned ``position_embd``
    table when the file has one, or none.
    """
    if arch not in NO_ROPE_ARCHS:
        return Positions.ROPE
    if arch in ALIBI_ARCHS:
        return Positions.ALIBI
    if "position_embd.weight" in tensor_names:
        return Positions.LEARNED
    return Positions.NONE


@dataclass(frozen=True)
class Architecture:
    """The whole model, as drawn in the Model panel.

    Attributes:
        name, arch: the model's name and ``general.architecture``.
        n_embd: hidden size.
        context_length: trained context, tokens.
        embedding: the :class:`EmbeddingTable` (None when the file has none).
        blocks: the N :class:`Block` s.
        head: the :class:`OutputHead`.
        other: tensors outside the embedding, the blocks and the head (e.g. ``rope_freqs``).
        positions: how the model knows token order (:class:`Positions`); ``rope_*`` apply to RoPE only.
        rope_dims: dimensions RoPE rotates per head (0: the file does not say).
        rope_scaling: ``"none"`` or e.g. ``"yarn ×4 (from 32,768)"``.
        attn_logit_softcap: ``attn_logit_softcapping`` (0: none).
        n_params: all parameters (llama_model_n_params).
        n_bytes: all tensor bytes (llama_model_size).
    """

    name: str
    arch: str
    n_embd: int
    context_length: int
    embedding: EmbeddingTable | None
    blocks: tuple[Block, ...]
    head: OutputHead
    other: tuple[TensorInfo, ...]
    positions: Positions
    rope_dims: int
    rope_scaling: str
    attn_logit_softcap: float
    n_params: int
    n_bytes: int

    @property
    def n_layer(self) -> int:
        return len(self.blocks)

    @property
    def block_params(self) -> int:
        """Parameters inside the blocks (what Kaplan et al. call non-embedding parameters, less the head)."""
        return sum(b.n_params for b in self.blocks)

    @property
    def n_swa_layers(self) -> int:
        return sum(b.attention.is_swa for b in self.blocks)

    @property
    def is_moe(self) -> bool:
        return any(b.ffn.is_moe for b in self.blocks)

    def block_groups(self) -> list[tuple[int, int]]:
        """Runs of consecutive blocks that look alike, as ``(first, last)`` layer indices.

        Blocks look alike when their attention (window, heads, RoPE base), FFN and bytes by
        type are equal: Gemma 3's 5 sliding-window layers then 1 global layer come out as
        separate runs, SmolLM2's 30 identical blocks as one.
        """
        groups: list[tuple[int, int]] = []
        for b in self.blocks:
            key = (b.attention, b.ffn, b.bytes_by_type)
            if groups:
                first, last = groups[-1]
                p = self.blocks[last]
                if (p.attention, p.ffn, p.bytes_by_type) == key:
                    groups[-1] = (first, b.index)
                    continue
            groups.append((b.index, b.index))
        return groups


def _rope_scaling(info: GGUFInfo) -> str:
    kind = info.arch_key("rope.scaling.type")
    factor = info.arch_key("rope.scaling.factor")
    orig = info.arch_key("rope.scaling.original_context_length")
    if not kind or kind == "none":
        if factor and float(factor) not in (0.0, 1.0):
            return f"linear ×{float(factor):g}"
        return "none"
    text = str(kind)
    if factor:
        text += f" ×{float(factor):g}"
    if orig:
        text += f" (from {int(orig):,} tokens)"
    return text


def describe_architecture(info: GGUFInfo) -> Architecture:
    """The model's anatomy from ``info``'s metadata and tensor table.

    Returns:
        An :class:`Architecture`; every block is listed (n_layer of them).

    Raises:
        ValueError: the file has no blocks or no attention shape (``block_count`` /
            ``attention.head_count``: not a transformer GGUF llama.cpp can run).
    """
    n_layer = info.n_layer
    if n_layer <= 0 or info.n_head <= 0:
        raise ValueError(f"{info.name}: the file has no transformer shape (block_count / attention.head_count)")
    per_block: list[list[TensorInfo]] = [[] for _ in range(n_layer)]
    embd: TensorInfo | None = None
    output: TensorInfo | None = None
    output_norm: TensorInfo | None = None
    other: list[TensorInfo] = []
    for t in info.tensors:
        m = _BLOCK_RE.match(t.name)
        if m and int(m.group(1)) < n_layer:
            per_block[int(m.group(1))].append(t)
        elif t.name == "token_embd.weight":
            embd = t
        elif t.name == "output.weight":
            output = t
        elif t.name == "output_norm.weight":
            output_norm = t
        else:
            other.append(t)
    tied = output is None and embd is not None
    embedding = None
    if embd is not None:
        n_embd_t, n_vocab_t = (*embd.shape, 1, 1)[:2]
        embedding = EmbeddingTable(int(n_vocab_t), int(n_embd_t), embd.type_name, embd.n_bytes, tied)

    swa = info.swa_layers()
    rope_base = float(info.arch_key("rope.freq_base", 10000.0) or 10000.0)
    swa_key = info.arch_key("rope.freq_base_swa")
    if swa_key:
        rope_base_swa, swa_from_file = float(swa_key), True
    elif info.architecture in SWA_ROPE_SAME_AS_GLOBAL:
        rope_base_swa, swa_from_file = rope_base, True
    else:
        rope_base_swa, swa_from_file = DEFAULT_ROPE_BASE_SWA, False
    head_count = info.arch_key("attention.head_count")
    ff_len = info.arch_key("feed_forward_length")
    n_expert = int(info.arch_key("expert_count", 0) or 0)
    n_expert_used = int(info.arch_key("expert_used_count", 0) or 0)
    n_ff_exp = int(info.arch_key("expert_feed_forward_length", 0) or 0)
    n_shared = int(info.arch_key("expert_shared_count", 0) or 0)

    blocks = []
    for il, tensors in enumerate(per_block):
        names = {t.name.split(".", 2)[2] for t in tensors}
        is_swa = bool(swa[il]) if il < len(swa) else False
        att = Attention(
            n_head=_per_layer(head_count, il),
            n_head_kv=info.n_head_kv_layer(il),
            head_dim_k=info.n_embd_head_k,
            head_dim_v=info.n_embd_head_v,
            rope_base=rope_base_swa if is_swa else rope_base,
            rope_base_from_file=swa_from_file if is_swa else True,
            sliding_window=info.sliding_window if is_swa else 0,
        )
        moe = "ffn_gate_inp.weight" in names
        gated = any(n.startswith(("ffn_gate.", "ffn_gate_exps.", "ffn_gate_shexp.")) for n in names)
        ffn = FeedForward(
            n_ff=_per_layer(ff_len, il) if any(n.startswith("ffn_up.") for n in names) else 0,
            n_expert=n_expert if moe else 0,
            n_expert_used=n_expert_used if moe else 0,
            n_ff_expert=n_ff_exp if moe else 0,
            n_expert_shared=n_shared if moe else 0,
            gated=gated,
            name=ffn_name(info.architecture, gated),
        )
        blocks.append(
            Block(
                index=il,
                attention=att,
                ffn=ffn,
                n_params=sum(t.n_elements for t in tensors),
                n_bytes=sum(t.n_bytes for t in tensors),
                bytes_by_type=_bytes_by_type(tensors),
                tensors=tuple(
                    TensorInfo(t.name.split(".", 2)[2], t.shape, t.type_name, t.n_elements, t.n_bytes, t.offset)
                    for t in tensors
                ),
            )
        )
    head = OutputHead(
        norm_type=output_norm.type_name if output_norm else "",
        type_name=output.type_name if output else (embd.type_name if embd else ""),
        n_bytes=output.n_bytes if output else 0,
        n_params=(output.n_elements if output else 0) + (output_norm.n_elements if output_norm else 0),
        tied=tied,
        final_logit_softcap=float(info.arch_key("final_logit_softcapping", 0.0) or 0.0),
    )
    return Architecture(
        name=info.name,
        arch=info.architecture,
        n_embd=info.n_embd,
        context_length=info.context_length,
        embedding=embedding,
        blocks=tuple(blocks),
        head=head,
        other=tuple(other),
        positions=positions_of(info.architecture, {t.name for t in info.tensors}),
        rope_dims=int(info.arch_key("rope.dimension_count", 0) or 0),
        rope_scaling=_rope_scaling(info),
        attn_logit_softcap=float(info.arch_key("attn_logit_softcapping", 0.0) or 0.0),
        n_params=info.n_params,
        n_bytes=info.tensor_bytes,
    )
