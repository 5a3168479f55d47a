"""llama.cpp's own ``llama-perplexity --kl-divergence-base`` / ``--kl-divergence``, run and read back: the yardstick
the quantization comparison (app/engine/quant/) is checked against in tests/engine/test_quant_compare.py and
bench/quant_compare.py.

The base file's layout is perplexity.cpp's (``perplexity()`` writes it, ``kl_divergence()`` reads it):
``_logits_``, uint32 n_ctx, int32 n_vocab, int32 n_chunk, n_ctx * n_chunk int32 tokens, then per chunk
``n_ctx - 1 - n_ctx / 2`` rows of ``nv = 2 * ((n_vocab + 1) / 2) + 4`` uint16: two float32 (scale,
min_log_prob) then each token's log-probability as ``scale * q + min_log_prob``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def llama_tool(name: str) -> Path:
    """A llama.cpp tool installed beside libllama in the venv's llama_cpp package (``llama-perplexity``...)."""
    import llama_cpp

    path = Path(llama_cpp.__file__).parent / "lib" / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{name} is not in {path.parent}: run packaging/bootstrap.py to build llama.cpp's tools"
        )
    return path


def _run(args: list[str], timeout: float) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} exited {done.returncode}:\n{out[-3000:]}")
    return out


def common_args(text_file: Path, n_ctx: int, threads: int) -> list[str]:
    """The options both runs share: the text, n_ctx, n_batch = n_ctx (one sequence per batch), threads."""
    return ["-f", str(text_file), "-c", str(n_ctx), "-b", str(n_ctx), "-t", str(threads), "-tb", str(threads)]


def write_base(model: Path, text_file: Path, base: Path, n_ctx: int, threads: int, timeout: float = 600) -> str:
    """``llama-perplexity --kl-divergence-base``: model A's log-probabilities into ``base``; its output."""
    args = [str(llama_tool("llama-perplexity")), "-m", str(model), "--kl-divergence-base", str(base)]
    return _run(args + common_args(text_file, n_ctx, threads), timeout)


@dataclass(frozen=True)
class KlStats:
    """What ``llama-perplexity --kl-divergence`` printed at the end (nan where a line was missing)."""

    ppl_b: float
    ppl_a: float
    ln_ratio: float
    ppl_ratio: float
    kl_mean: float
    kl_p99: float
    kl_median: float
    kl_max: float
    rms_dp_pct: float
    same_top1_pct: float


def _figure(out: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s*:\s*(-?[0-9.]+)", out)
    return float(m.group(1)) if m else float("nan")


def kl_divergence(model: Path, text_file: Path, base: Path, n_ctx: int, threads: int, timeout: float = 600) -> KlStats:
    """``llama-perplexity --kl-divergence`` of model B against ``base``, its final statistics.

    llama-perplexity prints them only from 100 scored tokens on.
    """
    args = [str(llama_tool("llama-perplexity")), "-m", str(model), "--kl-divergence-base", str(base), "--kl-divergence"]
    out = _run(args + common_args(text_file, n_ctx, threads), timeout)
    return KlStats(
        ppl_b=_figure(out, "Mean PPL(Q)"),
        ppl_a=_figure(out, "Mean PPL(base)"),
        ln_ratio=_figure(out, "Mean ln(PPL(Q)/PPL(base))"),
        ppl_ratio=_figure(out, "Mean PPL(Q)/PPL(base)"),
        kl_mean=_figure(out, "Mean    KLD"),
        kl_p99=_figure(out, "99.0%   KLD"),
        kl_median=_figure(out, "Median  KLD"),
        kl_max=_figure(out, "Maximum KLD"),
        rms_dp_pct=_figure(out, "RMS Δp"),
        same_top1_pct=_figure(out, "Same top p"),
    )


@dataclass(frozen=True)
class BaseFile:
    """A ``--kl-divergence-base`` file read back.

    Attributes:
        n_ctx, n_vocab, n_chunk: its header.
        tokens: the tokenized text as llama-perplexity cut it (n_ctx * n_chunk ids).
        scored_logp: per scored position in order (chunk by chunk), the base model's log-probability of the
            token that comes next, nats (as perplexity.cpp's ``nll_base`` reads it, negated).
    """

    n_ctx: int
    n_vocab: int
    n_chunk: int
    tokens: tuple[int, ...]
    scored_logp: tuple[float, ...]


def read_base(path: Path) -> BaseFile:
    """Read a ``--kl-divergence-base`` file (small ones: it is read whole)."""
    raw = path.read_bytes()
    assert raw[:8] == b"_logits_", f"{path} is not a llama-perplexity base file"
    n_ctx = int(np.frombuffer(raw, np.uint32, 1, 8)[0])
    n_vocab, n_chunk = (int(x) for x in np.frombuffer(raw, np.int32, 2, 12))
    off = 20
    tokens = np.frombuffer(raw, np.int32, n_ctx * n_chunk, off)
    off += 4 * n_ctx * n_chunk
    nv = 2 * ((n_vocab + 1) // 2) + 4
    first = n_ctx // 2
    per_chunk = n_ctx - 1 - first
    logp: list[float] = []
    for c in range(n_chunk):
        rows = np.frombuffer(raw, np.uint16, per_chunk * nv, off).reshape(per_chunk, nv)
        off += 2 * per_chunk * nv
        head = rows[:, :4].copy().view(np.float32)  # [scale, min_log_prob] per row
        for r in range(per_chunk):
            tok = int(tokens[c * n_ctx + first + r + 1])
            logp.append(float(head[r, 0]) * float(rows[r, 4 + tok]) + float(head[r, 1]))
    return BaseFile(n_ctx, n_vocab, n_chunk, tuple(int(t) for t in tokens), tuple(logp))
