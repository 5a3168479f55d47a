"""The window's menu bar and shortcuts, and the menus filled just before they open
(recent models, the model picker). The View menu lists the docks of the window's
:class:`~app.ui.window.docks.DockRegistry`, each with its key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QFontDatabase, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QMenuBar

from app import APP_NAME, __version__
from app.core.models.library import ModelEntry
from app.core.settings import Workspace
from app.ui.chat.export import ExportFormat
from app.ui.common import dialogs
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.window.chat_page import ChatPage
from app.ui.window.docks import DockRegistry
from app.ui.window.how_it_works import HowItWorks
from app.ui.window.model_loader import ModelLoader
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.pages import Page, Pages
from app.ui.window.workspaces import Workspaces

# Keys the prompt box handles itself (no QAction): listed in the shortcuts sheet too.
COMPOSER_KEYS: tuple[tuple[str, str], ...] = (
    ("Send the message", "Enter"),
    ("New line in the message", "Shift+Enter"),
    ("Stop the reply (from anywhere in the window)", "Esc"),
    ("Next / previous control", "Tab / Shift+Tab"),
)


@dataclass(frozen=True)
class MenuActions:
    """The actions other code enables, triggers or reads."""

    open_model: QAction
    recent_menu: QMenu
    new_chat: QAction
    stop: QAction
    unload: QAction
    models_page: QAction
    shortcuts: QAction
    tools_menu: QMenu  # the features that open a window of their own add their entries here


class Menus:
    """The window's menu bar (File, Engine, View, Tools, Help) and its shortcuts; Stop is enabled only
    while a reply is in flight, and Esc stops it from anywhere in the window.

    Args:
        main: the window whose menu bar is filled (the actions' parent; Quit closes it).
        loader: the model commands (open, recent, restart, unload).
        chats: the chat page's commands (new, export, import, next / previous, search, stop).
        pages: the window's pages.
        docks: the docks, each with its toggle (and key) in the View menu.
        workspaces: the layouts (chat, sampling lab), each an entry of the View menu with its key.
        guide: Help → How it works.
        engine: the engine client (a reply in flight; its build for About).
        notices: where About is said.
        logs_dir: the folder File → Show logs folder opens.
        open_sweep: View → Speed vs context (the depth sweep's window); None: no such entry.

    Attributes:
        actions: the actions other code enables, triggers or reads.
    """

    def __init__(
        self,
        main: QMainWindow,
        loader: ModelLoader,
        chats: ChatPage,
        pages: Pages,
        docks: DockRegistry,
        workspaces: Workspaces,
        guide: HowItWorks,
        engine: EngineClient,
        notices: Notices,
        logs_dir: Path,
        open_sweep: Callable[[], object] | None = None,
    ) -> None:
        self._main = main
        self._engine = engine
        self._notices = notices
        bar = main.menuBar()
        m = bar.addMenu("&File")
        act_open = _action(main, m, "&Open model…", (QKeySequence.StandardKey.Open,), loader.open_model_dialog)
        recent_menu = m.addMenu("Open &recent")
        recent_menu.aboutToShow.connect(lambda: fill_recent_menu(recent_menu, loader.recent_models, loader.load_model))
        m.addSeparator()
        act_new_chat = _action(main, m, "&New chat", ("Ctrl+N",), chats.new_chat)
        _action(main, m, "Export chat as &Markdown…", (), lambda: chats.export_shown(ExportFormat.MARKDOWN))
        _action(main, m, "Export chat as &JSON (all branches)…", (), lambda: chats.export_shown(ExportFormat.JSON))
        _action(main, m, "&Import chats (ChatGPT, Claude, Open WebUI, LM Studio, JSON)…", (), chats.import_conversation)
        m.addSeparator()
        _action(main, m, "Show &logs folder", (), lambda: dialogs.open_folder(logs_dir))
        _action(main, m, "&Quit", (QKeySequence.StandardKey.Quit,), main.close)

        e = bar.addMenu("&Engine")
        # Stop works from anywhere in the window, not only from the composer (Esc there is the
        # composer's own; elsewhere the action takes it while a reply is in flight).
        act_stop = _action(main, e, "&Stop reply", ("Ctrl+.", QKeySequence(Qt.Key.Key_Escape)), chats.chat.stop)
        act_stop.setEnabled(engine.generating)
        engine.generation_started.connect(lambda _rid: act_stop.setEnabled(True))
        engine.generation_ended.connect(lambda _rid: act_stop.setEnabled(False))
        _action(main, e, "&Restart engine", (), loader.restart_engine)
        act_unload = _action(main, e, "&Unload model", (), loader.unload_model)

        v = bar.addMenu("&View")
        _action(main, v, "&Chat page", ("Ctrl+1",), lambda: pages.show_page(Page.CHAT))
        act_models_page = _action(main, v, "&Models page", ("Ctrl+2", "Ctrl+M"), lambda: pages.show_page(Page.MODELS))
        if open_sweep is not None:
            _action(main, v, "Speed vs &context…", (), open_sweep)
        v.addSeparator()
        _action(main, v, "&Search chats", ("Ctrl+K", "Ctrl+F"), chats.focus_chat_search)
        _action(main, v, "N&ext chat", ("Ctrl+PgDown",), lambda: chats.step_chat(1))
        _action(main, v, "&Previous chat", ("Ctrl+PgUp",), lambda: chats.step_chat(-1))
        v.addSeparator()
        layouts = QActionGroup(main)
        for ws, text, layout_key in LAYOUT_ACTIONS:
            a = _action(main, v, text, (layout_key,), partial(workspaces.show, ws))
            a.setCheckable(True)
            a.setChecked(ws is workspaces.current)
            a.setData(ws.value)
            layouts.addAction(a)
        workspaces.switched.connect(lambda w: _check_layout(layouts, w))
        v.addSeparator()
        for dock in docks:
            toggle = dock.toggleViewAction()
            toggle.setText(f"{dock.windowTitle()} panel")
            key = docks.shortcut(dock)
            if key is not None:
                toggle.setShortcut(key)
            v.addAction(toggle)

        tools_menu = bar.addMenu("&Tools")

        h = bar.addMenu("&Help")
        act_keys = _action(main, h, "&Keyboard shortcuts", ("F1", "Ctrl+/"), self.show_shortcuts)
        # F1 is the shortcuts sheet's: the guide takes Shift+F1 (Qt's "What's This?" key, unused here).
        _action(main, h, "&How it works", ("Shift+F1",), guide.open)
        _action(main, h, f"About {APP_NAME}", (), self.show_about)
        self.actions = MenuActions(
            act_open,
            recent_menu,
            act_new_chat,
            act_stop,
            act_unload,
            act_models_page,
            act_keys,
            tools_menu,
        )

    def show_shortcuts(self) -> dialogs.TextDialog:
        """Help → Keyboard shortcuts: every shortcut, read from the menus' actions (:func:`shortcut_sheet`)."""
        rows = shortcut_sheet(self._main.menuBar())
        width = max(len(what) for what, _ in rows)
        text = "\n".join(f"{what.ljust(width)}   {keys}" for what, keys in rows)
        dlg = dialogs.show_text(self._main, "Keyboard shortcuts", text)
        dlg.setObjectName("shortcutsDialog")
        dlg.text_box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        dlg.resize(760, 520)
        return dlg

    def show_about(self) -> None:
        """Help → About: the version, and the engine's llama.cpp build once it has started."""
        ready = self._engine.ready_info
        info = f"llama-cpp-python {ready.llama_cpp_version}<br>{ready.system_info}" if ready else ""
        self._notices.show(
            NoticeTopic.GENERAL,
            Severity.INFO,
            f"<b>{APP_NAME} {__version__}</b> — local LLM chat that shows its work.<br>{info}",
        )


KeySpec = str | QKeySequence | QKeySequence.StandardKey
# View → the layouts, with their keys (Ctrl+1 / Ctrl+2 are the pages', Ctrl+Shift+digit the docks').
LAYOUT_ACTIONS: tuple[tuple[Workspace, str, str], ...] = (
    (Workspace.CHAT, "C&hat layout", "Ctrl+Alt+1"),
    (Workspace.SAMPLING, "S&ampling lab", "Ctrl+Alt+2"),
)


def _check_layout(group: QActionGroup, workspace: Workspace) -> None:
    """Check the View menu's entry of the layout shown."""
    for a in group.actions():
        a.setChecked(a.data() == workspace.value)


def _action(
    parent: QMainWindow, menu: QMenu, text: str, keys: tuple[KeySpec, ...], slot: Callable[[], object]
) -> QAction:
    """A menu entry with its shortcuts (the first one is shown in the menu), active anywhere in the window."""
    a = QAction(text, parent)
    if keys:
        a.setShortcuts([QKeySequence(k) for k in keys])
        a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    a.triggered.connect(slot)
    menu.addAction(a)
    return a


def shortcut_sheet(bar: QMenuBar) -> list[tuple[str, str]]:
    """Every keyboard shortcut of a window, read from its menu ``bar``'s actions (so the sheet
    cannot drift from what the keys do), then the prompt box's own keys.

    Returns:
        ``(what it does, keys)`` rows in menu order; keys in the platform's notation.
    """
    rows: list[tuple[str, str]] = []

    def walk(menu: QMenu, path: str) -> None:
        for a in menu.actions():
            sub = a.menu()
            if isinstance(sub, QMenu):
                walk(sub, f"{path}{a.text().replace('&', '')} → ")
            elif a.shortcuts():
                keys = " or ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in a.shortcuts())
                rows.append((path + a.text().replace("&", ""), keys))

    for top in bar.actions():
        sub = top.menu()
        if isinstance(sub, QMenu):
            walk(sub, f"{top.text().replace('&', '')} → ")
    rows.extend(COMPOSER_KEYS)
    return rows


def fill_recent_menu(menu: QMenu, recent: Sequence[str], load: Callable[[str], object]) -> None:
    """File → Open recent: one entry per recent model (full path in the tooltip)."""
    menu.clear()
    if not recent:
        a = menu.addAction("No recent models")
        a.setEnabled(False)
    for p in recent:
        a = menu.addAction(Path(p).name)
        a.setToolTip(p)
        a.triggered.connect(lambda _=False, path=p: load(path))


LIBRARY_IN_PICKER = 20  # library models listed in the model picker (the rest: the Models page)


def fill_model_menu(
    menu: QMenu, loader: ModelLoader, library: Sequence[ModelEntry], show_models_page: Callable[[], object]
) -> None:
    """The model picker: up to 8 recent models (missing files disabled), then the ``library``'s
    other models (as last scanned; unloadable ones disabled, with the reason), open, browse, unload."""
    menu.clear()
    recent = loader.recent_models
    loaded = loader.loaded_path
    for p in recent[:8]:
        exists = Path(p).exists()
        a = menu.addAction(Path(p).name + ("" if exists else "  (missing)"))
        a.setEnabled(exists)
        a.setToolTip(p)
        if str(Path(p)) == loaded:  # marked, and choosing it again does not reload it (nor stop a reply)
            a.setCheckable(True)
            a.setChecked(True)
            a.setText(f"{Path(p).name}  (loaded)")
            continue
        a.triggered.connect(lambda _=False, path=p: loader.load_model(path))
    if recent:
        menu.addSeparator()
    shown = {str(Path(p)) for p in recent[:8]}
    others = [e for e in library if str(e.path) not in shown]
    if others:
        head = menu.addAction("In the library")
        head.setEnabled(False)
        for e in others[:LIBRARY_IN_PICKER]:
            label = e.file_name + (f"  ({e.error})" if e.error else "")
            a = menu.addAction(label)
            a.setEnabled(e.ok)
            a.setToolTip(f"{e.path}\n{e.source_label}")
            a.triggered.connect(lambda _=False, path=str(e.path): loader.load_model(path))
        if len(others) > LIBRARY_IN_PICKER:
            more = menu.addAction(f"{len(others) - LIBRARY_IN_PICKER} more in the library…")
            more.triggered.connect(show_models_page)
        menu.addSeparator()
    menu.addAction("Open a GGUF file…", loader.open_model_dialog)
    menu.addAction("Browse models and the Hub…", show_models_page)
    if loader.engine.model is not None:
        menu.addAction("Unload model", loader.unload_model)
