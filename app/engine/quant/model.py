"""One side of a comparison: a GGUF loaded with its own llama.cpp context, evaluating chunks and timing itself.

Plain llama.cpp calls (``llama_model_load_from_file``, ``llama_init_from_model``, ``llama_decode`` on a
``llama_batch``), not ``llama_cpp.Llama``: a comparison asks for logits at chosen positions only
(the scored half of a chunk) and reads them in place (``llama_get_logits_ith``), so nothing on
our side ever holds a chunk's logits (:mod:`app.engine.quant.reduce` reduces them a block at a time).
Stop works inside an evaluation through llama.cpp's abort callback, as in :mod:`app.engine.prefill`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFInfo
from app.engine.batch import fill_batch
from app.engine.errors import CancelFlag, EngineError
from app.engine.loader import check_model
from app.engine.vocab import Vocab

#: llama.cpp's default physical batch (llama-perplexity's ``-ub`` default), tokens.
N_UBATCH = 512


class Cancelled(Exception):
    """The cancel flag stopped an evaluation."""


class CompareModel:
    """One GGUF for a comparison: its model now, its context once :meth:`open` is called.

    Args:
        path: the GGUF (checked by Glassbox's GGUF checks before llama.cpp sees it).
        cancel: the shared cancel flag (read by the abort callback between graph nodes).

    Attributes:
        info: the GGUF facts.
        vocab: the model's vocabulary.
        n_vocab: tokens in it.
        prefill_ns, prefill_tokens: time spent in the chunks' ``llama_decode`` calls and tokens they evaluated.

    Raises:
        EngineError: ``bad_model`` (the file fails the checks), ``load`` (llama.cpp refused it).
    """

    def __init__(self, path: str, cancel: CancelFlag) -> None:
        self.path = path
        self.info: GGUFInfo = check_model(path)
        self._cancel = cancel
        params = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), params)
        if not self.model:
            raise EngineError(
                P.FailureKind.LOAD,
                f"llama.cpp could not load {Path(path).name} (architecture {self.info.architecture}, "
                f"{self.info.quant_type}): this build may not support it, or memory ran out.",
            )
        self.vocab = Vocab(self.model)
        self.n_vocab = self.vocab.n_tokens
        self.ctx: Any = None
        self._batch: Any = None
        self._abort = llama_cpp.ggml_abort_callback(lambda _data: bool(cancel.is_set()))
        self.prefill_ns = 0
        self.prefill_tokens = 0
        self._sampler: Any = None
        self._pos = 0

    @property
    def file_bytes(self) -> int:
        """The file's size (every part of a split model), bytes."""
        return sum(p.stat().st_size for p in self.info.split_paths())

    @property
    def weights_bytes(self) -> int:
        """The weights in memory, bytes (``llama_model_size``)."""
        return int(llama_cpp.llama_model_size(self.model))

    def open(self, n_ctx: int, n_batch: int, n_threads: int, n_threads_batch: int) -> None:
        """Create the context: ``n_ctx`` tokens, ``n_batch`` per ``llama_decode``, one sequence.

        Raises:
            EngineError: ``load`` when llama.cpp returns no context (memory).
        """
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = min(n_batch, N_UBATCH)
        params.n_seq_max = 1
        params.n_threads = n_threads
        params.n_threads_batch = n_threads_batch
        params.abort_callback = self._abort
        params.abort_callback_data = None
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        if not self.ctx:
            raise EngineError(
                P.FailureKind.LOAD,
                f"llama.cpp could not create a context of {n_ctx} tokens for {Path(self.path).name}.",
            )
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)

    def clear(self) -> None:
        """Empty the KV cache (a new chunk)."""
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)

    def decode(self, tokens: Sequence[int], pos0: int, out_from: int, out_to: int) -> float:
        """Evaluate ``tokens`` at positions ``pos0...``, asking for logits at positions ``out_from`` .. ``out_to - 1``.

        Returns:
            seconds the ``llama_decode`` call took.

        Raises:
            Cancelled: the cancel flag was set (before or during the call).
            EngineError: ``internal`` when llama_decode fails otherwise.
        """
        if self._cancel.is_set():
            raise Cancelled
        batch = self._batch
        fill_batch(batch, tokens, pos0, logits=lambda pos: out_from <= pos < out_to)
        t = time.perf_counter_ns()
        rc = int(llama_cpp.llama_decode(self.ctx, batch))
        ns = time.perf_counter_ns() - t
        if self._cancel.is_set():
            raise Cancelled
        if rc != 0:
            raise EngineError(
                P.FailureKind.INTERNAL, f"llama_decode returned {rc} on {Path(self.path).name} at position {pos0}."
            )
        return ns / 1e9

    def logits(self, row: int, n_rows: int) -> npt.NDArray[np.float32]:
        """The logits of the last :meth:`decode`'s batch entries ``row`` .. ``row + n_rows - 1`` (each asked for
        logits), in place: a view of llama.cpp's output buffer, [n_rows, n_vocab] float32, valid until the
        next decode. llama.cpp keeps a sequence's output rows in batch order, one after another."""
        ptr = llama_cpp.llama_get_logits_ith(self.ctx, row)
        out: npt.NDArray[np.float32] = np.ctypeslib.as_array(ptr, shape=(n_rows, self.n_vocab))
        return out

    def start_decode(self, prompt: Sequence[int]) -> None:
        """Before a decode-speed run: the KV cache cleared, ``prompt`` evaluated (not timed) and a greedy
        sampler made (llama.cpp's; freed by :meth:`close` or the next call).

        Raises:
            Cancelled: as :meth:`decode`.
        """
        self._free_sampler()
        self.clear()
        self.decode(prompt, 0, len(prompt) - 1, len(prompt))
        self._sampler = llama_cpp.llama_sampler_init_greedy()
        self._pos = len(prompt)

    def decode_next(self) -> float:
        """One greedy token sampled from the last logits and evaluated (one ``llama_decode``, after
        :meth:`start_decode`).

        Returns:
            seconds that ``llama_decode`` took (the sampling is not counted).

        Raises:
            Cancelled: as :meth:`decode`.
        """
        tok = int(llama_cpp.llama_sampler_sample(self._sampler, self.ctx, -1))
        seconds = self.decode([tok], self._pos, self._pos, self._pos + 1)
        self._pos += 1
        return seconds

    def _free_sampler(self) -> None:
        if self._sampler is not None:
            llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None

    def close(self) -> None:
        """Free the sampler, the batch, the context and the model."""
        self._free_sampler()
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx is not None:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        if self.model is not None:
            llama_cpp.llama_model_free(self.model)
            self.model = None


def tokenize(vocab: Vocab, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
    """``llama_tokenize`` of ``text`` (``add_special``: BOS when the vocabulary adds it; ``parse_special``:
    special-token texts become their tokens), as llama.cpp's ``common_tokenize``."""
    raw = text.encode("utf-8")
    n_max = len(raw) + 2
    buf = (llama_cpp.llama_token * n_max)()
    n = int(llama_cpp.llama_tokenize(vocab.ptr, raw, len(raw), buf, n_max, add_special, parse_special))
    if n < 0:
        buf = (llama_cpp.llama_token * -n)()
        n = int(llama_cpp.llama_tokenize(vocab.ptr, raw, len(raw), buf, -n, add_special, parse_special))
    return list(buf[:n])


class Tokenizer:
    """The ``llm.tokenize`` that :class:`~app.engine.prompt.PromptBuilder` calls, on a bare vocabulary."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        """Token ids of UTF-8 ``text`` (``add_bos``: BOS when the vocabulary adds it; ``special``: parse
        special-token texts), as ``llama_cpp.Llama.tokenize``."""
        return tokenize(self._vocab, text.decode("utf-8"), add_special=add_bos, parse_special=special)


def decode_speeds(models: Sequence[CompareModel], prompt: Sequence[int], n_tokens: int) -> list[float]:
    """Each model's decode tokens per second: ``prompt`` evaluated by each (not timed), then ``n_tokens`` greedy
    tokens each, one ``llama_decode`` per token, timed, the models taking turns token by token (A, B, then
    B, A...).

    Turns, not one model after the other: whatever else the machine does during the measurement (the
    window drawing the last chunk's tokens, another program) then slows every model alike. Measured one
    after the other, model A's tokens ran while the window filled its worst-tokens table (about 2 s of
    its CPU time on 2 CPUs), and the same file read 26 tok/s as A and 48 tok/s as B.

    Returns:
        tokens per second, one per model in order (0.0 when ``n_tokens`` is 0).

    Raises:
        Cancelled: as :meth:`CompareModel.decode`.
    """
    if n_tokens <= 0:
        return [0.0 for _ in models]
    for m in models:
        m.start_decode(prompt)
    seconds = [0.0 for _ in models]
    order = list(range(len(models)))
    for _ in range(n_tokens):
        for i in order:
            seconds[i] += models[i].decode_next()
        order.reverse()  # neither model always goes first: a load that starts or ends mid-turn hits both
    return [n_tokens / s if s > 0 else 0.0 for s in seconds]
