"""Every token's alternatives, and a reply branched from one of them.

Alternatives: when a :class:`~app.core.protocol.Generate` asks for ``alternatives`` (N), the
reply's per-step logits store (:class:`~app.engine.funnel_store.ReplyLogits`, the one the
funnel uses: the decode thread only copies the logits, a worker thread reduces them to the
top 64 and the log-sum-exp) is read when the reply ends, and :func:`reply_alternatives`
turns it into a :class:`~app.core.sampling.alternatives.ReplyAlternatives` (the top N of each step,
the entropy, the prompt's tail for penalties and DRY, each distinct token's text) that goes
back with :class:`~app.core.protocol.Finished`. No third path over the logits.

Branch from an alternative: ``Generate.reply_prefix`` is the reply's first k tokens and the
alternative chosen for token k. :func:`prefixed_tokens` appends them to the prompt's tokens;
the session keeps the longest prefix the KV cache holds (:func:`app.engine.prefill.rewind_to_prefix`,
``llama_memory_seq_rm`` of the rest), so after the reply being branched only the new token
is evaluated, and decoding goes on from there with the reply's sampler settings.
:func:`prefix_text` seeds the text stream with the prefix's bytes, so the reply's text
starts with them (a prefix ending inside a UTF-8 character is finished by the next token).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.chat.textstream import TextStream
from app.core.protocol import FailureKind
from app.core.sampling.alternatives import MAX_HISTORY, MAX_PER_TOKEN, ReplyAlternatives
from app.engine.errors import EngineError
from app.engine.funnel_store import ReplyLogits
from app.engine.vocab import Vocab


def reply_alternatives(store: ReplyLogits, per_token: int, vocab: Vocab, prompt: Sequence[int]) -> ReplyAlternatives:
    """The top ``per_token`` candidates of every step ``store`` recorded (call after ``store.close()``).

    Args:
        store: the reply's per-step logits (closed: every step reduced).
        per_token: N, at most :data:`MAX_PER_TOKEN` (and the store's top 64).
        vocab: for the tokens' display texts.
        prompt: the tokens before the first step; the last :data:`MAX_HISTORY` are kept.

    Under an output constraint each step keeps its drawn token: the last of the N when it is not among
    the top N (a token the grammar forced can rank far below them).
    """
    k = max(1, min(per_token, MAX_PER_TOKEN))
    ids_list, logits_list, lse, entropy = store.reduced()
    n = min(len(ids_list), store.n_steps)
    tokens = tuple(int(t) for t in store.tokens[:n])
    ids: list[int] = []
    logits: list[float] = []
    for s in range(n):
        row_ids = ids_list[s][:k].tolist()
        row_logits = logits_list[s][:k].tolist()
        if store.gbnf is not None and tokens[s] not in row_ids:
            # Under a grammar the drawn token can rank below the top N: it takes the last place (its logit is
            # kept last in the reduced row), so a stored step's funnel shows it surviving the grammar.
            at = ids_list[s].tolist().index(tokens[s]) if tokens[s] in ids_list[s] else -1
            if at >= 0:
                room = min(len(row_ids), k - 1)
                row_ids = [*row_ids[:room], tokens[s]]
                row_logits = [*row_logits[:room], float(logits_list[s][at])]
        pad = k - len(row_ids)
        ids.extend(row_ids + [-1] * pad)
        logits.extend(row_logits + [0.0] * pad)
    texts = {t: vocab.display(t) for t in {*ids, *tokens} if t >= 0}
    return ReplyAlternatives(
        k,
        tokens,
        tuple(lse[:n]),
        tuple(entropy[:n]),
        tuple(int(t) for t in ids),
        tuple(float(x) for x in logits),
        tuple(int(t) for t in prompt[-MAX_HISTORY:]),
        texts,
    )


def no_alternatives(per_token: int, prompt: Sequence[int]) -> ReplyAlternatives:
    """The alternatives of a reply that generated no token (a branch ending with the token chosen)."""
    return ReplyAlternatives(
        max(1, min(per_token, MAX_PER_TOKEN)), (), (), (), (), (), tuple(int(t) for t in prompt[-MAX_HISTORY:])
    )


def prefixed_tokens(prompt: Sequence[int], prefix: Sequence[int], vocab: Vocab, n_ctx: int) -> list[int]:
    """The prompt's tokens followed by a reply's prefix (see the module docstring).

    Raises:
        EngineError: ``bad_settings`` for a token id outside the vocabulary or an end-of-generation
            token before the last; ``context_overflow`` when prompt and prefix do not fit in n_ctx.
    """
    n_vocab = vocab.n_tokens
    for i, t in enumerate(prefix):
        if not 0 <= t < n_vocab:
            raise EngineError(FailureKind.BAD_SETTINGS, f"Token {t} is not in this model's vocabulary ({n_vocab}).")
        if i < len(prefix) - 1 and vocab.is_eog(t):
            raise EngineError(FailureKind.BAD_SETTINGS, "A reply cannot go on after an end-of-generation token.")
    out = [*prompt, *prefix]
    if len(out) >= n_ctx:
        raise EngineError(
            FailureKind.CONTEXT_OVERFLOW,
            f"The prompt and the reply up to the chosen token are {len(out)} tokens; the context holds {n_ctx} (n_ctx).",
        )
    return out


def prefix_text(stream: TextStream, prefix: Sequence[int], vocab: Vocab) -> str:
    """Push the prefix's bytes into ``stream`` (the decode loop's); the text now safe to show."""
    return "".join(stream.push(vocab.piece(t)).text for t in prefix)
