"""Composition root: builds and wires everything. No singletons, no globals."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from pathlib import Path

from app.self_test import TEST_MODEL_ENV


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="glassbox", description="Chat with a local GGUF model and watch it work.")
    p.add_argument(
        "file", nargs="?", help="a GGUF file to open (as --model; what a file manager passes)", metavar="FILE.gguf"
    )
    p.add_argument("--model", help="load this GGUF file at start (default: the most recent model)")
    p.add_argument("--no-model", action="store_true", help="start without loading a model")
    p.add_argument("--debug", action="store_true", help="log at DEBUG level, to app.log and to stderr")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument(
        "--self-test",
        action="store_true",
        help=(
            "check this Glassbox headless and exit: offscreen window, engine process, the model opened through "
            "a second start (single instance), a few tokens, TTFT and KV cache figures; prints JSON, exit code 0 "
            f"when all passed. Model: --model, else ${TEST_MODEL_ENV}, else the library's most recent model"
        ),
    )
    args = p.parse_args(argv)
    if args.file and args.model:
        p.error("give the model once: FILE or --model")
    args.model = args.model or args.file
    return args


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
    app = QApplication.instance() or QApplication(sys.argv[:1])
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
        _open_model(window, Path(model), explicit=bool(args.model))
    window.show()
    listen_for_second_starts(instance, window)
    _quit_on_signals(window)
    code = app.exec()
    diagnostics.set_notice(None)
    engine.shutdown()
    window.conversations.close()
    instance.release()
    return code


def internal_error_notice(window):
    """What shows an unexpected error to the person (:meth:`app.diagnostics.Diagnostics.set_notice`):
    the window's notices, as an error, under its own topic."""
    from app.ui.common.severity import Severity
    from app.ui.window.notices import NoticeTopic

    return lambda text: window.notices.show(NoticeTopic.INTERNAL_ERROR, Severity.ERROR, text)


def _open_model(window, path: Path, *, explicit: bool) -> None:
    """Load ``path`` in ``window``; a missing file the person named (``explicit``) gets a banner."""
    from app.ui.common.severity import Severity
    from app.ui.window.notices import NoticeTopic
    from app.ui.window.pages import Page

    if path.exists():
        window.show_page(Page.CHAT)  # where the model's chat is (the Models page may be shown)
        window.loader.load_model(str(path))
    elif explicit:
        window.notices.show(
            NoticeTopic.GENERAL,
            Severity.ERROR,
            f"The model file {path} does not exist. Open a model with File → Open model.",
        )


def _hand_over_to_running(instance, argv: list[str]) -> int:
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


def listen_for_second_starts(instance, window) -> None:
    """Route what a second start hands over (see :mod:`app.ui.window.single_instance`) to ``window``:
    its ``--model`` is loaded (relative to the second start's working folder) and the window
    comes forward."""
    instance.arguments_received.connect(lambda argv, cwd: receive_second_start(window, argv, cwd))


def receive_second_start(window, argv: list[str], cwd: str) -> None:
    """Act on a second start's arguments in the running ``window`` (see :func:`listen_for_second_starts`)."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = parse_args(argv)
    except SystemExit:  # not arguments this version knows: just come forward
        args = None
    if args is not None and args.model:
        _open_model(window, Path(cwd) / args.model, explicit=True)
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()


def _quit_on_signals(window) -> None:
    """Ctrl+C in the terminal and SIGTERM close the window properly (settings saved, engine ended)."""
    import signal

    from PySide6.QtCore import QTimer

    def close(*_args) -> None:
        window.close()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, close)
    # Python runs signal handlers only between bytecodes: wake it up now and then.
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)
    timer.start(250)


def create_window(paths, engine=None):
    """Build the window and everything it needs (settings, chat history, engine client).

    The engine process is not started: call ``window.engine.start()``. Used by
    :func:`main`, the UI tests and the benchmarks, so they all run the same wiring.
    ``engine``: an engine client to use instead of a new :class:`EngineClient`
    (the UI tests pass a fake one that starts no process).
    """
    from app.core.settings import SettingsStore
    from app.ui.common.severity import Severity
    from app.ui.engine.client import EngineClient
    from app.ui.window.main_window import MainWindow
    from app.ui.window.notices import NoticeTopic
    from app.ui.window.settings_controller import SettingsController

    store = SettingsStore(paths.settings_file)
    settings = SettingsController(store, store.load())
    conversations, history_notice = open_conversations(paths)
    if engine is None:
        engine = EngineClient(str(paths.logs_dir / "engine.log"))
    window = MainWindow(paths, settings, engine, conversations, build_models_page(paths, settings))
    notices = [n for n in (store.notice, history_notice) if n]
    if notices:
        window.notices.show(NoticeTopic.STARTUP, Severity.WARNING, " ".join(notices))
    recent = conversations.list_conversations()
    if recent:
        window.open_conversation(recent[0].id)
    return window


def build_models_page(paths, settings, *, memory=None, download_options=None):
    """The Models page (Library, Hub, Downloads) with the services it runs on.

    Builds the model library (with the folders from ``settings``), the download
    manager (with the Hub token from ``settings``), the Hub client factory and
    the two worker pools, and hands them to the
    :class:`~app.ui.models.ModelsWindow`, which owns them from then on (its
    ``shutdown()`` stops them).

    Args:
        paths: Glassbox's folders.
        settings: the :class:`~app.ui.window.settings_controller.SettingsController`.
        memory: the machine's memory for fit verdicts (None: RAM measured at each verdict).
        download_options: extra keyword arguments for
            :class:`~app.core.models.downloads.DownloadManager` (concurrency, retries, free_space...).
    """
    from app.core.models.downloads import DownloadManager
    from app.core.models.hub import HubClient
    from app.core.models.library import ModelLibrary
    from app.ui.common.tasks import TaskPool
    from app.ui.models import ModelsWindow

    current = settings.settings
    return ModelsWindow(
        paths,
        settings,
        library=ModelLibrary(paths, folders=[Path(f) for f in current.library_folders]),
        manager=DownloadManager(paths, token=current.hub_token, **(download_options or {})),
        hub_client_factory=lambda token: HubClient(token=token),
        library_pool=TaskPool("library", 1),
        hub_pool=TaskPool("hub", 2),
        memory=memory,
    )


def open_conversations(paths):
    """The conversation store, and a notice for the person if it had to be set aside or replaced.

    A history from a newer Glassbox, or one that cannot be opened at all, is left
    untouched; this session then keeps its chats in a separate file and says so.
    """
    from app.core.conversations import ConversationStore, SchemaTooNewError

    try:
        store = ConversationStore(paths.conversations_db)
        _keep_private(paths.conversations_db)
        store.purge_deleted(older_than=7 * 24 * 3600)
        return store, store.notice
    except (SchemaTooNewError, OSError) as exc:
        fallback = paths.data_dir / "conversations-this-session.sqlite3"
        store = ConversationStore(fallback)
        _keep_private(fallback)
        return store, (
            f"Your chat history could not be opened ({exc}); it was left untouched. "
            f"Chats from this session are kept in {fallback}."
        )


def _keep_private(db: Path) -> None:
    """The chat history (the SQLite file and its -wal/-shm companions, which SQLite creates
    with the database's mode) readable by the user only (0o600, POSIX); sqlite3 creates it
    with the umask's mode."""
    import logging

    from app.logfiles import make_private

    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        try:
            make_private(path)
        except OSError as exc:  # not ours to change (another owner): the history still opens
            logging.getLogger(__name__).warning("could not make %s private: %s", path, exc)


if __name__ == "__main__":  # python -m app.main works as python -m app does
    raise SystemExit(main())
