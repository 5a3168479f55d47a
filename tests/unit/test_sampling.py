"""Sampler settings and the distribution preview (llama.cpp's filter semantics)."""

from __future__ import annotations

import random

import pytest

from app.core.sampling import DEFAULTS, PRESETS, SamplerSettings, matching_preset, preview_distribution

CANDS = [(1, "a", 5.0), (2, "b", 4.0), (3, "c", 2.0), (4, "d", 0.0), (5, "e", -1.0)]


def test_greedy_keeps_only_the_top_token():
    rows = preview_distribution(CANDS, SamplerSettings(temperature=0.0))
    assert [r.kept for r in rows] == [True, False, False, False, False]
    assert rows[0].p_sampled == 1.0


def test_zero_and_one_mean_off():
    off = SamplerSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0)
    rows = preview_distribution(CANDS, off)
    assert all(r.kept for r in rows)
    # with everything off at temperature 1, sampling follows the model exactly
    for r in rows:
        assert r.p_sampled == pytest.approx(r.p_model)


def test_each_filter_cuts_where_llama_cpp_does():
    assert sum(r.kept for r in preview_distribution(CANDS, SamplerSettings(top_k=2, top_p=1, min_p=0))) == 2
    # top_p: smallest set reaching p; p(a) ~ 0.70, p(a)+p(b) ~ 0.96
    assert sum(r.kept for r in preview_distribution(CANDS, SamplerSettings(top_k=0, top_p=0.9, min_p=0))) == 2
    assert sum(r.kept for r in preview_distribution(CANDS, SamplerSettings(top_k=0, top_p=0.5, min_p=0))) == 1
    # min_p 0.1: keep tokens with p >= 0.1 * p(top) -> logit >= 5 + ln(0.1) = 2.70
    assert sum(r.kept for r in preview_distribution(CANDS, SamplerSettings(top_k=0, top_p=1, min_p=0.1))) == 2


def test_temperature_flattens_or_sharpens():
    hot = preview_distribution(CANDS, SamplerSettings(temperature=2.0, top_k=0, top_p=1, min_p=0))
    cold = preview_distribution(CANDS, SamplerSettings(temperature=0.5, top_k=0, top_p=1, min_p=0))
    assert hot[0].p_sampled < hot[0].p_model < cold[0].p_sampled


def test_presets_and_matching():
    assert matching_preset(DEFAULTS) == "Balanced"
    assert matching_preset(SamplerSettings(**{**PRESETS["Creative"].to_dict(), "seed": 7})) == "Creative"
    assert matching_preset(SamplerSettings(temperature=0.33)) is None


def test_validation_and_clamping():
    with pytest.raises(ValueError, match=r"top_p = 1.5 is out of range; it must be between 0.0 and 1.0"):
        SamplerSettings(top_p=1.5).validated()
    s = SamplerSettings.from_dict({"temperature": 9, "top_k": "12", "seed": 5, "bogus": 1})
    assert s.temperature == 2.0 and s.top_k == 12 and s.seed == 5


def test_seed_resolution():
    assert SamplerSettings(seed=42).resolved_seed() == 42
    rng = random.Random(0)
    seeds = {SamplerSettings().resolved_seed(rng) for _ in range(10)}
    assert len(seeds) == 10
