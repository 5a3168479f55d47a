"""Take screenshots of the running app mid-reply (for the README and for review).

Usage: python packaging/screenshot.py MODEL.gguf OUT_DIR [prompt] [--size WIDTHxHEIGHT]
Runs the real app window (use a virtual display: xvfb-run, or QT_QPA_PLATFORM=offscreen).
``--size`` sets the window's size in pixels (default 1600x1000); use the screen's size to see
what a person with that screen sees, e.g. ``xvfb-run -s "-screen 0 1366x768x24" ... --size 1366x768``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def open_window(argv: list[str], default_size: tuple[int, int]):
    """The real app window for screenshots, shown at ``--size`` (else ``default_size``), in a
    temporary data folder (``GLASSBOX_HOME``, unless set). ``argv``: ``MODEL OUT_DIR [more]``.

    Returns ``(app, window, model, out_dir, more)``; ``out_dir`` exists.
    """
    args = list(argv)
    size = default_size
    if "--size" in args:
        i = args.index("--size")
        w, h = args[i + 1].lower().split("x")
        size = (int(w), int(h))
        del args[i : i + 2]
    model, out = args[0], Path(args[1])
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("GLASSBOX_HOME", tempfile.mkdtemp(prefix="glassbox-shot-"))
    from PySide6.QtWidgets import QApplication

    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.compose import create_window

    paths = default_paths().ensure()
    app = QApplication(sys.argv[:1])
    apply_theme(app)
    win = create_window(paths)
    win.resize(*size)
    win.show()
    return app, win, model, out, args[2:]


def main() -> int:
    from PySide6.QtCore import QTimer

    app, win, model, out, more = open_window(sys.argv[1:], (1600, 1000))
    prompt = more[0] if more else "Explain what a KV cache is, with a short Python example."
    engine = win.engine
    engine.start()
    win.load_model(model)
    shots = {"n": 0}

    def grab(name: str) -> None:
        win.grab().save(str(out / f"{name}.png"))
        print("saved", out / f"{name}.png", flush=True)

    def on_loaded(_ev) -> None:
        grab("1-loaded")
        win.chat.send(prompt)

    def on_token(_ev) -> None:
        shots["n"] += 1
        if shots["n"] == 60:
            QTimer.singleShot(50, lambda: grab("2-mid-reply"))

    def on_done(_ev) -> None:
        QTimer.singleShot(300, lambda: (grab("3-done"), win.close(), app.quit()))

    engine.model_loaded.connect(on_loaded)
    engine.token_received.connect(on_token)
    engine.generation_finished.connect(on_done)
    QTimer.singleShot(120_000, app.quit)
    app.exec()
    engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
