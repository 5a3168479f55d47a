"""Compare two quantizations of one model token by token: answer a :class:`~app.core.quant.comparison.CompareModels`.

The run, in order (the events are :mod:`app.core.quant.comparison`'s):

1. load both models (:class:`~app.engine.quant.model.CompareModel`) and check their vocabularies
   (:func:`app.engine.compat.check_compatible`: ``Failed`` of kind ``incompatible`` naming the check);
2. tokenize the input with model A: a passage as llama-perplexity tokenizes its file, a chat rendered
   with A's chat template as a turn renders it (:class:`~app.engine.prompt.PromptBuilder`);
3. cut it into llama-perplexity's chunks (:func:`app.core.quant.chunks.plan_chunks`) and send
   ``ComparisonStarted``;
4. per chunk: both KV caches cleared, then per ``n_batch`` slice A evaluates it, B evaluates it, and the
   scored rows of both are reduced in blocks (:func:`app.engine.quant.reduce.reduce_block`) into
   :class:`~app.core.quant.comparison.ScoredToken` s and the running sums
   (:class:`~app.core.quant.statistics.KlTally`); ``ComparisonProgressed`` after each slice that scored tokens;
5. each model's decode speed (``decode_tokens`` greedy tokens after the text's first :data:`DECODE_PROMPT`,
   the two models taking turns token by token: :func:`~app.engine.quant.model.decode_speeds`);
6. ``ComparisonFinished`` with the summary.

The cancel flag is read between chunks and slices, and by llama.cpp's abort callback inside each
evaluation: a cancelled run ends with ``Failed`` of kind ``cancelled``, saying how far it got.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

from app.core import protocol as P
from app.core.quant.chunks import MIN_TOKENS, Chunk, batches, plan_chunks, plural, short_passage
from app.core.quant.comparison import (
    Candidate,
    CompareModels,
    ComparisonFinished,
    ComparisonProgressed,
    ComparisonStarted,
    ModelFigures,
    ScoredToken,
)
from app.core.quant.statistics import KlTally, summarize
from app.engine.compat import check_compatible, file_names
from app.engine.errors import CancelFlag, EngineError
from app.engine.prompt import PromptBuilder, compile_template
from app.engine.quant.model import Cancelled, CompareModel, Tokenizer, decode_speeds, tokenize
from app.engine.quant.reduce import BlockFigures, block_rows, reduce_block
from app.engine.threads import auto_threads, auto_threads_batch
from app.engine.vocab import Vocab

log = logging.getLogger(__name__)

#: Tokens of the text evaluated before that decode.
DECODE_PROMPT = 16


def compare_models(req: CompareModels, *, emit: Callable[[object], None], cancel: CancelFlag) -> ComparisonFinished:
    """Run the comparison ``req`` (see the module docstring), sending its progress with ``emit``.

    Raises:
        EngineError: ``bad_settings`` (both or neither of text and messages; n_ctx below 3; a passage of
            fewer than n_ctx tokens: :func:`~app.core.quant.chunks.short_passage`; a chat of fewer than 3
            tokens), ``incompatible``, ``bad_model`` / ``load`` (a file), ``template`` (the chat
            template refused the chat), ``cancelled`` (the cancel flag), ``internal`` (llama_decode failed).
    """
    t0 = time.perf_counter()
    if (req.text is None) == (req.messages is None):
        raise EngineError(P.FailureKind.BAD_SETTINGS, "A comparison needs a text or a chat, not both and not neither.")
    if req.n_ctx < MIN_TOKENS:
        raise EngineError(P.FailureKind.BAD_SETTINGS, f"n_ctx {req.n_ctx} is too small: use at least {MIN_TOKENS}.")
    models: list[CompareModel] = []
    run: _Run | None = None
    try:
        a = CompareModel(req.path_a, cancel)
        models.append(a)
        b = CompareModel(req.path_b, cancel)
        models.append(b)
        found = check_compatible(a.model, b.model, *file_names(req.path_a, req.path_b))
        if found is not None:
            raise EngineError(
                P.FailureKind.INCOMPATIBLE,
                f"These two models cannot be compared token by token: {found.message}. Choose two files of the "
                "same model (two quantizations of one GGUF).",
            )
        tokens = _tokens(req, a)
        n_vocab = min(a.n_vocab, b.n_vocab)
        beyond = next((t for t in tokens if t >= n_vocab), None)
        if beyond is not None:  # the sizes may differ by up to 128 (llama.cpp's check); the text uses one of those
            raise EngineError(
                P.FailureKind.INCOMPATIBLE,
                f"The text uses token {beyond:,} ({a.vocab.display(beyond)!r}), which only one of the two models has "
                f"({a.n_vocab:,} and {b.n_vocab:,} tokens). Compare on a text without it.",
            )
        refusal = short_passage(len(tokens), req.n_ctx) if req.text is not None else ""
        if refusal:
            raise EngineError(P.FailureKind.BAD_SETTINGS, refusal)
        chunks = plan_chunks(len(tokens), req.n_ctx)
        if not chunks:
            raise EngineError(
                P.FailureKind.BAD_SETTINGS,
                f"The chat is {plural(len(tokens), 'token')}; a comparison needs at least {MIN_TOKENS}.",
            )
        n_ctx = chunks[0].size
        n_batch = max(1, min(req.n_batch, n_ctx))
        threads = req.n_threads or auto_threads()
        threads_batch = req.n_threads or auto_threads_batch()
        prompt = _chunk_tokens(tokens, Chunk(0, min(DECODE_PROMPT, len(tokens))), a.vocab)
        room = max(n_ctx, len(prompt) + req.decode_tokens)  # the decode-speed run after the chunks fits too
        for m in models:
            m.open(room, n_batch, threads, threads_batch)
        run = _Run(req.request_id, a, b, tokens, sum(c.n_scored for c in chunks), emit=emit, cancel=cancel, t0=t0)
        emit(
            ComparisonStarted(
                req.request_id,
                total=run.total,
                token_ids=tuple(tokens),
                token_texts=run.texts,
                scored=tuple(c.scored for c in chunks),
                n_chunks=len(chunks),
                n_ctx=n_ctx,
            )
        )
        for chunk in chunks:
            run.chunk(chunk, n_batch)
        speeds = decode_speeds(models, prompt, req.decode_tokens)
        ppl_a, ppl_b = run.tally.ppl_a(), run.tally.ppl_b()
        summary = summarize(
            run.tally,
            _figures(a, speeds[0], ppl_a),
            _figures(b, speeds[1], ppl_b),
            n_chunks=len(chunks),
            n_ctx=n_ctx,
            elapsed_s=time.perf_counter() - t0,
            n_ctx_asked=req.n_ctx,
        )
        log.info(
            "comparison %s: %d tokens, %d chunks, mean KL divergence %.6f, PPL ratio %.6f in %.1f s",
            req.request_id,
            summary.n_scored,
            summary.n_chunks,
            summary.kl_mean,
            summary.ppl_ratio,
            summary.elapsed_s,
        )
        return ComparisonFinished(req.request_id, summary)
    except Cancelled:
        done = f"{run.done:,} of {run.total:,}" if run is not None else "0"
        raise EngineError(P.FailureKind.CANCELLED, f"The comparison was stopped after {done} scored tokens.") from None
    finally:
        for m in models:
            m.close()


def _tokens(req: CompareModels, a: CompareModel) -> list[int]:
    """The input's tokens with model A: a passage as ``common_tokenize(ctx, text, true)`` (llama-perplexity),
    a chat as a turn's prompt (:meth:`PromptBuilder.tokens_for`, the generation prompt at the end).

    Raises:
        EngineError: ``template`` (the template does not compile or refuses the chat).
    """
    if req.text is not None:
        return tokenize(a.vocab, req.text, add_special=True, parse_special=False)
    vocab = a.vocab
    bos_text = vocab.text(vocab.bos) if vocab.bos >= 0 else ""
    eos_text = vocab.text(vocab.eos) if vocab.eos >= 0 else ""
    template = a.info.chat_template
    formatter = compile_template(template, eos_text, bos_text) if template else None
    builder = PromptBuilder(
        Tokenizer(vocab), vocab, formatter, (), req.n_ctx, a.info.context_length, bos_text=bos_text, eos_text=eos_text
    )
    builder.use_template(req.chat_template)
    tokens, _text = builder.tokens_for(list(req.messages or ()), continue_last=False)
    return tokens


def _chunk_tokens(tokens: list[int], chunk: Chunk, vocab: Vocab) -> list[int]:
    """A chunk's tokens as evaluated: its first replaced by BOS when the vocabulary adds it (perplexity.cpp)."""
    out = tokens[chunk.start : chunk.start + chunk.size]
    if vocab.add_bos and vocab.bos >= 0:
        out[0] = vocab.bos
    return out


def _figures(m: CompareModel, decode_tok_s: float, ppl: tuple[float, float]) -> ModelFigures:
    prefill = m.prefill_tokens / (m.prefill_ns / 1e9) if m.prefill_ns else 0.0
    return ModelFigures(m.path, m.file_bytes, m.weights_bytes, prefill, decode_tok_s, ppl[0], ppl[1])


class _Run:
    """The state of one comparison while its chunks are scored: the tally, tokens done, texts."""

    def __init__(
        self,
        request_id: int,
        a: CompareModel,
        b: CompareModel,
        tokens: list[int],
        total: int,
        *,
        emit: Callable[[object], None],
        cancel: CancelFlag,
        t0: float,
    ) -> None:
        self.request_id = request_id
        self.a, self.b = a, b
        self.tokens = tokens
        self.emit = emit
        self.cancel = cancel
        self.t0 = t0
        self.tally = KlTally()
        self.done = 0
        self.total = total
        self.texts = tuple(a.vocab.display(t) for t in tokens)
        self._rows = min(block_rows(a.n_vocab), block_rows(b.n_vocab))

    def chunk(self, chunk: Chunk, n_batch: int) -> None:
        """Score one chunk, sending a ``ComparisonProgressed`` after each ``llama_decode`` slice that scored tokens
        (one per chunk when n_batch is n_ctx).

        Raises:
            Cancelled: the cancel flag was set.
        """
        if self.cancel.is_set():
            raise Cancelled
        a, b = self.a, self.b
        evaluated = _chunk_tokens(self.tokens, chunk, a.vocab)
        first, last = chunk.first, chunk.size - 1  # logits of positions first .. last - 1 are scored
        a.clear()
        b.clear()
        for begin, end in batches(chunk, n_batch):
            for m in (a, b):
                m.prefill_ns += int(m.decode(evaluated[begin:end], begin, first, last) * 1e9)
                m.prefill_tokens += end - begin
            lo, hi = max(begin, first), min(end, last)
            if hi <= lo:
                continue
            scored: list[ScoredToken] = []
            for r0 in range(0, hi - lo, self._rows):
                n = min(self._rows, hi - lo - r0)
                pos = lo + r0  # the first position of the block; it predicts the token after it
                nxt = self.tokens[chunk.start + pos + 1 : chunk.start + pos + 1 + n]
                row = pos - begin  # its index in the batch (llama_get_logits_ith's i); the rows after it follow
                fig = reduce_block(a.logits(row, n), b.logits(row, n), nxt)
                scored.extend(self._scored(fig, chunk.start + pos + 1, nxt))
            self.done += len(scored)
            elapsed = time.perf_counter() - self.t0
            self.emit(ComparisonProgressed(self.request_id, self.done, self.total, elapsed, tuple(scored)))

    def _scored(self, fig: BlockFigures, index0: int, nxt: list[int]) -> list[ScoredToken]:
        """The block's positions as ScoredTokens (and added to the tally)."""
        out = []
        va, vb = self.a.vocab, self.b.vocab
        for i, tok in enumerate(nxt):
            nll_a, nll_b, kl, same = float(fig.nll_a[i]), float(fig.nll_b[i]), float(fig.kl[i]), bool(fig.same_top1[i])
            self.tally.add(nll_a, nll_b, kl, same)
            top_a = _candidates(va, fig.top_a_ids[i], fig.top_a_p[i])
            top_b = _candidates(vb, fig.top_b_ids[i], fig.top_b_p[i])
            out.append(
                ScoredToken(
                    index=index0 + i,
                    token_id=tok,
                    text=self.texts[index0 + i],
                    kl=kl,
                    same_top1=same,
                    p_a=math.exp(-nll_a),
                    p_b=math.exp(-nll_b),
                    top_a=top_a,
                    top_b=top_b,
                )
            )
        return out


def _candidates(vocab: Vocab, ids: Sequence[int], ps: Sequence[float]) -> tuple[Candidate, ...]:
    return tuple(Candidate(int(t), vocab.display(int(t)), float(p)) for t, p in zip(ids, ps, strict=True))
