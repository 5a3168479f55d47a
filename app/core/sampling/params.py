"""Sampler settings: defaults, validation, presets, the stage order, and logit bias.

The ranges each numeric parameter must keep to, and how the Sampler panel shows it, are
:data:`app.core.sampling.param_specs.PARAMS`.

The engine turns :class:`SamplerSettings` into llama.cpp's own sampler chain
(``llama_sampler_chain``, :mod:`app.engine.funnel`), the way llama.cpp's
``common_sampler_init`` does (common/sampling.cpp):

- logit bias first (always first in llama.cpp; not reorderable),
- then the stages of :attr:`SamplerSettings.order`, llama.cpp's default being
  penalties -> DRY -> top-n-sigma -> top_k -> typical_p -> top_p -> min_p -> XTC
  -> temperature (common.h, ``common_params_sampling.samplers``),
- then the draw: ``dist`` (a weighted random pick with the seed); greedy (argmax)
  when temperature is 0.

Mirostat replaces the stages, as in llama.cpp: logit bias -> temperature ->
mirostat (v1 or v2), which draws the token itself.

"Off" values are llama.cpp's: top_k = 0, top_p = 1, min_p = 0, typical_p = 1,
repeat_penalty = 1, presence/frequency penalty = 0, dry_multiplier = 0,
xtc_probability = 0 (or xtc_threshold > 0.5), top_n_sigma <= 0 (llama.cpp's
default is -1), dynatemp_range = 0, mirostat = 0. Only stages that are on go
into the chain, so the funnel shows the stages that ran.
"""

from __future__ import annotations

import enum
import math
import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

# The Sampler panel's parameter catalogue, re-exported: the panel imports the settings and their ranges from here.
from app.core.sampling.param_specs import GROUPS as GROUPS
from app.core.sampling.param_specs import KNEE_AT as KNEE_AT
from app.core.sampling.param_specs import PARAMS as PARAMS
from app.core.sampling.param_specs import ParamSpec as ParamSpec

SEED_MAX = 2**32 - 2  # llama.cpp treats 0xFFFFFFFF (LLAMA_DEFAULT_SEED) as "random"
MAX_LOGIT_BIAS = 100.0  # |bias| above this is refused (a ban is -inf, written "ban")


class SamplerStage(str, enum.Enum):
    """A reorderable stage of llama.cpp's sampler chain (values are stored with chats)."""

    PENALTIES = "penalties"
    DRY = "dry"
    TOP_N_SIGMA = "top_n_sigma"
    TOP_K = "top_k"
    TYPICAL_P = "typical_p"
    TOP_P = "top_p"
    MIN_P = "min_p"
    XTC = "xtc"
    TEMPERATURE = "temperature"


# llama.cpp's default order (common/common.h, common_params_sampling.samplers).
DEFAULT_ORDER: tuple[SamplerStage, ...] = (
    SamplerStage.PENALTIES,
    SamplerStage.DRY,
    SamplerStage.TOP_N_SIGMA,
    SamplerStage.TOP_K,
    SamplerStage.TYPICAL_P,
    SamplerStage.TOP_P,
    SamplerStage.MIN_P,
    SamplerStage.XTC,
    SamplerStage.TEMPERATURE,
)


class Mirostat(int, enum.Enum):
    """llama.cpp's ``mirostat`` setting: 0 off, 1 Mirostat, 2 Mirostat 2.0."""

    OFF = 0
    V1 = 1
    V2 = 2


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
        dry_multiplier: DRY ("don't repeat yourself") strength; 0 = off.
        dry_base: DRY's exponential base (penalty = multiplier x base^(repeat - allowed)).
        dry_allowed_length: repeated sequences up to this many tokens go unpenalised.
        dry_penalty_last_n: tokens DRY looks back over; -1 = whole context, 0 = off.
        top_n_sigma: keep tokens within n standard deviations of the top logit; <= 0 = off.
        xtc_probability: chance that XTC ("exclude top choices") cuts, per token; 0 = off.
        xtc_threshold: XTC cuts every token above this probability but the least likely of
            them; > 0.5 = off.
        dynatemp_range: dynamic temperature: the temperature moves within
            temperature +- range by the distribution's entropy; 0 = off.
        dynatemp_exponent: how the entropy maps to the temperature (1 = linear).
        mirostat: 0 off, 1 or 2 (replaces the truncation stages; see the module docstring).
        mirostat_tau: target surprise, bits.
        mirostat_eta: learning rate of mirostat's running mu.
        logit_bias: ``(token_id, bias)`` added to the logits; a bias of -inf bans the token.
        logit_bias_vocab: the fingerprint of the vocabulary the bias's ids were set for
            (:func:`app.core.sampling.bias_vocabulary.vocabulary_fingerprint`); "" unknown
            (set with no model loaded, or before Glassbox kept it). The engine does not read it.
        order: the order of the reorderable stages (a permutation of :data:`DEFAULT_ORDER`).
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
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1
    top_n_sigma: float = -1.0
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    dynatemp_range: float = 0.0
    dynatemp_exponent: float = 1.0
    mirostat: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    logit_bias: tuple[tuple[int, float], ...] = ()
    logit_bias_vocab: str = ""
    order: tuple[SamplerStage, ...] = DEFAULT_ORDER

    def validated(self) -> SamplerSettings:
        """Return self after checking every value against :data:`PARAMS`, the order and the bias.

        Raises:
            ValueError: a value is out of range or the order is not a permutation of the
                stages; the message names the field and what it must be.
        """
        for spec in PARAMS:
            v = getattr(self, spec.name)
            if isinstance(v, float) and math.isnan(v):
                raise ValueError(f"{spec.name} is not a number")
            if not (spec.minimum <= v <= spec.maximum):
                raise ValueError(
                    f"{spec.name} = {v} is out of range; it must be between {spec.minimum} and {spec.maximum}"
                )
        if self.seed is not None and not (0 <= self.seed <= SEED_MAX):
            raise ValueError(f"seed = {self.seed} is out of range; it must be between 0 and {SEED_MAX}")
        if sorted(self.order) != sorted(DEFAULT_ORDER) or len(set(self.order)) != len(DEFAULT_ORDER):
            names = ", ".join(s.value for s in DEFAULT_ORDER)
            raise ValueError(f"order must name each stage once: {names}")
        for tok, bias in self.logit_bias:
            check_bias(tok, bias)
        return self

    def resolved_seed(self, rng: random.Random | None = None) -> int:
        """The seed to use for one reply: the fixed one, or a fresh random one."""
        if self.seed is not None:
            return self.seed
        return (rng or random.SystemRandom()).randint(0, SEED_MAX)

    @property
    def is_greedy(self) -> bool:
        return self.temperature <= 0.0 and self.mirostat == Mirostat.OFF

    def stage_on(self, stage: SamplerStage) -> bool:
        """Whether ``stage`` changes anything with these values (off stages are left out of the chain)."""
        if stage == SamplerStage.PENALTIES:
            return self.repeat_last_n != 0 and (
                self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
            )
        if stage == SamplerStage.DRY:
            return self.dry_multiplier != 0.0 and self.dry_penalty_last_n != 0
        if stage == SamplerStage.TOP_N_SIGMA:
            return self.top_n_sigma > 0.0
        if stage == SamplerStage.TOP_K:
            return self.top_k > 0
        if stage == SamplerStage.TYPICAL_P:
            return self.typical_p < 1.0
        if stage == SamplerStage.TOP_P:
            return self.top_p < 1.0
        if stage == SamplerStage.MIN_P:
            return self.min_p > 0.0
        if stage == SamplerStage.XTC:
            return self.xtc_probability > 0.0 and self.xtc_threshold <= 0.5
        return True  # temperature always runs (it is the greedy switch at 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (the order as stage names, the bias as [id, bias] pairs; a ban as "-inf").

        Fields added after the first stored format (:data:`ADDED_FIELDS`) are written only when
        they differ from their default, so settings that use none of them are stored exactly as
        before (same keys, same size: each chat row carries one).
        """
        d = asdict(self)
        d["order"] = [s.value for s in self.order]
        d["logit_bias"] = [[t, "-inf" if b == -math.inf else b] for t, b in self.logit_bias]
        for name in ADDED_FIELDS:
            if getattr(self, name) == getattr(_DEFAULT, name):
                del d[name]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SamplerSettings:
        """Build from stored values, ignoring unknown keys and clamping to range.

        Settings stored before a field existed (older chats and settings files) get that
        field's default, which is llama.cpp's "off" for every sampler added since; an
        unreadable order or bias entry is dropped (the default order, no bias).
        """
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        s = cls()
        for spec in PARAMS:
            if spec.name in values:
                try:
                    v = spec.kind(values[spec.name])
                except (TypeError, ValueError, OverflowError):
                    continue
                if isinstance(v, float) and math.isnan(v):
                    continue
                s = replace(s, **{spec.name: min(max(v, spec.minimum), spec.maximum)})
        seed = values.get("seed")
        if isinstance(seed, int) and 0 <= seed <= SEED_MAX:
            s = replace(s, seed=seed)
        order = values.get("order")
        if isinstance(order, (list, tuple)):
            try:
                parsed = tuple(SamplerStage(x) for x in order)
            except ValueError:
                parsed = ()
            if sorted(parsed) == sorted(DEFAULT_ORDER):
                s = replace(s, order=parsed)
        bias = values.get("logit_bias")
        if isinstance(bias, (list, tuple)):
            kept: list[tuple[int, float]] = []
            for item in bias:
                try:
                    tok, b = int(item[0]), float(item[1])
                    check_bias(tok, b)
                except (TypeError, ValueError, IndexError):
                    continue
                kept.append((tok, b))
            s = replace(s, logit_bias=tuple(kept))
            vocab = values.get("logit_bias_vocab")
            if kept and isinstance(vocab, str):
                s = replace(s, logit_bias_vocab=vocab)
        return s


_DEFAULT = SamplerSettings()
# Fields added with the funnel (DRY, XTC, top-n-sigma, dynamic temperature, mirostat, bias, order).
ADDED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(SamplerSettings))[11:]


def check_bias(token_id: int, bias: float) -> None:
    """Check one logit bias entry.

    Raises:
        ValueError: a negative token id, a NaN bias, or a finite bias beyond +-MAX_LOGIT_BIAS.
    """
    if token_id < 0:
        raise ValueError(f"logit bias: token id {token_id} is negative")
    if math.isnan(bias) or bias == math.inf or (bias != -math.inf and abs(bias) > MAX_LOGIT_BIAS):
        raise ValueError(
            f"logit bias for token {token_id} = {bias}: it must be between -{MAX_LOGIT_BIAS:g} and "
            f"{MAX_LOGIT_BIAS:g}, or 'ban'"
        )


def parse_logit_bias(text: str, n_vocab: int = 0) -> tuple[tuple[int, float], ...]:
    """Parse ``"13:ban, 42:+2.5, 7:-1"`` (token id: bias, comma-separated) into ``logit_bias``.

    ``ban`` (or ``-inf``) bans the token; ``n_vocab`` (tokens; 0 = not known) bounds the ids. Raises:
        ValueError: an entry that is not ``id:bias``, or whose id is beyond the vocabulary, with the
            entry and what it must be.
    """
    out: dict[int, float] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        tok_s, sep, bias_s = item.partition(":")
        if not sep:
            raise ValueError(f"logit bias '{item}': write token_id:bias, e.g. 13:ban or 42:+2")
        try:
            tok = int(tok_s.strip())
        except ValueError:
            raise ValueError(f"logit bias '{item}': the token id must be a whole number") from None
        b = bias_s.strip().lower()
        if b in ("ban", "-inf"):
            bias = -math.inf
        else:
            try:
                bias = float(b)
            except ValueError:
                raise ValueError(f"logit bias '{item}': the bias must be a number or 'ban'") from None
        check_bias(tok, bias)
        if n_vocab > 0 and tok >= n_vocab:
            raise ValueError(
                f"logit bias '{item}': token id {tok} is beyond this model's vocabulary (ids 0 to {n_vocab - 1:,})"
            )
        out[tok] = bias
    return tuple(out.items())


def format_logit_bias(bias: tuple[tuple[int, float], ...]) -> str:
    """The text :func:`parse_logit_bias` reads back to ``bias``."""
    return ", ".join(f"{t}:ban" if b == -math.inf else f"{t}:{b:+g}" for t, b in bias)


DEFAULTS = SamplerSettings()

PRESETS: dict[str, SamplerSettings] = {
    "Precise": SamplerSettings(temperature=0.2, top_k=20, top_p=0.9, min_p=0.1, repeat_penalty=1.1),
    "Balanced": DEFAULTS,
    "Creative": SamplerSettings(temperature=1.1, top_k=0, top_p=0.98, min_p=0.02, repeat_penalty=1.05),
    # What DRY's and XTC's authors suggest for creative writing (min_p only, DRY 0.8, XTC 0.5 / 0.1).
    "DRY+XTC": SamplerSettings(
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        min_p=0.05,
        repeat_penalty=1.0,
        dry_multiplier=0.8,
        xtc_probability=0.5,
        xtc_threshold=0.1,
    ),
    "Mirostat 2": SamplerSettings(temperature=1.0, repeat_penalty=1.0, mirostat=2, mirostat_tau=5.0, mirostat_eta=0.1),
}


def matching_preset(settings: SamplerSettings) -> str | None:
    """The preset name these settings equal (ignoring seed, max_tokens, logit bias and order), if any."""
    for name, preset in PRESETS.items():
        same = replace(
            preset,
            seed=settings.seed,
            max_tokens=settings.max_tokens,
            logit_bias=settings.logit_bias,
            logit_bias_vocab=settings.logit_bias_vocab,
            order=settings.order,
        )
        if same == settings:
            return name
    return None


def with_preset(settings: SamplerSettings, name: str) -> SamplerSettings:
    """``settings`` with preset ``name``'s values (seed, max_tokens, logit bias and order kept)."""
    return replace(
        PRESETS[name],
        seed=settings.seed,
        max_tokens=settings.max_tokens,
        logit_bias=settings.logit_bias,
        logit_bias_vocab=settings.logit_bias_vocab,
        order=settings.order,
    )


ORDER_NOTE = (
    "llama.cpp applies temperature after the truncation stages: top_k, top_p and min_p cut on the "
    "temperature-1 probabilities, so a higher temperature only spreads the chance among the survivors."
)


_ORDER_NAME = {
    SamplerStage.PENALTIES: "penalties",
    SamplerStage.TEMPERATURE: "temp",
    SamplerStage.TOP_N_SIGMA: "nσ",
    SamplerStage.TYPICAL_P: "typical",
}


def order_text(s: SamplerSettings) -> str:
    """The chain as it runs with ``s``: the stages that are on, in order, then the draw (short names)."""
    if s.mirostat:
        parts = ["bias"] if s.logit_bias else []
        return "→".join([*parts, "temp", f"mirostat {s.mirostat}"])
    parts = ["bias"] if s.logit_bias else []
    for st in s.order:
        if s.stage_on(st) and (not s.is_greedy or st in (SamplerStage.PENALTIES, SamplerStage.DRY)):
            parts.append(_ORDER_NAME.get(st, st.value))
    parts.append("greedy" if s.is_greedy else "draw")
    return "→".join(parts)
