"""Prompt-cache reuse after a sampled reply: the next turn evaluates only what is new.

At temperature 1 the model samples token splits the tokenizer would not write
(re-tokenizing the reply's text gives other tokens), so the follow-up's prompt
must be built from the tokens the KV cache holds (app.engine.kv_reuse).
"""

from __future__ import annotations

import pytest

from app.core import protocol as P
from app.core.chat.context import StopReason
from tests.support.engine import SYSTEM

SEEDS = (1, 2, 3, 4, 5, 6)


@pytest.mark.parametrize(
    ("ask", "max_tokens"),
    [
        ("Tell me about your favourite city, with odd words and numbers.", 40),  # ends at max_tokens
        ("Greet me in one short sentence.", 200),  # ends with an end-of-generation token
    ],
)
def test_follow_up_reuses_the_sampled_reply_from_the_cache(fresh_engine, ask, max_tokens):
    eng = fresh_engine(n_ctx=2048)
    eos_seen = False
    for seed in SEEDS:
        eng.host.request(P.ResetContext(eng.host.next_id()))
        first_msgs = [SYSTEM, ("user", ask)]
        first = eng.generate(
            first_msgs, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed, max_tokens=max_tokens
        )
        assert isinstance(first, P.Finished), first
        s1 = first.stats
        # What the cache holds: the prompt and every sampled token it evaluated. An end-of-generation
        # token is sampled but never evaluated; the template writes its own <|im_end|> (evaluated anew).
        eog = s1.stop_reason == StopReason.EOS.value
        eos_seen |= eog
        in_cache = s1.prompt_tokens + s1.generated_tokens - (1 if eog else 0)
        assert s1.context_used == in_cache
        events: list = []
        second = eng.generate(
            [*first_msgs, ("assistant", first.text), ("user", "And its food?")],
            events=events,
            temperature=0.0,
            max_tokens=4,
        )
        assert isinstance(second, P.Finished), second
        prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
        # The whole previous prompt and reply are reused; only the glue and the new message are evaluated.
        assert second.stats.cached_tokens == in_cache, (seed, s1, second.stats)
        new_text = "".join(text for _, text in prepared.new_tokens)
        assert new_text == "<|im_end|>\n<|im_start|>user\nAnd its food?<|im_end|>\n<|im_start|>assistant\n", (
            seed,
            new_text,
        )
        assert second.stats.evaluated_tokens == second.stats.prompt_tokens - second.stats.cached_tokens
    assert eos_seen == (max_tokens == 200), "each case must cover its way of ending"


def test_a_changed_history_is_tokenized_afresh(fresh_engine):
    """Reuse never puts tokens in the prompt that its text does not say."""
    eng = fresh_engine(n_ctx=2048)
    first_msgs = [SYSTEM, ("user", "Name a colour.")]
    first = eng.generate(first_msgs, temperature=1.0, seed=7, max_tokens=12)
    assert isinstance(first, P.Finished), first
    edited = "A colour I like is teal."
    events: list = []
    second = eng.generate(
        [*first_msgs, ("assistant", edited), ("user", "Why?")], events=events, temperature=0.0, max_tokens=4
    )
    assert isinstance(second, P.Finished), second
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    # The previous prompt is reused; the reply text differs from the sampled tokens from some point on,
    # and everything after that point is evaluated as the template renders it.
    assert second.stats.cached_tokens >= first.stats.prompt_tokens
    assert prepared.prompt_text.endswith(
        f"{edited}<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n"
    )
    new_text = "".join(text for _, text in prepared.new_tokens)
    assert prepared.prompt_text.endswith(new_text) and "Why?" in new_text


def test_a_plain_transcript_reply_is_reused_too(gemma):
    """Gemma 3 270M here has no chat template: the plain ``User:`` / ``Assistant:`` transcript.

    The reply is sampled after ``Assistant:`` with its own leading space; the transcript
    renders it back the same way, so the whole reply is reused.
    """
    from tests.support.engine import start_engine

    eng = start_engine(gemma, n_ctx=2048)
    try:
        assert eng.loaded.chat_template is None
        for seed in SEEDS[:3]:
            eng.host.request(P.ResetContext(eng.host.next_id()))
            first_msgs = [("user", "Tell me about your favourite city, with odd words and numbers.")]
            first = eng.generate(first_msgs, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed, max_tokens=40)
            assert isinstance(first, P.Finished), first
            s1 = first.stats
            in_cache = s1.prompt_tokens + s1.generated_tokens - (1 if s1.stop_reason == StopReason.EOS.value else 0)
            events: list = []
            second = eng.generate(
                [*first_msgs, ("assistant", first.text), ("user", "Why?")], events=events, temperature=0.0, max_tokens=4
            )
            assert isinstance(second, P.Finished), second
            prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
            assert second.stats.cached_tokens == in_cache, (seed, s1, second.stats)
            assert "".join(text for _, text in prepared.new_tokens) == "\nUser: Why?\nAssistant:"
    finally:
        eng.host.stop()
