"""Sampler settings: ranges, presets, the stage order, logit bias, and stored settings from before they existed."""

from __future__ import annotations

import json
import math
import random

import pytest

from app.core.sampling.params import (
    DEFAULT_ORDER,
    DEFAULTS,
    PRESETS,
    SamplerSettings,
    SamplerStage,
    format_logit_bias,
    matching_preset,
    parse_logit_bias,
    with_preset,
)


def test_presets_and_matching():
    assert matching_preset(DEFAULTS) == "Balanced"
    assert matching_preset(SamplerSettings(**{**PRESETS["Creative"].to_dict(), "seed": 7})) == "Creative"
    assert matching_preset(SamplerSettings(temperature=0.33)) is None
    mine = SamplerSettings(seed=5, max_tokens=99, logit_bias=((13, -math.inf),), order=DEFAULT_ORDER[::-1])
    dry = with_preset(mine, "DRY+XTC")
    assert (dry.seed, dry.max_tokens, dry.logit_bias, dry.order) == (5, 99, mine.logit_bias, mine.order)
    assert dry.dry_multiplier == 0.8 and dry.xtc_probability == 0.5 and matching_preset(dry) == "DRY+XTC"
    for preset in PRESETS.values():
        preset.validated()


def test_validation_and_clamping():
    with pytest.raises(ValueError, match=r"top_p = 1.5 is out of range; it must be between 0.0 and 1.0"):
        SamplerSettings(top_p=1.5).validated()
    with pytest.raises(ValueError, match=r"temperature = 6.0 is out of range; it must be between 0.0 and 5.0"):
        SamplerSettings(temperature=6.0).validated()
    with pytest.raises(ValueError, match=r"mirostat = 3 is out of range"):
        SamplerSettings(mirostat=3).validated()
    with pytest.raises(ValueError, match=r"order must name each stage once"):
        SamplerSettings(order=DEFAULT_ORDER[:-1]).validated()
    with pytest.raises(ValueError, match=r"order must name each stage once"):
        SamplerSettings(order=(SamplerStage.TOP_K,) * len(DEFAULT_ORDER)).validated()
    with pytest.raises(ValueError, match=r"logit bias for token 3 = 500"):
        SamplerSettings(logit_bias=((3, 500.0),)).validated()
    with pytest.raises(ValueError, match=r"temperature is not a number"):
        SamplerSettings(temperature=math.nan).validated()
    s = SamplerSettings.from_dict({"temperature": 99, "top_k": "12", "seed": 5, "bogus": 1})
    assert s.temperature == 5.0 and s.top_k == 12 and s.seed == 5
    assert SamplerSettings(temperature=3.5).validated().temperature == 3.5  # past 2.0, as llama.cpp allows


def test_seed_resolution():
    assert SamplerSettings(seed=42).resolved_seed() == 42
    rng = random.Random(0)
    seeds = {SamplerSettings().resolved_seed(rng) for _ in range(10)}
    assert len(seeds) == 10


def test_off_values_are_llama_cpps():
    d = DEFAULTS
    assert not d.stage_on(SamplerStage.DRY) and d.dry_multiplier == 0.0
    assert not d.stage_on(SamplerStage.XTC) and d.xtc_probability == 0.0
    assert not d.stage_on(SamplerStage.TOP_N_SIGMA) and d.top_n_sigma == -1.0
    assert not d.stage_on(SamplerStage.TYPICAL_P)
    assert d.mirostat == 0 and d.dynatemp_range == 0.0 and d.logit_bias == ()
    assert SamplerSettings(xtc_probability=0.5, xtc_threshold=0.6).stage_on(SamplerStage.XTC) is False
    assert SamplerSettings(xtc_probability=0.5, xtc_threshold=0.1).stage_on(SamplerStage.XTC) is True
    assert SamplerSettings(repeat_penalty=1.0).stage_on(SamplerStage.PENALTIES) is False
    assert SamplerSettings(repeat_last_n=0).stage_on(SamplerStage.PENALTIES) is False
    assert d.order == DEFAULT_ORDER and d.order[-1] == SamplerStage.TEMPERATURE


def test_logit_bias_text():
    bias = parse_logit_bias(" 13:ban, 42:+2.5,7:-1 ")
    assert bias == ((13, -math.inf), (42, 2.5), (7, -1.0))
    assert parse_logit_bias(format_logit_bias(bias)) == bias
    assert parse_logit_bias("") == ()
    for bad, words in (
        ("13", "token_id:bias"),
        ("x:1", "whole number"),
        ("3:lots", "number or 'ban'"),
        ("3:101", "between"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_logit_bias(bad)


def test_round_trip_through_json():
    s = SamplerSettings(
        temperature=2.5,
        dry_multiplier=0.8,
        xtc_probability=0.3,
        mirostat=2,
        logit_bias=((13, -math.inf), (42, 1.5)),
        order=DEFAULT_ORDER[::-1],
        seed=3,
    )
    back = SamplerSettings.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s


def test_settings_stored_before_the_new_samplers_load():
    """A chat or settings file written before DRY, XTC, mirostat, bias and order existed."""
    old = {
        "temperature": 0.7,
        "top_k": 30,
        "top_p": 0.9,
        "min_p": 0.1,
        "typical_p": 1.0,
        "repeat_penalty": 1.2,
        "repeat_last_n": 64,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "seed": 11,
        "max_tokens": 256,
    }
    s = SamplerSettings.from_dict(old)
    assert (s.temperature, s.top_k, s.top_p, s.min_p, s.repeat_penalty, s.seed, s.max_tokens) == (
        0.7,
        30,
        0.9,
        0.1,
        1.2,
        11,
        256,
    )
    assert s.order == DEFAULT_ORDER and s.logit_bias == () and s.mirostat == 0 and s.dry_multiplier == 0.0
    s.validated()
    # Damaged new fields fall back to their defaults; the rest is kept.
    broken = SamplerSettings.from_dict({**old, "order": ["top_k", "nope"], "logit_bias": [[1], ["a", 2], [5, 2.0]]})
    assert broken.order == DEFAULT_ORDER and broken.logit_bias == ((5, 2.0),) and broken.top_k == 30


def test_settings_without_the_new_samplers_are_stored_as_before():
    old_keys = {
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "typical_p",
        "repeat_penalty",
        "repeat_last_n",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "max_tokens",
    }
    assert set(SamplerSettings(temperature=0.3).to_dict()) == old_keys
    assert set(SamplerSettings(dry_multiplier=0.8).to_dict()) == old_keys | {"dry_multiplier"}
