"""Composition root: builds and wires the window and everything it runs on. No singletons, no globals.

:func:`create_window` is what :func:`app.main.main`, the self-test, the UI tests and the benchmarks all
build, so they run the same wiring; :func:`listen_for_second_starts` routes a second start's arguments
to the running window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli import parse_args

if TYPE_CHECKING:
    from app.core.chat.context import ChatMessage
    from app.core.conversations import ConversationStore
    from app.core.hardware.fit import SystemMemory
    from app.paths import Paths
    from app.ui.engine.client import EngineClient
    from app.ui.mcp.entry import McpLauncher
    from app.ui.models import ModelsWindow
    from app.ui.quant.compare_entry import CompareLauncher
    from app.ui.window.main_window import MainWindow
    from app.ui.window.settings_controller import SettingsController
    from app.ui.window.single_instance import SingleInstance


def create_window(paths: Paths, engine: EngineClient | None = None) -> MainWindow:
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
    add_compare_window(window)
    add_mcp_servers(window)
    return window


def add_mcp_servers(window: MainWindow) -> McpLauncher:
    """Tools → MCP servers… (issue 23 §2): the person's MCP servers, connected while the window runs
    (closed when it closes), their dialog, and their tools in the chat (Tools → Use MCP tools in chats)."""
    from app.ui.mcp.chat_tools import ChatTools
    from app.ui.mcp.entry import McpLauncher
    from app.ui.mcp.servers import McpServers

    servers = McpServers(window.settings_ctl, watch=window, parent=window)
    launcher = McpLauncher(window, servers)
    launcher.add_to(window.menus.actions.tools_menu)
    ChatTools(servers, window.chat, window.engine, window.notices, window)
    return launcher


def add_compare_window(window: MainWindow) -> CompareLauncher:
    """Tools → Compare quantizations… and the Library's "Compare with the source" after a quantization
    (issue 21 §1): the Compare window, given only what it reads (the library's entries, the loaded
    model, the chat shown, the chat-template overrides)."""
    from app.ui.jobs.runner import running_jobs
    from app.ui.quant.compare_entry import CompareLauncher, engine_activity

    def chat_shown() -> tuple[ChatMessage, ...] | None:
        chat = window.chat
        if chat.conversation_id is None or window.conversations.get_conversation(chat.conversation_id).deleted_at:
            return None
        return chat.messages_for_engine() or None

    launcher = CompareLauncher(
        window,
        entries=lambda: window.models.library.entries,
        loaded=lambda: window.loader.loaded_path,
        chat_source=chat_shown,
        template_for=lambda path: window.settings_ctl.settings.chat_template_for(path),
        others=lambda: engine_activity(window.engine) + running_jobs(window),
    )
    launcher.add_to(window.menus.actions.tools_menu)
    window.models.compare_requested.connect(launcher.compare)  # the Library's "Compare with the source"
    return launcher


def build_models_page(
    paths: Paths,
    settings: SettingsController,
    *,
    memory: SystemMemory | None = None,
    download_options: dict[str, Any] | None = None,
) -> ModelsWindow:
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


def open_conversations(paths: Paths) -> tuple[ConversationStore, str | None]:
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


def internal_error_notice(window: MainWindow) -> Callable[[str], None]:
    """What shows an unexpected error to the person (:meth:`app.diagnostics.Diagnostics.set_notice`):
    the window's notices, as an error, under its own topic."""
    from app.ui.common.severity import Severity
    from app.ui.window.notices import NoticeTopic

    return lambda text: window.notices.show(NoticeTopic.INTERNAL_ERROR, Severity.ERROR, text)


def open_model(window: MainWindow, path: Path, *, explicit: bool) -> None:
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


def listen_for_second_starts(instance: SingleInstance, window: MainWindow) -> None:
    """Route what a second start hands over (see :mod:`app.ui.window.single_instance`) to ``window``:
    its ``--model`` is loaded (relative to the second start's working folder) and the window
    comes forward."""
    instance.arguments_received.connect(lambda argv, cwd: receive_second_start(window, argv, cwd))


def receive_second_start(window: MainWindow, argv: list[str], cwd: str) -> None:
    """Act on a second start's arguments in the running ``window`` (see :func:`listen_for_second_starts`)."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = parse_args(argv)
    except SystemExit:  # not arguments this version knows: just come forward
        args = None
    if args is not None and args.model:
        open_model(window, Path(cwd) / args.model, explicit=True)
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()
