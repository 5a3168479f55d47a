"""Which columns of a funnel run on a step's top-M candidates are the real chain's (:func:`known_columns`).

A stored reply keeps its top-N logits and the log-sum-exp over the vocabulary (N = 10 by default), the
live store its top 64 for older steps. On those the model column is exact (true probabilities), but a
stage that renormalises, or decides from the whole distribution (top_p, typical_p, top-n-sigma, XTC, the
draw), sees only the kept tokens: its figures are not the chain's. They become the chain's again after a
cut that provably left only kept tokens: from then on the run on the kept tokens is the chain's run.

The proof keeps an upper bound on every logit outside the kept ones (at first the lowest kept logit:
the kept ones are the top-M). Stages that only lower or cut tokens one by one (the grammar, penalties
with repeat_penalty >= 1 and presence / frequency >= 0, DRY, a logit bias raising only kept tokens) leave
it as it is; a fixed temperature T > 0 divides it by T. A cut closes the tail when:

- top_k left k tokens and each has a logit above the bound (the k best of the vocabulary, then);
- min_p's threshold (the best logit + ln min_p, llama.cpp's ``llama_sampler_min_p_apply``) is above it;
- greedy, or temperature <= 0 (the best kept logit above it: it is the vocabulary's best).

Any other stage before that (top_p, typical_p, top-n-sigma, XTC, dynamic temperature, mirostat, the
draw) makes the bound unknown: nothing after it can be shown as the chain's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from app.core.sampling.funnel import FunnelStageKind
from app.core.sampling.params import SamplerSettings

Column = tuple[FunnelStageKind, npt.NDArray[np.void], int]  # (stage, the entries it left, picked)


def _lowers_only(kind: FunnelStageKind, s: SamplerSettings, kept: set[int]) -> bool:
    """Whether ``kind`` can only lower or cut tokens outside ``kept`` (their bound holds after it)."""
    if kind is FunnelStageKind.GRAMMAR:
        return True
    if kind is FunnelStageKind.PENALTIES:
        return s.repeat_penalty >= 1.0 and s.presence_penalty >= 0.0 and s.frequency_penalty >= 0.0
    if kind is FunnelStageKind.DRY:
        return s.dry_multiplier >= 0.0
    if kind is FunnelStageKind.LOGIT_BIAS:
        return all(bias <= 0.0 or tok in kept for tok, bias in s.logit_bias)
    return False


def known_columns(columns: Sequence[Column], s: SamplerSettings, kept: set[int], floor: float) -> list[bool]:
    """For each stage column run on the kept candidates, whether its figures are the chain's (see the
    module docstring).

    Args:
        columns: the stages in the order they ran, each with the entries (``llama_token_data``, numpy) it left.
        s: the settings they ran with.
        kept: the candidates' ids.
        floor: the lowest logit among the top-M kept (every token outside them has a logit at most this).

    Returns:
        One bool per column: True from the cut that closed the tail on.
    """
    bound = np.float32(floor)
    closed = False
    out: list[bool] = []
    for kind, entries, _picked in columns:
        if not closed:
            lg = entries["logit"]
            fin = lg[np.isfinite(lg)]
            best = fin.max() if fin.shape[0] else np.float32(-np.inf)
            if _lowers_only(kind, s, kept):
                pass
            elif kind is FunnelStageKind.TEMPERATURE and s.dynatemp_range <= 0.0:
                if s.temperature > 0.0:
                    bound = np.float32(bound / np.float32(s.temperature))  # as llama.cpp divides, float32
                else:
                    closed = bool(best > bound)
            elif kind is FunnelStageKind.TOP_K:
                closed = s.top_k > 0 and fin.shape[0] == s.top_k and bool(fin.min() > bound)
                bound = bound if closed else np.float32(np.inf)
            elif kind is FunnelStageKind.MIN_P:
                threshold = best + np.float32(math.log(s.min_p)) if s.min_p > 0.0 else np.float32(-np.inf)
                closed = bool(best > bound and threshold > bound)
                bound = bound if closed else np.float32(np.inf)
            elif kind is FunnelStageKind.GREEDY:
                closed = bool(best > bound)
            else:
                bound = np.float32(np.inf)
        out.append(closed)
    return out
