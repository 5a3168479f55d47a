"""Prompt-cache reuse across turns: the next prompt starts with the tokens the KV cache holds.

After a reply the KV cache holds the turn's prompt tokens and the reply tokens
exactly as they were sampled. The next turn's prompt contains the same reply
as text, and tokenizing that text again does not always give the sampled
tokens back: at temperature > 0 a model often samples an unusual split
(``" hel" "lo"`` where the tokenizer writes ``" hello"``), and from that
token on the token prefix, and with it the cache, would be lost.

So the next prompt is built from the cache's own tokens as far as their text
matches the newly rendered prompt, and only the rest (the template's
end-of-turn glue, the new user message, the assistant header) is tokenized:

* reused: the previous prompt's tokens, when the new prompt text starts with
  the previous prompt text; then each reply token in the cache while its bytes
  continue the new prompt text (never cutting a UTF-8 character);
* tokenized anew: everything after that. The end-of-generation token the model
  sampled is never evaluated, so it is not in the cache; the template writes
  its own end-of-turn text (``<|im_end|>``), tokenized with the rest. A
  template that renders the reply differently (Gemma 3's trims it, for
  example) ends the reuse where the texts part.

The spliced tokens are used only when the rest's tokens spell exactly the rest's
text (a tokenizer that adds a space at the start of a text would not), so the
prompt always says what the template rendered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.vocab import Vocab


@dataclass(frozen=True)
class CachedTurn:
    """What the KV cache holds after a turn, and the text it stands for.

    Attributes:
        prompt_text: the turn's rendered prompt.
        prompt_tokens: the prompt's tokens as evaluated (BOS included).
        reply_tokens: the sampled reply tokens evaluated after the prompt, in order.
    """

    prompt_text: str
    prompt_tokens: tuple[int, ...]
    reply_tokens: tuple[int, ...]


def splice_prompt(turn: CachedTurn, text: str, vocab: Vocab, tokenize: Callable[[str], list[int]]) -> list[int] | None:
    """The tokens of prompt ``text``, reusing ``turn``'s cached tokens where their text matches.

    Args:
        turn: the KV cache's contents after the previous turn.
        text: the new rendered prompt.
        vocab: the model's vocabulary (token bytes).
        tokenize: text to tokens (special tokens parsed, no BOS added).

    Returns:
        The prompt's tokens, or None when ``text`` does not start with the previous
        prompt's text or the rest does not tokenize back to itself (then tokenize
        ``text`` whole).
    """
    if not text.startswith(turn.prompt_text):
        return None
    rest = text[len(turn.prompt_text) :].encode("utf-8")
    kept: list[int] = []
    pos = 0
    for tok in turn.reply_tokens:
        piece = vocab.piece(tok)
        if not piece or rest[pos : pos + len(piece)] != piece:
            break
        kept.append(tok)
        pos += len(piece)
    # Never cut inside a UTF-8 character: give back tokens until the cut is at a character start.
    while kept and pos < len(rest) and (rest[pos] & 0xC0) == 0x80:
        pos -= len(vocab.piece(kept.pop()))
    tail = rest[pos:].decode("utf-8")
    tail_tokens = tokenize(tail) if tail else []
    if _spelled(tail_tokens, vocab) != rest[pos:]:
        return None
    return [*turn.prompt_tokens, *kept, *tail_tokens]


def _spelled(tokens: Sequence[int], vocab: Vocab) -> bytes:
    """The bytes ``tokens`` spell, special tokens as their text."""
    return b"".join(vocab.piece(t, special=True) for t in tokens)
