"""Remote engines' plain values: the URL people type, the stored settings, what replies record.

The protocol against real servers is tested in tests/remote.
"""

from __future__ import annotations

import json

import pytest

from app.core.chat.context import GenerationStats
from app.core.conversations.model import MessageMeta
from app.core.remote import RemoteFacts, RemoteSettings, ServerKind, api_base
from app.core.settings import Settings
from app.remote.probe import listed_n_ctx


@pytest.mark.parametrize(
    ("typed", "base"),
    [
        ("gpu-box:8080", "http://gpu-box:8080/v1"),
        ("http://10.0.0.5:8080", "http://10.0.0.5:8080/v1"),
        ("http://10.0.0.5:8080/", "http://10.0.0.5:8080/v1"),
        ("https://example.org/api/v1/", "https://example.org/api/v1"),
        ("  http://h:11434/v1  ", "http://h:11434/v1"),
    ],
)
def test_the_url_people_type_becomes_the_api_base(typed: str, base: str) -> None:
    assert api_base(typed) == base


@pytest.mark.parametrize("typed", ["", "ftp://h/v1", "http://", "http://h:99999/v1", "http://h:port/v1"])
def test_a_bad_url_is_refused_with_a_reason(typed: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        api_base(typed)


def test_llama_servers_own_routes_hang_off_the_root() -> None:
    ep = RemoteSettings(url="h:8080").endpoint()
    assert ep.base_url == "http://h:8080/v1" and ep.server_root == "http://h:8080"


def test_remote_settings_are_stored_and_read_back() -> None:
    s = Settings(remote=RemoteSettings(url="http://h:8080/v1", api_key="sk-1", model="m"))
    back = Settings.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.remote == s.remote
    assert Settings.from_dict({}).remote == RemoteSettings()  # older files have none
    assert Settings.from_dict({"remote": {"url": 5, "api_key": None}}).remote == RemoteSettings()


def test_a_reply_records_the_server_and_what_it_did_not_report() -> None:
    stats = GenerationStats(generated_tokens=12, decode_s=0.5, unreported=("prefill_s", "cached_tokens", "seed"))
    meta = MessageMeta(
        model_name="SmolLM2", engine="llama-server b1 at http://h:8080/v1", endpoint="http://h:8080/v1", stats=stats
    )
    back = MessageMeta.from_dict(json.loads(json.dumps(meta.to_dict())))
    assert back == meta
    assert not back.stats.reported("prefill_s") and back.stats.reported("decode_s")
    assert "remote h:8080" in back.stats_line()
    assert back.seed_used is None and "seed" not in back.stats_line()  # random on the server, not reported
    old = MessageMeta.from_dict({"engine": "llama-cpp-python 0.3.36", "stats": {"generated_tokens": 3}})
    assert old.endpoint == "" and old.stats.unreported == ()  # replies stored before remote engines: local


def test_provenance_names_the_server_and_its_build() -> None:
    facts = RemoteFacts("http://h:8080/v1", ServerKind.LLAMA_SERVER, ("m",), "m", build_info="b7000-abc")
    assert facts.engine_label == "llama-server b7000-abc at http://h:8080/v1"
    generic = RemoteFacts("http://h:11434/v1", ServerKind.OPENAI_COMPATIBLE, ("llama3",), "llama3")
    assert generic.engine_label == "OpenAI-compatible server at http://h:11434/v1"


@pytest.mark.parametrize(
    ("entry", "n_ctx"),
    [
        ({"id": "m", "max_model_len": 32768}, 32768),  # vLLM
        ({"id": "m", "meta": {"n_ctx": 2048, "n_ctx_train": 8192}}, 2048),  # llama-server: the slot's, not trained
        ({"id": "m", "max_context_length": 4096}, 4096),  # LM Studio
        ({"id": "m", "object": "model"}, 0),  # says nothing
        ({"id": "m", "max_model_len": True, "meta": "x"}, 0),
    ],
)
def test_the_model_list_can_state_n_ctx(entry: dict, n_ctx: int) -> None:
    assert listed_n_ctx(entry) == n_ctx
