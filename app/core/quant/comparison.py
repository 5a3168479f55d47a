"""Comparing two quantizations of one model, token by token: the request, its events and their values.

The window asks a fresh engine process (:class:`~app.engine.host.EngineHost`) for a
:class:`CompareModels`; the engine answers, in order:

1. one :class:`ComparisonStarted`: every token of the tokenized input (its ids and texts, scored
   or not, for the strip view) and which index ranges will be scored;
2. :class:`ComparisonProgressed` after each chunk (after each ``llama_decode`` slice that scored tokens when
   n_batch is below n_ctx): the tokens scored since the last one (only the
   compact per-token figures below, never a distribution), with tokens done, total and time;
3. one terminal event: :class:`ComparisonFinished` with the :class:`ComparisonSummary`, or
   ``Failed`` (kind ``incompatible`` when the two vocabularies differ, naming the check; ``bad_model``,
   ``load``, ``template``, ``bad_settings`` for a text too short; ``cancelled`` when the cancel flag
   stopped it).

The chunking is ``llama-perplexity --kl-divergence``'s (tools/perplexity/perplexity.cpp,
``kl_divergence``): the text is tokenized once (BOS first when the vocabulary adds it), cut into
``len(tokens) // n_ctx`` chunks of n_ctx tokens (the tail left over is not scored), each chunk's
first token replaced by BOS when the vocabulary adds it, and only the second half of each chunk
scored: the logits at positions ``n_ctx // 2`` .. ``n_ctx - 2`` predicting the tokens at
``n_ctx // 2 + 1`` .. ``n_ctx - 1``. A passage shorter than n_ctx tokens is refused (``bad_settings``,
naming both numbers); a chat shorter than n_ctx (the usual case) is one chunk of its own length, scored
the same way, and the summary says so (``n_ctx_asked``); llama-perplexity refuses both. With at
least ``2 * n_ctx`` tokens the scored positions are exactly llama-perplexity's.

Model A is the base (llama-perplexity's ``--kl-divergence-base``), model B the one compared with it
(its ``--kl-divergence`` run): KL divergence is KL(P_a || P_b) and Δp is p_b - p_a, as there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.chat.context import ChatMessage


@dataclass(frozen=True)
class CompareModels:
    """Run one text through two GGUFs and compare their next-token distributions at every scored position.

    Exactly one of ``text`` and ``messages`` is given. Answered as the module docstring says.

    Attributes:
        path_a: the base model's GGUF (e.g. the Q8_0 or F16 file).
        path_b: the model compared with it (e.g. the Q4_K_M file of the same model).
        text: a passage (pasted or read from a file), tokenized as llama-perplexity tokenizes its
            file (BOS added when the vocabulary adds it, special-token texts not parsed).
        messages: a chat, rendered with model A's chat template as a turn renders it (special-token
            texts parsed, the generation prompt at the end; replies that carry their sampled tokens
            keep them).
        chat_template: the person's chat template override for model A (Jinja2 source); None: the GGUF's.
        n_ctx: tokens per chunk (llama-perplexity's ``-c``).
        n_batch: tokens per ``llama_decode`` call (``-b``); at most n_ctx is used.
        n_threads: CPU threads for both models (0: the engine's default).
        decode_tokens: greedy tokens decoded per model after the chunks, for its decode tok/s (0: not measured).
    """

    request_id: int
    path_a: str
    path_b: str
    text: str | None
    messages: tuple[ChatMessage, ...] | None
    chat_template: str | None
    n_ctx: int = 512
    n_batch: int = 512
    n_threads: int = 0
    decode_tokens: int = 32


@dataclass(frozen=True)
class Candidate:
    """One of a model's most likely next tokens.

    Attributes:
        token_id: the token.
        text: its text for display (special tokens as their text, UTF-8 fragments as ``⟨F0 9F⟩``).
        p: its probability under the model (softmax of the raw logits), 0..1.
    """

    token_id: int
    text: str
    p: float


@dataclass(frozen=True)
class ScoredToken:
    """The two models' figures for one scored token (the token that actually comes next).

    Attributes:
        index: the token's position in the whole tokenized input (an index into
            ``ComparisonStarted.token_texts``).
        token_id, text: the token (text as :class:`Candidate` shows it).
        kl: KL(P_a || P_b) of the two next-token distributions at the position before it, nats.
        same_top1: both models' most likely token there is the same.
        p_a, p_b: each model's probability of this token, 0..1.
        top_a, top_b: each model's 5 most likely tokens there, most likely first.
    """

    index: int
    token_id: int
    text: str
    kl: float
    same_top1: bool
    p_a: float
    p_b: float
    top_a: tuple[Candidate, ...]
    top_b: tuple[Candidate, ...]

    @property
    def dp(self) -> float:
        """Δp: p_b - p_a, as llama-perplexity's ``p_diff`` (``expf(-nll) - expf(-nll_base)``)."""
        return self.p_b - self.p_a

    @property
    def surprisal_a(self) -> float:
        """-log2 p_a, bits (inf when p_a is 0)."""
        return _bits(self.p_a)

    @property
    def surprisal_b(self) -> float:
        """-log2 p_b, bits (inf when p_b is 0)."""
        return _bits(self.p_b)


def _bits(p: float) -> float:
    return -math.log2(p) if p > 0 else math.inf


@dataclass(frozen=True)
class ComparisonStarted:
    """The input is tokenized and both models are loaded; scoring starts.

    Sent once, before any :class:`ComparisonProgressed`.

    Attributes:
        total: tokens that will be scored (``ComparisonProgressed.total``).
        token_ids: every token of the tokenized input, scored or not (BOS first when added).
        token_texts: their texts for display, as :class:`Candidate` shows them.
        scored: the index ranges scored, one ``(start, stop)`` per chunk (stop exclusive).
        n_chunks: chunks of n_ctx tokens.
        n_ctx: tokens per chunk (the request's, or the whole text when it is shorter).
    """

    request_id: int
    total: int
    token_ids: tuple[int, ...]
    token_texts: tuple[str, ...]
    scored: tuple[tuple[int, int], ...]
    n_chunks: int
    n_ctx: int


@dataclass(frozen=True)
class ComparisonProgressed:
    """Tokens were scored: a chunk (or, with n_batch below n_ctx, one ``llama_decode`` slice of one).

    Attributes:
        done: tokens scored so far.
        total: tokens to score in all.
        elapsed_s: seconds since the request reached the engine (time left is about
            ``elapsed_s * (total - done) / done`` once scoring has started).
        tokens: the tokens scored since the last event, in order.
    """

    request_id: int
    done: int
    total: int
    elapsed_s: float
    tokens: tuple[ScoredToken, ...]


@dataclass(frozen=True)
class ModelFigures:
    """One model's figures, measured in the comparison's run.

    Attributes:
        path: the GGUF.
        file_bytes: the file's size (every part of a split model), bytes.
        weights_bytes: the weights in memory (``llama_model_size``), bytes.
        prefill_tok_s: tokens per second over the chunks' evaluations (``llama_decode`` calls timed).
        decode_tok_s: tokens per second of a short greedy decode (one token per ``llama_decode``; 0 when the
            request asked for none).
        ppl: perplexity over the scored tokens; ppl_err its error estimate (llama-perplexity's).
    """

    path: str
    file_bytes: int
    weights_bytes: int
    prefill_tok_s: float
    decode_tok_s: float
    ppl: float
    ppl_err: float


@dataclass(frozen=True)
class ComparisonSummary:
    """The comparison over the whole text, each figure as ``llama-perplexity --kl-divergence`` computes it
    (:func:`app.core.quant.statistics.summarize` cites the lines).

    Attributes:
        a, b: each model's figures.
        n_scored: tokens scored.
        n_chunks: chunks of n_ctx tokens.
        n_ctx: tokens per chunk.
        ppl_ratio, ppl_ratio_err: PPL(B) / PPL(A) and its error.
        ln_ratio, ln_ratio_err: ln(PPL(B) / PPL(A)) and its error.
        kl_mean, kl_mean_err: mean KL(P_a || P_b), nats, and its error.
        kl_p99, kl_p999: 99th and 99.9th percentile KL divergence, nats.
        kl_max, kl_median: the largest and the median KL divergence, nats.
        same_top1, same_top1_err: the fraction of positions whose top-1 token is the same (0..1) and
            its binomial error.
        rms_dp, rms_dp_err: the root mean square of Δp (0..1) and its error.
        elapsed_s: seconds the whole comparison took (loads, chunks, decodes).
        dp_mean, dp_mean_err: the mean Δp (p_b - p_a, -1..1: below 0, B gives the text less probability)
            and its error.
        n_ctx_asked: the request's n_ctx (0: the same as ``n_ctx``); larger than ``n_ctx`` when a chat
            shorter than it was scored as one chunk of its own length.
    """

    a: ModelFigures
    b: ModelFigures
    n_scored: int
    n_chunks: int
    n_ctx: int
    ppl_ratio: float
    ppl_ratio_err: float
    ln_ratio: float
    ln_ratio_err: float
    kl_mean: float
    kl_mean_err: float
    kl_p99: float
    kl_p999: float
    kl_max: float
    kl_median: float
    same_top1: float
    same_top1_err: float
    rms_dp: float
    rms_dp_err: float
    elapsed_s: float
    dp_mean: float = 0.0
    dp_mean_err: float = 0.0
    n_ctx_asked: int = 0

    @property
    def shrunk(self) -> bool:
        """The text was shorter than the n_ctx asked, so it was one chunk of its own length."""
        return self.n_ctx_asked > self.n_ctx


@dataclass(frozen=True)
class ComparisonFinished:
    """The comparison is done (terminal event of :class:`CompareModels`)."""

    request_id: int
    summary: ComparisonSummary
