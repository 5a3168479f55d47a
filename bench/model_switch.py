"""Engine memory across model switches: SmolLM2 → Gemma 3 → SmolLM2, five times, through EngineClient.

After each load the engine process's resident memory is read from
``/proc/PID/status`` (VmRSS, Linux); the switch time is from ``load_model`` to
``model_loaded`` (seconds), as the window sees it. A switch that keeps one
engine process grows it (llama.cpp and the C heap do not give all memory
back); a fresh engine process per switch returns to the first load's figure.

Usage::

    python bench/model_switch.py [--a SMOLLM2.gguf] [--b GEMMA.gguf] [--rounds 5] [--n-ctx 2048]

The last line printed is JSON: ``loads`` (model, pid, rss_mb, switch_s per load),
``rss_mb_by_model`` (each model's RSS per load, MB), ``growth_mb`` (each model's last
load minus its first, MB) and ``switch_s_median``.
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

CACHE = Path.home() / ".cache/glassbox-build/test-models"


def vm_rss_mb(pid: int) -> float:
    """Resident memory of process ``pid``, MB (VmRSS from /proc/PID/status, Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--a", default=os.environ.get("GLASSBOX_TEST_SMOLLM2", str(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    )
    ap.add_argument("--b", default=os.environ.get("GLASSBOX_TEST_GEMMA", str(CACHE / "gemma-3-270m-q4_k_m.gguf")))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n-ctx", type=int, default=2048)
    args = ap.parse_args()

    from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

    from app.core.chat.context import LoadSettings
    from app.ui.engine.client import EngineClient

    app = QCoreApplication.instance() or QCoreApplication([])
    client = EngineClient()
    settings = LoadSettings(n_ctx=args.n_ctx)

    def wait(signal, timeout_s: float = 120.0) -> object:
        loop = QEventLoop()
        got: list = []
        signal.connect(lambda ev: (got.append(ev), loop.quit()))
        client.model_load_failed.connect(lambda ev: (got.append(ev), loop.quit()))
        QTimer.singleShot(int(timeout_s * 1000), loop.quit)
        loop.exec()
        signal.disconnect()
        client.model_load_failed.disconnect()
        if not got:
            raise TimeoutError("no answer from the engine")
        return got[0]

    client.start()
    wait(client.engine_ready)
    loads = []
    try:
        for path in [args.a, args.b] * args.rounds + [args.a]:
            t = time.perf_counter()
            client.load_model(path, settings)
            ev = wait(client.model_loaded)
            switch_s = time.perf_counter() - t
            if client.model is None:
                raise RuntimeError(f"load failed: {ev}")
            time.sleep(0.2)
            pid = client.pid
            assert pid is not None
            rss = vm_rss_mb(pid)
            loads.append(
                {"model": Path(path).name, "pid": pid, "rss_mb": round(rss, 1), "switch_s": round(switch_s, 3)}
            )
            print(f"{Path(path).name:40s} pid {pid:7d}  RSS {rss:7.1f} MB  load {switch_s:.2f} s", flush=True)
    finally:
        client.shutdown()
        del app
    by_model: dict[str, list[float]] = {}
    for load in loads:
        by_model.setdefault(load["model"], []).append(load["rss_mb"])
    result = {
        "loads": loads,
        "rss_mb_by_model": by_model,
        "growth_mb": {m: round(v[-1] - v[0], 1) for m, v in by_model.items()},
        "switch_s_median": round(statistics.median(ld["switch_s"] for ld in loads[1:]), 3),
        "processes": len({ld["pid"] for ld in loads}),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
