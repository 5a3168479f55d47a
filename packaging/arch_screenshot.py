"""Screenshots of the Model panel's architecture drawing and the Stats panel's "What bounds the speed".

Usage: python packaging/arch_screenshot.py MODEL.gguf OUT_DIR [--size 1366x768]
Runs the real app window (use a virtual display, e.g. ``Xvfb :72 -screen 0 1366x768x24``): loads
the model, grabs the window with the Model panel scrolled to the top of the drawing and then to
its blocks, sends a prompt, and grabs the window once the reply (and the first bandwidth probe)
is over, with the Stats panel scrolled to its last section.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's app, not an installed one
sys.path.insert(0, str(Path(__file__).resolve().parent))  # packaging/screenshot.py


def main() -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QScrollArea
    from screenshot import open_window  # packaging/screenshot.py: the same window set-up

    app, win, model, out, _more = open_window(sys.argv[1:], (1366, 768))
    engine = win.engine
    engine.start()
    win.load_model(model)
    model_scroll = win.model_dock.widget()
    stats_scroll = win.stats_dock.widget()
    assert isinstance(model_scroll, QScrollArea) and isinstance(stats_scroll, QScrollArea)
    shots = {"n": 0}
    size = f"{win.width()}x{win.height()}"

    def grab(name: str) -> None:
        shots["n"] += 1
        path = out / f"{size}-{shots['n']:02d}-{name}.png"
        win.grab().save(str(path))
        print("saved", path, flush=True)

    def scroll_to(area: QScrollArea, y: int) -> None:
        area.verticalScrollBar().setValue(y)

    def shot_at(fraction: float, name: str) -> None:
        """Scroll the Model panel to ``fraction`` of the drawing's height (measured once laid out), grab."""
        panel = win.model_panel
        scroll_to(model_scroll, panel.arch_title.y() + int(fraction * panel.arch_view.height()))
        QTimer.singleShot(150, lambda: grab(name))

    def on_loaded(_ev) -> None:
        QTimer.singleShot(300, lambda: shot_at(0.0, "model-architecture-top"))
        QTimer.singleShot(700, lambda: shot_at(0.45, "model-blocks"))
        QTimer.singleShot(1100, lambda: shot_at(10.0, "model-head"))
        QTimer.singleShot(1500, send)

    def send() -> None:
        sp = win.sampler_panel
        sp.set_settings(replace(sp.settings(), max_tokens=80, seed=11), emit=True)
        win.chat.send("Explain what a KV cache is in three sentences.")

    def done_shot() -> None:
        speed = win.stats_panel.speed
        if speed.measuring:
            QTimer.singleShot(300, done_shot)
            return
        win.stats_panel.refresh()
        scroll_to(stats_scroll, 10**6)
        QTimer.singleShot(200, lambda: (grab("stats-what-bounds-the-speed"), print(speed.sentence.text()), finish()))

    def finish() -> None:
        print(win.stats_panel.speed.machine.text(), flush=True)
        win.close()
        app.quit()

    def on_done(_ev) -> None:
        QTimer.singleShot(500, done_shot)

    engine.model_loaded.connect(on_loaded)
    engine.generation_finished.connect(on_done)
    QTimer.singleShot(240_000, app.quit)
    app.exec()
    engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
