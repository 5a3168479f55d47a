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

The window also sends each stored reply's sampled tokens with its message
(:attr:`~app.core.chat.context.ChatMessage.tokens`; a continued reply's parts joined).
:func:`splice_messages` builds the prompt from those, whatever the cache holds: the
text between replies is tokenized, each reply is its sampled tokens as far as they
spell its text. So every path (a follow-up, a regenerate after a Continue, an edit,
a branch switch, a chat opened again) gives the model the tokens it sampled, and the
KV cache, which holds them too, is reused up to the first real change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.core.chat.context import ChatMessage, Role
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
    kept, pos = spelled_prefix(turn.reply_tokens, rest, vocab)
    tail = rest[pos:].decode("utf-8")
    tail_tokens = tokenize(tail) if tail else []
    if _spelled(tail_tokens, vocab) != rest[pos:]:
        return None
    return [*turn.prompt_tokens, *kept, *tail_tokens]


def spelled_prefix(tokens: Sequence[int], text: bytes, vocab: Vocab) -> tuple[list[int], int]:
    """The longest prefix of ``tokens`` whose bytes start ``text``, cut at a UTF-8 character start.

    A token outside the vocabulary, or one that adds no bytes (an end-of-generation token), ends it.

    Returns:
        ``(those tokens, how many bytes of text they spell)``.
    """
    kept: list[int] = []
    pos = 0
    for tok in tokens:
        if not 0 <= tok < vocab.n_tokens:
            break
        piece = vocab.piece(tok)
        if not piece or text[pos : pos + len(piece)] != piece:
            break
        kept.append(tok)
        pos += len(piece)
    # Never cut inside a UTF-8 character: give back tokens until the cut is at a character start.
    while kept and pos < len(text) and (text[pos] & 0xC0) == 0x80:
        pos -= len(vocab.piece(kept.pop()))
    return kept, pos


def splice_messages(
    messages: Sequence[ChatMessage],
    text: str,
    vocab: Vocab,
    tokenize: Callable[[str], list[int]],
    prompt_tokens: Callable[[str], list[int]],
) -> list[int] | None:
    """The tokens of prompt ``text`` with each reply's sampled tokens (:attr:`ChatMessage.tokens`) in it.

    Each assistant message with tokens is found in ``text`` (its content verbatim, after the
    previous one); its tokens that spell the start of its content stand for it. The text before
    the first is tokenized as a whole prompt (``prompt_tokens``: BOS first when the tokenizer adds
    it), the text between and after them with ``tokenize`` (special tokens parsed, no BOS).

    Returns:
        The prompt's tokens, or None when no message's tokens could be used, or a piece of text
        between them does not tokenize back to itself (then use :func:`splice_prompt` or
        tokenize ``text`` whole).
    """
    out: list[int] = []
    start = 0  # where the text not yet in ``out`` begins (characters)
    used = False
    for m in messages:
        if m.role is not Role.ASSISTANT or not m.tokens or not m.content:
            continue
        at = text.find(m.content, start)
        if at < 0:  # a template that renders replies otherwise (trimmed): this one is tokenized
            continue
        kept, n = spelled_prefix(m.tokens, m.content.encode("utf-8"), vocab)
        if not kept:
            continue
        before = text[start:at]
        if not used:
            out = prompt_tokens(before)
        elif before:
            toks = tokenize(before)
            if _spelled(toks, vocab) != before.encode("utf-8"):
                return None
            out += toks
        out += kept
        used = True
        start = at + len(m.content.encode("utf-8")[:n].decode("utf-8"))
    if not used:
        return None
    tail = text[start:]
    toks = tokenize(tail) if tail else []
    if _spelled(toks, vocab) != tail.encode("utf-8"):
        return None
    return out + toks


def _spelled(tokens: Sequence[int], vocab: Vocab) -> bytes:
    """The bytes ``tokens`` spell, special tokens as their text."""
    return b"".join(vocab.piece(t, special=True) for t in tokens)
