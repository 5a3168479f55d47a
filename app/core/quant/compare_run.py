"""One comparison as the window follows it: every token of the text, which positions are scored, the
scored tokens received so far, progress, and the summary once it ends. Plain Python, no Qt.

Owned by the Compare window's controller (:class:`app.ui.quant.compare_controller.CompareController`),
which folds the engine's events in; the strip, the worst-token list and the exports read it.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.core.quant.comparison import ComparisonSummary, ScoredToken


@dataclass
class ComparisonRun:
    """The figures of one comparison, filled as its events arrive.

    Attributes:
        n_ctx: the chunk size, tokens.
        token_texts: every token of the text by position (scored or not); empty until the engine sent them.
        scored: the scored positions as half-open ``(start, end)`` ranges, sorted (the second half of
            each n_ctx chunk, as llama-perplexity scores them).
        tokens: the scored tokens received, by position.
        done, total: tokens evaluated so far and in all (the engine's count).
        elapsed_s: engine time since the comparison started, seconds.
        summary: the figures over the text, once the comparison finished (None before, or when it
            was cancelled or failed).
    """

    n_ctx: int = 512
    token_texts: tuple[str, ...] = ()
    scored: tuple[tuple[int, int], ...] = ()
    tokens: dict[int, ScoredToken] = field(default_factory=dict)
    done: int = 0
    total: int = 0
    elapsed_s: float = 0.0
    summary: ComparisonSummary | None = None
    _starts: list[int] = field(default_factory=list, repr=False)

    def begin(self, token_texts: Sequence[str], scored: Iterable[tuple[int, int]]) -> None:
        """The engine's first word: the text's tokens and which positions it will score."""
        self.token_texts = tuple(token_texts)
        self.scored = tuple(sorted((int(a), int(b)) for a, b in scored))
        self._starts = [a for a, _ in self.scored]

    def add(self, done: int, total: int, elapsed_s: float, tokens: Iterable[ScoredToken]) -> None:
        """A progress event: the counts, and the tokens scored since the last one."""
        self.done, self.total, self.elapsed_s = done, total, elapsed_s
        for t in tokens:
            self.tokens[t.index] = t

    def finish(self, summary: ComparisonSummary) -> None:
        self.summary = summary
        self.done = self.total
        self.elapsed_s = summary.elapsed_s

    @property
    def n_scored_expected(self) -> int:
        """How many positions will be scored in all (0 before :meth:`begin`)."""
        return sum(b - a for a, b in self.scored)

    def is_scored(self, index: int) -> bool:
        """Whether position ``index`` is one the comparison scores (received yet or not)."""
        i = bisect.bisect_right(self._starts, index) - 1
        return i >= 0 and index < self.scored[i][1]

    def chunk_of(self, index: int) -> int:
        """The n_ctx chunk (0-based) position ``index`` belongs to."""
        return index // self.n_ctx if self.n_ctx > 0 else 0

    def eta_s(self) -> float | None:
        """Seconds left at the pace so far (engine time), None before any token is done."""
        if self.done <= 0 or self.total <= 0 or self.elapsed_s <= 0:
            return None
        return max(0.0, (self.total - self.done) * self.elapsed_s / self.done)

    def worst(self, n: int = 100) -> list[ScoredToken]:
        """The ``n`` scored tokens with the highest KL divergence, highest first (ties: earlier first)."""
        kl = [t for t in self.tokens.values() if not math.isnan(t.kl)]
        return heapq.nsmallest(n, kl, key=lambda t: (-t.kl, t.index))

    def flips(self) -> int:
        """How many scored tokens so far have a different top-1 in the two models."""
        return sum(1 for t in self.tokens.values() if not t.same_top1)
