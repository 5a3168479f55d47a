"""Speculative decoding's plain values: JSON round trips, old data read as off / None."""

from __future__ import annotations

import json

from app.core.chat.context import GenerationStats, LoadSettings
from app.core.conversations.model import MessageMeta
from app.core.gguf.gguf_facts import GGUFInfo
from app.core.quant.compatibility import CompatCheck
from app.core.speculative.settings import Drafter, SpeculationSettings
from app.core.speculative.stats import RoundEnd, SpeculationStats
from app.core.speculative.vocab_header import header_incompatibility


def _stats() -> SpeculationStats:
    return SpeculationStats(
        drafter=Drafter.DRAFT_MODEL,
        draft_max=4,
        rounds=3,
        drafted=7,
        accepted=5,
        accepted_at=(3, 2),
        drafted_at=(3, 3, 1),
        round_ends=((RoundEnd.MISMATCH, 2), (RoundEnd.P_MIN, 1)),
        draft_s=0.1,
        verify_s=0.2,
        sample_s=0.01,
        accepted_tokens=(1, 2, 5, 6, 7),
        rejected=((3, " foo"), (8, "bar")),
        weight_bytes_per_token=1234.5,
        draft_weight_bytes_per_token=678.5,
    )


def test_load_settings_round_trip_keeps_speculation() -> None:
    spec = SpeculationSettings(True, Drafter.DRAFT_MODEL, 5, 0.5, 2, "/m/draft.gguf")
    s = LoadSettings(n_ctx=2048, speculation=spec)
    back = LoadSettings.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    assert "speculation: draft model" in s.terms()
    assert "speculation: draft model" in s.differences(LoadSettings(n_ctx=2048))


def test_settings_saved_before_speculation_read_as_off() -> None:
    old = LoadSettings(n_ctx=2048).to_dict()
    del old["speculation"]
    assert LoadSettings.from_dict(old).speculation == SpeculationSettings()
    assert not LoadSettings.from_dict(old).speculation.enabled


def test_bad_speculation_values_fall_back_and_clamp() -> None:
    s = SpeculationSettings.from_dict(
        {"enabled": "yes", "drafter": "nonsense", "draft_max": 1000, "p_min": 7, "ngram": 0, "draft_model": 3}
    )
    assert s == SpeculationSettings(False, Drafter.PROMPT_LOOKUP, 64, 1.0, 1, "")


def test_generation_stats_store_speculation_and_old_replies_read_none() -> None:
    stats = GenerationStats(generated_tokens=9, speculation=_stats())
    meta = MessageMeta(stats=stats)
    back = MessageMeta.from_dict(json.loads(json.dumps(meta.to_dict())))
    assert back.stats == stats
    assert back.stats is not None and back.stats.speculation is not None
    assert back.stats.speculation.acceptance_rate == 5 / 7
    assert back.stats.speculation.ended(RoundEnd.MISMATCH) == 2
    plain = json.loads(json.dumps(MessageMeta(stats=GenerationStats(generated_tokens=3)).to_dict()))
    del plain["stats"]["speculation"]  # a reply stored before speculation existed
    old = MessageMeta.from_dict(plain)
    assert old.stats is not None and old.stats.speculation is None


def test_damaged_speculation_stats_drop_bad_entries() -> None:
    s = SpeculationStats.from_dict({"drafter": "draft_model", "rounds": "x", "round_ends": [["what", 1], ["p_min", 2]]})
    assert s is not None
    assert s.rounds == 0 and s.round_ends == ((RoundEnd.P_MIN, 2),)
    assert SpeculationStats.from_dict("garbage") is None


def test_a_draft_model_counts_in_the_fit_verdict(smollm2) -> None:
    from app.core.gguf.gguf_info import read_gguf_info
    from app.core.hardware.fit import SystemMemory, Verdict, fit_verdict

    info = read_gguf_info(str(smollm2))
    alone = fit_verdict(info, 2048, memory=SystemMemory(ram_total=10**9, ram_available=10**9))
    with_draft = fit_verdict(info, 2048, memory=SystemMemory(ram_total=10**9, ram_available=10**9), draft_bytes=10**9)
    assert alone.verdict is not Verdict.DOES_NOT_FIT and with_draft.verdict is Verdict.DOES_NOT_FIT
    assert "draft model" in with_draft.breakdown() and "draft model" not in alone.breakdown()


def _header(path: str, n_vocab: int, **md: object) -> GGUFInfo:
    base = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2}
    return GGUFInfo(path, 0, 3, {**base, **md}, {"tokenizer.ggml.tokens": n_vocab}, (), 0)


def test_the_header_check_refuses_what_both_headers_state_differently() -> None:
    model = _header("/m/SmolLM2.gguf", 49152, **{"tokenizer.ggml.add_bos_token": False})
    assert header_incompatibility(model, _header("/d/SmolLM2-Q8_0.gguf", 49152)) is None  # add_bos unstated: no refusal
    gemma = _header("/d/gemma.gguf", 262144, **{"tokenizer.ggml.model": "llama"})
    bad = header_incompatibility(model, gemma)
    assert bad is not None and bad.check is CompatCheck.VOCAB_TYPE
    assert bad.message.startswith(
        "gemma.gguf cannot be the draft model of SmolLM2.gguf: different tokenizers: "
        "SmolLM2.gguf uses byte-level BPE, gemma.gguf uses SentencePiece (SPM). A draft model must share"
    )
    bigger = header_incompatibility(model, _header("/d/big.gguf", 49152 + 129))
    assert (
        bigger is not None
        and bigger.check is CompatCheck.VOCAB_SIZE
        and "49,152 tokens in SmolLM2.gguf" in bigger.message
    )
    assert header_incompatibility(model, _header("/d/near.gguf", 49152 + 128)) is None  # llama.cpp allows 128
    adds = {"tokenizer.ggml.add_bos_token": True}
    bos = header_incompatibility(
        _header("/m/a.gguf", 100, **adds), _header("/d/b.gguf", 100, **adds, **{"tokenizer.ggml.bos_token_id": 7})
    )
    assert bos is not None and bos.check is CompatCheck.BOS and "token 1 in a.gguf, token 7 in b.gguf" in bos.message
    flag = header_incompatibility(model, _header("/d/c.gguf", 49152, **adds))
    assert flag is not None and "SmolLM2.gguf does not add BOS, c.gguf adds BOS" in flag.message


def test_the_draft_length_setting_and_the_measured_costs_are_stored() -> None:
    fixed = SpeculationSettings(True, Drafter.PROMPT_LOOKUP, 8, adaptive=False)
    assert SpeculationSettings.from_dict(json.loads(json.dumps(fixed.to_dict()))) == fixed
    assert "fixed draft length" in fixed.terms() and "fixed draft length" not in SpeculationSettings(True).terms()
    assert SpeculationSettings.from_dict({"enabled": True}).adaptive  # saved before the setting: adaptive
    stats = SpeculationStats(Drafter.PROMPT_LOOKUP, 8, adaptive=True, verify_steps=(1.0, 1.22, 0.0, 2.59))
    back = SpeculationStats.from_dict(json.loads(json.dumps(stats.to_dict())))
    assert back == stats
    damaged = SpeculationStats.from_dict({"drafter": "prompt_lookup", "verify_steps": [1.0, "x", True, 1.5]})
    assert damaged is not None and damaged.verify_steps == (1.0, 1.5) and not damaged.adaptive
