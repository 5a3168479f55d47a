"""Load on the local API: N concurrent OpenAI clients for S seconds against SmolLM2 on 127.0.0.1.

The engine client, the settings owner and the server controller run here as the window wires
them (no window: a QCoreApplication turns the Qt event loop); the clients are the official
``openai`` package, one per thread, each sending streamed ``/v1/completions`` one after
another. Every request asks for a distinct echo with greedy decoding: its prompt repeats a
code unique to that request (``K07-0042``) four times, and the reply must contain its own code
and no other request's, so a reply that got another request's text is caught. Latency is from
sending to the last chunk, TTFT from sending to the first chunk with text (both client-side,
queue wait included), seconds.

Usage::

    python bench/api_load.py [--model SMOLLM2.gguf] [--clients 20] [--seconds 60] [--max-tokens 8]

The last line printed is JSON: ``requests_ok``, ``requests_failed``, ``mixed_up`` (replies that
hold a code another request sent), ``echo_missed`` (replies without their own code: the model
miscopied it, e.g. ``K04-0401`` for ``K04-0001``, a code no request sent), ``latency_s`` and ``ttft_s`` (p50, p99, max), ``queued_s`` (p50,
p99, from the server's timings), ``requests_per_s``, ``engine_tok_s`` (decode, median).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2", str(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    )
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--n-ctx", type=int, default=2048)
    args = ap.parse_args()

    import openai
    from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

    from app.core.chat.context import LoadSettings
    from app.core.server_settings import ServerSettings
    from app.core.settings import Settings, SettingsStore
    from app.ui.engine.client import EngineClient
    from app.ui.server.controller import ServerController
    from app.ui.window.settings_controller import SettingsController

    app = QCoreApplication.instance() or QCoreApplication([])
    tmp = tempfile.TemporaryDirectory()
    settings = SettingsController(SettingsStore(Path(tmp.name) / "settings.json"), Settings())
    engine = EngineClient()
    server = ServerController(engine, settings)

    def spin_until(done, timeout_s: float) -> None:
        loop = QEventLoop()
        timer = QTimer()
        timer.timeout.connect(lambda: loop.quit() if done() else None)
        timer.start(20)
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline:
            loop.exec()
        timer.stop()
        if not done():
            raise TimeoutError("timed out")

    engine.start()
    engine.load_model(args.model, LoadSettings(n_ctx=args.n_ctx))
    spin_until(lambda: engine.model is not None, 120)
    settings.update(server=ServerSettings(enabled=True, port=0))
    assert server.running, server.error
    url, key = server.url, settings.settings.server.api_key

    results: list[dict] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + args.seconds

    def run_client(n: int) -> None:
        c = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=args.seconds + 120)
        i = 0
        while time.monotonic() < stop_at:
            code = f"K{n:02d}-{i:04d}"
            i += 1
            prompt = "".join(f"Code: {code}\n" for _ in range(4)) + "Code:"
            t0 = time.perf_counter()
            ttft = None
            text = ""
            queued_ms = None
            err = ""
            try:
                for ch in c.completions.create(
                    model="any", prompt=prompt, max_tokens=args.max_tokens, temperature=0, stream=True
                ):
                    if ch.choices and ch.choices[0].text:
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                        text += ch.choices[0].text
                    timings = (ch.model_extra or {}).get("timings")
                    if timings:
                        queued_ms = timings["queued_ms"]
                        tok_s = timings["predicted_per_second"]
            except openai.APIError as exc:
                err = f"{type(exc).__name__}: {exc}"
            rec = {
                "code": code,
                "text": text,
                "latency_s": time.perf_counter() - t0,
                "ttft_s": ttft,
                "queued_s": queued_ms / 1000 if queued_ms is not None else None,
                "tok_s": tok_s if not err and queued_ms is not None else None,
                "error": err,
            }
            with lock:
                results.append(rec)
        c.close()

    threads = [threading.Thread(target=run_client, args=(n,), daemon=True) for n in range(args.clients)]
    t_start = time.monotonic()
    for t in threads:
        t.start()
    spin_until(lambda: not any(t.is_alive() for t in threads), args.seconds + 300)
    wall = time.monotonic() - t_start

    ok = [r for r in results if not r["error"]]
    failed = [r for r in results if r["error"]]
    issued = {r["code"] for r in results}
    # another request's text: a code some other request sent (a code nobody sent is the model miscopying)
    mixed = [r for r in ok if any(c != r["code"] and c in issued for c in CODE.findall(r["text"]))]
    missed = [r for r in ok if r["code"] not in r["text"]]
    lat = [r["latency_s"] for r in ok]
    ttft = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
    queued = [r["queued_s"] for r in ok if r["queued_s"] is not None]
    tok_s = [r["tok_s"] for r in ok if r["tok_s"]]
    for r in failed[:5]:
        print("failed:", r["error"])
    for r in mixed[:5]:
        print("mixed up:", r["code"], repr(r["text"]))
    server.shutdown()
    engine.shutdown()
    summary = {
        "clients": args.clients,
        "seconds": args.seconds,
        "max_tokens": args.max_tokens,
        "requests_ok": len(ok),
        "requests_failed": len(failed),
        "mixed_up": len(mixed),
        "echo_missed": len(missed),
        "requests_per_s": round(len(ok) / wall, 2),
        "latency_s": {
            "p50": round(pct(lat, 50), 3),
            "p99": round(pct(lat, 99), 3),
            "max": round(max(lat, default=0), 3),
        },
        "ttft_s": {
            "p50": round(pct(ttft, 50), 3),
            "p99": round(pct(ttft, 99), 3),
            "max": round(max(ttft, default=0), 3),
        },
        "queued_s": {"p50": round(pct(queued, 50), 3), "p99": round(pct(queued, 99), 3)},
        "engine_tok_s": round(statistics.median(tok_s), 1) if tok_s else 0.0,
    }
    app.processEvents()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
