"""How long the UI thread stalls while a reply streams (p50, p99, max, in ms).

The real window streams a real reply (Markdown with code blocks, every panel
visible). A 1 ms precise QTimer runs on the UI thread; each gap between its
ticks beyond 1 ms is time the thread was busy. Also reports the UI process's
CPU use and the engine's decode speed during the run.

Usage (a display is needed: xvfb-run, or QT_QPA_PLATFORM=offscreen)::

    python bench/ui_stall.py [--model PATH] [--tokens 400] [--funnel]

``--funnel``: the Funnel panel on screen (the reply keeps its logits, the newest token's funnel
follows the stream) and the temperature slider dragged every 50 ms during the reply; the
slider-move-to-repaint latencies are reported too.

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPTS = {
    "tutorial": (
        "Write a short Python tutorial about lists: explain with headings, bullet points, "
        "and three code examples in fenced code blocks."
    ),
    # Worst case for incremental Markdown: one list that grows without a blank line.
    "list": "Write a numbered list from 1 to 5000, one number per line.",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2"))
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--prompt", choices=sorted(PROMPTS), default="tutorial")
    ap.add_argument("--funnel", action="store_true", help="Funnel panel shown, a slider dragged during the reply")
    args = ap.parse_args()
    if not args.model:
        ap.error("give --model or set GLASSBOX_TEST_SMOLLM2")
    os.environ.setdefault("GLASSBOX_HOME", tempfile.mkdtemp(prefix="glassbox-bench-"))

    from PySide6.QtCore import QElapsedTimer, Qt, QTimer
    from PySide6.QtWidgets import QApplication

    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.compose import create_window
    from app.ui.window.model_loader import model_key

    paths = default_paths().ensure()
    app = QApplication(sys.argv[:1])
    apply_theme(app)
    win = create_window(paths)
    engine = win.engine
    win.resize(1600, 1000)
    win.show()
    if args.funnel:
        win.funnel_dock.raise_()
    threads = replace(win.settings.load_for(model_key(args.model)), n_threads=args.threads)
    win.settings_ctl.apply(lambda s: s.with_load_for(model_key(args.model), threads))  # remembered for this file
    engine.start()
    win.load_model(args.model)

    clock = QElapsedTimer()
    gaps: list[float] = []
    when: list[float] = []
    state = {"last": 0, "on": False}
    probe = QTimer()
    probe.setTimerType(Qt.TimerType.PreciseTimer)
    probe.setInterval(1)

    def tick() -> None:
        now = clock.nsecsElapsed()
        if state["on"] and state["last"]:
            gaps.append((now - state["last"]) / 1e6 - 1.0)
            when.append(now / 1e9)
        state["last"] = now

    probe.timeout.connect(tick)
    result: dict = {}
    drag = QTimer()
    drag.setInterval(50)
    sweep = [round(0.5 + 0.05 * i, 2) for i in range(31)]
    sweep += sweep[::-1]

    def drag_step() -> None:  # a person dragging temperature back and forth
        state["drag"] = (state.get("drag", -1) + 1) % len(sweep)
        win.sampler_panel.rows["temperature"].field.setValue(sweep[state["drag"]])

    drag.timeout.connect(drag_step)

    def loaded(_ev) -> None:
        panel = win.sampler_panel
        panel.set_settings(
            replace(
                panel.settings(),
                max_tokens=args.tokens,
                temperature=0.0,
                repeat_penalty=1.0 if args.prompt == "list" else 1.1,
            ),
            emit=True,
        )
        clock.start()
        probe.start()
        result["cpu0"] = time.process_time()
        result["wall0"] = time.perf_counter()
        state["on"] = True
        win.chat.send(PROMPTS[args.prompt])
        if args.funnel:
            win.funnel.latencies_s.clear()
            drag.start()

    def finished(ev) -> None:
        state["on"] = False
        drag.stop()
        result["cpu"] = time.process_time() - result["cpu0"]
        result["wall"] = time.perf_counter() - result["wall0"]
        result["stats"] = ev.stats
        result["t_end"] = clock.nsecsElapsed() / 1e9
        result["threads"] = engine.model.n_threads if engine.model else None
        QTimer.singleShot(200, app.quit)

    engine.model_loaded.connect(loaded)
    engine.generation_finished.connect(finished)
    QTimer.singleShot(300_000, app.quit)
    app.exec()
    win.close()
    engine.shutdown()
    if "stats" not in result:
        print("the reply did not finish", file=sys.stderr)
        return 1
    stalls = sorted(max(0.0, g) for g in gaps)

    def pct(p: float) -> float:
        return stalls[min(len(stalls) - 1, int(p / 100 * len(stalls)))]

    s = result["stats"]
    out = {
        "platform": app.platformName() if app else os.environ.get("QT_QPA_PLATFORM", ""),
        "generated_tokens": s.generated_tokens,
        "samples": len(stalls),
        "stall_ms_p50": round(pct(50), 2),
        "stall_ms_p99": round(pct(99), 2),
        "stall_ms_max": round(stalls[-1], 2),
        "stall_ms_mean": round(statistics.fmean(stalls), 3),
        "ui_cpu_percent": round(100 * result["cpu"] / result["wall"], 1),
        "engine_decode_tok_s": round(s.decode_tok_s, 1),
        "engine_threads": result["threads"],
        "prompt": args.prompt,
        "funnel": args.funnel,
    }
    if args.funnel:
        lat = sorted(x * 1000 for x in win.funnel.latencies_s)
        out["funnel_moves_shown"] = len(lat)
        out["funnel_repaint_ms_p50"] = round(statistics.median(lat), 1) if lat else None
        out["funnel_repaint_ms_max"] = round(lat[-1], 1) if lat else None
    worst = sorted(zip(gaps, when, strict=True), reverse=True)[:5]
    print(
        f"worst stalls (ms @ s after start; reply ended at {result['t_end']:.2f} s): "
        + ", ".join(f"{g:.1f} @ {w:.2f}" for g, w in worst)
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
