"""The views of an inspection, as pure numpy over the tensors the eval callback captured.

No llama.cpp here: each function reads named tensors (``l_out-N``, ``result_norm``,
``kq_soft_max-N``, ``ffn_moe_topk-N``, ``ffn_moe_weights*-N``: :mod:`app.engine.inspection.evaluation`
says which are copied) and the dequantized tables (:class:`~app.engine.inspection.model_tables.ModelTables`),
and returns the frozen records of :mod:`app.core.inspection.token_inspection`.

A captured tensor is a numpy array in ggml's order reversed (outermost first): the residual stream
``l_out-N`` is [n_tokens, n_embd] (one row per position of the evaluated span), the attention
probabilities ``kq_soft_max-N`` [n_head, n_tokens, n_kv] (possibly with a leading 1), the router's
choices ``ffn_moe_topk-N`` [n_tokens, n_expert_used] and its weights [n_tokens, n_expert_used(, 1)].
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.core.inspection.token_inspection import (
    AttentionMaps,
    EmbeddingView,
    ExpertChoice,
    ExpertsView,
    LensCell,
    LogitLens,
)
from app.engine.errors import EngineError
from app.engine.inspection.model_tables import ModelTables, chunked_matmul

F32 = npt.NDArray[np.float32]
Tensors = Mapping[str, npt.NDArray[Any]]
#: A token's text for display (``Vocab.display``).
Display = Callable[[int], str]

# The router's weights as the layer mixes them: the last of these the graph names (src/llama-graph.cpp build_moe_ffn).
WEIGHT_NAMES = ("ffn_moe_weights_scaled", "ffn_moe_weights_norm", "ffn_moe_weights_softmax", "ffn_moe_weights")


def logit_lens(
    tensors: Tensors,
    tables: ModelTables,
    *,
    tokens: Sequence[int],
    pos: int,
    c0: int,
    c1: int,
    n_layer: int,
    n_embd: int,
    top_k: int,
    llama_logits: F32,
    chat_logits: F32 | None = None,
    display: Display,
) -> tuple[LogitLens, F32, F32]:
    """The logit lens grid over positions ``[c0, c1]`` and, from the same pass over the tables, the
    cosines the embedding view needs.

    Each cell is layer ``il``'s residual stream at one position (``l_out-il``, row ``c - c0``) through
    the output norm and the LM head (:meth:`ModelTables.norm`, :meth:`ModelTables.logits`: the
    model's own final steps, softcap included), as a softmax: its ``top_k`` tokens with their
    probabilities, and the rank and probability of the token that follows in the context. The last
    layer's lens at ``pos`` is the model's prediction, compared with ``llama_logits`` (the self-check).

    Args:
        tensors: ``l_out-0`` ... ``l_out-{n_layer-1}`` [n_span, n_embd] and, when captured,
            ``result_norm`` [n_span, n_embd] (the final norm's output: the hidden state the
            embedding view compares with the table).
        tokens: the context's tokens (the next token of position c is ``tokens[c + 1]``; -1 past the end).
        pos: the inspected position, in ``[c0, c1]``.
        llama_logits: the logits llama.cpp computed for ``pos`` [n_vocab] (the self-check's reference).
        chat_logits: the chat context's own logits for ``pos`` when it still holds them (its last
            evaluated position), compared too; None: not compared.
        display: a token's text.

    Returns:
        ``(lens, hidden cosines [n_vocab], embedding cosines [n_vocab])``: the cosine of ``pos``'s
        final hidden state and of ``tokens[pos]``'s embedding row with every embedding row.
    """
    t = tables
    cols = list(range(c0, c1 + 1))
    rows = [c - c0 for c in cols]
    states = np.concatenate([tensors[f"l_out-{il}"].reshape(-1, n_embd)[rows] for il in range(n_layer)])
    normed = t.norm(states)
    emb_row = t.embd[tokens[pos]].astype(np.float32)[None, :]
    hidden = tensors["result_norm"].reshape(-1, n_embd)[pos - c0][None, :] if "result_norm" in tensors else normed[-1:]
    if t.tied:  # one pass over the one table: lens logits and both cosines
        dots = chunked_matmul(t.embd, np.concatenate([t.act_quant.apply(normed), emb_row, hidden]), t.workers)
        logits = dots[: normed.shape[0]]
        if t.softcap:
            logits = np.tanh(logits / t.softcap) * t.softcap
        cos = dots[normed.shape[0] :] / np.maximum(
            t.embd_norms[None, :] * np.linalg.norm(np.concatenate([emb_row, hidden]), axis=1, keepdims=True), 1e-12
        )
    else:
        logits = t.logits(normed)
        cos = t.cosines(np.concatenate([emb_row, hidden]))
    k = max(1, min(top_k, logits.shape[1]))
    next_ids = [tokens[c + 1] if c + 1 < len(tokens) else -1 for c in cols]
    cells: list[tuple[LensCell, ...]] = []
    for il in range(n_layer):
        line = []
        for j, nxt in enumerate(next_ids):
            lg = logits[il * len(cols) + j]
            m = float(lg.max())
            lse = m + float(np.log(np.exp(lg - m, dtype=np.float32).sum(dtype=np.float64)))
            top = np.argpartition(lg, -k)[-k:]
            top = top[np.argsort(-lg[top])]
            cands = tuple((int(i), display(int(i)), float(np.exp(lg[i] - lse))) for i in top)
            rank = int((lg > lg[nxt]).sum()) + 1 if nxt >= 0 else 0
            line.append(LensCell(cands, rank, float(np.exp(lg[nxt] - lse)) if nxt >= 0 else 0.0))
        cells.append(tuple(line))
    last = logits[(n_layer - 1) * len(cols) + (pos - c0)]
    diff = float(np.abs(last - llama_logits).max())
    chat_diff: float | None = None
    ctx_diff: float | None = None
    if chat_logits is not None and chat_logits.shape == llama_logits.shape:
        chat_diff = float(np.abs(last - chat_logits).max())
        ctx_diff = float(np.abs(llama_logits - chat_logits).max())
    lens = LogitLens(
        positions=tuple(cols),
        tokens=tuple((tokens[c], display(tokens[c])) for c in cols),
        next_tokens=tuple((n, display(n) if n >= 0 else "") for n in next_ids),
        cells=tuple(cells),
        last_layer_max_abs_diff=diff,
        logit_range=float(llama_logits.max() - llama_logits.min()),
        chat_max_abs_diff=chat_diff,
        contexts_max_abs_diff=ctx_diff,
        softcap=t.softcap,
        tied=t.tied,
    )
    return lens, cos[1], cos[0]


def attention_maps(
    tensors: Tensors,
    *,
    tokens: Sequence[int],
    pos: int,
    c0: int,
    n_layer: int,
    n_head: int,
    n_head_kv: int,
    sliding: Sequence[bool],
    sliding_window: int,
    display: Display,
) -> AttentionMaps:
    """Row ``pos - c0`` of every layer's ``kq_soft_max-N``, its KV cells ``[0, pos]``: KV cell i is position i
    (the inspect context keeps its cells in position order, :mod:`app.engine.inspection.evaluation`).

    ``row_sum_max_error`` is the largest ``|sum over positions [0, pos] - 1|``: a row whose cells
    were not in position order would leave weight on cells after ``pos`` and show here.

    Args:
        tensors: ``kq_soft_max-0`` ... [(1,) n_head, n_span, n_kv] for each layer.
        n_head_kv: layer 0's KV heads (grouped-query attention: query head h reads KV head
            ``h // (n_head // n_head_kv)``).
        sliding: per layer, whether it attends over a sliding window; ``sliding_window`` its size, tokens.

    Raises:
        EngineError: ``internal`` when a layer's ``kq_soft_max-N`` was not captured.
    """
    n = pos + 1
    out = np.zeros((n_layer, n_head, n), dtype=np.float32)
    worst = 0.0
    row = pos - c0
    for il in range(n_layer):
        kq = tensors.get(f"kq_soft_max-{il}")
        if kq is None:
            raise EngineError(P.FailureKind.INTERNAL, f"The evaluation did not produce kq_soft_max-{il}.")
        w = kq.reshape(-1, kq.shape[-3], kq.shape[-2], kq.shape[-1])[0, :, row, :]  # [n_head, n_kv]
        cells = w[:, :n]
        out[il, : cells.shape[0], : cells.shape[1]] = cells
        worst = max(worst, float(np.abs(out[il].sum(axis=1, dtype=np.float64) - 1.0).max()))
    ratio = max(1, n_head // max(1, n_head_kv))
    return AttentionMaps(
        key_positions=(0, n),
        n_layer=n_layer,
        n_head=n_head,
        weights=as_array(out),
        head_kv=tuple(h // ratio for h in range(n_head)),
        sliding=tuple(sliding),
        window=sliding_window if any(sliding) else 0,
        row_sum_max_error=worst,
        key_texts=tuple(display(t) for t in tokens[:n]),
    )


def embedding_view(
    tables: ModelTables, token: int, emb_cos: F32, hidden_cos: F32, n: int, display: Display
) -> EmbeddingView:
    """``token``'s embedding row and its ``n`` nearest rows by cosine (itself left out), and the ``n``
    rows nearest the final hidden state.

    Args:
        emb_cos, hidden_cos: cosines [n_vocab] of the token's row and of the hidden state with every
            row (:func:`logit_lens` computes both).
    """
    vec = tables.embd[token].astype(np.float32)
    emb = emb_cos.copy()
    emb[token] = -np.inf
    return EmbeddingView(
        vector=as_array(vec),
        norm=float(tables.embd_norms[token]),
        scale=tables.embd_scale,
        neighbours=top_scores(emb, n, display),
        hidden_neighbours=top_scores(hidden_cos, n, display),
        table_bytes=tables.n_bytes,
    )


def top_scores(scores: F32, n: int, display: Display) -> tuple[tuple[int, str, float], ...]:
    """The ``n`` highest of ``scores`` [n_vocab] as ``(token id, text, score)``, highest first (at least one)."""
    k = max(1, min(n, scores.shape[0]))
    idx = np.argpartition(scores, -k)[-k:]
    idx = idx[np.argsort(-scores[idx])]
    return tuple((int(i), display(int(i)), float(scores[i])) for i in idx)


def add_expert_load(tensors: Tensors, counts: F32) -> None:
    """Add one evaluation's router choices (``ffn_moe_topk-N`` [n_tokens, n_expert_used]) to ``counts``
    [n_layer, n_expert]: each token adds 1 to each expert it chose, per layer."""
    for il in range(counts.shape[0]):
        topk = tensors.get(f"ffn_moe_topk-{il}")
        if topk is not None:
            counts[il] += np.bincount(topk.reshape(-1), minlength=counts.shape[1])[: counts.shape[1]]


def experts_view(
    tensors: Tensors, *, n_layer: int, n_expert: int, n_expert_used: int, row: int, counts: F32, n_tokens: int
) -> ExpertsView:
    """The router's choice for the inspected row (batch index ``row`` of the span) in each layer that
    has one, experts ordered by weight (the weights the layer mixes with: :data:`WEIGHT_NAMES`), and
    the load ``counts`` [n_layer, n_expert] over ``n_tokens`` positions as shares (a layer sums to
    ``n_expert_used``)."""
    chosen: list[ExpertChoice] = []
    layers: list[int] = []
    for il in range(n_layer):
        topk = tensors.get(f"ffn_moe_topk-{il}")
        if topk is None:
            continue
        ids = topk.reshape(-1, topk.shape[-1])
        weights = next((tensors[f"{w}-{il}"] for w in WEIGHT_NAMES if f"{w}-{il}" in tensors), None)
        wrow = weights.reshape(ids.shape[0], -1)[row] if weights is not None else np.zeros(ids.shape[1])
        order = np.argsort(-wrow, kind="stable")
        chosen.append(ExpertChoice(tuple(int(ids[row][i]) for i in order), tuple(float(wrow[i]) for i in order)))
        layers.append(il)
    load = counts[layers] / max(1, n_tokens)
    return ExpertsView(
        n_expert=n_expert,
        n_expert_used=n_expert_used,
        chosen=tuple(chosen),
        load=as_array(load),
        load_tokens=n_tokens,
    )


def as_array(a: npt.NDArray[Any]) -> array[float]:
    """``a`` as a flat ``array('f')`` (float32, row-major): how the records carry tables (they pickle compactly)."""
    out = array("f")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float32).tobytes())
    return out
