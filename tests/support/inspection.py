"""A made-up :class:`~app.core.inspection.token_inspection.TokenInspection` for window tests (no llama.cpp).

Deterministic values with the real shapes: a lens whose top candidate gets likelier layer by
layer, attention rows that sum to 1, an embedding strip, and (``moe=True``) expert choices.
"""

from __future__ import annotations

from array import array

from app.core.inspection.token_inspection import (
    AttentionMaps,
    EmbeddingView,
    ExpertChoice,
    ExpertsView,
    InspectPath,
    LensCell,
    LogitLens,
    TokenInspection,
)


def synthetic_inspection(
    position: int, token_id: int, *, n_layer: int = 4, n_head: int = 4, n_head_kv: int = 2, moe: bool = False
) -> TokenInspection:
    """An inspection of ``position`` with ``n_layer`` layers (columns: the position and one each side)."""
    cols = tuple(p for p in (position - 1, position, position + 1) if p >= 0)
    cells = tuple(
        tuple(
            LensCell(((100 + c, f"tok{c}", (il + 1) / (n_layer + 1)), (200, "alt", 0.05)), il + 1, 0.01 * (il + 1))
            for c in cols
        )
        for il in range(n_layer)
    )
    lens = LogitLens(
        positions=cols,
        tokens=tuple((100 + c, f"tok{c}") for c in cols),
        next_tokens=tuple((101 + c, f"tok{c + 1}") for c in cols),
        cells=cells,
        last_layer_max_abs_diff=0.0123,
        logit_range=25.0,
        softcap=0.0,
        tied=True,
    )
    n = position + 1
    weights = array("f")
    for il in range(n_layer):
        for h in range(n_head):
            row = [0.0] * n
            row[-1] = 0.5
            row[(il + h) % n] += 0.5
            weights.extend(row)
    attention = AttentionMaps(
        key_positions=(0, n),
        n_layer=n_layer,
        n_head=n_head,
        weights=weights,
        head_kv=tuple(h // (n_head // n_head_kv) for h in range(n_head)),
        sliding=tuple(il % 2 == 0 for il in range(n_layer)),
        window=512,
        row_sum_max_error=0.0,
        key_texts=tuple(f"tok{p}" for p in range(n)),
    )
    embedding = EmbeddingView(
        vector=array("f", [((i % 7) - 3) / 3 for i in range(16)]),
        norm=1.5,
        scale=1.0,
        neighbours=((7, "seven", 0.9), (8, "eight", 0.8)),
        hidden_neighbours=((9, "nine", 0.7),),
        table_bytes=1 << 20,
    )
    experts = None
    if moe:
        experts = ExpertsView(
            n_expert=4,
            n_expert_used=2,
            chosen=tuple(ExpertChoice((il % 4, (il + 1) % 4), (0.7, 0.3)) for il in range(n_layer)),
            load=array("f", [0.5, 0.5, 0.5, 0.5] * n_layer),
            load_tokens=8,
        )
    return TokenInspection(
        position=position,
        token_id=token_id,
        text=f"tok{position}",
        n_layer=n_layer,
        path=InspectPath.CACHE_REUSE,
        fallback_reason="",
        evaluated=len(cols),
        inspect_s=0.05,
        tables_s=0.0,
        extra_memory_bytes=3 << 20,
        lens=lens,
        attention=attention,
        embedding=embedding,
        experts=experts,
    )
