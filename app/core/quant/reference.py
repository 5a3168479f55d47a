"""llama.cpp's published reference figures for quantization quality, to read a comparison's numbers by.

Source: llama.cpp's perplexity README (tools/perplexity/README.md in the vendored sources,
/work/llama-src/vendor/llama.cpp), "LLaMA 3 8b Scoreboard": each quantization of LLaMA 3 8B against
its FP16 logits on the Wikitext-2 test set, without an importance matrix (CUDA, revision f364eb6f);
the same-top-1 figures are from its "LLaMA 2 vs. LLaMA 3 Quantization comparison" table (LLaMA 3 8B
column). They are one model on one text: a smaller model usually loses more at the same type, and a
comparison of two quantizations of each other (not against FP16) measures their difference only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

SOURCE = "llama.cpp tools/perplexity/README.md, LLaMA 3 8B vs FP16 on Wikitext-2"


@dataclass(frozen=True)
class Reference:
    """One row of the scoreboard.

    Attributes:
        quant: the quantization type, as llama.cpp names it.
        kl_mean: mean KL divergence against FP16, nats.
        rms_dp: RMS Δp (root mean square change of the next token's probability), a fraction.
        same_top1: how often both gave the same most likely token, a fraction; None when not published.
        ppl_ratio: mean PPL(Q) / PPL(FP16); None when not published.
    """

    quant: str
    kl_mean: float
    rms_dp: float
    same_top1: float | None = None
    ppl_ratio: float | None = None


# Sorted by mean KL divergence, low to high.
REFERENCES: tuple[Reference, ...] = (
    Reference("Q8_0", 0.001355, 0.01198, 0.97674, 1.000425),
    Reference("Q6_K", 0.005452, 0.02295, 0.96031, 1.003490),
    Reference("Q5_K_M", 0.010762, 0.03160),
    Reference("Q4_K_M", 0.031273, 0.05519, 0.91901, 1.028160),
    Reference("Q4_0", 0.071940, 0.08434),
    Reference("Q3_K_M", 0.101913, 0.10203),
    Reference("Q2_K", 0.445132, 0.21421, 0.71138, 1.564849),
)


def place_kl(kl_mean: float) -> str:
    """Where a mean KL divergence (nats) sits among :data:`REFERENCES`, in words, e.g.
    "between Q8_0 (0.0014) and Q6_K (0.0055)", "below Q8_0 (0.0014)", "above Q2_K (0.45)"."""
    refs = REFERENCES
    if kl_mean < refs[0].kl_mean:
        return f"below {refs[0].quant} ({refs[0].kl_mean:.2g})"
    for lo, hi in itertools.pairwise(refs):
        if kl_mean < hi.kl_mean:
            return f"between {lo.quant} ({lo.kl_mean:.2g}) and {hi.quant} ({hi.kl_mean:.2g})"
    return f"above {refs[-1].quant} ({refs[-1].kl_mean:.2g})"


def reference_line(field: str) -> str:
    """The published figures for one field (``kl_mean``, ``rms_dp``, ``same_top1``, ``ppl_ratio``) as
    "Q8_0 0.0014, Q6_K 0.0055, …" (fractions as percentages), rows without the figure left out."""
    parts = []
    for r in REFERENCES:
        v = getattr(r, field)
        if v is None:
            continue
        text = f"{100 * v:.1f}%" if field in ("rms_dp", "same_top1") else f"{v:.4g}"
        parts.append(f"{r.quant} {text}")
    return ", ".join(parts)
