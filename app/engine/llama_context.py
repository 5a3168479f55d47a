"""Creating ``llama_cpp.Llama`` with llama.cpp's flash attention setting as asked, auto included.

llama-cpp-python 0.3.36's ``Llama(flash_attn: bool)`` maps True to
``LLAMA_FLASH_ATTN_TYPE_ENABLED`` and False to ``LLAMA_FLASH_ATTN_TYPE_DISABLED``
(llama_cpp/llama.py, ``self.context_params.flash_attn_type = ...``): llama.cpp's own default,
``LLAMA_FLASH_ATTN_TYPE_AUTO`` (-1), cannot be asked for. :class:`GlassboxLlama` keeps every
other part of ``Llama.__init__`` and sets ``context_params.flash_attn_type`` to the value asked
for each time ``__init__`` reads the struct, so ``llama_init_from_model`` receives it (the
struct is read, not copied, when the context is created). After ``__init__`` the struct reads
as llama.cpp was given it.

K and V cache types go through ``Llama(type_k=, type_v=)`` as ``enum ggml_type`` numbers.

:attr:`GlassboxLlama.logits_position` says which context position the logits llama.cpp holds
for the context's last output row belong to (``llama_get_logits_ith(ctx, -1)``), so "Inspect a
token" can compare its lens with them (:func:`app.engine.inspection.chat_cache.take_chat_cache`).
llama.cpp keeps that buffer until the next ``llama_decode``: removing cells from the KV cache
(``llama_memory_seq_rm``, a rewind) or restoring a sequence's state leaves it in place, stale.
Every evaluation goes through :meth:`Llama.eval` and every rewind or restore sets ``n_tokens``
(:mod:`app.engine.prefill`, :mod:`app.engine.kv_snapshot`, the session's reset), so the position
is set by :meth:`GlassboxLlama.eval` and forgotten when ``n_tokens`` drops to it or below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import llama_cpp

from app.core.chat.context import FlashAttention
from app.core.hardware.memory import KVCacheType


class GlassboxLlama(llama_cpp.Llama):  # type: ignore[misc,unused-ignore]  # llama_cpp is untyped: Any
    """``llama_cpp.Llama`` created with ``flash_attn_type`` set to ``flash_attn`` (auto, on or off).

    Args:
        flash_attn: the :class:`~app.core.chat.context.FlashAttention` setting.
        type_k, type_v: K and V cache types.
        **kwargs: everything else, as for ``llama_cpp.Llama``.

    Raises:
        ValueError: llama.cpp returned no context (``Failed to create llama_context``; the
            reason is in llama.cpp's log) or no model.
    """

    def __init__(
        self,
        model_path: str,
        *,
        flash_attn: FlashAttention = FlashAttention.OFF,
        type_k: KVCacheType = KVCacheType.F16,
        type_v: KVCacheType = KVCacheType.F16,
        **kwargs: Any,
    ) -> None:
        self._gb_flash_attn_type: int | None = flash_attn.llama_value
        self._gb_logits_pos = -1
        try:
            super().__init__(
                model_path,
                flash_attn=flash_attn is FlashAttention.ON,
                type_k=type_k.ggml_type,
                type_v=type_v.ggml_type,
                **kwargs,
            )
        finally:
            self._gb_flash_attn_type = None

    @property
    def context_params(self) -> Any:
        """The ``llama_context_params`` struct; while ``__init__`` runs, with the asked ``flash_attn_type``."""
        params = self.__dict__["_gb_context_params"]
        forced = self.__dict__.get("_gb_flash_attn_type")
        if forced is not None:
            params.flash_attn_type = forced
        return params

    @context_params.setter
    def context_params(self, value: Any) -> None:
        self.__dict__["_gb_context_params"] = value

    @property
    def n_tokens(self) -> int:
        """Tokens in the KV cache (``Llama.n_tokens``); setting it at or below :attr:`logits_position`
        (a rewind, a reset, a restore) forgets that position."""
        return int(self.__dict__.get("_gb_n_tokens", 0))

    @n_tokens.setter
    def n_tokens(self, value: int) -> None:
        if value <= self.__dict__.get("_gb_logits_pos", -1):
            self.__dict__["_gb_logits_pos"] = -1
        self.__dict__["_gb_n_tokens"] = value

    @property
    def logits_position(self) -> int:
        """The context position whose logits llama.cpp's last output row holds (-1: none, or stale)."""
        return int(self.__dict__.get("_gb_logits_pos", -1))

    @property
    def logits_batch(self) -> int:
        """Tokens in the ``llama_decode`` call that computed the logits of :attr:`logits_position` (0:
        none). llama.cpp's CPU backend computes a one-token batch by another kernel path than a longer
        one (SmolLM2 Q4_1: 0.59 logit apart for the same position), so a comparison evaluates alike."""
        return int(self.__dict__.get("_gb_logits_batch", 0)) if self.logits_position >= 0 else 0

    def eval(self, tokens: Sequence[int]) -> None:
        """``Llama.eval``; afterwards the last output row's logits are those of position ``n_tokens - 1``,
        computed in a batch of :attr:`logits_batch` tokens (``Llama.eval`` cuts ``tokens`` in slices of n_batch).

        Raises:
            RuntimeError: llama_decode failed (Stop included); no position is then held.
        """
        self.__dict__["_gb_logits_pos"] = -1
        super().eval(tokens)
        n = len(tokens)
        if n:
            self.__dict__["_gb_logits_pos"] = self.n_tokens - 1
            self.__dict__["_gb_logits_batch"] = n - (n - 1) // self.n_batch * self.n_batch

    def decoded(self, tokens: Sequence[int], pos0: int) -> None:
        """Record a ``llama_decode`` of ``tokens`` at positions ``pos0...`` made outside :meth:`eval` (the
        speculative verification, :mod:`app.engine.speculative.verify`), its last row's logits asked for:
        ``input_ids`` and ``n_tokens`` follow, and :attr:`logits_position` is its last position."""
        n = len(tokens)
        self.input_ids[pos0 : pos0 + n] = tokens
        self.n_tokens = pos0 + n
        if n:
            self.__dict__["_gb_logits_pos"] = pos0 + n - 1
            self.__dict__["_gb_logits_batch"] = n
