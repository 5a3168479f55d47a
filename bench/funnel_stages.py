"""How long the engine takes to compute one funnel, per settings, on a stored top-N step (a review
found "DRY on Gemma takes 78-88 ms"): the model's vocabulary only (no weights), random logits over its
top 64, ``run_funnel`` as the engine calls it, the median of ``--repeat`` runs per preset and for a
temperature drag with each preset on (each run a new temperature, as a slider move).

Usage::

    python bench/funnel_stages.py [--model PATH] [--repeat 15] [--top 64]

The last line printed is JSON (milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_GEMMA"))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--top", type=int, default=64)
    args = ap.parse_args()
    if not args.model:
        print("give --model or set GLASSBOX_TEST_GEMMA", file=sys.stderr)
        return 2
    import llama_cpp
    import numpy as np

    from app.core.sampling.params import DEFAULTS, with_preset
    from app.engine.funnel import run_funnel
    from app.engine.vocab import Vocab

    llm = llama_cpp.Llama(model_path=args.model, n_ctx=64, vocab_only=True, verbose=False)
    vocab = Vocab(llm.model)
    rng = np.random.default_rng(0)
    n_vocab = vocab.n_tokens
    ids = rng.choice(n_vocab, size=args.top, replace=False).astype(np.int32)
    logits = np.sort(rng.normal(0, 3, size=args.top).astype(np.float32))[::-1].copy()
    history = rng.integers(0, n_vocab, size=300).tolist()
    out: dict[str, float] = {}
    for name in ("Balanced", "DRY+XTC"):
        s = with_preset(DEFAULTS, name)
        times = []
        for i in range(args.repeat):
            t = replace(s, temperature=0.5 + 0.05 * i).validated()
            t0 = time.perf_counter()
            run_funnel(
                ids=ids,
                logits=logits,
                logsumexp=float(logits.max()) + 3.0,
                settings=t,
                seed=1,
                history=history,
                vocab=vocab,
                n_ctx=4096,
                drawn=int(ids[0]),
                reply_id=1,
                step=0,
                exact=False,
            )
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = statistics.median(times)
        print(f"{name}: median {out[name]:.1f} ms over {args.repeat} runs (first {times[0]:.1f} ms), vocab {n_vocab}")
    print(json.dumps({k: round(v, 2) for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
