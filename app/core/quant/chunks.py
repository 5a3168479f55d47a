"""How a tokenized text is cut into chunks and which positions are scored: ``llama-perplexity``'s plan.

Source: llama.cpp's tools/perplexity/perplexity.cpp, ``perplexity()`` (which writes the base model's
log-probabilities for ``--kl-divergence-base``) and ``kl_divergence()``: ``n_chunk = tokens.size() / n_ctx``
chunks of n_ctx tokens, the tokens past the last whole chunk unused; in each chunk the first token is
replaced by BOS when the vocabulary adds it; logits are requested from position ``first = n_ctx / 2``
on, and the logits at positions ``first`` .. ``n_ctx - 2`` are scored against the tokens at
``first + 1`` .. ``n_ctx - 1`` (``n_ctx - 1 - first`` tokens per chunk). llama-perplexity refuses a
text shorter than ``2 * n_ctx`` tokens; :func:`plan_chunks` cuts one of ``n_ctx`` tokens or more the
same way, and makes a shorter one (a short chat) one chunk of its own length. A passage shorter than
n_ctx is refused before that (:func:`short_passage`): only a chat, usually shorter than any useful
n_ctx, is scored as one shorter chunk, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The fewest tokens a text can have to score one: a chunk of 3 scores its last token.
MIN_TOKENS = 3
#: The fewest scored tokens llama-perplexity does statistics on (``kl_divergence``: ``if (kld.count < 100)
#: return; // we do not wish to do statistics on so few values``): under it no scoreboard placement is made.
MIN_VERDICT_TOKENS = 100


@dataclass(frozen=True)
class Chunk:
    """One chunk of the text.

    Attributes:
        start: the index of its first token in the whole tokenized text.
        size: its tokens (n_ctx, or the whole text when it is shorter).
    """

    start: int
    size: int

    @property
    def first(self) -> int:
        """The first position (in the chunk) whose logits are read: ``size // 2``."""
        return self.size // 2

    @property
    def scored(self) -> tuple[int, int]:
        """The indices in the whole text of the tokens scored, ``(start, stop)``, stop exclusive:
        ``start + first + 1`` .. ``start + size``."""
        return self.start + self.first + 1, self.start + self.size

    @property
    def n_scored(self) -> int:
        """Tokens scored: ``size - 1 - first``."""
        return self.size - 1 - self.first


def plan_chunks(n_tokens: int, n_ctx: int) -> tuple[Chunk, ...]:
    """The chunks of a text of ``n_tokens`` tokens at ``n_ctx`` (see the module docstring).

    Returns:
        ``n_tokens // n_ctx`` chunks of ``n_ctx`` tokens; one chunk of ``n_tokens`` when the text is shorter
        than ``n_ctx``; none when it has fewer than :data:`MIN_TOKENS` tokens.

    Raises:
        ValueError: ``n_ctx`` below :data:`MIN_TOKENS`.
    """
    if n_ctx < MIN_TOKENS:
        raise ValueError(f"n_ctx must be at least {MIN_TOKENS}, not {n_ctx}")
    if n_tokens < MIN_TOKENS:
        return ()
    if n_tokens < n_ctx:
        return (Chunk(0, n_tokens),)
    return tuple(Chunk(i * n_ctx, n_ctx) for i in range(n_tokens // n_ctx))


def batches(chunk: Chunk, n_batch: int) -> tuple[tuple[int, int], ...]:
    """The ``llama_decode`` calls of one chunk: ``(begin, end)`` positions in the chunk, ``n_batch`` at a time
    (perplexity.cpp's ``num_batches`` loop with one sequence per batch)."""
    n = max(1, n_batch)
    return tuple((b, min(b + n, chunk.size)) for b in range(0, chunk.size, n))


def plural(n: int, word: str) -> str:
    """``"1 token"``, ``"2 tokens"``, ``"1,024 tokens"``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def short_passage(n_tokens: int, n_ctx: int) -> str:
    """Why a passage of ``n_tokens`` tokens cannot be compared at ``n_ctx``, and what to do, or "" when it can
    (at least ``n_ctx`` tokens: one chunk; llama-perplexity asks for ``2 * n_ctx``, two chunks)."""
    if n_tokens >= n_ctx:
        return ""
    if n_tokens < 2 * MIN_TOKENS:
        return f"The passage is {plural(n_tokens, 'token')}: too short to compare. Paste a longer text."
    fits = n_tokens // 2
    return (
        f"The passage is {plural(n_tokens, 'token')}, fewer than n_ctx {n_ctx:,}: each chunk needs n_ctx tokens "
        f"(llama-perplexity asks for 2 × n_ctx, {2 * n_ctx:,}). Set n_ctx to {n_tokens:,} or less "
        f"({fits:,} gives two chunks, as llama-perplexity), or use a longer text."
    )
