"""Embeddings through the local API: seconds per 1,000 tokens embedded, against the same tokens' chat prefill.

The engine client, the settings owner and the server controller run here as the window wires
them (no window: a QCoreApplication turns the Qt event loop, as in ``bench/api_load.py``); the
client is the official ``openai`` package. Two workloads, each ``--repeats`` times after one
warm-up request (which makes the embeddings context):

- ``short``: 64 sentences of about 12 tokens in one request (a batch: several inputs per ``llama_decode``);
- ``long``: 4 inputs of about 500 tokens in one request (one input per ``llama_decode``).

Seconds per 1,000 tokens are client-side (request sent to response parsed) and the engine's own
(``glassbox.engine_ms``), medians. The reference is ``/v1/completions`` with ``max_tokens`` 1 on the
long input: the chat context's prefill rate (``timings.prompt_per_second``) for the same text.

Usage::

    python bench/api_embeddings.py [--model M.gguf] [--repeats 3] [--n-ctx 2048]

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CACHE = Path.home() / ".cache/glassbox-build/test-models"
SENTENCE = "Sentence number {i} is about the weather in a small town by the sea."
LONG = " ".join(f"The river {i} runs past the old mill and the market square." for i in range(40))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2", str(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-ctx", type=int, default=2048)
    args = ap.parse_args()

    import openai
    from PySide6.QtCore import QCoreApplication

    from bench._api import start_api
    from bench._window import loop_wait

    def in_thread(fn):
        """Run ``fn`` in a thread while the Qt loop turns; its result."""
        box: list[object] = []
        t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
        t.start()
        loop_wait(lambda: not t.is_alive(), 600)
        return box[0]

    api = start_api(args.model, args.n_ctx)
    c = openai.OpenAI(base_url=api.url, api_key=api.key, max_retries=0, timeout=600)

    def timed(inputs: list[str]) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        r = c.embeddings.create(model="any", input=inputs, encoding_format="float")
        wall = time.perf_counter() - t0
        return wall, r.model_extra["glassbox"]["engine_ms"] / 1000, r.usage.total_tokens

    workloads = {"short": [SENTENCE.format(i=i) for i in range(64)], "long": [f"{k}. {LONG}" for k in range(4)]}
    out: dict[str, object] = {"model": Path(args.model).name, "n_ctx": args.n_ctx}
    first = in_thread(lambda: timed(workloads["short"][:2]))
    out["first_request_s"] = round(first[0], 3)  # the embeddings context is made here
    for name, inputs in workloads.items():
        runs = [in_thread(lambda inputs=inputs: timed(inputs)) for _ in range(args.repeats)]
        tokens = runs[0][2]
        out[name] = {
            "inputs": len(inputs),
            "tokens": tokens,
            "s_per_1000_tokens_client": round(statistics.median(r[0] for r in runs) / tokens * 1000, 3),
            "s_per_1000_tokens_engine": round(statistics.median(r[1] for r in runs) / tokens * 1000, 3),
        }
    ref = in_thread(lambda: c.completions.create(model="any", prompt=workloads["long"][0], max_tokens=1))
    t = ref.model_extra["timings"]
    out["chat_prefill_s_per_1000_tokens"] = round(1000 / t["prompt_per_second"], 3)
    c.close()
    api.close()
    QCoreApplication.processEvents()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
