"""What keeping logits for the sampler funnel costs the decode loop, measured in alternating blocks.

One greedy decode (llama.cpp's chain, ``llama_sampler_sample``, ``Llama.eval``, as the
engine's decode loop does) in blocks of ``--block`` tokens, the per-step logits store
(:class:`app.engine.funnel_store.ReplyLogits`) on in every other block. Alternating short
blocks puts both cases under the same machine load, so the ratio holds on a busy machine
where whole-run figures (bench/engine_vs_plain.py) swing by tens of percent. Also reports
the store's own time per step on the decode thread (the copy), the reducing thread's time per
step (``reduce_step`` on the last step's logits: the CPU it takes from other work), and the
bytes it keeps. The same store gives every token's alternatives (app/engine/alternative.py):
they cost the decode loop nothing more.

Usage::

    python bench/funnel_cost.py [--model PATH] [--tokens 1024] [--block 16] [--threads 1]

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2"))
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if not args.model:
        ap.error("give --model or set GLASSBOX_TEST_SMOLLM2")

    import llama_cpp
    import numpy as np

    from app.core.sampling.params import SamplerSettings
    from app.engine.funnel import make_chain
    from app.engine.funnel_store import BYTES_PER_STEP, ReplyLogits, reduce_step
    from app.engine.vocab import Vocab

    n_ctx = args.tokens + 256
    llm = llama_cpp.Llama(args.model, n_ctx=n_ctx, n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    vocab = Vocab(llm.model)
    prompt = llm.tokenize(b"Count from 1 to 1000, one number per line.\n1\n2\n3\n", add_bos=True)
    settings = SamplerSettings(temperature=0.0, repeat_penalty=1.0)
    chain = make_chain(settings, 0, prompt, vocab, n_ctx)
    store = ReplyLogits(1, settings, 0, prompt, vocab.n_tokens)
    n = llm.n_vocab()
    llm.eval(prompt)
    on_rates: list[float] = []
    off_rates: list[float] = []
    record_ns: list[int] = []
    blocks = args.tokens // args.block
    reduce_ns: list[int] = []
    try:
        for b in range(blocks):
            on = b % 2 == 1
            t0 = time.perf_counter_ns()
            for _ in range(args.block):
                token = llama_cpp.llama_sampler_sample(chain, llm.ctx, -1)
                if on:
                    r0 = time.perf_counter_ns()
                    view = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n,))
                    store.record(view, token)
                    record_ns.append(time.perf_counter_ns() - r0)
                llm.eval([token])
            rate = args.block / ((time.perf_counter_ns() - t0) / 1e9)
            (on_rates if on else off_rates).append(rate)
        last = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n,)).copy()
        scratch, scratch2 = np.empty_like(last), np.empty_like(last)
        for _ in range(50):
            r0 = time.perf_counter_ns()
            reduce_step(last, scratch, scratch2)
            reduce_ns.append(time.perf_counter_ns() - r0)
    finally:
        store.close()
        llama_cpp.llama_sampler_free(chain)
        llm.close()
    # Pairs of neighbouring blocks (off, on): the ratio of each pair, then the median.
    pairs = [on / off for off, on in zip(off_rates, on_rates, strict=False)]
    out = {
        "model": Path(args.model).name,
        "n_vocab": n,
        "threads": args.threads,
        "tokens": blocks * args.block,
        "block": args.block,
        "decode_tok_s_off": round(statistics.median(off_rates), 1),
        "decode_tok_s_on": round(statistics.median(on_rates), 1),
        "paired_ratio_on_over_off": round(statistics.median(pairs), 3),
        "record_us_median": round(statistics.median(record_ns) / 1000, 1),
        "reduce_us_median": round(statistics.median(reduce_ns) / 1000, 1),
        "stored_bytes_per_token": BYTES_PER_STEP,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
