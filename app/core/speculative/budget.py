"""How many tokens the next round drafts: the length whose expected tokens per second is highest.

A round that drafts k tokens verifies k + 1 in one llama_decode. Where decode is memory-bound (a GPU, a
large model) that costs about one one-token step whatever k, and a long draft pays as soon as some of it
is accepted. Where it is compute-bound (this project's 2-core CPU with SmolLM2: a batch of 2 / 3 / 5 / 9
tokens costs 1.22 / 1.80 / 2.59 / 4.16 one-token steps) a long draft pays only when most of it is
accepted, and a fixed draft_max of 8 made chat replies 0.80x as fast as plain (bench/speculative.py: 93
drafted rounds with 11 % accepted, each paying for a batch of 9).

So the budget measures both, and the next round drafts the best length:

- cost (:class:`VerifyCost`, the loaded model's lifetime): a verification's time per batch size m,
  ``v(m)`` seconds, on the line ``v(1) (1 + slope (m - 1))`` fitted to the medians of the recent
  timings of each size (a memory-bound guess, slope 0.05, before any batch of two or more was
  timed); and the drafter's time per drafted token ``d`` (a draft model's llama_decode; ~0 for prompt
  lookup), and the sampler's time per drawn token ``s``;
- acceptance (:class:`DraftBudget`, one reply): for each draft position i, the share ``a_i`` of the
  rounds that reached position i (all before it accepted) whose token i was accepted, counts decayed by
  0.9 a round so a reply that moves from copying to writing is followed, from a prior of 0.6 weighing two
  rounds.

A round drafting k tokens yields ``E(k) = 1 + sum_{j=1..k} prod_{i=1..j} a_i`` tokens (its own token, and
each drafted one that is accepted with all before it) in ``T(k) = v(k + 1) + k d + E(k) s`` seconds; the
next round drafts ``argmax_k E(k) / T(k)`` for k in 0..cap, where k = 0 is a plain decode step
(E = 1, T = v(1) + s). This is the expected-speed-up model of Leviathan, Kalman and Matias, "Fast
Inference from Transformers via Speculative Decoding" (ICML 2023, section 3.4: E = (1 - a^(k+1)) / (1 - a)
tokens for a cost of c k + 1), with the acceptance measured per position rather than one rate, and the
verification's cost measured per length rather than taken as one model call whatever k.

A reply whose acceptance has fallen so low that no draft pays would never draft again, and never see it
rise: after :data:`EXPLORE_EVERY` rounds in a row that skipped a draft, one round drafts a single token
(on the CPU above, 0.22 of a step each time), unless no draft could pay even if every token of it were
accepted (a draft model about as slow as the model: each look would also make it catch up on every
token since its last draft). The model's first speculated round is a plain step, so
every length is judged against a measured one-token step.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

#: The acceptance assumed for a draft position before any round reached it, and its weight in rounds.
PRIOR_ACCEPT = 0.6
PRIOR_ROUNDS = 1.0
#: How much of a position's counts the next round keeps (0.95: the last ~20 rounds weigh most; 0.9
#: left ~10, too few to tell 11 % from 20 % acceptance).
DECAY = 0.95
#: The verification's extra cost per drafted token assumed before a batch of two or more was timed,
#: in one-token steps: memory-bound, so long drafts are tried first.
GUESSED_SLOPE = 0.05
#: Timings kept per verification size (their median is read).
RECENT = 15
#: After this many rounds in a row that skipped a draft, one round drafts a single token.
EXPLORE_EVERY = 16


@dataclass
class _Mean:
    """A running mean (seconds) of the observations so far."""

    n: int = 0
    mean: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.mean += (x - self.mean) / self.n


@dataclass
class _Recent:
    """The last :data:`RECENT` timings of one verification size, read by their median (a round slowed by
    another process on a shared CPU moves a mean, not a median)."""

    times: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))
    n: int = 0  #: timings ever added

    def add(self, x: float) -> None:
        self.times.append(x)
        self.n += 1

    @property
    def median(self) -> float:
        return statistics.median(self.times)


@dataclass
class VerifyCost:
    """What a round costs on this machine and model: kept for the loaded model's lifetime.

    A verification's time is read off one line, ``v(m) = v(1) (1 + slope (m - 1))``: v(1) the median of
    the recent one-token rounds, the slope fitted through (1, v(1)) to the medians of the other sizes
    (least squares, each size weighted by its timings), never below 0. So the costs rise with m as
    they must, however noisy one size's timings are (on a CPU shared with other work, one size's median
    can come out below a smaller size's).

    Attributes:
        capacity: the longest verification, tokens (draft_max + 1).
    """

    capacity: int
    _verify: dict[int, _Recent] = field(default_factory=dict)
    _draft: _Mean = field(default_factory=_Mean)
    _sample: _Mean = field(default_factory=_Mean)

    def verified(self, m: int, seconds: float) -> None:
        """A verification of ``m`` tokens (one llama_decode) took ``seconds``."""
        if m >= 1 and seconds > 0:
            self._verify.setdefault(m, _Recent()).add(seconds)

    def drafted(self, k: int, seconds: float) -> None:
        """The drafter took ``seconds`` for a draft of ``k`` tokens (k >= 1)."""
        if k >= 1 and seconds >= 0:
            self._draft.add(seconds / k)

    def drew(self, n: int, seconds: float) -> None:
        """The sampler chain drew ``n`` tokens in ``seconds``."""
        if n >= 1 and seconds >= 0:
            self._sample.add(seconds / n)

    @property
    def known(self) -> bool:
        """True once a one-token verification was timed (before that :meth:`verify_s` is a guess)."""
        return 1 in self._verify

    @property
    def timings(self) -> int:
        """Verifications timed so far."""
        return sum(r.n for r in self._verify.values())

    def verify_s(self, m: int) -> float:
        """The estimated seconds of a verification of ``m`` tokens, on the line of the class docstring (in
        units of a one-token step, 1.0, before a one-token verification was timed: :class:`DraftBudget`
        times one first)."""
        v1, slope = self.line()
        return v1 * (1.0 + slope * (m - 1))

    def line(self) -> tuple[float, float]:
        """``(v(1) seconds, slope in one-token steps per extra token)``: the line every size is read off."""
        return (self._verify[1].median if 1 in self._verify else 1.0), self.slope()

    def slope(self) -> float:
        """The verification's extra cost per token beyond the first, in one-token steps
        (:data:`GUESSED_SLOPE` before a size above 1 was timed)."""
        if 1 not in self._verify:
            return GUESSED_SLOPE
        v1 = self._verify[1].median
        num = den = 0.0
        for m, recent in self._verify.items():
            if m > 1:
                w = float(len(recent.times))
                num += w * (m - 1) * (recent.median / v1 - 1.0)
                den += w * (m - 1) ** 2
        return max(num / den, 0.0) if den else GUESSED_SLOPE

    def steps(self) -> tuple[float, ...]:
        """For m = 1..capacity: what a verification of m tokens costs in one-token steps on the fitted line,
        at the sizes timed (0.0 at the others); () before a one-token verification was timed."""
        if 1 not in self._verify:
            return ()
        slope = self.slope()
        return tuple(1.0 + slope * (m - 1) if m in self._verify else 0.0 for m in range(1, self.capacity + 1))

    @property
    def draft_s(self) -> float:
        """The drafter's seconds per drafted token (0.0 before any draft)."""
        return self._draft.mean

    @property
    def sample_s(self) -> float:
        """The sampler's seconds per drawn token (0.0 before any)."""
        return self._sample.mean


@dataclass
class DraftBudget:
    """One reply's draft lengths (module docstring): :meth:`length` before each round, :meth:`judged` after.

    Attributes:
        cost: the model's :class:`VerifyCost`.
        draft_max: the longest draft (the settings' draft_max).
        adaptive: False: always ``cap`` (draft_max), as llama.cpp does.
    """

    cost: VerifyCost
    draft_max: int
    adaptive: bool = True
    _reached: list[float] = field(default_factory=list)
    _accepted: list[float] = field(default_factory=list)
    _skipped_in_a_row: int = 0

    def __post_init__(self) -> None:
        self._reached = [0.0] * self.draft_max
        self._accepted = [0.0] * self.draft_max

    def rate(self, i: int) -> float:
        """The acceptance of draft position ``i`` (0-based) given all before it were accepted, 0..1."""
        return (self._accepted[i] + PRIOR_ACCEPT * PRIOR_ROUNDS) / (self._reached[i] + PRIOR_ROUNDS)

    def expected_tokens(self, k: int) -> float:
        """E(k): tokens a round drafting ``k`` yields (module docstring)."""
        total, run = 1.0, 1.0
        for i in range(k):
            run *= self.rate(i)
            total += run
        return total

    def length(self, cap: int) -> int:
        """How many tokens the next round drafts, 0..``cap`` (0: a plain step; the caller asks the
        drafter for ``cap`` and keeps this many)."""
        cap = max(0, min(cap, self.draft_max))
        if not self.adaptive or cap == 0:
            return cap
        c = self.cost
        if not c.known:
            return 0  # one plain step first: every other size is judged against its time
        round_s = self._round_s()
        best_k, best = 0, 1.0 / round_s(0, 1.0)
        run = total = 1.0
        for k in range(1, cap + 1):
            run *= self.rate(k - 1)
            total += run  # E(k), built up position by position
            speed = total / round_s(k, total)
            if speed > best:
                best_k, best = k, speed
        if best_k == 0:
            if not self._could_pay(cap, best):
                return 0  # not even a draft accepted whole would: the drafter is too slow here
            self._skipped_in_a_row += 1
            if self._skipped_in_a_row >= EXPLORE_EVERY:
                self._skipped_in_a_row = 0
                return 1
        else:
            self._skipped_in_a_row = 0
        return best_k

    def may_pay(self, cap: int) -> bool:
        """Whether a draft of 1..cap tokens could pay here at all (True before the costs are known): False
        only when even a draft accepted whole would not (a draft model as slow as the model), so the
        draft model need not even read the prompt."""
        return not self.cost.known or self._could_pay(cap, 1.0 / self._round_s()(0, 1.0))

    def _round_s(self) -> Callable[[int, float], float]:
        """T(k, E): the seconds of a round drafting k tokens that yields E (module docstring)."""
        c = self.cost
        v1, slope = c.line()
        draft_s, sample_s = c.draft_s, c.sample_s
        return lambda k, e: v1 * (1.0 + slope * k) + k * draft_s + e * sample_s

    def _could_pay(self, cap: int, plain: float) -> bool:
        """Whether some draft of 1..cap tokens, every one accepted, would beat a plain step's ``plain``
        tokens per second (False: a draft model as slow as the model; looking again cannot help)."""
        round_s = self._round_s()
        return any((k + 1) / round_s(k, k + 1.0) > plain for k in range(1, cap + 1))

    def judged(self, drafted: int, accepted: int) -> None:
        """A round drafted ``drafted`` tokens and the first ``accepted`` of them were accepted."""
        if drafted <= 0:
            return
        for i in range(self.draft_max):
            self._reached[i] *= DECAY
            self._accepted[i] *= DECAY
        for i in range(min(accepted + 1, drafted, self.draft_max)):
            self._reached[i] += 1.0
            if i < accepted:
                self._accepted[i] += 1.0
