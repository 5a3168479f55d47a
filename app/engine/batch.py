"""`fill_batch`: tokens of one sequence written into a ``llama_batch`` by hand.

llama-cpp-python's ``llama_batch_get_one`` returns logits for the last token only; where Glassbox needs
other positions' logits (the quantization comparison's scored positions, a speculative round's verified
positions, an inspection, embeddings) or several sequences in one batch, the batch is filled here: each
entry's token, position, sequence (one per entry) and whether llama.cpp returns its logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def fill_batch(
    batch: Any,
    tokens: Sequence[int],
    pos0: int,
    *,
    logits: Callable[[int], bool],
    seq: int = 0,
    start: int = 0,
) -> None:
    """Write ``tokens`` at positions ``pos0, pos0 + 1, ...`` of sequence ``seq`` into ``batch`` (a
    ``llama_batch`` from ``llama_batch_init`` with room for them) from entry ``start``, and set
    ``batch.n_tokens`` to ``start + len(tokens)``.

    Args:
        logits: called with each position; True: llama.cpp returns that entry's logits (or embedding).
    """
    for i, tok in enumerate(tokens):
        j = start + i
        batch.token[j] = tok
        batch.pos[j] = pos0 + i
        batch.n_seq_id[j] = 1
        batch.seq_id[j][0] = seq
        batch.logits[j] = logits(pos0 + i)
    batch.n_tokens = start + len(tokens)
