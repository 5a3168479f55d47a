"""Screenshots of the Timeline panel and the chat template dialog (for review at a given screen size).

Usage: python packaging/timeline_screenshot.py MODEL.gguf OUT_DIR [--size 1366x768]
Runs the real app window (use a virtual display, e.g. ``Xvfb :76 -screen 0 1366x768x24``), shows
the Timeline tab, sends two prompts (the second reuses the first's KV cache), grabs the window
mid-reply and after each reply, hovers a decode step, then opens Tokens → Template… and grabs it.
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
    win.timeline_dock.raise_()
    engine.start()
    win.load_model(model)
    sp = win.sampler_panel
    prompts = ["Explain what a KV cache is in three sentences.", "Now say it in one sentence."]
    state = {"tokens": 0, "shots": 0}

    def grab(name: str, widget=None) -> None:
        state["shots"] += 1
        path = out / f"{state['shots']:02d}-{name}.png"
        (widget or win).grab().save(str(path))
        print("saved", path, flush=True)

    def on_loaded(_ev) -> None:
        sp.set_settings(replace(sp.settings(), max_tokens=120, seed=5), emit=True)
        win.chat.send(prompts.pop(0))

    def on_token(_ev) -> None:
        state["tokens"] += 1
        if state["tokens"] == 40:
            QTimer.singleShot(100, lambda: grab("timeline-mid-reply"))

    def template() -> None:
        dialog = win.show_template()
        if dialog is None:
            app.quit()
            return
        QTimer.singleShot(1500, lambda: (grab("template-dialog", dialog), dialog.close(), win.close(), app.quit()))

    def on_done(_ev) -> None:
        def after() -> None:
            grab("timeline-done")
            panel = win.timeline_panel
            t = panel.shown
            if t is not None and len(t.token_times_s) > 3:
                slow = t.slow_steps()
                k = slow[0] if slow else len(t.token_times_s) // 2
                panel.hover_at((t.token_times_s[k - 1] + t.token_times_s[k]) / 2)
                grab("timeline-hover")
            if prompts:
                win.chat.send(prompts.pop(0))
            else:
                template()

        QTimer.singleShot(600, after)

    engine.model_loaded.connect(on_loaded)
    engine.token_received.connect(on_token)
    engine.generation_finished.connect(on_done)
    QTimer.singleShot(180_000, app.quit)
    app.exec()
    engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
