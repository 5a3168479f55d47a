"""The comparison's statistics (app/core/quant/statistics.py) on inputs worked out by hand, against the
formulas of llama.cpp's tools/perplexity/perplexity.cpp (kl_divergence)."""

from __future__ import annotations

import math

import pytest

from app.core.quant.comparison import Candidate, ModelFigures, ScoredToken
from app.core.quant.statistics import KlTally, covariance, mean_and_uncertainty, median, percentile, summarize


def figures(ppl: float = 0.0, err: float = 0.0) -> ModelFigures:
    return ModelFigures("m.gguf", 10, 8, 100.0, 20.0, ppl, err)


def test_mean_and_uncertainty_follows_perplexity_cpp() -> None:
    # 12 values: six 1s and six 3s. mean 2, E[x^2] = 5, variance 5 - 4 = 1, error sqrt(1 / 11).
    assert mean_and_uncertainty(24.0, 60.0, 12) == pytest.approx((2.0, math.sqrt(1 / 11)))
    # 10 values or fewer: no error estimate (count > 10 in perplexity.cpp).
    assert mean_and_uncertainty(20.0, 50.0, 10) == (2.0, 0.0)
    assert mean_and_uncertainty(0.0, 0.0, 0) == (0.0, 0.0)
    # all the same value: variance 0, no error.
    assert mean_and_uncertainty(24.0, 48.0, 12) == (2.0, 0.0)


def test_covariance_follows_perplexity_cpp() -> None:
    # a = b = (1, 3) six times each: E[ab] = 5, E[a]E[b] = 4 -> (5 - 4) / 11.
    assert covariance(24.0, 24.0, 60.0, 12) == pytest.approx(1 / 11)
    assert covariance(24.0, 24.0, 60.0, 9) == 0.0  # fewer than 10 values


def test_percentile_interpolates_between_ranks() -> None:
    values = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 0.5) == 2.0
    assert percentile(values, 0.99) == pytest.approx(3.96)  # rank 3.96: 0.04 * 3 + 0.96 * 4
    assert percentile(values, 0.999) == pytest.approx(3.996)
    assert percentile(values, 0.0) == 0.0 and percentile(values, 1.0) == 4.0
    assert percentile([], 0.5) == 0.0


def test_median_even_and_odd() -> None:
    assert median([1.0, 2.0, 10.0]) == 2.0
    assert median([1.0, 2.0, 4.0, 10.0]) == 3.0
    assert median([]) == 0.0


def test_identical_models_give_zero_divergence_and_all_same_top1() -> None:
    tally = KlTally()
    for p in (0.5, 0.25, 0.125) * 4:
        tally.add(-math.log(p), -math.log(p), 0.0, True)
    ppl_a, ppl_a_err = tally.ppl_a()
    assert ppl_a == pytest.approx(4.0)  # exp(mean(ln 2, ln 4, ln 8)) = exp(ln 4)
    assert tally.ppl_b() == (ppl_a, ppl_a_err)
    s = summarize(tally, figures(*tally.ppl_a()), figures(*tally.ppl_b()), n_chunks=1, n_ctx=32, elapsed_s=1.5)
    assert s.n_scored == 12
    assert s.ppl_ratio == 1.0 and s.ln_ratio == 0.0
    assert s.ln_ratio_err == pytest.approx(0.0, abs=1e-6)  # err² + err² - 2 cov: rounding only
    assert s.kl_mean == 0.0 and s.kl_max == 0.0 and s.kl_p99 == 0.0
    assert s.same_top1 == 1.0 and s.same_top1_err == 0.0
    assert s.rms_dp == 0.0 and s.rms_dp_err == 0.0
    assert s.a.ppl == pytest.approx(4.0)
    assert s.a.ppl_err == s.b.ppl_err > 0  # ln 2, ln 4, ln 8 spread: an error, the same for both


def test_summary_of_hand_computed_positions() -> None:
    """Twelve positions: A gives the next token p = 1/2 everywhere, B gives 1/4 at six and 1/2 at six;
    KL 0.1 at six, 0.3 at six; the top-1 differs at three."""
    tally = KlTally()
    for i in range(12):
        p_b = 0.25 if i % 2 else 0.5
        tally.add(math.log(2), -math.log(p_b), 0.3 if i % 2 else 0.1, i >= 3)
    s = summarize(tally, figures(), figures(), n_chunks=2, n_ctx=16, elapsed_s=0.0)
    # ln PPL(A) = ln 2 exactly (no spread: error 0); ln PPL(B) = mean(ln 2, ln 4) = 1.5 ln 2.
    assert tally.ppl_a() == pytest.approx((2.0, 0.0), abs=1e-6)  # variance 0 up to rounding
    assert s.ln_ratio == pytest.approx(0.5 * math.log(2))
    assert s.ppl_ratio == pytest.approx(math.sqrt(2))
    # nll_b is ln 2 or 2 ln 2: variance (ln 2 / 2)^2, error of the mean (ln 2 / 2) / sqrt(11);
    # nll_a has no spread, so the covariance is 0 and the ln-ratio error is B's error alone.
    assert s.ln_ratio_err == pytest.approx(math.log(2) / 2 / math.sqrt(11))
    assert s.ppl_ratio_err == pytest.approx(math.sqrt(2) * s.ln_ratio_err)
    # KL: mean 0.2, variance 0.01, error sqrt(0.01 / 11); median 0.2; max and 99.9 % 0.3.
    assert s.kl_mean == pytest.approx(0.2)
    assert s.kl_mean_err == pytest.approx(0.1 / math.sqrt(11))
    assert s.kl_median == pytest.approx(0.2)
    assert s.kl_max == pytest.approx(0.3) and s.kl_p999 == pytest.approx(0.3) and s.kl_p99 == pytest.approx(0.3)
    # Δp = -1/4 at six positions, 0 at six: RMS sqrt(1/32); mean Δp² 1/32 with Δp⁴ mean 1/512:
    # variance 1/512 - 1/1024 = 1/1024, error 1/32/sqrt(11); rms error 0.5 / rms * that.
    # mean Δp -1/8; Δp² mean 1/32, variance 1/32 - 1/64 = 1/64, error 1/8/sqrt(11).
    assert s.dp_mean == pytest.approx(-1 / 8)
    assert s.dp_mean_err == pytest.approx(1 / 8 / math.sqrt(11))
    assert s.rms_dp == pytest.approx(math.sqrt(1 / 32))
    assert s.rms_dp_err == pytest.approx(0.5 / math.sqrt(1 / 32) * (1 / 32) / math.sqrt(11))
    # same top-1: 9 of 12, binomial error sqrt(0.75 * 0.25 / 11).
    assert s.same_top1 == pytest.approx(0.75)
    assert s.same_top1_err == pytest.approx(math.sqrt(0.75 * 0.25 / 11))


def test_kl_percentiles_over_a_spread() -> None:
    tally = KlTally()
    for i in range(1001):
        tally.add(1.0, 1.0, i / 1000, True)  # KL 0.000 .. 1.000 in steps of 0.001
    s = summarize(tally, figures(), figures(), n_chunks=1, n_ctx=2048, elapsed_s=0.0)
    assert s.kl_p99 == pytest.approx(0.99)
    assert s.kl_p999 == pytest.approx(0.999)
    assert s.kl_median == pytest.approx(0.5)
    assert s.kl_max == pytest.approx(1.0)


def test_scored_token_derived_figures() -> None:
    top = (Candidate(7, "a", 0.5),)
    t = ScoredToken(3, 7, "a", 0.01, True, 0.5, 0.25, top, top)
    assert t.dp == -0.25
    assert t.top_a[0].p == t.top_b[0].p == 0.5
    assert t.surprisal_a == pytest.approx(1.0) and t.surprisal_b == pytest.approx(2.0)
    assert ScoredToken(3, 7, "a", 0.0, True, 0.0, 1.0, top, top).surprisal_a == math.inf
