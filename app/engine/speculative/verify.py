"""The model's side of a round: evaluate [its token, d1..dk] in one llama_decode, roll back a rejected tail.

A ``llama_batch`` of its own with logits asked for at every position of the round (never
``logits_all`` over the context): row i holds the model's logits after position ``pos0 + i``, read in
place (``llama_get_logits_ith``) and sampled there by the model's own sampler chain
(``llama_sampler_sample(chain, ctx, i)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from app.core import protocol as P
from app.engine.batch import fill_batch
from app.engine.errors import EngineError


class Verifier:
    """Evaluates rounds in the chat context of ``llm`` (a :class:`~app.engine.llama_context.GlassboxLlama`).

    Args:
        llm: the chat model.
        max_tokens: the longest round, tokens (draft_max + 1, at most the context's n_batch).
    """

    def __init__(self, llm: Any, max_tokens: int) -> None:
        self._llm = llm
        self.capacity = max_tokens
        self._batch = llama_cpp.llama_batch_init(max_tokens, 0, 1)
        self._n_vocab = int(llm.n_vocab())

    def decode(self, tokens: Sequence[int]) -> npt.NDArray[np.float32]:
        """Evaluate ``tokens`` after what the KV cache holds, logits at every position.

        Returns:
            the logits, [len(tokens), n_vocab] float32, a view of llama.cpp's buffer valid until the next
            decode (rows in batch order).

        Raises:
            EngineError: ``internal`` when llama_decode fails.
        """
        llm, batch = self._llm, self._batch
        pos0 = llm.n_tokens
        fill_batch(batch, tokens, pos0, logits=lambda _pos: True)
        rc = int(llama_cpp.llama_decode(llm.ctx, batch))
        if rc != 0:
            raise EngineError(P.FailureKind.INTERNAL, f"llama_decode returned {rc} verifying a draft at {pos0}.")
        llm.decoded(tokens, pos0)
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, 0)
        rows: npt.NDArray[np.float32] = np.ctypeslib.as_array(ptr, shape=(len(tokens), self._n_vocab))
        return rows

    def keep(self, n: int) -> None:
        """Keep the first ``n`` tokens of the KV cache, remove the rest (a rejected tail).

        Raises:
            EngineError: ``internal`` when the cache cannot remove a partial range.
        """
        llm = self._llm
        if n < llm.n_tokens:
            if not llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), 0, n, -1):
                # Only a sliding-window cache without swa_full refuses; the load turns speculation off then.
                raise EngineError(P.FailureKind.INTERNAL, "the KV cache could not remove a rejected draft.")
            llm.n_tokens = n

    def close(self) -> None:
        """Free the batch."""
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
