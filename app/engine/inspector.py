"""What the Sampler panel sees of the raw model: logits, log-sum-exp, top candidates."""

from __future__ import annotations

import ctypes
import math
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from app.engine.vocab import Vocab

Logits = npt.NDArray[np.float32]


class Inspector:
    """Reads the last position's logits of one loaded model.

    Args:
        llm: the ``llama_cpp.Llama``.
        vocab: its vocabulary (candidate texts).
    """

    def __init__(self, llm: Any, vocab: Vocab) -> None:
        self._llm = llm
        self._vocab = vocab
        self._lse_buf: Logits | None = None
        self._view: Logits | None = None  # the last position's logits, as numpy, while its address holds
        self._view_at: int | None = None

    def logits(self) -> Logits:
        """The last position's logits as a numpy view (n_vocab float32, no copy; valid until the next eval).

        The view is made again only when llama.cpp's logits buffer moves (it is reallocated when a
        batch asks for more outputs than it holds): ``np.ctypeslib.as_array`` builds a ctypes array
        type per call, 10-20 us, once per decode step otherwise."""
        llm = self._llm
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        at = ctypes.cast(ptr, ctypes.c_void_p).value
        if at != self._view_at or self._view is None:
            self._view = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))
            self._view_at = at
        return self._view

    def logsumexp(self, logits: Logits) -> float:
        """log(sum(exp(logits))) over the vocabulary, in a reused float32 buffer (no allocation
        per token: 262k-token vocabularies make this the costliest step of the inspector)."""
        buf = self._lse_buf
        if buf is None or buf.shape != logits.shape:
            buf = self._lse_buf = np.empty(logits.shape, dtype=np.float32)
        m = float(logits.max())
        np.subtract(logits, m, out=buf)
        np.exp(buf, out=buf)
        return m + math.log(float(buf.sum(dtype=np.float64)))

    def top_candidates(self, logits: Logits, n: int) -> tuple[tuple[int, str, float], ...]:
        """The ``n`` highest logits as ``(token_id, text, logit)``, best first."""
        k = min(n, logits.shape[0])
        idx = np.argpartition(logits, -k)[-k:]
        idx = idx[np.argsort(-logits[idx])]
        return tuple((int(i), self._vocab.display(int(i)), float(logits[i])) for i in idx)
