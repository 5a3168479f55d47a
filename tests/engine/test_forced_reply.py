"""The benchmark facility GLASSBOX_FORCED_REPLY (app/engine/forced.py): the real engine streams a given text."""

from __future__ import annotations

from app.core import protocol as P
from app.core.chat.context import StopReason
from app.engine.forced import ENV, ForcedTokens
from tests.support.engine import SYSTEM, start_engine

TEXT = "| # | Name |\n|---|---|\n| 1 | alpha `beta` |\n| 2 | gamma |\n\n```python\ndef f(x):\n    return x * 2\n```\n"


def test_forced_tokens_hand_out_the_text_then_the_end_token():
    forced = ForcedTokens([5, 6], end_token=2)
    assert [forced.next(99), forced.next(99), forced.next(99), forced.next(99)] == [5, 6, 2, 2]


def test_engine_streams_the_forced_text_with_one_decode_per_token(smollm2, tmp_path, monkeypatch):
    path = tmp_path / "reply.md"
    path.write_text(TEXT, encoding="utf-8")
    monkeypatch.setenv(ENV, str(path))
    eng = start_engine(smollm2, n_ctx=1024)
    try:
        events: list = []
        fin = eng.generate([SYSTEM, ("user", "Say hi.")], events=events, max_tokens=500, temperature=0.0)
        assert isinstance(fin, P.Finished), fin
        assert fin.text == TEXT
        streamed = "".join(ev.text for ev in events if isinstance(ev, P.TokenEvent))
        assert streamed == TEXT
        assert fin.stats.stop_reason == StopReason.EOS
        n_text = fin.stats.generated_tokens - 1  # the end token is sampled, never evaluated
        assert n_text > 20
        # every forced token went through llama_decode (llama.cpp's own decode counter)
        assert fin.stats.llama_n_decode == n_text
        # max_tokens still ends a forced reply
        fin2 = eng.generate([SYSTEM, ("user", "Again.")], max_tokens=10, temperature=0.0)
        assert isinstance(fin2, P.Finished) and fin2.stats.stop_reason == StopReason.MAX_TOKENS
        assert TEXT.startswith(fin2.text) and 0 < len(fin2.text) < len(TEXT)
    finally:
        eng.host.stop()


def test_without_the_variable_the_model_writes_its_own_reply(smollm2, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    eng = start_engine(smollm2, n_ctx=1024)
    try:
        fin = eng.generate([SYSTEM, ("user", "Say hi.")], max_tokens=40, temperature=0.0)
        assert isinstance(fin, P.Finished), fin
        assert fin.text and fin.text != TEXT[: len(fin.text)]
    finally:
        eng.host.stop()
