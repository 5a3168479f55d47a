"""Through the window: a follow-up to a sampled reply reuses the whole previous turn from the KV cache.

The window sends the reply back as the text it stored; the engine finds the tokens it
sampled for that text in its cache (app.engine.kv_reuse), so only the template's
glue and the new message are evaluated.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.core.chat.context import StopReason
from tests.support.window import send


@pytest.mark.timeout(90)  # 29 s in the suite on this machine (tests/ durations, 2 cores)
def test_a_follow_up_evaluates_only_the_new_message(qtbot, window):
    panel = window.sampler_panel
    for seed in (1, 2, 3, 4, 5, 6):
        window.new_chat()
        panel.set_settings(
            replace(panel.settings(), temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed, max_tokens=40),
            emit=True,
        )
        first = send(qtbot, window, "Tell me about your favourite city, with odd words and numbers.")
        s1 = first.stats
        in_cache = s1.prompt_tokens + s1.generated_tokens - (1 if s1.stop_reason == StopReason.EOS.value else 0)
        prepared: list = []
        window.engine.prompt_prepared.connect(prepared.append)
        second = send(qtbot, window, "Why?")
        window.engine.prompt_prepared.disconnect(prepared.append)
        assert second.stats.cached_tokens == in_cache, (seed, s1, second.stats)
        assert second.stats.evaluated_tokens == second.stats.prompt_tokens - in_cache
        new_text = "".join(text for _, text in prepared[-1].new_tokens)
        assert new_text == "<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n", new_text
