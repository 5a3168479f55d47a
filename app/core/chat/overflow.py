"""What a refused prompt (it does not fit n_ctx) tells the person to do, from the numbers.

Raising n_ctx helps only up to the context the model was trained for: past it llama.cpp still runs,
but the model was never trained on those positions (RoPE positions beyond ``n_ctx_train``; llama.cpp
warns "n_ctx_per_seq > n_ctx_train"). So a message longer than the trained context is told to be
shortened or given to a model with a longer context, and the n_ctx advice is kept for when it helps
(review of issue 20: a 37,059-token paste was told to raise n_ctx on a model trained for 8,192).
"""

from __future__ import annotations

DROP_OLDEST = '"Drop oldest turns and go on"'  # the context policy's label in the Model panel


def overflow_message(n_full: int, message_tokens: int, n_ctx: int, trained_ctx: int) -> str:
    """The refusal of a prompt that does not fit, with what would fit it.

    Args:
        n_full: tokens of the whole prompt (the conversation as rendered).
        message_tokens: tokens of the system prompt and the last message alone.
        n_ctx: the context loaded, tokens.
        trained_ctx: the model's trained context (GGUF ``context_length``), tokens; 0 when unknown.

    Returns:
        One paragraph: both counts, then the advice.
    """
    head = f"The conversation is {n_full:,} tokens but the context holds {n_ctx:,} (n_ctx)."
    trained = f"this model was trained for {trained_ctx:,} tokens" if trained_ctx > 0 else ""
    if message_tokens >= n_ctx:
        alone = f"Your message alone takes {message_tokens:,} tokens."
        if trained_ctx > 0 and message_tokens >= trained_ctx:
            advice = (
                f"Even the context {trained} cannot hold it, so raising n_ctx would not help: "
                "shorten the message, or use a model with a longer context."
            )
        else:
            where = f" ({trained})" if trained else ""
            advice = f"Raise n_ctx above {message_tokens:,} in the Model panel{where}, or shorten the message."
        return f"{head} {alone} {advice}"
    if trained_ctx > 0 and n_full >= trained_ctx:
        return (
            f"{head} The whole conversation is longer than the context {trained}: set the context policy to "
            f"{DROP_OLDEST} (Model panel) so the oldest messages are left out, or start a new chat."
        )
    where = f" ({trained})" if trained else ""
    return (
        f"{head} Raise n_ctx in the Model panel{where}, or set the context policy to {DROP_OLDEST} "
        "so the oldest messages are left out."
    )
