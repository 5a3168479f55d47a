"""What a loaded draft model holds, for the Model panel and the memory fit verdict."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DraftInfo:
    """The draft model loaded beside the chat model (``ModelLoaded.draft``).

    Attributes:
        path: the draft GGUF's path.
        n_params: its parameters (llama_model_n_params).
        weights_bytes: its weights' size, bytes (llama_model_size).
        kv_bytes: its KV cache, bytes (its own context, n_ctx as the chat model's).
    """

    path: str
    n_params: int
    weights_bytes: int
    kv_bytes: int

    @property
    def total_bytes(self) -> int:
        """Weights plus KV cache, bytes: what the fit verdict adds for the draft."""
        return self.weights_bytes + self.kv_bytes
