"""The local API's request checks, settings and response bodies (no server, no model)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage, GenerationStats, Role, StopReason
from app.core.server_settings import BusyPolicy, ServerSettings
from app.core.settings import Settings, SettingsStore
from app.core.speculative.settings import Drafter
from app.core.speculative.stats import SpeculationStats
from app.server.errors import ApiError
from app.server.gateway import ApiJob, ModelCard
from app.server.responses import ReplyBuilder, piece_bytes, timings
from app.server.schema import API_DEFAULT_SAMPLER, Endpoint, parse_request

CHAT = {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}


def test_chat_request_maps_to_an_external_generate():
    r = parse_request(
        {**CHAT, "temperature": 0, "top_p": 0.5, "min_p": 0.1, "top_k": 7, "seed": 42, "max_tokens": 9, "stop": "x"},
        Endpoint.CHAT,
    )
    g = r.generate
    assert g.messages == (ChatMessage(Role.SYSTEM, "Be brief."), ChatMessage(Role.USER, "Hi"))
    assert (g.sampler.temperature, g.sampler.top_p, g.sampler.min_p, g.sampler.top_k) == (0, 0.5, 0.1, 7)
    assert (g.sampler.seed, g.sampler.max_tokens, g.stop_strings) == (42, 9, ("x",))
    assert g.external and g.raw_prompt is None and g.context_policy == "stop" and g.top_candidates == 0
    assert not r.stream and not r.logprobs


def test_defaults_are_llama_servers_not_the_sampler_panels():
    g = parse_request(CHAT, Endpoint.CHAT).generate
    assert g.sampler == API_DEFAULT_SAMPLER
    assert (g.sampler.temperature, g.sampler.top_k, g.sampler.repeat_penalty, g.sampler.max_tokens) == (
        0.8,
        40,
        1.0,
        -1,
    )


def test_text_parts_and_developer_role():
    body = {
        "messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    }
    assert parse_request(body, Endpoint.CHAT).generate.messages == (ChatMessage(Role.SYSTEM, "ab"),)


def test_logprobs_ask_for_candidates_on_every_token():
    r = parse_request({**CHAT, "logprobs": True, "top_logprobs": 3}, Endpoint.CHAT)
    assert r.logprobs and r.top_logprobs == 3 and r.generate.top_candidates == 3 and r.generate.candidates_every_token
    r = parse_request({**CHAT, "logprobs": True}, Endpoint.CHAT)
    assert r.generate.top_candidates == 1 and not r.generate.candidates_every_token
    c = parse_request({"prompt": "Once", "logprobs": 2, "stream": True}, Endpoint.COMPLETIONS)
    assert c.generate.raw_prompt == "Once" and c.top_logprobs == 2 and c.stream and c.generate.messages == ()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({**CHAT, "temperature": 5}, "temperature"),
        ({**CHAT, "temperature": "hot"}, "temperature"),
        ({**CHAT, "max_tokens": 0}, "max_tokens"),
        ({**CHAT, "max_tokens": 40_000}, "max_tokens"),  # above the engine's 32768: named, not a bare 400
        ({**CHAT, "top_k": 500}, "top_k"),  # above the engine's 200
        ({**CHAT, "repeat_penalty": 0.5}, "repeat_penalty"),  # below the engine's 1
        ({**CHAT, "top_k": 1.5}, "top_k"),
        ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({**CHAT, "stop": [1]}, "stop"),
        ({**CHAT, "n": 2}, "n"),
        ({**CHAT, "tools": [{"type": "function"}]}, "tools[0].function"),
        ({**CHAT, "functions": [{"name": "f"}]}, "functions"),
        ({**CHAT, "top_logprobs": 2}, "top_logprobs"),
        ({**CHAT, "stream": "yes"}, "stream"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content"),
    ],
)
def test_bad_chat_requests_name_the_field(body, param):
    with pytest.raises(ApiError) as err:
        parse_request(body, Endpoint.CHAT)
    assert err.value.status == 400 and err.value.param == param
    assert err.value.body()["error"]["type"] == "invalid_request_error" and err.value.body()["error"]["message"]


def test_bad_completion_requests():
    for body in ({"prompt": ""}, {"prompt": ["a", "b"]}, {"prompt": "a", "logprobs": 21}, [1]):
        with pytest.raises(ApiError) as err:
            parse_request(body, Endpoint.COMPLETIONS)
        assert err.value.status == 400


def test_server_settings_off_by_default_round_trip_and_bad_values(tmp_path):
    s = Settings()
    assert (
        not s.server.enabled and s.server.host == "127.0.0.1" and s.server.cors_origins == () and not s.server.api_key
    )
    on = ServerSettings(
        enabled=True, port=9000, expose_lan=True, cors_origins=("http://a",), busy_policy=BusyPolicy.REFUSE
    )
    on = on.with_key()
    assert on.api_key.startswith("gb-") and on.with_key() == on and on.host == "0.0.0.0"
    store = SettingsStore(tmp_path / "settings.json")
    store.save(Settings(server=on))
    assert store.load().server == on
    assert json.loads((tmp_path / "settings.json").read_text())["server"]["busy_policy"] == "refuse"
    bad = ServerSettings.from_dict({"enabled": "yes", "port": 70000, "busy_policy": "maybe", "cors_origins": "x"})
    assert bad == ServerSettings()
    assert Settings.from_dict({"version": 2}).server == ServerSettings()  # a file from before the API
    # parallel sequences (issue 23 §4): kept when 1 to 16, else the default 4 (a file from before has none)
    assert ServerSettings.from_dict({"parallel": 8}).parallel == 8 and ServerSettings().parallel == 1
    assert [ServerSettings.from_dict({"parallel": v}).parallel for v in (0, 17, True, "4", None)] == [1] * 5
    assert ServerSettings.from_dict(ServerSettings(parallel=1).to_dict()).parallel == 1


def _job(body, endpoint):
    loop = asyncio.new_event_loop()
    try:
        return ApiJob(parse_request(body, endpoint), "127.0.0.1:1", loop)
    finally:
        loop.close()


MODEL = ModelCard("smol", "/m/smol.gguf", 2048, (2,), 0)
STATS = GenerationStats(
    prompt_tokens=30, cached_tokens=10, evaluated_tokens=20, prefill_s=0.5, ttft_s=0.6, generated_tokens=5, decode_s=0.2
)


def test_timings_follow_llama_server():
    t = timings(STATS, 0.25)
    assert (t["prompt_n"], t["cache_n"], t["predicted_n"]) == (20, 10, 5)
    assert t["prompt_ms"] == 500 and t["prompt_per_second"] == 40 and t["predicted_ms"] == 200
    assert t["predicted_per_second"] == pytest.approx(20.0) and t["queued_ms"] == 250 and t["ttft_ms"] == 600
    assert "draft_n" not in t and "draft_n_accepted" not in t  # not speculated


def test_timings_of_a_speculated_reply_carry_llama_servers_draft_counts():
    spec = SpeculationStats(Drafter.PROMPT_LOOKUP, 4, rounds=3, drafted=9, accepted=7)
    t = timings(replace(STATS, speculation=spec), 0.0)
    assert (t["draft_n"], t["draft_n_accepted"]) == (9, 7)


def test_stream_sends_text_held_back_for_a_stop_string_in_the_last_chunk():
    b = ReplyBuilder(_job({**CHAT, "stream": True}, Endpoint.CHAT), MODEL)
    toks = [P.TokenEvent(1, "Hel", 5, "Hel", 0, 0.1, 10), P.TokenEvent(1, "", 6, "lo", 1, 0.2, 11)]
    chunk = b.text_chunk(toks)
    assert chunk["choices"][0]["delta"] == {"content": "Hel"} and chunk["object"] == "chat.completion.chunk"
    assert b.text_chunk([P.TokenEvent(1, "", 2, "", 2, 0.3, 12)]) is None  # the end token adds nothing
    last = b.last_chunk(P.Finished(1, "Hello", STATS), 0.0)
    assert last["choices"][0]["delta"] == {"content": "lo"} and last["choices"][0]["finish_reason"] == "stop"
    assert b.sent_text == "Hello"


def test_whole_completion_body_with_logprobs():
    b = ReplyBuilder(_job({"prompt": "x", "logprobs": 1}, Endpoint.COMPLETIONS), MODEL)
    b.take(
        P.TokenEvent(1, "A", 5, "A", 0, 0.1, 3, p=0.5, candidates=((5, "A", 1.0),), logsumexp=1.0 + 0.6931471805599453)
    )
    b.take(P.TokenEvent(1, "", 2, "", 1, 0.2, 4, p=0.9))  # the end token: not in logprobs
    body = b.completion(P.Finished(1, "A", GenerationStats(generated_tokens=2, stop_reason=StopReason.MAX_TOKENS)), 0)
    ch = body["choices"][0]
    assert ch["text"] == "A" and ch["finish_reason"] == "length" and body["id"].startswith("cmpl-")
    lp = ch["logprobs"]
    assert lp["tokens"] == ["A"] and lp["token_logprobs"][0] == pytest.approx(-0.6931, abs=1e-3)
    assert lp["top_logprobs"][0]["A"] == pytest.approx(-0.6931, abs=1e-3) and lp["text_offset"] == [0]
    assert body["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 2,
        "total_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_piece_bytes_reads_character_fragments():
    assert piece_bytes("⟨F0 9F⟩") == [0xF0, 0x9F] and piece_bytes("é") == [0xC3, 0xA9]
