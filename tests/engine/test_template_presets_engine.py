"""The chat template presets through the engine's own check (RenderPrompt with an override) on
real Gemma 3 270M, whose test GGUF has no chat template: each renders, and Gemma's preset turns
into Gemma's special turn tokens."""

from __future__ import annotations

import pytest

from app.core import protocol as P
from app.core.chat.template_presets import PRESETS, TemplateFamily, preset
from tests.support.engine import start_engine


@pytest.fixture(scope="module")
def gemma_engine(gemma):
    eng = start_engine(gemma, n_ctx=1024)
    yield eng
    eng.host.stop()


def test_every_preset_passes_the_engines_check_and_gemmas_uses_its_turn_tokens(gemma_engine):
    assert gemma_engine.loaded.chat_template is None  # a base model: the plain transcript
    for p in PRESETS:
        shown = gemma_engine.render((), chat_template=p.source)  # the check "Use" runs: the sample conversation
        assert isinstance(shown, P.PromptRendered), (p.family, getattr(shown, "message", shown))
        assert shown.source is P.TemplateSource.OVERRIDE and shown.sample and p.turn_marker in shown.text
    gemma = gemma_engine.render((), chat_template=preset(TemplateFamily.GEMMA).source)
    assert isinstance(gemma, P.PromptRendered)
    specials = [piece.text for piece in gemma.pieces if piece.special]
    assert specials[0] == "<bos>" and specials.count("<start_of_turn>") == 4 and specials.count("<end_of_turn>") == 3
