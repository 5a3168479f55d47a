"""Canned comparisons (issue 21 §1) for the Compare window's tests: the engine's events for
:class:`~app.core.quant.comparison.CompareModels`, played by a
:class:`~tests.support.job_host.ScriptedJobHost` (no model, no process).

The text is ``n_tokens`` words ``w0 w1 …``; chunks of ``n_ctx`` tokens, the second half of each scored
as llama-perplexity scores it (positions ``n_ctx // 2 + 1`` .. ``n_ctx - 1`` of each chunk). Token ``i``
has KL divergence ``kl_of(i)`` (default ``0.001 * (i % 50)``, so the worst tokens are known), and the
two models' top-1 differ where ``i % 7 == 0``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.core import protocol as P
from app.core.quant.comparison import (
    Candidate,
    ComparisonFinished,
    ComparisonProgressed,
    ComparisonStarted,
    ComparisonSummary,
    ModelFigures,
    ScoredToken,
)
from tests.support.job_host import Emit, ScriptedJobHost


def default_kl(i: int) -> float:
    return 0.001 * (i % 50)


def scored_ranges(n_tokens: int, n_ctx: int) -> tuple[tuple[int, int], ...]:
    """llama-perplexity's scored positions: per full chunk, ``n_ctx // 2 + 1`` .. ``n_ctx - 1``."""
    return tuple((c * n_ctx + n_ctx // 2 + 1, (c + 1) * n_ctx) for c in range(n_tokens // n_ctx))


def scored_token(i: int, kl: float) -> ScoredToken:
    flip = i % 7 == 0
    mine = Candidate(i, f" w{i}", 0.6)
    other = Candidate(10_000 + i, f" x{i}", 0.3)
    top_a = (mine, other, *(Candidate(20_000 + k, f" y{k}", 0.02) for k in range(3)))
    top_b = (other, mine, *top_a[2:]) if flip else top_a
    return ScoredToken(i, i, f" w{i}", kl, not flip, 0.6, 0.3 if flip else 0.58, top_a, top_b)


def summary_for(path_a: str, path_b: str, tokens: list[ScoredToken], n_ctx: int) -> ComparisonSummary:
    kls = sorted(t.kl for t in tokens)
    n = len(kls)
    same = sum(t.same_top1 for t in tokens) / n
    return ComparisonSummary(
        a=ModelFigures(path_a, 100_000_000, 90_000_000, 900.0, 60.0, 12.5, 0.3),
        b=ModelFigures(path_b, 60_000_000, 55_000_000, 1100.0, 80.0, 13.1, 0.3),
        n_scored=n,
        n_chunks=max(1, n // max(1, n_ctx // 2)),
        n_ctx=n_ctx,
        ppl_ratio=1.048,
        ppl_ratio_err=0.004,
        ln_ratio=0.0469,
        ln_ratio_err=0.004,
        kl_mean=sum(kls) / n,
        kl_mean_err=0.0004,
        kl_p99=kls[int(0.99 * (n - 1))],
        kl_p999=kls[int(0.999 * (n - 1))],
        kl_max=kls[-1],
        kl_median=kls[n // 2],
        same_top1=same,
        same_top1_err=(same * (1 - same) / n) ** 0.5,
        rms_dp=0.08,
        rms_dp_err=0.004,
        elapsed_s=1.5,
    )


@dataclass
class CannedComparison:
    """A comparison script for :class:`ScriptedJobHost` (``host = ScriptedJobHost(canned)``).

    Attributes:
        n_tokens: tokens in the text.
        hold_after_chunks: stop after this many chunks until :attr:`release` is set (None: run through);
            the cancel flag ends it there with ``Failed(CANCELLED)``, as the engine does between chunks.
        fail: a ``(kind, message)`` to answer with after ComparisonStarted instead of scoring.
        requests: the CompareModels requests received.
    """

    n_tokens: int = 2048
    hold_after_chunks: int | None = None
    fail: tuple[P.FailureKind, str] | None = None
    kl_of: Callable[[int], float] = default_kl
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[Any] = field(default_factory=list)

    def __call__(self, req: Any, emit: Emit, cancelled: Callable[[], bool]) -> None:
        self.requests.append(req)
        rid, n_ctx = req.request_id, req.n_ctx
        ranges = scored_ranges(self.n_tokens, n_ctx)
        total = sum(b - a for a, b in ranges)
        texts = tuple(f" w{i}" for i in range(self.n_tokens))
        emit(ComparisonStarted(rid, total, tuple(range(self.n_tokens)), texts, ranges, len(ranges), n_ctx))
        if self.fail is not None:
            emit(P.Failed(rid, *self.fail))
            return
        done: list[ScoredToken] = []
        for c, (a, b) in enumerate(ranges):
            if self.hold_after_chunks is not None and c == self.hold_after_chunks:
                while not cancelled() and not self.release.wait(0.005):
                    pass
            if cancelled():
                emit(P.Failed(rid, P.FailureKind.CANCELLED, "cancelled"))
                return
            chunk = [scored_token(i, self.kl_of(i)) for i in range(a, b)]
            done.extend(chunk)
            emit(ComparisonProgressed(rid, len(done), total, 0.1 * (c + 1), tuple(chunk)))
        emit(ComparisonFinished(rid, summary_for(req.path_a, req.path_b, done, n_ctx)))


def canned_runner_factory(canned: CannedComparison, hosts: list[ScriptedJobHost] | None = None) -> Callable[[], Any]:
    """A ``make_runner`` for the Compare window: a JobRunner whose job hosts play ``canned``."""
    from app.ui.jobs.runner import JobRunner

    def make_host() -> ScriptedJobHost:
        host = ScriptedJobHost(canned)
        if hosts is not None:
            hosts.append(host)
        return host

    return lambda: JobRunner(make_host)
