"""Speculation at load: check a draft model against the model, load it, build the drafter.

:func:`check_draft` runs before the model is loaded (vocabulary-only loads of both files,
:func:`app.engine.compat.check_files`: llama.cpp's own draft-model checks), so an incompatible
draft is refused with its reason (``FailureKind.INCOMPATIBLE``) before any weights are read.
:func:`set_up` then builds the drafter beside the loaded model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import llama_cpp

from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.gguf.gguf_info import GGUFError, GGUFInfo, check_loadable
from app.core.hardware.memory import kv_cache_layout, n_ubatch_for
from app.core.speculative.budget import VerifyCost
from app.core.speculative.draft import DraftInfo
from app.core.speculative.settings import Drafter, SpeculationSettings
from app.engine.compat import check_files
from app.engine.errors import EngineError
from app.engine.speculative.drafters import DraftModel, PromptLookup
from app.engine.speculative.loop import Drafting

ALL_LAYERS = 0x7FFFFFFF  # n_gpu_layers for every layer (what llama-cpp-python passes for -1)


@dataclass
class Speculator:
    """What speculation needs while a model is loaded (``LoadedModel.speculator``).

    Attributes:
        settings: the speculation settings as applied.
        drafter: the drafter (a draft model's context is freed by :meth:`close`).
        weights_bytes: the model's weights, bytes (the roofline's bytes per token).
        draft: the draft model's facts (None for prompt lookup).
        cost: what a round costs with this model here, measured by its replies (the draft lengths' budget).
    """

    settings: SpeculationSettings
    drafter: Drafting
    weights_bytes: int
    draft: DraftInfo | None = None
    cost: VerifyCost = field(init=False)

    def __post_init__(self) -> None:
        self.cost = VerifyCost(self.settings.draft_max + 1)

    def close(self) -> None:
        """Free the drafter (a draft model's context and weights)."""
        self.drafter.close()


def check_draft(model_path: str, s: SpeculationSettings) -> GGUFInfo | None:
    """Refuse a draft model that cannot draft for ``model_path``; its GGUF facts when there is one to load.

    Raises:
        EngineError: ``bad_settings`` (no draft file given), ``bad_model`` (the draft fails Glassbox's GGUF
            checks), ``incompatible`` (llama.cpp's draft-model checks fail: the one that failed, both values).
    """
    if not (s.enabled and s.drafter is Drafter.DRAFT_MODEL):
        return None
    if not s.draft_model:
        raise EngineError(
            P.FailureKind.BAD_SETTINGS,
            "Speculation with a draft model needs a draft GGUF: choose one, or use prompt lookup.",
        )
    try:
        info = check_loadable(s.draft_model)
    except GGUFError as exc:
        raise EngineError(P.FailureKind.BAD_MODEL, f"The draft model cannot be used: {exc.message}") from None
    bad = check_files(model_path, s.draft_model)
    if bad is not None:
        raise EngineError(
            P.FailureKind.INCOMPATIBLE,
            f"{Path(s.draft_model).name} cannot be the draft model of {Path(model_path).name}: {bad.message}. "
            "A draft model must share the model's vocabulary (usually a smaller model of the same family).",
        )
    return info


def set_up(
    llm: Any,
    info: GGUFInfo,
    settings: LoadSettings,
    draft_info: GGUFInfo | None,
    *,
    n_ctx: int,
    n_threads: int,
    n_threads_batch: int,
    gpu: bool,
) -> tuple[Speculator | None, SpeculationSettings, str]:
    """The speculator for the loaded model ``llm`` (None when speculation is off or cannot run).

    Args:
        info: the model's GGUF facts.
        settings: the load settings in effect (``speculation``, n_batch, swa_full, cache types).
        draft_info: the draft GGUF's facts (:func:`check_draft`), or None.
        n_ctx: the model's context; the draft model gets the same.
        gpu: layers may be offloaded (the draft model then goes wholly to the GPU).

    Returns:
        ``(speculator, settings as applied, warning)``: the warning says why speculation is off when
        it was asked for and cannot run ("" otherwise).

    Raises:
        EngineError: ``load`` when llama.cpp refuses the draft model or its context (memory).
    """
    s = settings.speculation
    if not s.enabled:
        return None, s, ""
    if info.sliding_window and not settings.swa_full:
        why = (
            "Speculation is off: this model's sliding-window KV cache cannot remove a rejected draft without "
            "the full-size SWA cache. Turn the SWA cache to full size to speculate."
        )
        return None, replace(s, enabled=False), why
    weights = int(llama_cpp.llama_model_size(llm.model))
    if s.drafter is Drafter.PROMPT_LOOKUP or draft_info is None:
        return Speculator(s, PromptLookup(s.ngram), weights), s, ""
    dm = DraftModel(
        s.draft_model,
        n_ctx=n_ctx,
        n_batch=settings.n_batch,
        n_threads=n_threads,
        n_threads_batch=n_threads_batch,
        n_gpu_layers=ALL_LAYERS if gpu else 0,
        p_min=s.p_min,
    )
    layout = kv_cache_layout(draft_info, dm.n_ctx, n_ubatch=n_ubatch_for(settings.n_batch, dm.n_ctx), swa_full=True)
    draft = DraftInfo(s.draft_model, dm.n_params, dm.weights_bytes, layout.allocated_bytes)
    return Speculator(s, dm, weights, draft), s, ""
