"""Embeddings of the loaded model: llama.cpp's embeddings mode in a context of its own (issue 23 §3).

What llama.cpp does, called as its own ``examples/embedding`` and llama-server do it:

- a second context on the loaded model (``llama_init_from_model``, as the inspect context in
  :mod:`app.engine.inspection.evaluation`), with ``embeddings`` on, so the chat's context and
  its KV cache are never touched;
- the pooling is the model's own (``{arch}.pooling_type`` in the GGUF: mean, CLS or last, which
  llama.cpp runs in the graph, ``llm_graph_context::build_pooling``). A generative model declares
  none (llama.cpp would then give a vector per token): mean pooling is asked for instead, and
  :attr:`~app.core.protocol.Embedded.model_pooling` says so. A reranker (``rank``) is refused;
- inputs are tokenized as llama-server tokenizes them (``add_special`` and ``parse_special``: BOS,
  and EOS / SEP when the tokenizer adds them) and evaluated several at a time, one sequence id
  each, in one ``llama_decode`` (``examples/embedding/embedding.cpp``, ``batch_add_seq``);
  ``llama_get_embeddings_seq`` gives each sequence's pooled vector;
- each vector is divided by its Euclidean (L2) norm, as OpenAI's vectors are unit length and
  llama-server's default ``embd_normalize = 2`` does (``common_embd_normalize``).

llama.cpp pools a sequence within one ubatch (``embd_seq`` is written per ubatch in
``llama_context::decode``), so the context's ``n_ubatch`` is at least the longest input and a
batch never splits a sequence. Its ``n_ctx = n_batch = n_ubatch`` is the request's need (in steps
of :data:`CTX_STEP`), kept for the next request unless its logits buffer could pass
:data:`KEEP_LOGITS_BYTES` (Gemma 3: over 1,024 tokens; SmolLM2: over 5,461). Cost: llama.cpp computes and keeps the
logits of every token in embeddings mode (``output_all``), ``n_vocab x 4`` bytes per token of a
batch: :data:`BATCH_TOKENS` bounds a batch of several inputs (537 MB for Gemma 3's 262k vocabulary),
one longer input goes alone, and an input may be at most :func:`max_input_tokens` long: the loaded
n_ctx, or fewer where its logits would pass :data:`MAX_LOGITS_BYTES` (2,048 tokens for Gemma 3).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import llama_cpp
import numpy as np

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFInfo
from app.core.hardware.memory import pad
from app.engine.batch import fill_batch
from app.engine.errors import EngineError

log = logging.getLogger(__name__)

BATCH_TOKENS = 512  # tokens of several inputs evaluated together (one longer input goes alone)
MAX_SEQS = 64  # inputs per llama_decode (sequence ids; llama.cpp allows LLAMA_MAX_SEQ = 256)
CTX_STEP = 256  # the context's n_ctx is rounded up to this, tokens
MAX_LOGITS_BYTES = 2 << 30  # the logits llama.cpp keeps for one input at most (n_vocab x 4 bytes a token)
KEEP_LOGITS_BYTES = 1 << 30  # a context whose logits buffer can pass this is freed after its request

_POOLING = {
    llama_cpp.LLAMA_POOLING_TYPE_MEAN: P.Pooling.MEAN,
    llama_cpp.LLAMA_POOLING_TYPE_CLS: P.Pooling.CLS,
    llama_cpp.LLAMA_POOLING_TYPE_LAST: P.Pooling.LAST,
    llama_cpp.LLAMA_POOLING_TYPE_RANK: P.Pooling.RANK,
}


def model_pooling(info: GGUFInfo) -> int | None:
    """The pooling the GGUF declares (``{arch}.pooling_type``, a ``LLAMA_POOLING_TYPE_*``), or None
    when it declares none (absent, or ``NONE``: a generative model)."""
    declared = info.arch_key("pooling_type")
    return int(declared) if isinstance(declared, int) and int(declared) in _POOLING else None


def max_input_tokens(n_ctx: int, n_vocab: int) -> int:
    """The longest input accepted, tokens: ``n_ctx``, or fewer where its logits (``n_vocab`` x 4 bytes a
    token, kept by llama.cpp in embeddings mode) would pass :data:`MAX_LOGITS_BYTES`; at least :data:`BATCH_TOKENS`."""
    return min(n_ctx, max(BATCH_TOKENS, MAX_LOGITS_BYTES // (4 * max(n_vocab, 1))))


def batches(counts: list[int], budget: int, max_seqs: int = MAX_SEQS) -> list[list[int]]:
    """Input indices grouped in order so that each group's tokens fit ``budget`` (a longer input alone).

    Args:
        counts: tokens of each input.
        budget: tokens per group.
        max_seqs: inputs per group at most.

    Returns:
        Groups of indices, covering ``range(len(counts))`` in order.
    """
    groups: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for i, n in enumerate(counts):
        if cur and (used + n > budget or len(cur) >= max_seqs):
            groups.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += n
    if cur:
        groups.append(cur)
    return groups


def l2_normalized(v: np.ndarray[Any, np.dtype[np.float32]]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """``v / ||v||_2`` (a zero vector stays zero), as llama.cpp's ``common_embd_normalize(.., 2)``."""
    norm = float(np.linalg.norm(v))
    return (v / norm).astype(np.float32) if norm > 0 else v.astype(np.float32)


class Embedder:
    """The embeddings context of one loaded model (made on first use, grown as requests need).

    Not thread-safe: one request at a time (the session's embed lock).

    Args:
        llm: the chat's ``llama_cpp.Llama`` (its model is shared, read-only; its context
            parameters give the threads and the KV offload).
        info: the model's GGUF facts (the declared pooling).
        cancels: request ids cancelled (the session adds to it from another thread); an Embed
            whose id is there ends with Failed ``cancelled``, and its id is removed when it ends.
    """

    def __init__(self, llm: Any, info: GGUFInfo, cancels: set[int] | None = None) -> None:
        self._llm = llm
        self._declared = model_pooling(info)
        self._pooling = self._declared if self._declared is not None else llama_cpp.LLAMA_POOLING_TYPE_MEAN
        self._ctx: Any = None
        self._n_ctx = 0
        self._stop = threading.Event()
        self._cancels = cancels if cancels is not None else set()
        self._current = -1  # the request being embedded
        self._abort = llama_cpp.ggml_abort_callback(lambda _data: self._stopped())
        self.n_embd = int(llama_cpp.llama_model_n_embd_out(llm.model))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llm.model)))

    def _stopped(self) -> bool:
        """The model is being unloaded, or the request being embedded was cancelled."""
        return self._stop.is_set() or self._current in self._cancels

    def request_stop(self) -> None:
        """Stop the evaluation in progress and refuse further ones (any thread): the model is about to be freed."""
        self._stop.set()

    def close(self) -> None:
        """Free the context (before the model is freed)."""
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
            self._n_ctx = 0

    def _open(self, n_needed: int) -> None:
        """Make sure the context holds ``n_needed`` tokens in one ubatch ((re)made when smaller).

        Raises:
            EngineError: ``bad_settings`` for a reranker; ``internal`` when llama.cpp cannot make it.
        """
        if self._ctx is not None and self._n_ctx >= n_needed:
            return
        self.close()
        chat = self._llm.context_params
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = pad(max(n_needed, CTX_STEP), CTX_STEP)
        params.n_seq_max = MAX_SEQS
        params.kv_unified = True  # the sequences share the n_ctx cells (else n_ctx / n_seq_max each)
        params.n_threads = chat.n_threads
        params.n_threads_batch = chat.n_threads_batch
        params.embeddings = True
        params.pooling_type = self._pooling
        params.offload_kqv = chat.offload_kqv
        params.no_perf = True
        params.abort_callback = self._abort
        params.abort_callback_data = None
        ctx = llama_cpp.llama_init_from_model(self._llm.model, params)
        if not ctx:
            raise EngineError(P.FailureKind.INTERNAL, "llama.cpp could not create the embeddings context (memory?).")
        self._ctx = ctx
        self._n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        pooling = int(llama_cpp.llama_pooling_type(ctx))
        if pooling not in _POOLING or pooling == llama_cpp.LLAMA_POOLING_TYPE_RANK:
            self.close()
            raise EngineError(
                P.FailureKind.BAD_SETTINGS,
                "This model is a reranker (its pooling is 'rank'): it scores pairs and gives no embeddings.",
            )
        log.info("embeddings context: n_ctx %d, pooling %s", self._n_ctx, _POOLING[pooling].value)

    # ------------------------------------------------------------------------------ the request
    def tokens(self, inputs: tuple[str | tuple[int, ...], ...], max_tokens: int) -> list[list[int]]:
        """Each input as token ids (texts tokenized as llama-server does), checked.

        Raises:
            EngineError: ``bad_settings`` (an empty input, a token id outside the vocabulary),
                ``context_overflow`` (an input over :func:`max_input_tokens`; the message names it and the limit).
        """
        limit = max_input_tokens(max_tokens, self.n_vocab)
        why = (
            "the loaded context, n_ctx"
            if limit == max_tokens
            else f"llama.cpp keeps every token's logits in embeddings mode, {self.n_vocab:,} x 4 bytes each; "
            f"the loaded context is {max_tokens:,}"
        )
        out: list[list[int]] = []
        for i, item in enumerate(inputs):
            if isinstance(item, str):
                ids = list(self._llm.tokenize(item.encode("utf-8"), add_bos=True, special=True))
            else:
                bad = [t for t in item if not 0 <= t < self.n_vocab]
                if bad:
                    raise EngineError(
                        P.FailureKind.BAD_SETTINGS,
                        f"input[{i}] has token id {bad[0]}, outside the vocabulary (0 to {self.n_vocab - 1}).",
                    )
                ids = list(item)
            if not ids:
                raise EngineError(P.FailureKind.BAD_SETTINGS, f"input[{i}] is empty: there is nothing to embed.")
            if len(ids) > limit:
                raise EngineError(
                    P.FailureKind.CONTEXT_OVERFLOW,
                    f"input[{i}] is {len(ids):,} tokens, over the limit of {limit:,} ({why}): shorten it or split it.",
                )
            out.append(ids)
        return out

    def embed(self, req: P.Embed) -> P.Embedded:
        """Embed ``req.inputs`` (see the module docstring).

        Raises:
            EngineError: as :meth:`tokens`; ``cancelled`` (the model is being unloaded, or
                :class:`~app.core.protocol.CancelEmbed` came for it); ``internal``
                (llama.cpp cannot make the context, or llama_decode failed).
        """
        self._current = req.request_id
        try:
            return self._embed(req)
        finally:
            self._cancels.discard(req.request_id)
            self._current = -1

    def _embed(self, req: P.Embed) -> P.Embedded:
        t0 = time.perf_counter()
        self._check_stopped()
        seqs = self.tokens(req.inputs, req.max_tokens)
        counts = [len(s) for s in seqs]
        budget = max(max(counts), min(sum(counts), BATCH_TOKENS))
        self._open(budget)
        out = np.zeros((len(seqs), self.n_embd), dtype=np.float32)
        for group in batches(counts, budget):
            for row, vec in zip(group, self._run([seqs[i] for i in group]), strict=True):
                out[row] = l2_normalized(vec)
        pooling = _POOLING[int(llama_cpp.llama_pooling_type(self._ctx))]
        if self._n_ctx * self.n_vocab * 4 > KEEP_LOGITS_BYTES:  # not kept idle with such a logits buffer
            self.close()
        return P.Embedded(
            req.request_id,
            out.astype("<f4").tobytes(),
            self.n_embd,
            tuple(counts),
            pooling,
            self._declared is not None,
            time.perf_counter() - t0,
        )

    def _check_stopped(self) -> None:
        """Raises EngineError ``cancelled`` when :meth:`_stopped`, saying why."""
        if self._stop.is_set():
            raise EngineError(P.FailureKind.CANCELLED, "The embeddings were stopped: the model is being unloaded.")
        if self._current in self._cancels:
            raise EngineError(P.FailureKind.CANCELLED, "The embeddings were cancelled (the client went away).")

    def _run(self, seqs: list[list[int]]) -> list[np.ndarray[Any, np.dtype[np.float32]]]:
        """Evaluate ``seqs`` in one llama_decode, sequence id ``k`` for the k-th; their pooled vectors (copies).

        Raises:
            EngineError: ``cancelled`` (:meth:`request_stop`, :class:`~app.core.protocol.CancelEmbed`),
                ``internal`` (llama_decode failed).
        """
        ctx = self._ctx
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        n = sum(len(s) for s in seqs)
        batch = llama_cpp.llama_batch_init(n, 0, len(seqs))
        try:
            i = 0
            for k, seq in enumerate(seqs):
                # Embeddings mode outputs every token (llama_context::decode).
                fill_batch(batch, seq, 0, logits=lambda _pos: True, seq=k, start=i)
                i += len(seq)
            rc = int(llama_cpp.llama_decode(ctx, batch))
        finally:
            llama_cpp.llama_batch_free(batch)
        self._check_stopped()
        if rc != 0:
            raise EngineError(P.FailureKind.INTERNAL, f"llama.cpp could not evaluate the inputs (llama_decode {rc}).")
        vecs = []
        for k in range(len(seqs)):
            ptr = llama_cpp.llama_get_embeddings_seq(ctx, k)
            if not ptr:
                raise EngineError(P.FailureKind.INTERNAL, f"llama.cpp gave no pooled embedding for sequence {k}.")
            vecs.append(np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).copy())
        return vecs
