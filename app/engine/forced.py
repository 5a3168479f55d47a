"""Forced reply tokens: a benchmark and test facility, never reachable from the UI.

``bench/stream_render.py --engine real`` needs the real engine to stream 5,000 tokens
of a given Markdown text (a table, a code block...), which no small model writes by
itself. When the engine process's environment names a UTF-8 text file in
``GLASSBOX_FORCED_REPLY``, every turn reads that file, tokenizes it with the loaded
model's vocabulary (no special tokens, no BOS) and the decode loop replaces each
token the sampler chain picked with the next token of that text; after the last one
it picks the end-of-generation token.

What stays real: prefill, the sampler chain running on the real logits
(``llama_sampler_sample``, top candidates when asked), detokenization, stop checks,
batching to the UI, and one ``llama_decode`` per token (``llm.eval``) with the forced
token, so the KV cache holds the forced text and every step costs what a real step
costs. What is forced: which token is kept. Nothing in the app sets the variable;
the window's settings cannot reach it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

ENV = "GLASSBOX_FORCED_REPLY"


class ForcedTokens:
    """The scripted tokens of one turn, handed out in order.

    Args:
        tokens: token ids of the forced text.
        end_token: the token picked once they are used up (the model's end-of-generation token).
    """

    def __init__(self, tokens: Sequence[int], end_token: int) -> None:
        self.tokens = list(tokens)
        self.end_token = end_token
        self.pos = 0

    def next(self, sampled: int) -> int:
        """The token to keep in place of ``sampled`` (what the sampler chain picked)."""
        if self.pos >= len(self.tokens):
            return self.end_token
        token = self.tokens[self.pos]
        self.pos += 1
        return token


def forced_from_env(tokenize: Callable[[str], list[int]], end_token: int) -> ForcedTokens | None:
    """The forced tokens for this turn when ``GLASSBOX_FORCED_REPLY`` names a file, else None.

    Args:
        tokenize: the loaded model's tokenizer (text -> token ids, no special tokens).
        end_token: the model's end-of-generation token id.

    Raises:
        OSError: the file named cannot be read (the turn fails with an internal error).
    """
    path = os.environ.get(ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return ForcedTokens(tokenize(text), end_token)
