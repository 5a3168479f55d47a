"""One llama-cpp-python build through Glassbox's engine: which CPU code runs, prefill and decode tok/s.

Run it with the Python of each build to compare them side by side (same machine, same model,
same settings), e.g. today's ``GGML_NATIVE=OFF`` wheel in one venv and the runtime-dispatch
wheel (``GGML_BACKEND_DL=ON GGML_CPU_ALL_VARIANTS=ON``) in another::

    .venv/bin/python bench/cpu_dispatch.py --model SmolLM2.gguf --repeats 5
    /path/to/other-venv/bin/python bench/cpu_dispatch.py --model SmolLM2.gguf --repeats 5

It reports the CPU variant the engine loaded (``app.engine.backends``: ``null`` for a build with
the CPU backend linked in), llama.cpp's system info, the size of ``llama_cpp/lib`` and the median
prefill and decode tok/s of ``--repeats`` greedy replies (``--gen`` tokens after a
``--prompt-lines`` prompt). The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2"))
    ap.add_argument("--threads", type=int, default=0, help="0: Glassbox's auto choice")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--prompt-lines", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if not args.model:
        ap.error("give --model or set GLASSBOX_TEST_SMOLLM2")

    from app.core import protocol as P
    from app.core.chat.context import ChatMessage, LoadSettings
    from app.core.sampling.params import SamplerSettings
    from app.engine.backends import cpu_variants, library_dir
    from app.engine.host import EngineHost

    lib = library_dir()
    body = "\n".join(f"{i}. The quick brown fox jumps over the lazy dog." for i in range(args.prompt_lines))
    messages = (
        ChatMessage("system", "You are a helpful assistant."),
        ChatMessage("user", body + "\nNow count from 1 to 1000, one number per line."),
    )
    log = Path(tempfile.mkdtemp(prefix="glassbox-bench-")) / "engine.log"
    host = EngineHost(str(log))
    host.start()
    ready = host.recv(120)
    assert isinstance(ready, P.EngineReady), ready
    loaded = host.request(P.LoadModel(host.next_id(), args.model, LoadSettings(n_threads=args.threads)))
    assert isinstance(loaded, P.ModelLoaded), loaded
    pre, dec = [], []
    try:
        for i in range(args.repeats + 1):  # the first is a warm-up
            host.request(P.ResetContext(host.next_id()))
            sampler = SamplerSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=args.gen)
            fin = host.request(P.Generate(host.next_id(), messages, sampler), timeout=600)
            assert isinstance(fin, P.Finished), fin
            if i:
                pre.append(fin.stats.prefill_tok_s)
                dec.append(fin.stats.decode_tok_s)
    finally:
        host.stop()
    m = re.search(r"CPU variant: (\S+)", log.read_text(encoding="utf-8"))
    result = {
        "cpu_variant": m.group(1) if m else None,
        "variants_shipped": [p.name for p in cpu_variants(lib)],
        "system_info": ready.system_info,
        "llama_cpp_lib_bytes": sum(p.stat().st_size for p in lib.iterdir() if p.is_file()),
        "n_threads": loaded.n_threads,
        "n_threads_batch": loaded.n_threads_batch,
        "prompt_tokens": fin.stats.prompt_tokens,
        "generated": fin.stats.generated_tokens,
        "prefill_tok_s_median": round(statistics.median(pre), 1),
        "decode_tok_s_median": round(statistics.median(dec), 1),
        "prefill_tok_s": [round(x, 1) for x in pre],
        "decode_tok_s": [round(x, 1) for x in dec],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
