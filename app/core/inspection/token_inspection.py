"""What "Inspect a token" found for one position of the context: logit lens, attention, embedding, experts.

Plain values (they cross the pipe from the engine, which computes them in a second llama.cpp
context with the eval callback, :mod:`app.engine.inspection`). Large per-layer tables are
``array.array('f')`` (float32, row-major, shapes given next to them) so they pickle compactly.
"""

from __future__ import annotations

import enum
from array import array
from dataclasses import dataclass, field

#: ``(token_id, text, probability)``
Candidate = tuple[int, str, float]

MAX_EXPERT_SPAN = 512  # positions before the inspected one evaluated for the expert load, at most


class InspectPath(str, enum.Enum):
    """How the inspect context got the keys and values of the positions before the inspected span."""

    CACHE_REUSE = "cache_reuse"  #: copied from the chat context's KV cache (llama_state_seq_get/set_data)
    RE_EVAL = "re_eval"  #: evaluated again from the start of the context


@dataclass(frozen=True)
class LensCell:
    """One cell of the logit lens: one layer's residual stream at one position, read as next-token predictions.

    Attributes:
        top: the best candidates, most likely first.
        next_rank: 1-based rank of the token that actually came next at this position (0: unknown).
        next_p: its probability under this layer's lens (0 when unknown).
    """

    top: tuple[Candidate, ...]
    next_rank: int
    next_p: float


@dataclass(frozen=True)
class LogitLens:
    """Each layer's residual stream (``l_out-N``) through the output norm and the output matrix.

    Attributes:
        positions: the context positions of the grid's columns (the inspected one and its neighbours).
        tokens: ``(token_id, text)`` at each of those positions.
        next_tokens: ``(token_id, text)`` that came next after each position (-1, "" when none is known).
        cells: ``cells[layer][column]``, layer 0 first.
        last_layer_max_abs_diff: the self-check: the largest absolute difference, over the
            whole vocabulary at the inspected position, between the last layer's lens logits and
            the logits llama.cpp computed in the inspect context for that position (logit units;
            the same evaluation the lens reads ``l_out`` from). Small means the lens reads this
            architecture right.
        logit_range: max - min of those logits, to judge the difference against.
        softcap: the final logit softcapping applied (0: none).
        tied: the output matrix is the token embedding table (no ``output.weight``).
        chat_max_abs_diff: the largest absolute difference between the last layer's lens logits
            and the logits the chat context itself computed for that position, when the inspected
            position is the chat context's last evaluated one and it still holds those logits
            (None otherwise: another position, a reply running, a rewind since).
        contexts_max_abs_diff: the largest absolute difference between the inspect context's and
            the chat context's logits for that position (None when ``chat_max_abs_diff`` is): how
            faithfully the inspect context redid the chat's computation (cache reuse or re-evaluation).
    """

    positions: tuple[int, ...]
    tokens: tuple[tuple[int, str], ...]
    next_tokens: tuple[tuple[int, str], ...]
    cells: tuple[tuple[LensCell, ...], ...]
    last_layer_max_abs_diff: float
    logit_range: float
    softcap: float
    tied: bool
    chat_max_abs_diff: float | None = None
    contexts_max_abs_diff: float | None = None


@dataclass(frozen=True)
class AttentionMaps:
    """The inspected position's attention probabilities (``kq_soft_max-N``) over every earlier position.

    Attributes:
        key_positions: the first and one-past-last context positions of the columns ``[k0, k1)``.
        n_layer, n_head: the table's shape.
        weights: float32 ``[n_layer, n_head, k1 - k0]``, row-major; 0 where a layer does not see a
            position (sliding window).
        head_kv: for each head, its KV head (GQA group): heads sharing one KV head read the same keys.
        sliding: for each layer, whether it is a sliding-window layer.
        window: the sliding window, tokens (0: none).
        row_sum_max_error: the largest ``|sum(row) - 1|`` over layers and heads (softmax rows sum to 1).
        key_texts: the token text at each column's position.
    """

    key_positions: tuple[int, int]
    n_layer: int
    n_head: int
    weights: array[float]
    head_kv: tuple[int, ...]
    sliding: tuple[bool, ...]
    window: int
    row_sum_max_error: float
    key_texts: tuple[str, ...] = ()

    def row(self, layer: int, head: int) -> array[float]:
        """One head's weights over ``key_positions`` (a copy)."""
        n = self.key_positions[1] - self.key_positions[0]
        i = (layer * self.n_head + head) * n
        return self.weights[i : i + n]


@dataclass(frozen=True)
class EmbeddingView:
    """The token's row of the embedding table and what is near it.

    Attributes:
        vector: the dequantized ``token_embd`` row (n_embd float32), before any model scaling.
        norm: its L2 norm.
        scale: the factor the model multiplies embeddings by (Gemma: sqrt(n_embd); 1 otherwise).
        neighbours: the nearest vocabulary tokens to the row by cosine, ``(id, text, cosine)``, itself excluded.
        hidden_neighbours: the nearest vocabulary tokens to the final hidden state (``result_norm``) by cosine.
        table_bytes: memory the normalised embedding table takes in the engine (built once per model).
    """

    vector: array[float]
    norm: float
    scale: float
    neighbours: tuple[Candidate, ...]
    hidden_neighbours: tuple[Candidate, ...]
    table_bytes: int


@dataclass(frozen=True)
class ExpertChoice:
    """One layer's router decision for the inspected token.

    Attributes:
        experts: the chosen experts' indices, highest weight first.
        weights: their weights as the layer mixes them (after llama.cpp's normalisation).
    """

    experts: tuple[int, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True)
class ExpertsView:
    """Mixture-of-experts routing (empty for a dense model).

    Attributes:
        n_expert, n_expert_used: experts per layer, and chosen per token.
        chosen: one :class:`ExpertChoice` per MoE layer, layer 0 first.
        load: float32 ``[n_layer, n_expert]``: per layer, the fraction of the span's tokens that chose each expert.
        load_tokens: how many tokens ``load`` counts: the turn's positions up to the inspected span's end,
            at most :data:`MAX_EXPERT_SPAN` before the inspected one (not the turn's later tokens).
    """

    n_expert: int
    n_expert_used: int
    chosen: tuple[ExpertChoice, ...]
    load: array[float]
    load_tokens: int


@dataclass(frozen=True)
class TokenInspection:
    """Everything "Inspect a token" shows for one context position.

    Attributes:
        position: the context position (0-based; the KV cache's order).
        token_id, text: the token there.
        n_layer: the model's layers.
        path: how the earlier positions' keys and values were obtained.
        fallback_reason: why the cache could not serve ("" on the cache path).
        evaluated: positions the inspect context evaluated (the span, plus everything before it on re-eval).
        inspect_s: seconds from the request to the result (tables built on first use included).
        tables_s: of those, seconds spent building the per-model tables (0 once built).
        extra_memory_bytes: what the inspector held on top of the chat during this inspection: the
            inspect context's KV cache and (estimated) compute buffer and the dequantized tables, which
            stay, and the copied KV cache state and graph tensors, which are dropped after it.
        lens, attention, embedding, experts: the four views (experts None for a dense model).
        tensors_seen: names of the graph tensors the callback copied (one per kind, for the log).
    """

    position: int
    token_id: int
    text: str
    n_layer: int
    path: InspectPath
    fallback_reason: str
    evaluated: int
    inspect_s: float
    tables_s: float
    extra_memory_bytes: int
    lens: LogitLens
    attention: AttentionMaps
    embedding: EmbeddingView
    experts: ExpertsView | None = None
    tensors_seen: tuple[str, ...] = field(default=())
