"""Load on the local API: 1, 4 and 20 concurrent OpenAI clients against SmolLM2 on 127.0.0.1, one request
at a time (parallel sequences 1, the chat context's queue) against N sequences decoded together (issue 23
§4), all in one run.

The engine client, the settings owner and the server controller run here as the window wires
them (no window: a QCoreApplication turns the Qt event loop); the clients are the official
``openai`` package, one per thread, each sending streamed ``/v1/completions`` one after
another for ``--seconds`` per round (a closed loop: a client sends its next request when its last
one ended; the requests in flight when the time is up are waited for). Every request asks for a
distinct echo with greedy decoding: its prompt repeats a code unique to that request (``K07-0042``)
four times, and the reply must contain its own code and no other request's, so a reply that got
another request's text is caught. Latency is from sending to the last chunk, TTFT from sending to
the first chunk with text (both client-side, queue wait included), seconds.

Usage::

    python bench/api_load.py [--model SMOLLM2.gguf] [--clients 1,4,20] [--parallel 1,4] [--seconds 20]
                             [--max-tokens 32]

The last line printed is JSON: ``rounds`` (one per parallel setting and number of clients: requests
ok / failed, ``mixed_up`` (replies that hold a code another request sent), ``echo_missed``, latency
and TTFT p50 / p99 / max, queue wait p50 / p99, ``aggregate_tok_s`` (completion tokens of the round
over its wall time, prefill and queue included: what the clients got), ``decode_tok_s`` (median of
each request's own decode speed, the server's ``predicted_per_second``), ``load_avg`` (the machine's
1-minute load average at the round's end)), and ``goals``: ``aggregate_4seq_over_single`` (4 clients
with 4 sequences against 1 client one at a time; goal at least 2.5) and ``p99_20_clients_ratio``
(20 clients with 4 sequences against one at a time; goal at most 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CACHE = Path.home() / ".cache/glassbox-build/test-models"
CODE = re.compile(r"K\d\d-\d{4}")


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``values``; 0 when empty."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def run_round(url: str, key: str, clients: int, seconds: float, max_tokens: int, loop_wait, tag: int) -> dict:
    """``clients`` closed-loop clients for ``seconds``; the round's figures (see the module docstring)."""
    import openai

    results: list[dict] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def run_client(n: int) -> None:
        c = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=seconds + 300)
        i = 0
        while time.monotonic() < stop_at:
            code = f"K{(tag * 20 + n) % 100:02d}-{i:04d}"
            i += 1
            prompt = "".join(f"Code: {code}\n" for _ in range(4)) + "Code:"
            t0 = time.perf_counter()
            ttft = None
            text = ""
            timings: dict = {}
            err = ""
            try:
                for ch in c.completions.create(
                    model="any", prompt=prompt, max_tokens=max_tokens, temperature=0, stream=True
                ):
                    if ch.choices and ch.choices[0].text:
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                        text += ch.choices[0].text
                    timings = (ch.model_extra or {}).get("timings") or timings
            except openai.APIError as exc:
                err = f"{type(exc).__name__}: {exc}"
            rec = {
                "code": code,
                "text": text,
                "latency_s": time.perf_counter() - t0,
                "ttft_s": ttft,
                "queued_s": timings["queued_ms"] / 1000 if timings else None,
                "tok_s": timings.get("predicted_per_second") if timings and not err else None,
                "generated": timings.get("predicted_n", 0) if timings and not err else 0,
                "error": err,
            }
            with lock:
                results.append(rec)
        c.close()

    threads = [threading.Thread(target=run_client, args=(n,), daemon=True) for n in range(clients)]
    t_start = time.monotonic()
    for t in threads:
        t.start()
    loop_wait(lambda: not any(t.is_alive() for t in threads), seconds + 600)
    wall = time.monotonic() - t_start

    ok = [r for r in results if not r["error"]]
    failed = [r for r in results if r["error"]]
    issued = {r["code"] for r in results}
    mixed = [r for r in ok if any(c != r["code"] and c in issued for c in CODE.findall(r["text"]))]
    missed = [r for r in ok if r["code"] not in r["text"]]
    lat = [r["latency_s"] for r in ok]
    ttft = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
    queued = [r["queued_s"] for r in ok if r["queued_s"] is not None]
    tok_s = [r["tok_s"] for r in ok if r["tok_s"]]
    for r in failed[:3]:
        print("failed:", r["error"])
    for r in mixed[:3]:
        print("mixed up:", r["code"], repr(r["text"]))
    return {
        "clients": clients,
        "requests_ok": len(ok),
        "requests_failed": len(failed),
        "mixed_up": len(mixed),
        "echo_missed": len(missed),
        "wall_s": round(wall, 2),
        "latency_s": {
            "p50": round(pct(lat, 50), 3),
            "p99": round(pct(lat, 99), 3),
            "max": round(max(lat, default=0), 3),
        },
        "ttft_s": {"p50": round(pct(ttft, 50), 3), "p99": round(pct(ttft, 99), 3)},
        "queued_s": {"p50": round(pct(queued, 50), 3), "p99": round(pct(queued, 99), 3)},
        "aggregate_tok_s": round(sum(r["generated"] for r in ok) / wall, 1) if wall > 0 else 0.0,
        "decode_tok_s": round(statistics.median(tok_s), 1) if tok_s else 0.0,
        "load_avg": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2", str(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    )
    ap.add_argument("--clients", type=ints, default=[1, 4, 20], help="comma-separated: one round each")
    ap.add_argument(
        "--parallel", type=ints, default=[1, 4], help="parallel sequences, comma-separated (1: one at a time)"
    )
    ap.add_argument("--seconds", type=float, default=20.0, help="per round")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--n-ctx", type=int, default=2048)
    args = ap.parse_args()

    from PySide6.QtCore import QCoreApplication

    from bench._api import start_api
    from bench._window import loop_wait

    api = start_api(args.model, args.n_ctx, parallel=args.parallel[0])
    engine, settings, url, key = api.engine, api.settings, api.url, api.key
    load_start = os.getloadavg()[0]

    rounds = []
    tag = 0
    for n_seq in args.parallel:
        settings.update(server=replace(settings.settings.server, parallel=n_seq))
        assert engine.api.parallel == n_seq
        for clients in args.clients:
            r = {"parallel": n_seq, **run_round(url, key, clients, args.seconds, args.max_tokens, loop_wait, tag)}
            tag += 1
            print(json.dumps(r), flush=True)
            rounds.append(r)
    api.close()

    def find(n_seq: int, clients: int) -> dict | None:
        return next((r for r in rounds if r["parallel"] == n_seq and r["clients"] == clients), None)

    goals = {}
    single, four = find(1, 1), find(max(args.parallel), 4)
    if single and four and single["aggregate_tok_s"]:
        goals["aggregate_4seq_over_single"] = round(four["aggregate_tok_s"] / single["aggregate_tok_s"], 2)
    serial20, par20 = find(1, 20), find(max(args.parallel), 20)
    if serial20 and par20 and serial20["latency_s"]["p99"]:
        goals["p99_20_clients_ratio"] = round(par20["latency_s"]["p99"] / serial20["latency_s"]["p99"], 2)
    summary = {
        "model": Path(args.model).name,
        "seconds_per_round": args.seconds,
        "max_tokens": args.max_tokens,
        "cpus": os.cpu_count(),
        "load_avg_at_start": round(load_start, 2),
        "rounds": rounds,
        "goals": goals,
    }
    QCoreApplication.processEvents()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
