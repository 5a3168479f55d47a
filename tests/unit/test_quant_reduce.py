"""app/engine/quant/reduce.py on logits worked out by hand: KL divergence, nll, same top-1, top candidates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.engine.quant.reduce import block_rows, reduce_block


def logits(*rows: list[float], shift: float = 0.0) -> np.ndarray:
    return (np.log(np.array(rows, dtype=np.float64)) + shift).astype(np.float32)


def test_kl_nll_and_top1_of_two_small_distributions() -> None:
    # P_a = (1/2, 1/4, 1/4), P_b = (1/4, 1/2, 1/4): KL(P_a || P_b) = 1/2 ln 2 + 1/4 ln 1/2 + 0 = 1/4 ln 2.
    # Logits are log-probabilities plus any constant per row (softmax does not see it).
    la = logits([0.5, 0.25, 0.25], shift=3.0)
    lb = logits([0.25, 0.5, 0.25], shift=-7.0)
    f = reduce_block(la, lb, [1])
    assert f.kl[0] == pytest.approx(0.25 * math.log(2), rel=1e-6)
    assert f.nll_a[0] == pytest.approx(math.log(4), rel=1e-6) and f.nll_b[0] == pytest.approx(math.log(2), rel=1e-6)
    assert not f.same_top1[0]
    assert f.top_a_ids[0, 0] == 0 and f.top_b_ids[0, 0] == 1
    assert f.top_a_p[0, :3] == pytest.approx([0.5, 0.25, 0.25], rel=1e-6)


def test_equal_rows_give_exactly_zero() -> None:
    rng = np.random.default_rng(0)
    la = rng.normal(0, 4, size=(3, 1000)).astype(np.float32)
    f = reduce_block(la, la.copy(), [5, 6, 7])
    assert list(f.kl) == [0.0, 0.0, 0.0] and f.same_top1.all()
    assert (f.nll_a == f.nll_b).all()


def test_top_five_ranked_and_vocabularies_of_different_sizes() -> None:
    p = [0.05, 0.3, 0.1, 0.2, 0.15, 0.12, 0.08]
    la = logits(p)
    lb = np.concatenate([la, np.full((1, 3), -50, np.float32)], axis=1)  # B has 3 more (never likely) tokens
    f = reduce_block(la, lb, [3])
    assert list(f.top_a_ids[0]) == [1, 3, 4, 5, 2]
    assert f.top_a_p[0] == pytest.approx([0.3, 0.2, 0.15, 0.12, 0.1], rel=1e-6)
    assert f.kl[0] == pytest.approx(0.0, abs=1e-6) and f.same_top1[0]


def test_a_block_holds_at_most_4_mi_logits() -> None:
    assert block_rows(262_144) == 16 and block_rows(49_152) == 85 and block_rows(10_000_000) == 1
