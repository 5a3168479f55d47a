"""Screenshots of the Funnel panel while a slider moves (for review at a given screen size).

Usage: python packaging/funnel_screenshot.py MODEL.gguf OUT_DIR [--size 1366x768]
Runs the real app window (use a virtual display, e.g. ``Xvfb :63 -screen 0 1366x768x24``), shows
the Funnel tab, sends a prompt, moves the temperature slider while the reply streams, then moves
temperature, top_p and min_p after it, grabbing the window after each move's funnel is drawn.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's app, not an installed one
sys.path.insert(0, str(Path(__file__).resolve().parent))  # packaging/screenshot.py


def main() -> int:
    from PySide6.QtCore import QTimer
    from screenshot import open_window  # packaging/screenshot.py: the same window set-up

    app, win, model, out, _more = open_window(sys.argv[1:], (1366, 768))
    engine = win.engine
    win.funnel_dock.raise_()
    engine.start()
    win.load_model(model)
    sp = win.sampler_panel
    # After the reply: each (field, value) is set once the previous move's funnel is drawn.
    moves = [("temperature", 0.2), ("temperature", 2.0), ("top_p", 0.5), ("min_p", 0.0), ("top_p", 1.0)]
    state = {"tokens": 0, "streaming_moved": False, "shots": 0}

    def grab(name: str) -> None:
        state["shots"] += 1
        path = out / f"{state['shots']:02d}-{name}.png"
        win.grab().save(str(path))
        print("saved", path, flush=True)

    def on_loaded(_ev) -> None:
        sp.set_settings(replace(sp.settings(), max_tokens=60, seed=11), emit=True)
        win.chat.send("Write a short poem about the sea.")

    def on_token(_ev) -> None:
        state["tokens"] += 1
        if state["tokens"] == 25 and not state["streaming_moved"]:
            state["streaming_moved"] = True
            sp.rows["temperature"].slider.setValue(150)  # 1.50, mid-reply
            QTimer.singleShot(250, lambda: grab("during-reply-temperature-1.5"))

    def next_move() -> None:
        if not moves:
            QTimer.singleShot(200, lambda: (win.close(), app.quit()))
            return
        name, value = moves.pop(0)
        sp.rows[name].field.setValue(value)
        QTimer.singleShot(300, lambda: (grab(f"after-{name}-{value}"), next_move()))

    def on_done(_ev) -> None:
        QTimer.singleShot(500, lambda: (grab("reply-done"), next_move()))

    engine.model_loaded.connect(on_loaded)
    engine.token_received.connect(on_token)
    engine.generation_finished.connect(on_done)
    QTimer.singleShot(180_000, app.quit)
    app.exec()
    lat = win.funnel.latencies_s
    if lat:
        print(f"slider move -> repaint: {', '.join(f'{x * 1000:.1f}' for x in lat)} ms", flush=True)
    engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
