"""A depth sweep's plan and figures: which depths, one depth's tok/s, how long the rest will take.

Terms as llama-bench's (tools/llama-bench/llama-bench.cpp): ``depth`` is the tokens already in the
KV cache (``-d``), ``n_prompt`` the prompt tokens timed (``-p``, "pp"), ``n_gen`` the tokens decoded
one at a time (``-n``, "tg"); a figure is the mean of the repetitions' tok/s (llama-bench's
``avg_ts``) with their sample standard deviation (``stdev_ts``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: The first depth after 0 in the default plan; then each doubles (llama-bench's usual ``-d 0,512,1024,...``).
FIRST_DEPTH = 512


@dataclass(frozen=True)
class DepthPoint:
    """One depth's figures.

    Attributes:
        depth: tokens in the KV cache before each timed run.
        prefill_tok_s: mean over the repetitions of ``n_prompt / seconds`` (0: not timed).
        prefill_std: their sample standard deviation, tok/s (0 with one repetition).
        decode_tok_s: mean over the repetitions of ``n_gen / seconds`` (0: not timed).
        decode_std: their sample standard deviation, tok/s.
        fill_s: seconds spent filling the KV cache up to this depth from the depth before.
    """

    depth: int
    prefill_tok_s: float
    prefill_std: float
    decode_tok_s: float
    decode_std: float
    fill_s: float = 0.0


def mean_std(samples: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for fewer than 2 samples), as llama-bench's avg/stdev."""
    if not samples:
        return 0.0, 0.0
    mean = statistics.fmean(samples)
    return mean, statistics.stdev(samples) if len(samples) > 1 else 0.0


def max_depth(n_ctx: int, n_prompt: int, n_gen: int) -> int:
    """The deepest depth that leaves room for the timed tokens in n_ctx (llama-bench sizes its
    context as ``n_prompt + n_gen + n_depth``; here the context is the loaded one)."""
    return max(0, n_ctx - n_prompt - n_gen)


def default_depths(n_ctx: int, n_prompt: int, n_gen: int) -> tuple[int, ...]:
    """0, 512, 1024, 2048... while they fit, then the deepest that fits (when it is not one already).

    Example: n_ctx 4096, n_prompt 128, n_gen 32 gives (0, 512, 1024, 2048, 3936).
    """
    top = max_depth(n_ctx, n_prompt, n_gen)
    depths = [0]
    d = FIRST_DEPTH
    while d <= top:
        depths.append(d)
        d *= 2
    if top > depths[-1]:
        depths.append(top)
    return tuple(depths)


def parse_depths(text: str) -> tuple[int, ...]:
    """Depths typed as ``0, 512, 1k, 2k`` (``k`` = 1024), sorted, each once.

    Raises:
        ValueError: a part that is not a whole number of tokens (the message names it).
    """
    out: set[int] = set()
    for part in text.replace(";", ",").replace(" ", ",").split(","):
        p = part.strip().lower()
        if not p:
            continue
        scale = 1024 if p.endswith("k") else 1
        num = p[:-1] if scale > 1 else p
        if not num.isdigit():
            raise ValueError(f"“{part.strip()}” is not a depth: give whole numbers of tokens, such as 0, 512, 1k, 2k.")
        out.add(int(num) * scale)
    if not out:
        raise ValueError("No depth given: type depths such as 0, 512, 1k, 2k.")
    return tuple(sorted(out))


def check_plan(depths: Sequence[int], n_prompt: int, n_gen: int, repetitions: int, n_ctx: int) -> str:
    """Why the plan cannot run in a context of ``n_ctx`` tokens ("" when it can)."""
    if not depths:
        return "No depth was given."
    if any(d < 0 for d in depths) or list(depths) != sorted(set(depths)):
        return "The depths must be whole numbers of tokens, ascending, each once."
    if n_prompt < 0 or n_gen < 0 or n_prompt + n_gen == 0:
        return "Time the prefill (n_prompt > 0), the decode (n_gen > 0) or both."
    if repetitions < 1:
        return "At least one repetition is needed."
    top = max_depth(n_ctx, n_prompt, n_gen)
    if depths[-1] > top:
        return (
            f"Depth {depths[-1]:,} with {n_prompt:,} prompt and {n_gen:,} generated tokens needs "
            f"{depths[-1] + n_prompt + n_gen:,} tokens of context; n_ctx is {n_ctx:,}. The deepest that fits is "
            f"{top:,}: lower the depth or reload the model with a larger n_ctx."
        )
    return ""


def time_left_s(
    points: Sequence[DepthPoint], depths: Sequence[int], n_prompt: int, n_gen: int, repetitions: int
) -> float | None:
    """Seconds the depths not yet measured will take, at the speeds of the latest one (None before the
    first): filling to each depth at its prefill tok/s, then ``repetitions`` × (n_prompt at prefill +
    n_gen at decode tok/s). Speeds fall with depth, so it is a lower estimate."""
    if not points:
        return None
    last = points[-1]
    pp = last.prefill_tok_s
    if pp <= 0:  # prefill not timed: the fill speed is the one seen filling
        pp = (last.depth - (points[-2].depth if len(points) > 1 else 0)) / last.fill_s if last.fill_s > 0 else 0.0
    tg = last.decode_tok_s
    left = 0.0
    prev = last.depth
    for d in depths[len(points) :]:
        per_rep = (n_prompt / pp if pp > 0 and n_prompt else 0.0) + (n_gen / tg if tg > 0 and n_gen else 0.0)
        left += ((d - prev) / pp if pp > 0 else 0.0) + repetitions * per_rep
        prev = d
    return left if math.isfinite(left) else None
