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
"""

from __future__ import annotations

from typing import Any

import llama_cpp

from app.core.chat import FlashAttention
from app.core.memory import KVCacheType


class GlassboxLlama(llama_cpp.Llama):  # type: ignore[misc,unused-ignore]  # llama_cpp is untyped: Any
    """``llama_cpp.Llama`` created with ``flash_attn_type`` set to ``flash_attn`` (auto, on or off).

    Args:
        flash_attn: the :class:`~app.core.chat.FlashAttention` setting.
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
