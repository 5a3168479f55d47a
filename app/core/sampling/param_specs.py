"""The numeric sampler parameters as the Sampler panel shows them: label, range, step, "off" value, help, group.

:meth:`app.core.sampling.params.SamplerSettings.validated` checks a value against the same ranges
(:data:`PARAMS`), so the panel and the engine agree on what is allowed. The ranges are llama.cpp's
where it has one (see :mod:`app.core.sampling.params` for the "off" values).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParamSpec:
    """How the Sampler panel shows one numeric parameter.

    Attributes:
        group: the panel section it sits in (:data:`GROUPS`).
        knee: the value at :data:`KNEE_AT` of the slider's track (None: the track is linear): the
            values below it get most of the track, a finer feel where they matter; the exact field
            still takes any value in range.
    """

    name: str
    label: str
    minimum: float
    maximum: float
    step: float
    decimals: int
    off_value: float | None
    help: str
    kind: type = float
    group: str = "basic"
    knee: float | None = None


KNEE_AT = 0.8  # the share of a kneed slider's track below its knee

GROUPS: dict[str, str] = {
    "basic": "Truncation and temperature",
    "penalties": "Repetition",
    "more": "DRY, XTC, top-n-sigma, dynamic temperature",
    "mirostat": "Mirostat (replaces the stages above)",
    "length": "Length",
}

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "temperature",
        "temperature",
        0.0,
        5.0,
        0.05,
        2,
        None,
        "Divides the logits. Lower is more focused, higher more varied. 0 = greedy: always the most likely "
        "token. In llama.cpp's default order it runs after top_k, top_p and min_p have cut.",
        knee=2.0,
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
        group="penalties",
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
        group="penalties",
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
        group="penalties",
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
        group="penalties",
    ),
    ParamSpec(
        "dry_multiplier",
        "dry_multiplier",
        0.0,
        5.0,
        0.05,
        2,
        0.0,
        "DRY: penalise a token that would extend a sequence already in the context. 0 = off (0.8 is common).",
        group="more",
    ),
    ParamSpec(
        "dry_base",
        "dry_base",
        1.0,
        4.0,
        0.05,
        2,
        None,
        "DRY's growth: penalty = multiplier x base^(repeat length - allowed length).",
        group="more",
    ),
    ParamSpec(
        "dry_allowed_length",
        "dry_allowed_length",
        1,
        20,
        1,
        0,
        None,
        "DRY leaves repeated sequences up to this many tokens alone.",
        int,
        group="more",
    ),
    ParamSpec(
        "dry_penalty_last_n",
        "dry_last_n",
        -1,
        8192,
        1,
        0,
        0,
        "Tokens DRY looks back over. -1 = the whole context, 0 = off.",
        int,
        group="more",
    ),
    ParamSpec(
        "top_n_sigma",
        "top_n_sigma",
        -1.0,
        5.0,
        0.05,
        2,
        -1.0,
        "Keep tokens whose logit is within n standard deviations of the top logit. -1 (any value <= 0) = off.",
        group="more",
    ),
    ParamSpec(
        "xtc_probability",
        "xtc_probability",
        0.0,
        1.0,
        0.01,
        2,
        0.0,
        "XTC (exclude top choices): with this probability per token, cut the likely tokens. 0 = off.",
        group="more",
    ),
    ParamSpec(
        "xtc_threshold",
        "xtc_threshold",
        0.0,
        1.0,
        0.01,
        2,
        None,
        "XTC cuts every token above this probability except the least likely of them. Above 0.5 = off.",
        group="more",
    ),
    ParamSpec(
        "dynatemp_range",
        "dynatemp_range",
        0.0,
        5.0,
        0.05,
        2,
        0.0,
        "Dynamic temperature: the temperature moves within temperature ± range, higher when the model is "
        "unsure (high entropy). 0 = off.",
        group="more",
    ),
    ParamSpec(
        "dynatemp_exponent",
        "dynatemp_exponent",
        0.0,
        5.0,
        0.05,
        2,
        None,
        "How entropy maps to the dynamic temperature (1 = linear).",
        group="more",
    ),
    ParamSpec(
        "mirostat",
        "mirostat",
        0,
        2,
        1,
        0,
        0,
        "Mirostat keeps the text's surprise near tau: 1 = Mirostat, 2 = Mirostat 2.0, 0 = off. On, it replaces "
        "top_k, top_p, min_p and the other stages (as in llama.cpp).",
        int,
        group="mirostat",
    ),
    ParamSpec(
        "mirostat_tau",
        "mirostat_tau",
        0.0,
        10.0,
        0.1,
        1,
        None,
        "Mirostat's target surprise, bits per token (lower = more focused).",
        group="mirostat",
    ),
    ParamSpec(
        "mirostat_eta",
        "mirostat_eta",
        0.0,
        1.0,
        0.01,
        2,
        None,
        "Mirostat's learning rate.",
        group="mirostat",
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
        group="length",
    ),
)
