"""Glassbox's engine path against plain llama-cpp-python: prefill and decode tok/s.

Both sides evaluate the same prompt tokens (the engine's rendered chat prompt)
with the same threads, n_ctx and n_batch, and generate the same number of
tokens greedily. The engine runs as Glassbox runs it: in its child process,
with every measurement on and the tokens sent over the pipe in batches (about 30 a second); also
with the top-20 candidates on (the Tokens panel on screen), and with every token's alternatives
and the sampler funnel's per-step logits store on (``alternatives=10``, ``keep_logits``: what
every reply costs in the window now, the funnel's store being the one the alternatives are
taken from; with ``--no-alternatives`` the funnel's store alone, as before). Plain
llama-cpp-python is timed the way its own users time it (``Llama.eval`` for
prefill, the ``Llama.generate`` loop for decode). Decode tok/s on both sides
= (generated - 1) / (time of last token - time of first token). Each repeat runs the four cases back
to back, each repeat starting one case later (no case always first); ``paired_*`` are the medians of
the per-repeat ratios, steadier than the ratio of medians on a machine whose speed drifts.

Usage::

    python bench/engine_vs_plain.py [--model PATH] [--threads N] [--gen 128] [--prompt-lines 60] [--repeats 5]

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


def plain_run(llm, tokens: list[int], n_gen: int) -> tuple[float, float, list[int]]:
    import llama_cpp

    llm.reset()
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
    t = time.perf_counter()
    llm.eval(tokens[:-1])
    prefill_s = time.perf_counter() - t
    out: list[int] = []
    times: list[float] = []
    for tok in llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
        times.append(time.perf_counter())
        out.append(tok)
        if len(out) >= n_gen:
            break
    decode = (len(out) - 1) / (times[-1] - times[0])
    return (len(tokens) - 1) / prefill_s, decode, out


def engine_run(host, messages, n_gen: int, candidates: int, keep_logits: bool = False, alternatives: int = 0):
    from app.core import protocol as P
    from app.core.sampling.params import SamplerSettings

    host.request(P.ResetContext(host.next_id()))
    events: list = []
    fin = host.request(
        P.Generate(
            host.next_id(),
            messages,
            SamplerSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=n_gen),
            top_candidates=candidates,
            keep_logits=keep_logits,
            alternatives=alternatives,
        ),
        timeout=600,
        on_event=events.append,
    )
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    ids = [e.token_id for e in events if isinstance(e, P.TokenEvent)]
    engine_run.last_alternatives = fin.alternatives  # type: ignore[attr-defined]
    return fin.stats, prepared, ids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2"))
    ap.add_argument("--threads", type=int, default=0, help="0: Glassbox's auto choice, used for both sides")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--n-batch", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--prompt-lines", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--alternatives", type=int, default=10, help="alternatives per token in the funnel case")
    ap.add_argument("--no-alternatives", action="store_true", help="the funnel case without alternatives")
    args = ap.parse_args()
    n_alts = 0 if args.no_alternatives else args.alternatives
    if not args.model:
        ap.error("give --model or set GLASSBOX_TEST_SMOLLM2")

    import llama_cpp

    from app.core import protocol as P
    from app.core.chat.context import ChatMessage, LoadSettings
    from app.engine.funnel_store import BYTES_PER_STEP, FULL_STEPS
    from app.engine.host import EngineHost
    from app.engine.threads import auto_threads

    threads = args.threads or auto_threads()  # 0: the engine's auto choice (decode and prefill threads differ)
    body = "\n".join(f"{i}. The quick brown fox jumps over the lazy dog." for i in range(args.prompt_lines))
    messages = (
        ChatMessage("system", "You are a helpful assistant."),
        ChatMessage("user", body + "\nNow count from 1 to 1000, one number per line."),
    )

    host = EngineHost()
    host.start()
    assert isinstance(host.recv(60), P.EngineReady)
    loaded = host.request(
        P.LoadModel(
            host.next_id(), args.model, LoadSettings(n_ctx=args.n_ctx, n_batch=args.n_batch, n_threads=args.threads)
        )
    )
    assert isinstance(loaded, P.ModelLoaded), loaded
    llm = llama_cpp.Llama(
        args.model,
        n_ctx=args.n_ctx,
        n_batch=args.n_batch,
        n_ubatch=min(args.n_batch, 512),
        n_threads=threads,
        n_threads_batch=loaded.n_threads_batch,
        verbose=False,
    )
    results: dict[str, list[tuple[float, float]]] = {
        "plain": [],
        "engine": [],
        "engine+candidates": [],
        "engine+funnel": [],
    }
    engine_generated = 0
    same_tokens = True
    alt_bytes: list[float] = []
    try:
        _, prepared, _ = engine_run(host, messages, 4, 0)  # warm-up, and the exact prompt text
        tokens = llm.tokenize(prepared.prompt_text.encode(), add_bos=False, special=True)
        if loaded.add_bos and (not tokens or tokens[0] != llm.token_bos()):
            tokens.insert(0, llm.token_bos())  # as the engine does for models that want BOS
        assert len(tokens) == prepared.prompt_tokens, (len(tokens), prepared.prompt_tokens)
        plain_run(llm, tokens, 4)  # warm-up
        engine_n: list[int] = []

        def run_plain() -> None:
            p_pre, p_dec, p_ids = plain_run(llm, tokens, args.gen)
            results["plain"].append((p_pre, p_dec))
            plain_ids[:] = p_ids

        def run_engine() -> None:
            stats, _, e_ids = engine_run(host, messages, args.gen, 0)
            results["engine"].append((stats.prefill_tok_s, stats.decode_tok_s))
            engine_ids[:] = e_ids
            engine_n.append(stats.generated_tokens)

        def run_candidates() -> None:
            stats, _, _ = engine_run(host, messages, args.gen, 20)
            results["engine+candidates"].append((stats.prefill_tok_s, stats.decode_tok_s))

        def run_funnel() -> None:
            stats, _, f_ids = engine_run(host, messages, args.gen, 0, keep_logits=True, alternatives=n_alts)
            alts = engine_run.last_alternatives  # type: ignore[attr-defined]
            if alts is not None:
                alt_bytes.append(len(alts.to_bytes()) / max(1, alts.n_steps))
            results["engine+funnel"].append((stats.prefill_tok_s, stats.decode_tok_s))
            funnel_ids[:] = f_ids

        plain_ids: list[int] = []
        engine_ids: list[int] = []
        funnel_ids: list[int] = []
        cases = [run_plain, run_engine, run_candidates, run_funnel]
        for r in range(args.repeats):
            # Each repeat runs every case back to back, starting one case later than the last repeat
            # did, so no case always runs first (or right after plain llama-cpp-python) and a slow
            # stretch of the machine falls on each in turn.
            for case in cases[r % 4 :] + cases[: r % 4]:
                case()
            engine_generated = engine_n[-1]
            same_tokens &= (
                engine_ids == plain_ids[: len(engine_ids)]
            )  # the engine may stop earlier (EOS, a stop string)
            same_tokens &= funnel_ids == plain_ids[: len(funnel_ids)]
        n_vocab = llm.n_vocab()
    finally:
        host.stop()
        llm.close()

    def med(name: str, i: int) -> float:
        return statistics.median(v[i] for v in results[name])

    out = {
        "model": Path(args.model).name,
        "threads": threads,
        "threads_batch": loaded.n_threads_batch,
        "n_ctx": args.n_ctx,
        "n_batch": args.n_batch,
        "prompt_tokens": len(tokens),
        "generated_tokens": args.gen,
        "engine_generated_tokens": engine_generated,
        "repeats": args.repeats,
        "same_greedy_tokens": same_tokens,
        "plain": {"prefill_tok_s": round(med("plain", 0), 1), "decode_tok_s": round(med("plain", 1), 1)},
        "engine": {"prefill_tok_s": round(med("engine", 0), 1), "decode_tok_s": round(med("engine", 1), 1)},
        "engine_with_top20_candidates": {
            "prefill_tok_s": round(med("engine+candidates", 0), 1),
            "decode_tok_s": round(med("engine+candidates", 1), 1),
        },
    }
    out["decode_ratio"] = round(out["engine"]["decode_tok_s"] / out["plain"]["decode_tok_s"], 3)
    out["prefill_ratio"] = round(out["engine"]["prefill_tok_s"] / out["plain"]["prefill_tok_s"], 3)
    out["decode_ratio_with_candidates"] = round(
        out["engine_with_top20_candidates"]["decode_tok_s"] / out["plain"]["decode_tok_s"], 3
    )
    out["engine_with_funnel_store"] = {
        "prefill_tok_s": round(med("engine+funnel", 0), 1),
        "decode_tok_s": round(med("engine+funnel", 1), 1),
        "stored_bytes_per_token": BYTES_PER_STEP,
        "latest_full_steps_bytes": FULL_STEPS * n_vocab * 4,
        "alternatives_per_token": n_alts,
        "alternatives_stored_bytes_per_token": round(statistics.median(alt_bytes), 1) if alt_bytes else 0,
    }
    out["decode_ratio_with_funnel_store"] = round(
        out["engine_with_funnel_store"]["decode_tok_s"] / out["plain"]["decode_tok_s"], 3
    )
    # Paired per repeat (each repeat runs every case back to back): steadier on a busy machine.
    for name, key in (("engine", "paired_decode_ratio"), ("engine+funnel", "paired_decode_ratio_with_funnel_store")):
        out[key] = round(
            statistics.median(e[1] / p[1] for e, p in zip(results[name], results["plain"], strict=True)), 3
        )
    # The store's own cost: the funnel-on run over the funnel-off run of the same repeat.
    out["paired_funnel_store_over_engine"] = round(
        statistics.median(f[1] / e[1] for f, e in zip(results["engine+funnel"], results["engine"], strict=True)), 3
    )
    for name in results:
        print(f"{name:>20}: " + ", ".join(f"prefill {a:7.1f} decode {b:6.1f}" for a, b in results[name]))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
