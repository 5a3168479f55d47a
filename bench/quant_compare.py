"""The quantization comparison (CompareModels) against llama.cpp's own ``llama-perplexity --kl-divergence``.

One text file, one n_ctx, one thread count for both: llama-perplexity writes model A's log-probabilities
(``--kl-divergence-base``) and then scores model B against them (``--kl-divergence``); Glassbox compares
the same two files in an engine process of its own, as the window does. Printed: Glassbox's time per
1,000 scored tokens (the whole request: both loads, chunks, the decode-speed runs; and the chunks alone),
the engine process's peak extra memory (its VmHWM at the end less its RSS before the request), and
mean KL divergence and PPL ratio from both with their difference in %.

Model B defaults to SmolLM2 Q4_1 (``GLASSBOX_TEST_SMOLLM2``); model A to B requantized to ``--requant``
(Q8_0) by Glassbox's ``Quantize`` request, cached as the tests' ``smollm2_q8_0`` (tests/support/quantized.py). The text is the
repository's docs (``docs/**/*.md``) cut to about ``--chunks`` chunks of n_ctx tokens.

Usage::

    python bench/quant_compare.py [--model-b PATH] [--model-a PATH | --requant Q8_0] [--n-ctx 512]
                                  [--chunks 8] [--threads 1] [--work DIR]

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
CHARS_PER_TOKEN = 3.4  # the docs' English and code, SmolLM2 and Gemma 3 alike (rough: the text is cut by characters)


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def glassbox(a: Path, b: Path, text: str, n_ctx: int, threads: int) -> dict:
    from app.core import protocol as P
    from app.engine.host import EngineHost

    host = EngineHost()
    host.start()
    assert isinstance(host.recv(60), P.EngineReady)
    try:
        pid = host.process.pid
        rss0 = status_kib(pid, "VmRSS")
        progress: list = []
        req = P.CompareModels(
            host.next_id(), str(a), str(b), text, None, None, n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads
        )
        t = time.perf_counter()
        end = host.request(req, timeout=3600, on_event=progress.append)
        wall = time.perf_counter() - t
        hwm = status_kib(pid, "VmHWM")
    finally:
        host.stop()
    assert isinstance(end, P.ComparisonFinished), getattr(end, "message", end)
    chunks = [e for e in progress if isinstance(e, P.ComparisonProgressed)]
    s = end.summary
    first, last = chunks[0], chunks[-1]
    per_chunk = (last.elapsed_s - first.elapsed_s) / (last.done - first.done) if len(chunks) > 1 else float("nan")
    return {
        "n_scored": s.n_scored,
        "n_chunks": s.n_chunks,
        "wall_s": round(wall, 2),
        "s_per_1000_tokens": round(1000 * s.elapsed_s / s.n_scored, 2),
        "s_per_1000_tokens_chunks_only": round(1000 * per_chunk, 2),
        "peak_extra_mib": round((hwm - rss0) / 1024, 1),
        "kl_mean": s.kl_mean,
        "kl_mean_err": s.kl_mean_err,
        "kl_p99": s.kl_p99,
        "kl_median": s.kl_median,
        "kl_max": s.kl_max,
        "ppl_a": s.a.ppl,
        "ppl_b": s.b.ppl,
        "ppl_ratio": s.ppl_ratio,
        "ppl_ratio_err": s.ppl_ratio_err,
        "same_top1": s.same_top1,
        "rms_dp": s.rms_dp,
        "prefill_tok_s": [round(s.a.prefill_tok_s, 1), round(s.b.prefill_tok_s, 1)],
        "decode_tok_s": [round(s.a.decode_tok_s, 1), round(s.b.decode_tok_s, 1)],
        "weights_mib": [round(s.a.weights_bytes / 2**20, 1), round(s.b.weights_bytes / 2**20, 1)],
    }


def llama_perplexity(a: Path, b: Path, text_file: Path, n_ctx: int, threads: int, work: Path) -> dict:
    from tests.support.perplexity_tool import kl_divergence, write_base

    base = work / "base.kld"
    t = time.perf_counter()
    out = write_base(a, text_file, base, n_ctx, threads, timeout=3600)
    t_base = time.perf_counter() - t
    # the base run's own PPL, from its float32 logits (--kl-divergence's "Mean PPL(base)" reads the 16-bit
    # log-probabilities of the base file, each clipped 16 nats below its row's top)
    found = re.search(r"Final estimate: PPL = ([0-9.]+)", out)
    t = time.perf_counter()
    stats = kl_divergence(b, text_file, base, n_ctx, threads, timeout=3600)
    t_kld = time.perf_counter() - t
    base_mib = base.stat().st_size / 2**20
    base.unlink()
    return {
        "base_s": round(t_base, 2),
        "kld_s": round(t_kld, 2),
        "base_file_mib": round(base_mib, 1),
        "ppl_a_base_run": float(found.group(1)) if found else float("nan"),
        "peak_rss_mib_children": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        **{k: getattr(stats, k) for k in ("kl_mean", "kl_p99", "kl_median", "kl_max", "ppl_a", "ppl_b", "ppl_ratio")},
        "same_top1": stats.same_top1_pct / 100,
        "rms_dp": stats.rms_dp_pct / 100,
    }


def pct(ours: float, theirs: float) -> float:
    return round(100 * (ours - theirs) / theirs, 3) if theirs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-b", default=os.environ.get("GLASSBOX_TEST_SMOLLM2"))
    ap.add_argument("--model-a", default=None, help="the base model; default: model B requantized to --requant")
    ap.add_argument("--requant", default="Q8_0")
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=8, help="about this many chunks of the docs' text")
    ap.add_argument("--threads", type=int, default=1, help="both tools, prefill and decode")
    ap.add_argument("--work", default="/tmp/glassbox-bench-quant", help="the text file and the base log-probabilities")
    args = ap.parse_args()
    if not args.model_b:
        sys.exit("give --model-b or set GLASSBOX_TEST_SMOLLM2")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    b = Path(args.model_b)
    if args.model_a:
        a = Path(args.model_a)
    else:  # made by Glassbox's Quantize request and cached, as the tests' smollm2_q8_0
        from app.core.quant.types import QuantType
        from tests.support.quantized import requantized

        a = requantized(b, QuantType(args.requant))
    docs = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").rglob("*.md")))
    # enough for the chunks asked, and llama-perplexity's two chunks at least
    text = docs[: int(CHARS_PER_TOKEN * args.n_ctx * (max(2, args.chunks) + 0.5))]
    text_file = work / "text.txt"
    text_file.write_text(text, encoding="utf-8")
    print(f"A (base) {a.name}, B {b.name}; {len(text):,} characters, n_ctx {args.n_ctx}, {args.threads} thread(s)")
    theirs = llama_perplexity(a, b, text_file, args.n_ctx, args.threads, work)
    print("llama-perplexity:", theirs)
    ours = glassbox(a, b, text, args.n_ctx, args.threads)
    print("glassbox:", ours)
    result = {
        "model_a": a.name,
        "model_b": b.name,
        "n_ctx": args.n_ctx,
        "threads": args.threads,
        "glassbox": ours,
        "llama_perplexity": theirs,
        "kl_mean_diff_pct": pct(ours["kl_mean"], theirs["kl_mean"]),
        "ppl_ratio_diff_pct": pct(ours["ppl_ratio"], theirs["ppl_ratio"]),
        "ppl_a_diff_pct_vs_base_run": pct(ours["ppl_a"], theirs["ppl_a_base_run"]),
        "ppl_b_diff_pct": pct(ours["ppl_b"], theirs["ppl_b"]),
        "kl_mean_diff_abs": ours["kl_mean"] - theirs["kl_mean"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
