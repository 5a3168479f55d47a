"""Glassbox's depth sweep (speed against context length) against ``llama-bench -d`` on the same model and threads.

Glassbox's side is the engine's SweepDepth request (app/engine/depth_sweep.py) in its child process, on a
model loaded with n_threads, n_batch 512 (n_ubatch 512), flash attention and the K/V cache types given.
llama-bench's side is the binary llama-cpp-python ships (``llama_cpp/lib/llama-bench``) with the same
``-t``, ``-b 512 -ub 512``, ``-fa``, ``-ctk``/``-ctv``, ``-p``, ``-n``, ``-d`` and ``-r``, its JSON output
read. The two run back to back, ``--rounds`` times, each round in the other order (no side always first);
the figures are the medians over the rounds of each side's mean tok/s, and ``ratio`` is Glassbox / llama-bench
per depth (the median of the per-round ratios, steadier than a ratio of medians on a machine whose speed
drifts).

Usage::

    python bench/context_sweep.py [--model PATH] [--threads 1] [--depths 0,512,1024,2048]
        [--n-prompt 128] [--n-gen 32] [--reps 3] [--rounds 2] [--flash-attn] [--kv f16]

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def llama_bench_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.origin is not None, "llama-cpp-python is not installed"
    return Path(spec.origin).parent / "lib" / "llama-bench"


def run_llama_bench(args: argparse.Namespace, depths: list[int]) -> dict[int, dict[str, float]]:
    """``llama-bench -d`` with the sweep's settings: {depth: {pp, pp_sd, tg, tg_sd}} (tok/s)."""
    cmd = [
        str(llama_bench_path()),
        "-m", args.model, "-t", str(args.threads), "-b", "512", "-ub", "512",
        "-p", str(args.n_prompt), "-n", str(args.n_gen), "-d", ",".join(map(str, depths)),
        "-r", str(args.reps), "-fa", "1" if args.flash_attn else "0", "-ctk", args.kv, "-ctv", args.kv,
        "-ngl", "0", "-o", "json",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=True).stdout
    res: dict[int, dict[str, float]] = {d: {} for d in depths}
    for t in json.loads(out):
        kind = "pp" if t["n_prompt"] else "tg"
        res[int(t["n_depth"])][kind] = float(t["avg_ts"])
        res[int(t["n_depth"])][kind + "_sd"] = float(t["stddev_ts"])
    return res


def run_glassbox(host, args: argparse.Namespace, depths: list[int]) -> dict[int, dict[str, float]]:
    from app.core import protocol as P

    host.clear_cancel()
    ans = host.request(P.SweepDepth(host.next_id(), tuple(depths), args.n_prompt, args.n_gen, args.reps), timeout=3600)
    assert isinstance(ans, P.DepthSwept), getattr(ans, "message", ans)
    return {
        p.depth: {"pp": p.prefill_tok_s, "pp_sd": p.prefill_std, "tg": p.decode_tok_s, "tg_sd": p.decode_std}
        for p in ans.points
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2", ""))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--depths", default="0,512,1024,2048")
    ap.add_argument("--n-prompt", type=int, default=128)
    ap.add_argument("--n-gen", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--flash-attn", action="store_true")
    ap.add_argument("--kv", default="f16", help="K and V cache type (f16, q8_0...)")
    ap.add_argument(
        "--swa-full",
        action="store_true",
        help="Glassbox's default full-size cache for sliding-window layers; without it, as llama-bench runs "
        "(it sets swa_full false: llama-bench.cpp), so a sliding-window model compares like for like",
    )
    args = ap.parse_args()
    if not args.model or not Path(args.model).is_file():
        print("Give a GGUF with --model (or set GLASSBOX_TEST_SMOLLM2).", file=sys.stderr)
        return 2
    depths = sorted({int(d) for d in args.depths.split(",")})
    n_ctx = (depths[-1] + args.n_prompt + args.n_gen + 255) // 256 * 256

    from app.core import protocol as P
    from app.core.chat.context import FlashAttention, LoadSettings
    from app.engine.host import EngineHost

    host = EngineHost()
    host.start()
    assert isinstance(host.recv(60), P.EngineReady)
    settings = LoadSettings(
        n_ctx=n_ctx,
        n_threads=args.threads,
        n_batch=512,
        n_gpu_layers=0,
        flash_attn=FlashAttention.ON if args.flash_attn else FlashAttention.OFF,
        type_k=args.kv,
        type_v=args.kv,
        swa_full=args.swa_full,
    )
    loaded = host.request(P.LoadModel(host.next_id(), args.model, settings), timeout=300)
    assert isinstance(loaded, P.ModelLoaded), getattr(loaded, "message", loaded)
    rounds: list[dict[str, dict[int, dict[str, float]]]] = []
    t0 = time.perf_counter()
    try:
        for r in range(args.rounds):
            order = ["glassbox", "llama_bench"] if r % 2 == 0 else ["llama_bench", "glassbox"]
            got: dict[str, dict[int, dict[str, float]]] = {}
            for side in order:
                got[side] = run_glassbox(host, args, depths) if side == "glassbox" else run_llama_bench(args, depths)
                print(f"round {r + 1} {side}: " + "  ".join(
                    f"d{d}: pp {v.get('pp', 0):.1f} tg {v.get('tg', 0):.1f}" for d, v in got[side].items()
                ), flush=True)  # fmt: skip
            rounds.append(got)
    finally:
        host.stop()

    def med(side: str, d: int, k: str) -> float:
        return statistics.median(rd[side][d].get(k, 0.0) for rd in rounds)

    def ratio(d: int, k: str) -> float:
        vals = [rd["glassbox"][d][k] / rd["llama_bench"][d][k] for rd in rounds if rd["llama_bench"][d].get(k)]
        return round(statistics.median(vals), 3) if vals else 0.0

    sides = {
        side: [{"depth": d, **{k: round(med(side, d, k), 2) for k in ("pp", "pp_sd", "tg", "tg_sd")}} for d in depths]
        for side in ("glassbox", "llama_bench")
    }
    result = {
        "model": Path(args.model).name,
        "threads": args.threads,
        "n_ctx": loaded.n_ctx,
        "n_prompt": args.n_prompt,
        "n_gen": args.n_gen,
        "repetitions": args.reps,
        "rounds": args.rounds,
        "flash_attn": args.flash_attn,
        "kv": args.kv,
        "swa_full": args.swa_full,
        "seconds": round(time.perf_counter() - t0, 1),
        **sides,
        "ratio": [{"depth": d, "pp": ratio(d, "pp"), "tg": ratio(d, "tg")} for d in depths],
        "per_round": [
            {side: {d: {k: round(v, 2) for k, v in vals.items()} for d, vals in rd[side].items()} for side in rd}
            for rd in rounds
        ],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
