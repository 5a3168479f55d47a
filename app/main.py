"""The entry point: parse the command line, then run the window (or the self-test) until it closes."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli import parse_args
from app.ui.window.compose import create_window, internal_error_notice, listen_for_second_starts, open_model

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from app.ui.window.single_instance import SingleInstance


def main(argv: list[str] | None = None) -> int:
    """Start Glassbox. Returns the process exit code."""
    multiprocessing.freeze_support()
    # Glassbox talks to the Hub only to search and download; no telemetry calls besides.
    # (huggingface_hub reads this when it is first imported.)
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from app import __version__

    if args.version:
        print(f"Glassbox {__version__}")
        return 0
    if args.self_test:
        from app import self_test

        return self_test.run(Path(args.model) if args.model else None)

    from PySide6.QtWidgets import QApplication

    from app import APP_ID, logfiles
    from app.diagnostics import Diagnostics
    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.single_instance import SingleInstance

    paths = default_paths().ensure()
    app_log = paths.logs_dir / "app.log"
    logfiles.configure(app_log, debug=args.debug, stderr=args.debug)
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    instance = SingleInstance(paths.data_dir)
    if not instance.claim():
        return _hand_over_to_running(instance, sys.argv[1:] if argv is None else argv)
    diagnostics = Diagnostics(app_log)
    diagnostics.install()
    app.setApplicationName("Glassbox")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName(APP_ID)
    apply_theme(app)

    window = create_window(paths)
    diagnostics.set_notice(internal_error_notice(window))
    engine = window.engine
    settings = window.settings
    engine.start()
    model = args.model or (None if args.no_model else next(iter(settings.recent_models), None))
    if model:
        open_model(window, Path(model), explicit=bool(args.model))
    window.show()
    listen_for_second_starts(instance, window)
    _quit_on_signals(window)
    code = app.exec()
    diagnostics.set_notice(None)
    engine.shutdown()
    window.conversations.close()
    instance.release()
    return code


def _hand_over_to_running(instance: SingleInstance, argv: list[str]) -> int:
    """A second start: give ``argv`` to the running Glassbox of this data folder. Returns the exit code."""
    import logging

    if instance.send(argv, os.getcwd()):
        logging.getLogger(__name__).info("handed %s to the running Glassbox", argv)
        return 0
    print(
        "Glassbox is already running with this data folder but did not answer. "
        "Close it (or end its process) and start Glassbox again.",
        file=sys.stderr,
    )
    return 1


def _quit_on_signals(window: QWidget) -> None:
    """Ctrl+C in the terminal and SIGTERM close the window properly (settings saved, engine ended)."""
    import signal

    from PySide6.QtCore import QTimer

    def close(*_args: object) -> None:
        window.close()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, close)
    # Python runs signal handlers only between bytecodes: wake it up now and then.
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(250)


if __name__ == "__main__":  # python -m app.main works as python -m app does
    raise SystemExit(main())
