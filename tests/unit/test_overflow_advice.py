"""A refused over-long prompt's advice (app/core/chat/overflow.py): raise n_ctx only where it would help."""

from __future__ import annotations

from app.core.chat.overflow import overflow_message


def test_a_message_longer_than_the_trained_context_is_not_told_to_raise_n_ctx():
    # the review's paste: 37,059 tokens into SmolLM2 (trained for 8,192) at n_ctx 4,096
    text = overflow_message(37_100, 37_059, 4096, 8192)
    assert "Raise n_ctx" not in text and "raising n_ctx would not help" in text
    assert "37,059" in text and "8,192" in text
    assert "shorten the message" in text and "longer context" in text


def test_a_message_that_fits_the_trained_context_is_told_how_far_to_raise_n_ctx():
    text = overflow_message(5_020, 5_000, 4096, 8192)
    assert "Raise n_ctx above 5,000" in text and "trained for 8,192" in text and "shorten" in text


def test_a_long_conversation_is_told_to_raise_n_ctx_only_while_the_trained_context_holds_it():
    fits = overflow_message(6_000, 300, 4096, 8192)
    assert "Raise n_ctx" in fits and "Drop oldest turns" in fits
    too_long = overflow_message(9_000, 300, 4096, 8192)
    assert "Raise n_ctx" not in too_long and "Drop oldest turns" in too_long and "new chat" in too_long


def test_an_unknown_trained_context_keeps_the_n_ctx_advice():
    text = overflow_message(700, 700, 512, 0)
    assert "Raise n_ctx above 700" in text and "trained" not in text


def test_both_counts_are_written_alike():
    """Review of issue 20 (low): "The conversation is 9022 tokens … holds 4096 … takes 9,022 tokens"."""
    text = overflow_message(9_022, 9_022, 4096, 8192)
    assert text.startswith("The conversation is 9,022 tokens but the context holds 4,096 (n_ctx).")
