"""The comparison's figures over a text, computed exactly as ``llama-perplexity --kl-divergence`` computes them.

Source: llama.cpp's tools/perplexity/perplexity.cpp (vendored in llama-cpp-python 0.3.36):
``kl_divergence_result`` (the running sums), ``log_softmax(..., kl_divergence_result &)`` (what one
position adds), and in ``kl_divergence()`` the lambdas ``mean_and_uncertainty``, ``covariance`` and
``percentile`` and the final "Perplexity statistics" / "KL divergence statistics" / "Token probability
statistics" blocks. Model A is llama-perplexity's base (``--kl-divergence-base``), model B its Q.

Plain Python (no numpy): the engine adds one position at a time (:meth:`KlTally.add`) and
:func:`summarize` turns the sums into a :class:`~app.core.quant.comparison.ComparisonSummary`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.quant.comparison import ComparisonSummary, ModelFigures


def mean_and_uncertainty(total: float, total2: float, count: int) -> tuple[float, float]:
    """The mean of values and the standard error of that mean, from their sum and sum of squares.

    perplexity.cpp's ``mean_and_uncertainty``: ``f = sum / count``, ``df = sum2 / count - f²``,
    error ``sqrt(df / (count - 1))`` when ``df > 0`` and ``count > 10``, else 0; (0, 0) for no values.
    """
    if count < 1:
        return 0.0, 0.0
    f = total / count
    df = total2 / count - f * f
    return f, (math.sqrt(df / (count - 1)) if df > 0 and count > 10 else 0.0)


def covariance(total_a: float, total_b: float, total_ab: float, count: int) -> float:
    """The covariance of the two means, from the sums of a, b and a·b (perplexity.cpp's ``covariance``:
    ``(sum_ab / count - (sum_a / count)(sum_b / count)) / (count - 1)``; 0 below 10 values)."""
    if count < 10:
        return 0.0
    return (total_ab / count - (total_a / count) * (total_b / count)) / (count - 1)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of ascending ``sorted_values``, interpolated linearly between the two
    nearest ranks (perplexity.cpp's ``percentile``: rank ``fraction * (n - 1)``); 0 for no values.
    """
    if not sorted_values:
        return 0.0
    if fraction <= 0:
        return sorted_values[0]
    if fraction >= 1:
        return sorted_values[-1]
    rank = fraction * (len(sorted_values) - 1)
    i = int(rank)
    rest = rank - i
    return (1 - rest) * sorted_values[i] + rest * sorted_values[min(i + 1, len(sorted_values) - 1)]


def median(sorted_values: Sequence[float]) -> float:
    """The median of ascending ``sorted_values``: the middle one, or the mean of the middle two
    (perplexity.cpp's ``kld_median``); 0 for no values."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    if n % 2 == 0:
        return 0.5 * (sorted_values[n // 2] + sorted_values[n // 2 - 1])
    return sorted_values[n // 2]


@dataclass
class KlTally:
    """The running sums of one comparison (perplexity.cpp's ``kl_divergence_result``), and every KL value
    (for the percentiles).

    Attributes are the sums over the positions added: ``nll_b`` (B's negative log-likelihood of the
    token that comes next, nats; perplexity.cpp's ``sum_nll``) and its square, ``nll_a`` (A's,
    ``sum_nll_base``) and its square, their product, KL divergence and its square, Δp and its square
    and fourth power, the positions with the same top-1 token, and the count.
    """

    sum_nll_b: float = 0.0
    sum_nll_b2: float = 0.0
    sum_nll_a: float = 0.0
    sum_nll_a2: float = 0.0
    sum_nll_ab: float = 0.0
    sum_kl: float = 0.0
    sum_kl2: float = 0.0
    sum_dp: float = 0.0
    sum_dp2: float = 0.0
    sum_dp4: float = 0.0
    n_same_top1: int = 0
    count: int = 0
    kl_values: list[float] = field(default_factory=list)

    def add(self, nll_a: float, nll_b: float, kl: float, same_top1: bool) -> None:
        """Add one scored position.

        Args:
            nll_a, nll_b: -ln p of the token that comes next under A and under B, nats.
            kl: KL(P_a || P_b) at the position, nats.
            same_top1: both models' most likely token is the same.

        Δp is ``exp(-nll_b) - exp(-nll_a)``, as perplexity.cpp's ``p_diff``.
        """
        self.sum_nll_b += nll_b
        self.sum_nll_b2 += nll_b * nll_b
        self.sum_nll_a += nll_a
        self.sum_nll_a2 += nll_a * nll_a
        self.sum_nll_ab += nll_b * nll_a
        self.sum_kl += kl
        self.sum_kl2 += kl * kl
        dp = math.exp(-nll_b) - math.exp(-nll_a)
        self.sum_dp += dp
        dp2 = dp * dp
        self.sum_dp2 += dp2
        self.sum_dp4 += dp2 * dp2
        self.n_same_top1 += bool(same_top1)
        self.count += 1
        self.kl_values.append(kl)

    def ppl_a(self) -> tuple[float, float]:
        """PPL of model A and its error: ``exp(mean nll)`` and ``ppl · (error of the mean nll)``
        (perplexity.cpp's "Mean PPL(base)")."""
        mean, err = mean_and_uncertainty(self.sum_nll_a, self.sum_nll_a2, self.count)
        ppl = math.exp(mean)
        return ppl, ppl * err

    def ppl_b(self) -> tuple[float, float]:
        """PPL of model B and its error (perplexity.cpp's "Mean PPL(Q)")."""
        mean, err = mean_and_uncertainty(self.sum_nll_b, self.sum_nll_b2, self.count)
        ppl = math.exp(mean)
        return ppl, ppl * err


def summarize(
    tally: KlTally,
    a: ModelFigures,
    b: ModelFigures,
    *,
    n_chunks: int,
    n_ctx: int,
    elapsed_s: float,
    n_ctx_asked: int = 0,
) -> ComparisonSummary:
    """The comparison's summary from its sums, as perplexity.cpp's ``kl_divergence()`` prints it.

    - ln ratio: ``mean nll_b - mean nll_a``, error ``sqrt(err_b² + err_a² - 2 cov(nll_b, nll_a))``
      ("Mean ln(PPL(Q)/PPL(base))"); PPL ratio ``exp(ln ratio)``, error ``ratio · ln-ratio error``.
    - KL divergence: mean and its error by ``mean_and_uncertainty``; max, 99.9 %, 99 % by ``percentile``
      of the sorted values; the median.
    - mean Δp and its error by ``mean_and_uncertainty`` ("Mean Δp").
    - RMS Δp: ``sqrt(mean Δp²)``, error ``0.5 / rms · (error of mean Δp²)`` (0 when rms is 0).
    - same top-1: ``n_same / count``, error ``sqrt(p (1 - p) / (count - 1))`` (0 below 2 positions).

    llama-perplexity prints nothing below 100 positions; these are computed for any count (the errors
    are 0 up to 10 positions, as ``mean_and_uncertainty`` makes them).

    Args:
        a, b: each model's figures (their ``ppl`` from :meth:`KlTally.ppl_a` / :meth:`KlTally.ppl_b`).
        n_ctx: tokens per chunk as run; n_ctx_asked: the request's (0: the same).
    """
    t = tally
    mean_a, err_a = mean_and_uncertainty(t.sum_nll_a, t.sum_nll_a2, t.count)
    mean_b, err_b = mean_and_uncertainty(t.sum_nll_b, t.sum_nll_b2, t.count)
    cov = covariance(t.sum_nll_b, t.sum_nll_a, t.sum_nll_ab, t.count)
    ln_ratio = mean_b - mean_a
    ln_ratio_err = math.sqrt(max(0.0, err_b * err_b + err_a * err_a - 2.0 * cov))
    ppl_ratio = math.exp(ln_ratio)
    kl_mean, kl_err = mean_and_uncertainty(t.sum_kl, t.sum_kl2, t.count)
    kls = sorted(t.kl_values)
    mse, mse_err = mean_and_uncertainty(t.sum_dp2, t.sum_dp4, t.count)
    rms = math.sqrt(mse)
    dp_mean, dp_mean_err = mean_and_uncertainty(t.sum_dp, t.sum_dp2, t.count)
    same = t.n_same_top1 / t.count if t.count else 0.0
    same_err = math.sqrt(same * (1.0 - same) / (t.count - 1)) if t.count > 1 else 0.0
    return ComparisonSummary(
        a=a,
        b=b,
        n_scored=t.count,
        n_chunks=n_chunks,
        n_ctx=n_ctx,
        ppl_ratio=ppl_ratio,
        ppl_ratio_err=ppl_ratio * ln_ratio_err,
        ln_ratio=ln_ratio,
        ln_ratio_err=ln_ratio_err,
        kl_mean=kl_mean,
        kl_mean_err=kl_err,
        kl_p99=percentile(kls, 0.99),
        kl_p999=percentile(kls, 0.999),
        kl_max=kls[-1] if kls else 0.0,
        kl_median=median(kls),
        same_top1=same,
        same_top1_err=same_err,
        rms_dp=rms,
        rms_dp_err=0.5 / rms * mse_err if rms > 0 else 0.0,
        elapsed_s=elapsed_s,
        dp_mean=dp_mean,
        dp_mean_err=dp_mean_err,
        n_ctx_asked=n_ctx_asked,
    )
