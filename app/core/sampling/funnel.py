"""The sampler funnel's data: the candidates after each stage of llama.cpp's chain, for one step.

Plain values (they cross the pipe from the engine, which computes them with llama.cpp's
own sampler objects in :mod:`app.engine.funnel`). One :class:`Funnel` is one decode step:
the rows are the tokens shown (the most likely ones under the raw model, and the drawn
token), the stages are the chain's stages in the order they ran, each with every shown
row's probability after it (0 when the stage cut the token).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from app.core.sampling.params import SamplerSettings


class FunnelStageKind(str, enum.Enum):
    """A column of the funnel: the raw model, a chain stage, or the draw."""

    MODEL = "model"
    GRAMMAR = "grammar"  # the output constraint: llama.cpp's grammar sampler, first in the chain
    LOGIT_BIAS = "logit_bias"
    PENALTIES = "penalties"
    DRY = "dry"
    TOP_N_SIGMA = "top_n_sigma"
    TOP_K = "top_k"
    TYPICAL_P = "typical_p"
    TOP_P = "top_p"
    MIN_P = "min_p"
    XTC = "xtc"
    TEMPERATURE = "temperature"
    MIROSTAT = "mirostat"
    MIROSTAT_V2 = "mirostat_v2"
    DIST = "dist"
    GREEDY = "greedy"

    @property
    def is_draw(self) -> bool:
        """A final stage: it picks the token (dist, greedy, mirostat)."""
        return self in (
            FunnelStageKind.DIST,
            FunnelStageKind.GREEDY,
            FunnelStageKind.MIROSTAT,
            FunnelStageKind.MIROSTAT_V2,
        )


@dataclass(frozen=True)
class FunnelStage:
    """The candidates after one stage.

    Attributes:
        kind: which stage.
        probs: each shown row's probability after this stage, renormalised over the
            survivors (softmax of the survivors' logits as the next stage sees them); 0 = cut.
        survivors: tokens left after this stage (finite logits); -1: not known (the model column of a
            stored reply's top-N: the vocabulary of the model that wrote it).
        entropy_bits: entropy of the survivors' distribution, bits.
        outside: probability mass of survivors that are not among the shown rows.
        picked: for a draw stage, the token it picked (-1 otherwise).
        known: whether these figures are the real chain's. Always True on the whole vocabulary; on a
            step's top-M (:attr:`Funnel.exact` False) only the model column's probabilities and the
            stages after a cut that provably left only kept candidates (:mod:`app.engine.funnel_known`):
            before it, a stage's result depends on the tokens outside the kept ones, and its figures
            (renormalised over the kept ones) must not be shown as the chain's.
    """

    kind: FunnelStageKind
    probs: tuple[float, ...]
    survivors: int
    entropy_bits: float
    outside: float
    picked: int = -1
    known: bool = True


@dataclass(frozen=True)
class Funnel:
    """One step's funnel.

    Attributes:
        reply_id: the Generate request id of the reply the step belongs to.
        step: 0-based index of the token in the reply.
        rows: ``(token_id, text)`` shown, most likely under the raw model first.
        stages: the model column first, then the stages in chain order, the draw last.
        drawn: the token the reply actually drew at this step.
        settings: the settings this funnel was computed with.
        seed: the seed the draw (and XTC) used.
        n_logits: logits the funnel started from (the vocabulary, or the step's stored top-M).
        exact: True when the funnel ran on the full vocabulary; False on the top-M (see
            :mod:`app.engine.funnel` for how close that is).
        compute_s: the engine's time to compute it, seconds.
        unkept: the rows' tokens that are not among the candidates it ran on (a drawn token below a
            stored reply's top-N): nothing is known of them, they were not cut.
        stored: the candidates are the top-N stored with the reply (not the engine's kept logits).
        recomputed: a stored reply's step whose logits the model that wrote it computed again (``exact``).
    """

    reply_id: int
    step: int
    rows: tuple[tuple[int, str], ...]
    stages: tuple[FunnelStage, ...]
    drawn: int
    settings: SamplerSettings
    seed: int
    n_logits: int
    exact: bool
    compute_s: float
    unkept: tuple[int, ...] = ()
    stored: bool = False
    recomputed: bool = False

    @property
    def all_known(self) -> bool:
        """Whether every column's figures are the real chain's (:attr:`FunnelStage.known`)."""
        return all(st.known for st in self.stages)

    @property
    def picked(self) -> int:
        """The token the draw stage picked with these settings (-1 when none ran)."""
        return self.stages[-1].picked if self.stages else -1


def same_chain(a: SamplerSettings, b: SamplerSettings) -> bool:
    """Whether ``a`` and ``b`` run the same chain on a step: every stage's value and the order equal
    (``max_tokens`` and ``seed`` are the reply's, not the chain's: the funnel draws with the reply's seed)."""
    return replace(a, max_tokens=-1, seed=None) == replace(b, max_tokens=-1, seed=None)
