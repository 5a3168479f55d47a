"""The draft model's memory for the Model panel: what the loaded draft holds (the engine's
:class:`~app.core.speculative.draft.DraftInfo`), or, before it is loaded, Glassbox's estimate from its
GGUF at the panel's n_ctx and cache types (:func:`app.core.hardware.memory.estimate_memory`, the same
formula as the model's). Both count the same parts: weights + KV cache + compute buffer (llama.cpp's
scratch memory for one batch of the draft's own context; Glassbox's estimate in both, the engine reports
the weights and KV cache of the loaded draft). The bytes are added to the model's in the panel's memory line.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.gguf.gguf_info import GGUFError, GGUFInfo, format_bytes, format_count, read_gguf_info
from app.core.hardware.memory import compute_buffer_estimate, estimate_memory, n_ubatch_for
from app.core.speculative.settings import Drafter
from app.core.speculative.vocab_header import header_incompatibility

COMPUTE_MEANS = " (compute: llama.cpp's scratch buffer for one batch of the draft's context, estimated)"


@functools.lru_cache(maxsize=8)
def _info(path: str, _mtime_ns: int, _size: int) -> GGUFInfo:
    return read_gguf_info(path)


def draft_memory(s: LoadSettings, loaded: P.ModelLoaded | None, n_ctx: int) -> tuple[str, int]:
    """The draft model's memory in words, and its bytes (0: no draft, or not known).

    Args:
        s: the load settings shown (``s.speculation`` says which draft; the cache types and n_batch
            are the model's, which the draft's context shares).
        loaded: the model loaded (its ``draft``, when that draft is the one shown), or None.
        n_ctx: the context length the model will have, tokens (the draft's context is as long).
    """
    spec = s.speculation
    if not spec.enabled:
        return "", 0
    if spec.drafter is not Drafter.DRAFT_MODEL:
        return "Prompt lookup needs no second model: no extra memory.", 0
    if not spec.draft_model:
        return "Choose a draft model: a small GGUF with this model's vocabulary (the same tokenizer).", 0
    draft = loaded.draft if loaded is not None else None
    path = spec.draft_model
    try:
        st = os.stat(path)
        info = _info(path, st.st_mtime_ns, st.st_size)
        est = estimate_memory(
            info, n_ctx or info.context_length, n_ubatch=n_ubatch_for(s.n_batch), type_k=s.type_k, type_v=s.type_v
        )
    except (OSError, GGUFError, ValueError) as exc:
        return f"The draft model {path} cannot be read ({exc}). Choose another GGUF file.", 0
    if draft is not None and Path(draft.path) == Path(spec.draft_model):
        compute = compute_buffer_estimate(info, n_ctx or info.context_length, n_ubatch=n_ubatch_for(s.n_batch))
        total = draft.total_bytes + compute
        return (
            f"Draft model loaded: {Path(draft.path).name}, {format_count(draft.n_params)} parameters, "
            f"weights {format_bytes(draft.weights_bytes)} + KV cache {format_bytes(draft.kv_bytes)} "
            f"+ compute {format_bytes(compute)} = {format_bytes(total)}{COMPUTE_MEANS}",
            int(total),
        )
    return f"Draft model {Path(path).name} at these settings: {est.breakdown()}{COMPUTE_MEANS}", est.total


def draft_refusal(s: LoadSettings, model: GGUFInfo | None) -> str:
    """Why the draft model shown cannot draft for ``model``, as far as the two GGUF headers tell
    (:func:`~app.core.speculative.vocab_header.header_incompatibility`); "" when they agree, when no draft
    model is asked for, or when a header cannot be read (the engine's full check still runs at load)."""
    spec = s.speculation
    if model is None or not (spec.enabled and spec.drafter is Drafter.DRAFT_MODEL and spec.draft_model):
        return ""
    try:
        st = os.stat(spec.draft_model)
        draft = _info(spec.draft_model, st.st_mtime_ns, st.st_size)
    except (OSError, GGUFError):
        return ""
    bad = header_incompatibility(model, draft)
    return bad.message if bad is not None else ""


def speculation_fact(loaded: P.ModelLoaded) -> str:
    """The Model panel's "speculation" fact: as the engine applied it (``ModelLoaded.speculation``), and
    whether that is less than was asked (``ModelLoaded.settings.speculation``)."""
    applied, asked = loaded.speculation, loaded.settings.speculation
    if applied.enabled:  # the draft's file is named under the settings (a file name here widened the panel)
        return " · ".join(t.removeprefix("speculation: ") for t in applied.terms()[:3])
    if asked.enabled:
        return "off: asked on, but the engine could not apply it (see the log)"
    return "off"
