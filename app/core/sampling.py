"""Sampler settings: ranges, defaults, presets, and a preview of their effect.

The engine turns :class:`SamplerSettings` into llama.cpp's own sampler chain
(``llama_sampler_chain``), in llama.cpp's default order (common/common.h,
``common_params_sampling.samplers``): penalties -> top_k -> typical_p -> top_p
-> min_p -> temperature -> dist. A temperature of 0 means greedy (argmax).
"Off" values follow llama.cpp: top_k = 0, top_p = 1, min_p = 0, typical_p = 1,
repeat_penalty = 1, presence/frequency penalty = 0.

:func:`preview_distribution` re-applies the same filters to the top
candidates of the last token so the Sampler panel can show what a slider does
before the next reply.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

SEED_MAX = 2**32 - 2  # llama.cpp treats 0xFFFFFFFF (LLAMA_DEFAULT_SEED) as "random"


@dataclass(frozen=True)
class SamplerSettings:
    """One reply's sampling parameters (immutable; the UI snapshots it per request).

    Attributes:
        temperature: divides the logits; 0 = greedy (always the most likely token).
        top_k: keep the k most likely tokens; 0 = off.
        top_p: keep the smallest set whose probability sums to p; 1 = off.
        min_p: drop tokens below min_p x the top token's probability; 0 = off.
        typical_p: locally typical sampling; 1 = off.
        repeat_penalty: divides the logits of tokens seen in the last
            ``repeat_last_n`` tokens; 1 = off.
        repeat_last_n: tokens the penalties look back over; 0 = off, -1 = whole context.
        presence_penalty: subtracted once from any token already seen; 0 = off.
        frequency_penalty: subtracted per occurrence of a token; 0 = off.
        seed: fixed seed, or None for a fresh random seed each reply (the seed
            used is reported either way).
        max_tokens: most tokens to generate; -1 = until the context is full.
    """

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int = 1024

    def validated(self) -> SamplerSettings:
        """Return self after checking every value against :data:`PARAMS`.

        Raises:
            ValueError: a value is out of range; the message names it and the range.
        """
        for spec in PARAMS:
            v = getattr(self, spec.name)
            if not (spec.minimum <= v <= spec.maximum):
                raise ValueError(
                    f"{spec.name} = {v} is out of range; it must be between {spec.minimum} and {spec.maximum}"
                )
        if self.seed is not None and not (0 <= self.seed <= SEED_MAX):
            raise ValueError(f"seed = {self.seed} is out of range; it must be between 0 and {SEED_MAX}")
        return self

    def resolved_seed(self, rng: random.Random | None = None) -> int:
        """The seed to use for one reply: the fixed one, or a fresh random one."""
        if self.seed is not None:
            return self.seed
        return (rng or random.SystemRandom()).randint(0, SEED_MAX)

    @property
    def is_greedy(self) -> bool:
        return self.temperature <= 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SamplerSettings:
        """Build from stored values, ignoring unknown keys and clamping to range."""
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        s = cls()
        for spec in PARAMS:
            if spec.name in values:
                try:
                    v = spec.kind(values[spec.name])
                except (TypeError, ValueError):
                    continue
                s = replace(s, **{spec.name: min(max(v, spec.minimum), spec.maximum)})
        seed = values.get("seed")
        if isinstance(seed, int) and 0 <= seed <= SEED_MAX:
            s = replace(s, seed=seed)
        return s


@dataclass(frozen=True)
class ParamSpec:
    """How the Sampler panel shows one parameter."""

    name: str
    label: str
    minimum: float
    maximum: float
    step: float
    decimals: int
    off_value: float | None
    help: str
    kind: type = float


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "temperature",
        "temperature",
        0.0,
        2.0,
        0.05,
        2,
        None,
        "Divides the logits before sampling. Lower is more focused, higher more varied. 0 = greedy: always the most likely token.",
    ),
    ParamSpec("top_k", "top_k", 0, 200, 1, 0, 0, "Keep only the k most likely tokens. 0 = off.", int),
    ParamSpec(
        "top_p",
        "top_p",
        0.0,
        1.0,
        0.01,
        2,
        1.0,
        "Nucleus sampling: keep the smallest set of tokens whose probabilities add up to p. 1 = off.",
    ),
    ParamSpec(
        "min_p",
        "min_p",
        0.0,
        1.0,
        0.01,
        2,
        0.0,
        "Drop tokens less likely than min_p x the top token's probability. 0 = off.",
    ),
    ParamSpec(
        "typical_p",
        "typical_p",
        0.0,
        1.0,
        0.01,
        2,
        1.0,
        "Locally typical sampling: prefer tokens whose surprise is close to the average. 1 = off.",
    ),
    ParamSpec(
        "repeat_penalty",
        "repeat_penalty",
        1.0,
        2.0,
        0.01,
        2,
        1.0,
        "Divides the logits of tokens that appeared in the last repeat_last_n tokens. 1 = off.",
    ),
    ParamSpec(
        "repeat_last_n",
        "repeat_last_n",
        -1,
        4096,
        1,
        0,
        0,
        "How many recent tokens the penalties look at. 0 = off, -1 = the whole context.",
        int,
    ),
    ParamSpec(
        "presence_penalty",
        "presence_penalty",
        -2.0,
        2.0,
        0.05,
        2,
        0.0,
        "Subtracted once from the logit of every token already present. 0 = off.",
    ),
    ParamSpec(
        "frequency_penalty",
        "frequency_penalty",
        -2.0,
        2.0,
        0.05,
        2,
        0.0,
        "Subtracted from a token's logit for each time it already appeared. 0 = off.",
    ),
    ParamSpec(
        "max_tokens",
        "max_tokens",
        -1,
        32768,
        1,
        0,
        -1,
        "Most tokens to generate in one reply. -1 = until the context is full.",
        int,
    ),
)

DEFAULTS = SamplerSettings()

PRESETS: dict[str, SamplerSettings] = {
    "Precise": SamplerSettings(temperature=0.2, top_k=20, top_p=0.9, min_p=0.1, repeat_penalty=1.1),
    "Balanced": DEFAULTS,
    "Creative": SamplerSettings(temperature=1.1, top_k=0, top_p=0.98, min_p=0.02, repeat_penalty=1.05),
}


def matching_preset(settings: SamplerSettings) -> str | None:
    """The preset name these settings equal (ignoring seed and max_tokens), if any."""
    for name, preset in PRESETS.items():
        if replace(preset, seed=settings.seed, max_tokens=settings.max_tokens) == settings:
            return name
    return None


@dataclass(frozen=True)
class Candidate:
    """One candidate next token in the preview.

    Attributes:
        token_id: vocabulary id.
        text: the token's text.
        p_model: probability under the raw model (softmax of logits, temperature 1).
        p_sampled: probability of being picked with the settings (0 when filtered out).
        kept: whether the filters keep it.
    """

    token_id: int
    text: str
    p_model: float
    p_sampled: float
    kept: bool


def preview_distribution(
    candidates: Sequence[tuple[int, str, float]],
    settings: SamplerSettings,
    logsumexp_all: float | None = None,
) -> list[Candidate]:
    """Apply top_k, typical_p, top_p, min_p and temperature to the top candidates.

    Mirrors llama.cpp's samplers (src/llama-sampling.cpp: llama_sampler_top_k_impl,
    llama_sampler_typical_apply, llama_sampler_top_p_apply,
    llama_sampler_min_p_apply, llama_sampler_temp_impl) on a truncated
    candidate list; penalties are left out because they depend on the history.

    Args:
        candidates: ``(token_id, text, logit)``, any order; usually the 20 to 40 best.
        settings: the sampler settings to preview.
        logsumexp_all: log-sum-exp of all logits in the vocabulary, so ``p_model`` is
            the true probability; default: normalise over the candidates given.

    Returns:
        Candidates sorted by logit, highest first.
    """
    if not candidates:
        return []
    cands = sorted(candidates, key=lambda c: -c[2])
    logits = [c[2] for c in cands]
    lse = logsumexp_all if logsumexp_all is not None else _logsumexp(logits)
    p_model = [math.exp(x - lse) for x in logits]
    alive = list(range(len(cands)))  # indices into cands, best first
    if settings.is_greedy:
        alive = alive[:1]
    else:
        if settings.top_k > 0:
            alive = alive[: settings.top_k]
        if settings.typical_p < 1.0 and len(alive) > 1:
            probs = _softmax([logits[i] for i in alive])
            entropy = -sum(q * math.log(q) for q in probs if q > 0)
            order = sorted(
                range(len(alive)), key=lambda j: abs(-math.log(probs[j]) - entropy) if probs[j] > 0 else math.inf
            )
            cum, kept = 0.0, []
            for j in order:
                kept.append(alive[j])
                cum += probs[j]
                if cum > settings.typical_p:
                    break
            alive = sorted(kept)
        if settings.top_p < 1.0 and len(alive) > 1:
            probs = _softmax([logits[i] for i in alive])
            # Keep the fewest best candidates whose probabilities add up to top_p.
            k = next(
                (n for n, cum in enumerate(itertools.accumulate(probs), start=1) if cum >= settings.top_p), len(probs)
            )
            alive = alive[: max(1, k)]
        if settings.min_p > 0.0 and len(alive) > 1:
            threshold = logits[alive[0]] + math.log(settings.min_p)
            alive = [i for i in alive if logits[i] >= threshold] or alive[:1]
    sampled = [0.0] * len(cands)
    if settings.is_greedy:
        sampled[alive[0]] = 1.0
    else:
        for i, q in zip(alive, _softmax([logits[i] / settings.temperature for i in alive]), strict=True):
            sampled[i] = q
    kept_set = set(alive)
    return [
        Candidate(token_id=c[0], text=c[1], p_model=p_model[i], p_sampled=sampled[i], kept=i in kept_set)
        for i, c in enumerate(cands)
    ]


def _logsumexp(xs: Iterable[float]) -> float:
    xs = list(xs)
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def _softmax(xs: list[float]) -> list[float]:
    if not xs:
        return []
    lse = _logsumexp(xs)
    return [math.exp(x - lse) for x in xs]
