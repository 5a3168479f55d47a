"""Two models' logits at the same positions, reduced to the per-token figures of a comparison, a block at a time.

For each position (a row of both models' logits, [n_vocab] float32, read in place from llama.cpp):

- the log-sum-exp of each row (max + log of the sum of exp, summed in float64);
- ``nll`` of the token that comes next, ``lse - logit[token]``, nats (perplexity.cpp's ``nll``);
- KL(P_a || P_b) = Σ p_a · (log p_a - log p_b), nats, with ``log p_a - log p_b`` computed as
  ``(logit_a - logit_b) - (lse_a - lse_b)`` so two equal rows give exactly 0 (perplexity.cpp sums the
  same terms over the base's stored log-probabilities);
- whether the arg-max of the two rows is the same token (the first of equal maxima, as perplexity.cpp);
- each model's top :data:`TOP_N` tokens and their probabilities.

At most :data:`BLOCK_ELEMENTS` logits per model are worked on at once (a few temporary arrays of that
size: 16 MiB each; 16 positions of Gemma 3's 262,144-token vocabulary), so no chunk's whole logits are
ever copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Candidates kept per position and model.
TOP_N = 5
#: Logits per model reduced at once (rows = this // n_vocab, at least 1).
BLOCK_ELEMENTS = 1 << 22

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class BlockFigures:
    """The figures of a block of positions (arrays of one value per position, in order).

    Attributes:
        nll_a, nll_b: -ln p of the token that comes next, nats.
        kl: KL(P_a || P_b), nats.
        same_top1: the two arg-maxes are the same token.
        top_a_ids, top_b_ids: [n, TOP_N] token ids, most likely first.
        top_a_p, top_b_p: [n, TOP_N] their probabilities.
    """

    nll_a: F64
    nll_b: F64
    kl: F64
    same_top1: npt.NDArray[np.bool_]
    top_a_ids: I64
    top_b_ids: I64
    top_a_p: F64
    top_b_p: F64


def block_rows(n_vocab: int) -> int:
    """Positions per block for a vocabulary of ``n_vocab`` tokens (:data:`BLOCK_ELEMENTS` logits)."""
    return max(1, BLOCK_ELEMENTS // max(1, n_vocab))


def log_sum_exp(rows: F32) -> F64:
    """Row-wise ``log Σ exp`` of [n, n_vocab] logits: the max plus the log of the float64 sum of exp(x - max)."""
    m = rows.max(axis=1)
    e = np.exp(rows - m[:, None])
    out: F64 = m.astype(np.float64) + np.log(e.sum(axis=1, dtype=np.float64))
    return out


def top(rows: F32, lse: F64, n: int) -> tuple[I64, F64]:
    """The ``n`` most likely tokens of each row, most likely first, and their probabilities."""
    n = min(n, rows.shape[1])
    part = np.argpartition(rows, -n, axis=1)[:, -n:]
    vals = np.take_along_axis(rows, part, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    ids: I64 = np.take_along_axis(part, order, axis=1).astype(np.int64)
    p: F64 = np.exp(np.take_along_axis(vals, order, axis=1).astype(np.float64) - lse[:, None])
    return ids, p


def reduce_block(la: F32, lb: F32, next_tokens: Sequence[int]) -> BlockFigures:
    """The figures of positions whose logits are ``la`` (model A) and ``lb`` (model B), [n, n_vocab] each,
    followed by ``next_tokens`` (n ids). The vocabularies may differ in size by a few tokens (llama.cpp's
    draft check allows 128): the shorter length is compared, as perplexity.cpp compares n_vocab entries.
    """
    n_vocab = min(la.shape[1], lb.shape[1])
    la, lb = la[:, :n_vocab], lb[:, :n_vocab]
    rows = np.arange(la.shape[0])
    toks = np.asarray(next_tokens, dtype=np.int64)
    lse_a, lse_b = log_sum_exp(la), log_sum_exp(lb)
    nll_a: F64 = lse_a - la[rows, toks].astype(np.float64)
    nll_b: F64 = lse_b - lb[rows, toks].astype(np.float64)
    p_a = np.exp(la - lse_a.astype(np.float32)[:, None])
    d = la - lb
    d -= (lse_a - lse_b).astype(np.float32)[:, None]
    d *= p_a
    kl: F64 = d.sum(axis=1, dtype=np.float64)
    same = la.argmax(axis=1) == lb.argmax(axis=1)
    top_a_ids, top_a_p = top(la, lse_a, TOP_N)
    top_b_ids, top_b_p = top(lb, lse_b, TOP_N)
    return BlockFigures(nll_a, nll_b, kl, same, top_a_ids, top_b_ids, top_a_p, top_b_p)
