"""The two drafters: prompt lookup (no second model) and a draft model (a second GGUF, its own context).

Each proposes up to ``k`` tokens that continue the context (the prompt, the reply so far, the
model's pending token last) and says why it stopped (:class:`~app.core.speculative.stats.RoundEnd`:
``DRAFT_MAX`` when it gave all it had or all it was asked for, ``P_MIN`` when the draft model's
confidence fell below ``p_min`` (at its first token too), ``NO_DRAFT`` when it had nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from app.core import protocol as P
from app.core.speculative.stats import RoundEnd
from app.engine.batch import fill_batch
from app.engine.errors import EngineError
from app.engine.prefill import common_prefix_len

Draft = tuple[list[int], RoundEnd]


class PromptLookup:
    """Prompt lookup: the continuation of the most recent earlier occurrence of the context's last ``ngram`` tokens.

    llama.cpp's ``ngram-simple`` (``common_ngram_simple_draft``, common/ngram-map.cpp): the exact
    n-gram, searched backwards, the tokens after it proposed; no match, no draft. Not llama-cpp-python's
    ``LlamaPromptLookupDecoding``: when the n-gram does not occur it falls back to shorter ones down to a
    single token, so nearly every round drafts; on ordinary chat prompts that drafted 264 tokens for
    120 generated with 6 % accepted (SmolLM2, bench/speculative.py), and on a CPU a verified batch of 9
    costs ~4 one-token steps, so the reply ran at half speed. Here a round without a match is a plain
    one-token step. numpy over the whole context, ~0.1 ms for 2,000 tokens.

    Args:
        ngram: the n-gram matched, tokens.
    """

    weights_bytes = 0  #: no second model: no weights read
    forward_passes = 0  #: no llama_decode ever

    def __init__(self, ngram: int) -> None:
        self._ngram = ngram

    def draft(self, context: Sequence[int], k: int) -> Draft:
        """Up to ``k`` tokens continuing ``context`` (``NO_DRAFT`` when its last n-gram occurs nowhere earlier)."""
        n = self._ngram
        if k <= 0 or len(context) <= n:
            return [], RoundEnd.NO_DRAFT
        ids = np.asarray(context, dtype=np.int32)
        windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)  # every n-gram but the last one
        hits = np.flatnonzero((windows == ids[-n:]).all(axis=1))
        if hits.size == 0:
            return [], RoundEnd.NO_DRAFT
        start = int(hits[-1]) + n
        return [int(t) for t in ids[start : start + k]], RoundEnd.DRAFT_MAX

    def prepare(self, context: Sequence[int]) -> None:
        """Nothing to read ahead: the n-gram search reads the context each round."""

    def close(self) -> None:
        """Nothing to free."""


class DraftModel:
    """A second GGUF that drafts greedily, with its own llama.cpp context and KV cache.

    Its cache follows the context by common prefix: each :meth:`draft` removes what differs
    (``llama_memory_seq_rm``: the rejected tail of the last round) and evaluates what is new (the
    model's accepted tokens and its token, in batches of ``n_batch``), then drafts one token per
    ``llama_decode`` while its top token's probability is at least ``p_min``, as llama.cpp's draft
    loop does (the vendored common/speculative.cpp: greedy, and a top token under p_min ends the
    draft without being kept).

    Args:
        path: the draft GGUF (already checked by Glassbox's GGUF checks).
        n_ctx: its context, tokens (the model's).
        n_batch: tokens per ``llama_decode`` when catching up.
        n_threads, n_threads_batch: its threads.
        n_gpu_layers: layers offloaded (0 on a CPU-only build).
        p_min: the draft's minimum top-token probability to go on.

    Raises:
        EngineError: ``load`` when llama.cpp refuses the file or the context (memory).
    """

    def __init__(
        self,
        path: str,
        *,
        n_ctx: int,
        n_batch: int,
        n_threads: int,
        n_threads_batch: int,
        n_gpu_layers: int,
        p_min: float,
    ) -> None:
        self.path = path
        self._p_min = p_min
        self._n_batch = n_batch
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = n_gpu_layers
        self.model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), mparams)
        if not self.model:
            raise EngineError(P.FailureKind.LOAD, f"llama.cpp could not load the draft model {Path(path).name}.")
        self.ctx: Any = None
        self._batch: Any = None
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = min(n_batch, 512)
        params.n_seq_max = 1
        params.n_threads = n_threads
        params.n_threads_batch = n_threads_batch
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        if not self.ctx:
            self.close()
            raise EngineError(
                P.FailureKind.LOAD,
                f"llama.cpp could not create a context of {n_ctx} tokens for the draft model {Path(path).name}.",
            )
        self.n_ctx = int(llama_cpp.llama_n_ctx(self.ctx))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model)))
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._held: list[int] = []  # the tokens its KV cache holds, in order
        self.forward_passes = 0  # its llama_decode calls so far (each reads every weight once)

    @property
    def n_params(self) -> int:
        """Its parameters."""
        return int(llama_cpp.llama_model_n_params(self.model))

    @property
    def weights_bytes(self) -> int:
        """Its weights in memory, bytes (``llama_model_size``)."""
        return int(llama_cpp.llama_model_size(self.model))

    def _decode(self, tokens: Sequence[int], pos0: int) -> None:
        """Evaluate ``tokens`` at ``pos0...`` with logits for the last one only."""
        batch = self._batch
        last = pos0 + len(tokens) - 1
        fill_batch(batch, tokens, pos0, logits=lambda pos: pos == last)
        rc = int(llama_cpp.llama_decode(self.ctx, batch))
        self.forward_passes += 1
        if rc != 0:
            raise EngineError(P.FailureKind.INTERNAL, f"the draft model's llama_decode returned {rc} at {pos0}.")
        self._held[pos0:] = list(tokens)

    def _sync(self, context: Sequence[int]) -> None:
        """Make the KV cache hold ``context`` (keep the common prefix, evaluate the rest, the last
        token always evaluated so its logits are there)."""
        keep = min(common_prefix_len(self._held, context), len(context) - 1)
        if keep < len(self._held):
            mem = llama_cpp.llama_get_memory(self.ctx)
            if not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
                llama_cpp.llama_memory_clear(mem, True)
                keep = 0
            del self._held[keep:]
        for i in range(keep, len(context), self._n_batch):
            self._decode(context[i : i + self._n_batch], i)

    def prepare(self, context: Sequence[int]) -> None:
        """Read the prompt ahead, before the reply's first token: the draft model's prompt processing is
        part of the prefill (the time to first token), not of the first round's drafting."""
        if 0 < len(context) < self.n_ctx:
            self._sync(context)

    def draft(self, context: Sequence[int], k: int) -> Draft:
        """Up to ``k`` greedy tokens continuing ``context`` while the top token's probability >= p_min.

        The probability is the softmax of the draft's logits at that token (float64 over the vocabulary).
        """
        if k <= 0 or len(context) + k > self.n_ctx:
            return [], RoundEnd.NO_DRAFT
        self._sync(context)
        out: list[int] = []
        while len(out) < k:
            ptr = llama_cpp.llama_get_logits_ith(self.ctx, -1)
            logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
            tok = int(np.argmax(logits))
            p = 1.0 / float(np.exp(logits.astype(np.float64) - float(logits[tok])).sum())
            if p < self._p_min:
                return out, RoundEnd.P_MIN
            out.append(tok)
            if len(out) < k:
                self._decode([tok], len(context) + len(out) - 1)
        return out, RoundEnd.DRAFT_MAX

    def close(self) -> None:
        """Free the batch, the context and the model."""
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx is not None:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        if self.model is not None:
            llama_cpp.llama_model_free(self.model)
            self.model = None
