"""Screenshots of "Inspect a token" on a real model: each tab of the inspect window (for review).

Usage: python packaging/inspect_screenshots.py MODEL.gguf OUT_DIR [prompt] [--size 1366x768]
Runs the real app (use a virtual display: ``xvfb-run -s "-screen 0 1366x768x24"``), sends the
prompt, then inspects the third reply token the way a click on its chip in the Tokens panel does,
and saves the main window and the inspect window's four tabs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's app, not an installed one
sys.path.insert(0, str(Path(__file__).resolve().parent))  # packaging/screenshot.py


def main() -> int:
    from PySide6.QtCore import QTimer
    from screenshot import open_window  # packaging/screenshot.py: the same window set-up

    app, win, model, out, more = open_window(sys.argv[1:], (1366, 768))
    prompt = more[0] if more else "Name three colours of the rainbow."
    engine = win.engine
    engine.start()
    win.load_model(model)
    ctl = win.token_inspect
    tabs = ("lens", "attention", "embedding", "experts")

    def grab_tab(i: int) -> None:
        if i >= len(tabs):
            ctl.window.close()
            win.close()
            app.quit()
            return
        ctl.window.tabs.setCurrentIndex(i)
        QTimer.singleShot(300, lambda: (save(ctl.window, f"inspect-{i + 1}-{tabs[i]}"), grab_tab(i + 1)))

    def save(widget, name: str) -> None:
        widget.grab().save(str(out / f"{name}.png"))
        print("saved", out / f"{name}.png", flush=True)

    def on_done(_ev) -> None:
        prompt_ev = win.turn.prompt
        k = min(2, len(win.turn.tokens) - 2)
        pos = prompt_ev.prompt_tokens + k
        QTimer.singleShot(300, lambda: save(win, "inspect-0-window"))
        QTimer.singleShot(400, lambda: ctl.inspect(pos, win.turn.tokens[k].token_id, prompt_ev.cached_tokens))

    def on_inspected(ev) -> None:
        ins = ev.inspection
        print(
            f"inspected position {ins.position} ({ins.text!r}): {ins.path.value} {ins.fallback_reason!r}, "
            f"{ins.inspect_s:.2f} s (tables {ins.tables_s:.2f} s), self-check {ins.lens.last_layer_max_abs_diff:.4f}",
            flush=True,
        )
        ctl.window.resize(1300, 740)
        QTimer.singleShot(300, lambda: grab_tab(0))

    def on_failed(ev) -> None:
        print("inspection failed:", ev.message, flush=True)
        app.quit()

    engine.model_loaded.connect(lambda _ev: win.chat.send(prompt))
    engine.generation_finished.connect(on_done)
    engine.token_inspected.connect(on_inspected)
    engine.inspection_failed.connect(on_failed)
    QTimer.singleShot(300_000, app.quit)
    app.exec()
    engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
