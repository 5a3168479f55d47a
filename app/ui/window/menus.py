"""The window's menu bar and shortcuts, and the menus filled just before they open
(recent models, the model picker)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QFontDatabase, QKeySequence
from PySide6.QtWidgets import QMenu

from app import APP_NAME
from app.ui.chat.export import ExportFormat
from app.ui.common import dialogs
from app.ui.window.how_it_works import show_how_it_works
from app.ui.window.top_bar import Page

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


# Keys the prompt box handles itself (no QAction): listed in the shortcuts sheet too.
COMPOSER_KEYS: tuple[tuple[str, str], ...] = (
    ("Send the message", "Enter"),
    ("New line in the message", "Shift+Enter"),
    ("Stop the reply (from anywhere in the window)", "Esc"),
    ("Next / previous control", "Tab / Shift+Tab"),
)
DOCK_KEYS = tuple(f"Ctrl+Shift+{i}" for i in range(1, 9))


@dataclass(frozen=True)
class MenuActions:
    """The actions other code enables, triggers or reads."""

    open_model: QAction
    recent_menu: QMenu
    new_chat: QAction
    stop: QAction
    restart: QAction
    unload: QAction
    search_chats: QAction
    next_chat: QAction
    previous_chat: QAction
    chat_page: QAction
    models_page: QAction
    shortcuts: QAction
    how_it_works: QAction


def build_menus(w: MainWindow) -> MenuActions:
    """Fill ``w``'s menu bar (File, Engine, View, Help) with its shortcuts; Stop starts disabled."""
    m = w.menuBar().addMenu("&File")
    act_open = QAction("&Open model…", w)
    act_open.setShortcut(QKeySequence.StandardKey.Open)
    act_open.triggered.connect(w.open_model_dialog)
    m.addAction(act_open)
    recent_menu = m.addMenu("Open &recent")
    recent_menu.aboutToShow.connect(lambda: fill_recent_menu(recent_menu, w.settings.recent_models, w.load_model))
    m.addSeparator()
    act_new_chat = QAction("&New chat", w)
    act_new_chat.setShortcut(QKeySequence("Ctrl+N"))
    act_new_chat.triggered.connect(w.new_chat)
    m.addAction(act_new_chat)
    act_export_md = QAction("Export chat as &Markdown…", w)
    act_export_md.triggered.connect(lambda: w.export_conversation(w.chat.conversation_id, ExportFormat.MARKDOWN))
    m.addAction(act_export_md)
    act_export_json = QAction("Export chat as &JSON (all branches)…", w)
    act_export_json.triggered.connect(lambda: w.export_conversation(w.chat.conversation_id, ExportFormat.JSON))
    m.addAction(act_export_json)
    act_import = QAction("&Import chat (JSON)…", w)
    act_import.triggered.connect(w.import_conversation)
    m.addAction(act_import)
    m.addSeparator()
    act_logs = QAction("Show &logs folder", w)
    act_logs.triggered.connect(w.show_logs_folder)
    m.addAction(act_logs)
    act_quit = QAction("&Quit", w)
    act_quit.setShortcut(QKeySequence.StandardKey.Quit)
    act_quit.triggered.connect(w.close)
    m.addAction(act_quit)

    e = w.menuBar().addMenu("&Engine")
    act_stop = QAction("&Stop reply", w)
    act_stop.setShortcut(QKeySequence("Ctrl+."))
    act_stop.setEnabled(w.engine.generating)
    act_stop.triggered.connect(w.chat.stop)
    e.addAction(act_stop)
    act_restart = QAction("&Restart engine", w)
    act_restart.triggered.connect(w.restart_engine)
    e.addAction(act_restart)
    act_unload = QAction("&Unload model", w)
    act_unload.triggered.connect(w.unload_model)
    e.addAction(act_unload)

    v = w.menuBar().addMenu("&View")
    act_chat_page = _action(w, v, "&Chat page", ("Ctrl+1",), lambda: w.show_page(Page.CHAT))
    act_models_page = _action(w, v, "&Models page", ("Ctrl+2", "Ctrl+M"), lambda: w.show_page(Page.MODELS))
    v.addSeparator()
    act_search = _action(w, v, "&Search chats", ("Ctrl+K", "Ctrl+F"), lambda: focus_chat_search(w))
    act_next = _action(w, v, "N&ext chat", ("Ctrl+PgDown",), lambda: step_chat(w, 1))
    act_prev = _action(w, v, "&Previous chat", ("Ctrl+PgUp",), lambda: step_chat(w, -1))
    v.addSeparator()
    for d, key in zip(
        (
            w.chats_dock,
            w.model_dock,
            w.stats_dock,
            w.sampler_dock,
            w.tokens_dock,
            w.server_dock,
            w.funnel_dock,
            w.timeline_dock,
        ),
        DOCK_KEYS,
        strict=True,
    ):
        toggle = d.toggleViewAction()
        toggle.setText(f"{d.windowTitle()} panel")
        toggle.setShortcut(QKeySequence(key))
        v.addAction(toggle)
    h = w.menuBar().addMenu("&Help")
    act_keys = _action(w, h, "&Keyboard shortcuts", ("F1", "Ctrl+/"), lambda: show_shortcuts(w))
    # F1 is the shortcuts sheet's: the guide takes Shift+F1 (Qt's "What's This?" key, unused here).
    act_guide = _action(w, h, "&How it works", ("Shift+F1",), lambda: show_how_it_works(w))
    about = QAction(f"About {APP_NAME}", w)
    about.triggered.connect(w.show_about)
    h.addAction(about)
    return MenuActions(
        act_open,
        recent_menu,
        act_new_chat,
        act_stop,
        act_restart,
        act_unload,
        act_search,
        act_next,
        act_prev,
        act_chat_page,
        act_models_page,
        act_keys,
        act_guide,
    )


def _action(w: MainWindow, menu: QMenu, text: str, keys: tuple[str, ...], slot: Callable[[], object]) -> QAction:
    """A menu entry with its shortcuts (the first one is shown in the menu), active anywhere in the window."""
    a = QAction(text, w)
    a.setShortcuts([QKeySequence(k) for k in keys])
    a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    a.triggered.connect(slot)
    menu.addAction(a)
    return a


def focus_chat_search(w: MainWindow) -> None:
    """Show the Chats panel and put the cursor in its search box (Ctrl+K / Ctrl+F)."""
    w.show_page(Page.CHAT)
    w.chats_dock.show()
    w.chats_dock.raise_()
    w.chats_panel.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
    w.chats_panel.search.selectAll()


def step_chat(w: MainWindow, step: int) -> None:
    """Open the next (``step`` 1, older) or previous (-1, newer) chat in the Chats list's
    order (Ctrl+PgDown / Ctrl+PgUp); from a new chat, the first or the last."""
    ids = [c.id for c in w.conversations.list_conversations()]
    if not ids:
        return
    cur = w.chat.conversation_id
    i = ids.index(cur) + step if cur in ids else (0 if step > 0 else len(ids) - 1)
    if 0 <= i < len(ids):
        w.open_conversation(ids[i])
        w.composer.box.setFocus()


def show_shortcuts(w: MainWindow) -> dialogs.TextDialog:
    """Help → Keyboard shortcuts: every shortcut, read from the menus' actions (:func:`shortcut_sheet`)."""
    rows = shortcut_sheet(w)
    width = max(len(what) for what, _ in rows)
    text = "\n".join(f"{what.ljust(width)}   {keys}" for what, keys in rows)
    dlg = dialogs.show_text(w, "Keyboard shortcuts", text)
    dlg.setObjectName("shortcutsDialog")
    dlg.text_box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    dlg.resize(760, 520)
    return dlg


def shortcut_sheet(w: MainWindow) -> list[tuple[str, str]]:
    """Every keyboard shortcut of the window, read from its menus' actions (so the sheet
    cannot drift from what the keys do), then the prompt box's own keys.

    Returns:
        ``(what it does, keys)`` rows in menu order; keys in the platform's notation.
    """
    rows: list[tuple[str, str]] = []

    def walk(menu: QMenu, path: str) -> None:
        for a in menu.actions():
            if a.menu() is not None:
                walk(a.menu(), f"{path}{a.text().replace('&', '')} → ")
            elif a.shortcuts():
                keys = " or ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in a.shortcuts())
                rows.append((path + a.text().replace("&", ""), keys))

    for top in w.menuBar().actions():
        if top.menu() is not None:
            walk(top.menu(), f"{top.text().replace('&', '')} → ")
    rows.extend(COMPOSER_KEYS)
    return rows


def fill_recent_menu(menu: QMenu, recent: list[str], load: Callable[[str], object]) -> None:
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


def fill_model_menu(w: MainWindow, menu: QMenu) -> None:
    """The model picker: up to 8 recent models (missing files disabled), then the library's
    other models (as last scanned; unloadable ones disabled, with the reason), open, browse, unload."""
    menu.clear()
    recent = w.settings.recent_models
    model = w.engine.model
    loaded = str(Path(model.info.path)) if model is not None and model.remote is None else None
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
        a.triggered.connect(lambda _=False, path=p: w.load_model(path))
    if recent:
        menu.addSeparator()
    shown = {str(Path(p)) for p in recent[:8]}
    library = [e for e in w.models.library_tab.model.entries if str(e.path) not in shown]
    if library:
        head = menu.addAction("In the library")
        head.setEnabled(False)
        for e in library[:LIBRARY_IN_PICKER]:
            label = e.file_name + (f"  ({e.error})" if e.error else "")
            a = menu.addAction(label)
            a.setEnabled(e.ok)
            a.setToolTip(f"{e.path}\n{e.source_label}")
            a.triggered.connect(lambda _=False, path=str(e.path): w.load_model(path))
        if len(library) > LIBRARY_IN_PICKER:
            more = menu.addAction(f"{len(library) - LIBRARY_IN_PICKER} more in the library…")
            more.triggered.connect(w.show_models_page)
        menu.addSeparator()
    menu.addAction("Open a GGUF file…", w.open_model_dialog)
    menu.addAction("Browse models and the Hub…", w.show_models_page)
    if w.engine.model is not None:
        menu.addAction("Unload model", w.unload_model)
