"""Through the window: every path sends a reply back as the tokens the model sampled (issue 20, §4.1).

A continued reply's tokens are its first part's sampled tokens and the continuation's, kept
joined with the reply; the window sends each stored reply's tokens with Generate, so a regenerate
after a Continue, or a follow-up once the KV cache holds another chat, gives the model exactly
what it sampled (not the reply re-tokenized from its text) and reuses the cache where it can.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.core.chat.context import Role, StopReason
from tests.support.window import reply_over, send, stats_shown_done, wait_ms

SEEDS = (1, 2, 3, 4, 5, 6)


def _run(qtbot, window, start, message_id: int) -> object:
    """Start a reply with ``start(message_id)`` (a controller call) and wait until the window shows it over."""
    with qtbot.waitSignal(window.engine.generation_finished, timeout=wait_ms(window)) as blocker:
        assert start(message_id)
    qtbot.waitUntil(lambda: reply_over(window) and stats_shown_done(window), timeout=wait_ms(window))
    return blocker.args[0]


def _sampler(window, **values) -> None:
    panel = window.sampler_panel
    panel.set_settings(replace(panel.settings(), **values), emit=True)


def _contains(seq: list[int], part: list[int]) -> bool:
    n = len(part)
    return any(seq[i : i + n] == part for i in range(len(seq) - n + 1))


@pytest.mark.timeout(240)
def test_regenerate_after_continue_and_a_later_turn_see_the_sampled_tokens(qtbot, window):
    chat = window.chat
    prepared: list = []
    window.engine.prompt_prepared.connect(prepared.append)
    for seed in SEEDS:
        window.new_chat()
        # A sampled first reply (temperature 1 samples token splits the tokenizer would not write).
        _sampler(window, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed, max_tokens=40)
        send(qtbot, window, "Tell me about your favourite city, with odd words and numbers.")
        # A greedy second reply cut by max_tokens, then continued.
        _sampler(window, temperature=0.0, max_tokens=12)
        cut = send(qtbot, window, "Say more.")
        assert cut.stats.stop_reason == StopReason.MAX_TOKENS.value, cut.stats
        conv = chat.conversation_id
        first, second = [m for m in chat.store.active_path(conv) if m.role is Role.ASSISTANT]
        _sampler(window, max_tokens=60)
        _run(qtbot, window, chat.continue_reply, second.id)
        drawn = {m.id: chat.store.alternatives(m.id).tokens for m in (first, second)}
        assert len(drawn[second.id]) > 12  # the first part's tokens and the continuation's, joined

        # Regenerate the continued reply: its prompt is the one the KV cache holds, so only its
        # last token is evaluated again (before the fix the first reply was re-tokenized from its text).
        _run(qtbot, window, chat.regenerate, second.id)
        p = prepared[-1]
        assert (p.cached_tokens, p.to_evaluate) == (p.prompt_tokens - 1, 1), (seed, p.prompt_tokens, p.cached_tokens)

        # The cache now holds another chat; back in this one (on the continued branch), a follow-up
        # is evaluated again after the system prompt, and holds each reply exactly as the model sampled it.
        window.new_chat()
        send(qtbot, window, "Hi.")
        window.open_conversation(conv)
        chat.switch_branch(second.id)
        send(qtbot, window, "Why?")
        p = prepared[-1]
        ids = [t for t, _ in p.new_tokens]
        assert len(ids) == p.to_evaluate == p.prompt_tokens - p.cached_tokens  # the system prompt is reused
        for mid, toks in drawn.items():
            # All but the last (an end-of-generation token, never sent back: the template writes its own).
            assert _contains(ids, list(toks[:-1])), (seed, mid)
