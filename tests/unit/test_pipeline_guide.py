"""The How it works guide's sections as data: in order, every one linked to a live view, a server's
model without file figures (none made up), and no model said plainly."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.inspection.pipeline_guide import NO_FILE, NO_MODEL, LiveView, number, pipeline_guide
from app.core.remote import RemoteFacts, ServerKind
from app.core.sampling.params import SamplerSettings
from app.remote.host import remote_model_loaded

FILE_SECTIONS = {"embeddings", "rope", "blocks", "attention", "ffn", "head", "decode", "kv", "quant"}


def test_without_a_model_every_model_section_says_load_a_model():
    sections = pipeline_guide(None, SamplerSettings())
    assert [s.key for s in sections][:3] == ["tokens", "embeddings", "rope"] and sections[-1].key == "training"
    assert all(s.live for s in sections) and {v for s in sections for v in s.live} == set(LiveView)
    for s in sections:
        assert (("figures", NO_MODEL) in s.figures) == (s.key != "serving"), s.key


def test_a_servers_model_shows_no_file_figures_and_no_zeros_made_up():
    facts = RemoteFacts("http://h:8080/v1", ServerKind.LLAMA_SERVER, ("m",), "m", n_ctx=8192)
    loaded = remote_model_loaded(1, P.LoadModel(1, "m", LoadSettings()), facts, 0.1)
    sections = {s.key: dict(s.figures) for s in pipeline_guide(loaded, SamplerSettings())}
    assert {k for k, f in sections.items() if f.get("figures") == NO_FILE} == FILE_SECTIONS
    assert sections["context"]["n_ctx (loaded)"] == "8,192 tokens"
    assert sections["training"]["name"] == "m"
    assert not any(v.startswith("0 ") for f in sections.values() for v in f.values())


def test_numbers_are_written_whole_when_whole():
    assert (number(1_000_000.0), number(10000), number(0.5), number(30.0)) == ("1,000,000", "10,000", "0.5", "30")
