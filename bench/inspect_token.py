"""Inspect a token: how long an inspection takes on each path, what it holds, and whether chatting slows.

One engine process (as Glassbox runs it) with a conversation of about 2,000 tokens in its KV cache:

- ``inspect_s``: median seconds per inspection of a late and a middle position, per path
  (``cache_reuse``: the chat's KV cache copied into the inspect context, only 5 positions
  evaluated; ``re_eval``: everything up to the position evaluated again); ``first_inspect_s`` is
  the first one, which also dequantizes the vocabulary tables (``tables_s``);
- ``extra_memory_bytes``: what the inspector holds (inspect context's KV cache and estimated
  compute buffer, the copied sequence, the tables), and the engine's RSS growth across the
  inspections (``engine_rss_growth_bytes``, /proc);
- ``lens_last_layer_max_abs_diff`` (the lens self-check, worst over every inspection) and
  ``attention_rows_max_sum_error``;
- ``decode_ratio_while_idle``: engine decode tok/s over plain llama-cpp-python's (the same
  short prompt, greedy, paired per repeat as bench/engine_vs_plain.py does), with an inspect context
  and tables held but no inspection running; ``decode_ratio_before_first_inspection`` the same
  before any inspection.

Usage::

    python bench/inspect_token.py --model PATH [--prompt-lines 160] [--gen 64] [--repeats 3]

The last line printed is JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path

# (Named inspect_token.py, not inspect.py: a bench/inspect.py stood in for the standard library's
# ``inspect`` in every script of this folder.)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import os
import statistics

from bench.engine_vs_plain import engine_run, plain_run


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, bytes (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2"))
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--prompt-lines", type=int, default=160)
    ap.add_argument("--decode-prompt-lines", type=int, default=30)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not args.model:
        ap.error("give --model or set GLASSBOX_TEST_SMOLLM2")

    import llama_cpp

    from app.core import protocol as P
    from app.core.chat.context import ChatMessage, LoadSettings
    from app.core.sampling.params import SamplerSettings
    from app.engine.host import EngineHost

    def conversation(lines: int) -> tuple[ChatMessage, ...]:
        body = "\n".join(f"{i}. The quick brown fox jumps over the lazy dog." for i in range(lines))
        return (
            ChatMessage("system", "You are a helpful assistant."),
            ChatMessage("user", body + "\nNow count from 1 to 1000, one number per line."),
        )

    messages = conversation(args.prompt_lines)  # the conversation the inspections read (~2,000 tokens)
    decode_messages = conversation(args.decode_prompt_lines)  # the decode comparison's prompt
    host = EngineHost()
    host.start()
    assert isinstance(host.recv(60), P.EngineReady)
    loaded = host.request(P.LoadModel(host.next_id(), args.model, LoadSettings(n_ctx=args.n_ctx)))
    assert isinstance(loaded, P.ModelLoaded), loaded
    pid = host.process.pid if host.process is not None else 0
    llm = llama_cpp.Llama(
        args.model,
        n_ctx=args.n_ctx,
        n_batch=loaded.n_batch,
        n_ubatch=min(loaded.n_batch, 512),
        n_threads=loaded.n_threads,
        n_threads_batch=loaded.n_threads_batch,
        verbose=False,
    )
    out: dict[str, object] = {"model": Path(args.model).name}
    try:
        _, prepared, _ = engine_run(host, decode_messages, 4, 0)
        tokens = llm.tokenize(prepared.prompt_text.encode(), add_bos=False, special=True)
        if loaded.add_bos and (not tokens or tokens[0] != llm.token_bos()):
            tokens.insert(0, llm.token_bos())
        plain_run(llm, tokens, 4)

        def decode_ratios() -> list[float]:
            ratios = []
            for _ in range(args.repeats):
                _, p_dec, _ = plain_run(llm, tokens, args.gen)
                stats, _, _ = engine_run(host, decode_messages, args.gen, 0)
                ratios.append(stats.decode_tok_s / p_dec)
            return ratios

        before = decode_ratios()
        # The conversation the inspections read: the prompt and a short reply in the KV cache.
        host.request(P.ResetContext(host.next_id()))
        events: list = []
        fin = host.request(
            P.Generate(host.next_id(), messages, SamplerSettings(temperature=0.0, max_tokens=16)),
            timeout=600,
            on_event=events.append,
        )
        assert isinstance(fin, P.Finished), fin
        prep = next(e for e in events if isinstance(e, P.PromptPrepared))
        held = [t for t, _ in prep.new_tokens] + [e.token_id for e in events if isinstance(e, P.TokenEvent)]
        n_held = fin.stats.context_used
        held = held[:n_held]
        assert prep.cached_tokens == 0 and len(held) == n_held, (prep.cached_tokens, len(held), n_held)
        rss0 = rss_bytes(pid)
        timings: dict[str, list[float]] = {"cache_reuse": [], "re_eval": []}
        diffs: list[float] = []
        sums: list[float] = []
        extra = 0
        first = None
        positions = [n_held - 3, n_held // 2]
        for rep in range(args.repeats):
            for pos in positions:
                for force in (False, True) if rep == 0 else (False,):  # re-evaluation: once per position
                    ev = host.request(P.InspectToken(host.next_id(), pos, held[pos], force_re_eval=force), timeout=600)
                    assert isinstance(ev, P.TokenInspected), ev
                    ins = ev.inspection
                    if first is None:
                        first = ins
                        continue  # its time includes the tables: reported apart
                    timings[ins.path.value].append(ins.inspect_s)
                    diffs.append(ins.lens.last_layer_max_abs_diff)
                    sums.append(ins.attention.row_sum_max_error)
                    extra = max(extra, ins.extra_memory_bytes)
        assert first is not None
        diffs.append(first.lens.last_layer_max_abs_diff)
        sums.append(first.attention.row_sum_max_error)
        rss1 = rss_bytes(pid)
        after = decode_ratios()
    finally:
        host.stop()
        llm.close()

    out.update(
        {
            "context_tokens": n_held,
            "positions": positions,
            "inspect_s": {k: round(statistics.median(v), 3) for k, v in timings.items() if v},
            "inspect_s_max": {k: round(max(v), 3) for k, v in timings.items() if v},
            "first_inspect_s": round(first.inspect_s, 3),
            "first_path": first.path.value,
            "tables_s": round(first.tables_s, 3),
            "extra_memory_bytes": extra,
            "engine_rss_growth_bytes": rss1 - rss0,
            "lens_last_layer_max_abs_diff": round(max(diffs), 5),
            "attention_rows_max_sum_error": float(f"{max(sums):.3g}"),
            "decode_ratio_while_idle": round(statistics.median(after), 3),
            "decode_ratio_before_first_inspection": round(statistics.median(before), 3),
            "decode_ratios_while_idle": [round(r, 3) for r in after],
        }
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
