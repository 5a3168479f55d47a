"""One reply's speculative decoding, counted: rounds, drafted and accepted tokens, why rounds ended.

``GenerationStats.speculation`` (None: the reply was not speculated); stored with the reply.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from app.core.speculative.settings import Drafter


class RoundEnd(str, enum.Enum):
    """Why a drafting round stopped."""

    MISMATCH = "mismatch"  #: the model's own sampler disagreed at a drafted position
    P_MIN = "p_min"  #: the draft model's confidence fell below p_min
    DRAFT_MAX = "draft_max"  #: draft_max tokens drafted, all accepted
    NO_DRAFT = "no_draft"  #: the drafter proposed nothing (no n-gram match)
    STOPPED = "stopped"  #: the reply ended inside the round (EOS, stop string, max_tokens, Stop)
    SKIPPED = "skipped"  #: drafting did not pay on this machine (app.core.speculative.budget): a plain step

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def parse(cls, value: object) -> RoundEnd | None:
        """The member for a stored value; None for an unknown one (its count is dropped)."""
        try:
            return cls(value)
        except (ValueError, TypeError):
            return None


@dataclass(frozen=True)
class SpeculationStats:
    """One speculated reply's counts and times.

    Attributes:
        drafter: which drafter proposed the drafts.
        draft_max: tokens drafted per round at most.
        rounds: verification rounds (one llama_decode of the model each; a round with no draft
            is a plain decode step and counts too).
        drafted: drafted tokens verified.
        accepted: drafted tokens accepted (<= drafted).
        accepted_at: per draft position i (0-based): rounds whose position i was accepted
            (non-increasing: position i+1 is accepted only after position i).
        drafted_at: per draft position i: rounds that drafted a position i.
        round_ends: how many rounds ended each way, ``((RoundEnd, count), ...)``.
        draft_s, verify_s, sample_s: engine time drafting (the drafter), verifying (the model's
            llama_decode) and sampling (the model's sampler chain at each position), seconds.
        accepted_tokens: the reply's token indices (0-based, as ``TokenEvent.index``) that came from
            an accepted draft.
        rejected: ``(reply token index, the drafted text the model replaced there)`` per mismatch.
        weight_bytes_per_token: model weight bytes read per generated token (weights x verify
            batches / tokens generated), bytes; the roofline's figure (weights read once per batch).
        draft_weight_bytes_per_token: the draft model's weight bytes read per generated token (its
            weights x its llama_decode calls in the reply, catching up included / tokens generated),
            bytes; 0.0 for prompt lookup (no second model).
        adaptive: the draft lengths were chosen by the cost model (:mod:`app.core.speculative.budget`);
            False: every round drafted what the drafter had, up to draft_max.
        verify_steps: for m = 1, 2, ...: what verifying m tokens in one llama_decode cost, in one-token
            steps, as measured on this model so far (0.0 where never timed; () when nothing was).
        chosen_mean: the mean length of the drafts verified, tokens (0.0: none).
    """

    drafter: Drafter
    draft_max: int
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_at: tuple[int, ...] = ()
    drafted_at: tuple[int, ...] = ()
    round_ends: tuple[tuple[RoundEnd, int], ...] = ()
    draft_s: float = 0.0
    verify_s: float = 0.0
    sample_s: float = 0.0
    accepted_tokens: tuple[int, ...] = ()
    rejected: tuple[tuple[int, str], ...] = ()
    weight_bytes_per_token: float = 0.0
    draft_weight_bytes_per_token: float = 0.0
    adaptive: bool = False
    verify_steps: tuple[float, ...] = ()

    @property
    def chosen_mean(self) -> float:
        """The mean length of the drafts verified, tokens (drafted / rounds that drafted; 0.0: none)."""
        rounds = self.drafted_at[0] if self.drafted_at else 0
        return self.drafted / rounds if rounds else 0.0

    @property
    def total_weight_bytes_per_token(self) -> float:
        """Weight bytes read per generated token, the model's and the draft model's together."""
        return self.weight_bytes_per_token + self.draft_weight_bytes_per_token

    @property
    def acceptance_rate(self) -> float:
        """accepted / drafted, 0..1 (0.0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted_per_round(self) -> float:
        """accepted / rounds (0.0 without rounds)."""
        return self.accepted / self.rounds if self.rounds else 0.0

    def ended(self, how: RoundEnd) -> int:
        """Rounds that ended ``how``."""
        return sum(n for end, n in self.round_ends if end is how)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (enums as their strings, tuples as lists) plus the two rates."""
        return {
            "drafter": self.drafter.value,
            "draft_max": self.draft_max,
            "rounds": self.rounds,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "accepted_at": list(self.accepted_at),
            "drafted_at": list(self.drafted_at),
            "round_ends": [[end.value, n] for end, n in self.round_ends],
            "draft_s": self.draft_s,
            "verify_s": self.verify_s,
            "sample_s": self.sample_s,
            "accepted_tokens": list(self.accepted_tokens),
            "rejected": [[i, text] for i, text in self.rejected],
            "weight_bytes_per_token": self.weight_bytes_per_token,
            "draft_weight_bytes_per_token": self.draft_weight_bytes_per_token,
            "adaptive": self.adaptive,
            "verify_steps": list(self.verify_steps),
            "acceptance_rate": self.acceptance_rate,
            "mean_accepted_per_round": self.mean_accepted_per_round,
        }

    @classmethod
    def from_dict(cls, data: object) -> SpeculationStats | None:
        """Build from stored values; None when ``data`` is not a dict (a reply stored before
        speculation, or damaged). Values of the wrong type read as their defaults; entries of the
        lists that are not of their shape are dropped."""
        if not isinstance(data, dict):
            return None

        def num(key: str, kind: type) -> Any:
            v = data.get(key)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            return kind(v) if ok else kind(0)

        def ints(key: str) -> tuple[int, ...]:
            v = data.get(key)
            items = v if isinstance(v, list) else []
            return tuple(x for x in items if isinstance(x, int) and not isinstance(x, bool))

        def pairs(key: str) -> list[tuple[Any, Any]]:
            v = data.get(key)
            items = v if isinstance(v, list) else []
            return [(p[0], p[1]) for p in items if isinstance(p, list | tuple) and len(p) == 2]

        ends = []
        for end, n in pairs("round_ends"):
            parsed = RoundEnd.parse(end)
            if parsed is not None and isinstance(n, int) and not isinstance(n, bool):
                ends.append((parsed, n))
        rejected = [(i, t) for i, t in pairs("rejected") if isinstance(i, int) and isinstance(t, str)]
        steps = data.get("verify_steps")
        verify_steps = tuple(
            float(x)
            for x in (steps if isinstance(steps, list) else [])
            if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        )
        return cls(
            drafter=Drafter.parse(data.get("drafter")),
            draft_max=num("draft_max", int),
            rounds=num("rounds", int),
            drafted=num("drafted", int),
            accepted=num("accepted", int),
            accepted_at=ints("accepted_at"),
            drafted_at=ints("drafted_at"),
            round_ends=tuple(ends),
            draft_s=num("draft_s", float),
            verify_s=num("verify_s", float),
            sample_s=num("sample_s", float),
            accepted_tokens=ints("accepted_tokens"),
            rejected=tuple(rejected),
            weight_bytes_per_token=num("weight_bytes_per_token", float),
            draft_weight_bytes_per_token=num("draft_weight_bytes_per_token", float),
            adaptive=data.get("adaptive") is True,
            verify_steps=verify_steps,
        )
