"""The main window: chat in the middle, panels around it, menus, drag and drop."""

from __future__ import annotations

import html
import logging
import re
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QByteArray, QElapsedTimer, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import APP_NAME, __version__
from app.core import protocol as P
from app.core.chat import LoadSettings
from app.core.conversations import ConversationStore
from app.core.gguf_info import GGUFError, MissingSplitParts, check_loadable, format_bytes
from app.core.settings import Settings
from app.paths import Paths
from app.ui.chat.controller import ChatController
from app.ui.chat.view import ChatView, Composer, SystemPromptBar
from app.ui.engine_client import EngineClient, EngineState
from app.ui.library import ModelsWindow
from app.ui.panels.conversations import ConversationsPanel
from app.ui.panels.model import ModelPanel
from app.ui.panels.sampler import SamplerPanel
from app.ui.panels.stats import StatsPanel
from app.ui.panels.tokens import TokensPanel
from app.ui.settings_controller import SettingsController
from app.ui.turn import LiveTurn

log = logging.getLogger("glassbox.ui")

REFRESH_HZ = 30


def display_name(path: str) -> str:
    """A model's name for the window: its file name without .gguf (and the split suffix)."""
    name = Path(path).name
    if name.lower().endswith(".gguf"):
        name = name[:-5]
    return re.sub(r"-\d{5}-of-\d{5}$", "", name)


class Banner(QFrame):
    """A dismissible message above the chat, with optional action buttons."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(12, 8, 8, 8)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setObjectName("bannerText")
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.text, 1)
        self._actions = QHBoxLayout()
        lay.addLayout(self._actions)
        close = QToolButton()
        close.setText("✕")
        close.setObjectName("bannerClose")
        close.clicked.connect(self.hide)
        lay.addWidget(close)
        self.topic = ""
        self.hide()

    def clear(self, topic: str) -> None:
        """Hide the banner if it shows a message about ``topic``."""
        if self.isVisible() and self.topic == topic:
            self.hide()

    def show_message(
        self, kind: str, text: str, actions: list[tuple[str, object]] | None = None, topic: str = "general"
    ) -> None:
        """Show ``text``; ``topic`` lets a later event clear only its own kind of message
        (a new model load clears a load error, never a startup notice)."""
        log.log(
            logging.ERROR if kind == "error" else logging.WARNING if kind == "warning" else logging.INFO,
            "banner (%s): %s",
            kind,
            text,
        )
        self.topic = topic
        self.setProperty("kind", kind)
        self.style().unpolish(self)
        self.style().polish(self)
        self.text.setText(text)
        while self._actions.count():
            item = self._actions.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        for label, fn in actions or []:
            b = QPushButton(label)
            b.setObjectName("bannerButton")
            b.clicked.connect(fn)
            self._actions.addWidget(b)
        self.show()


def _dock(title: str, name: str, widget: QWidget, scroll: bool = True) -> QDockWidget:
    d = QDockWidget(title)
    d.setObjectName(name)
    d.setFeatures(
        QDockWidget.DockWidgetFeature.DockWidgetMovable
        | QDockWidget.DockWidgetFeature.DockWidgetClosable
        | QDockWidget.DockWidgetFeature.DockWidgetFloatable
    )
    if scroll:
        area = QScrollArea()
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # The panel takes the viewport's width, never its children's (long) minimum
        # widths: word-wrapped text wraps instead of running under the dock's edge.
        widget.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        area.setWidget(widget)
        d.setWidget(area)
    else:
        d.setWidget(widget)
    return d


class MainWindow(QMainWindow):
    """Glassbox's window.

    Signals:
        model_changed(object): a model finished loading (ModelLoaded) or was unloaded (None).
    """

    model_changed = Signal(object)

    def __init__(
        self,
        paths: Paths,
        settings: SettingsController,
        engine: EngineClient,
        conversations: ConversationStore,
    ) -> None:
        super().__init__()
        self.paths = paths
        self.conversations = conversations
        self.settings_ctl = settings
        settings_now = settings.settings
        settings.save_failed.connect(lambda text: self.banner.show_message("error", text))
        self.engine = engine
        self.turn = LiveTurn()
        self.setWindowTitle(APP_NAME)
        self.setAcceptDrops(True)
        self.resize(1500, 940)

        # Centre: top bar, banner, chat, composer
        centre = QWidget()
        centre.setObjectName("centre")
        col = QVBoxLayout(centre)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self._build_top_bar())
        self.system_bar = SystemPromptBar(settings_now.system_prompt)
        col.addWidget(self.system_bar)
        self.banner = Banner()
        col.addWidget(self.banner)
        self.chat_view = ChatView()
        col.addWidget(self.chat_view, 1)
        self.composer = Composer()
        col.addWidget(self.composer)
        # The centre shows the chat or the model library / Hub browser / downloads.
        self.models = ModelsWindow(paths, settings)
        self.pages = QStackedWidget()
        self.pages.addWidget(centre)
        models_page = QWidget()
        models_page.setObjectName("centre")
        mcol = QVBoxLayout(models_page)
        mcol.setContentsMargins(0, 0, 0, 0)
        mcol.setSpacing(0)
        mcol.addWidget(self._build_models_bar())
        mcol.addWidget(self.models, 1)
        self.pages.addWidget(models_page)
        self.setCentralWidget(self.pages)

        # Panels
        self.stats_panel = StatsPanel(self.turn)
        self.sampler_panel = SamplerPanel(settings_now.sampler)
        self.model_panel = ModelPanel(settings_now.load)
        self.tokens_panel = TokensPanel(self.turn)
        self.chats_panel = ConversationsPanel(conversations)
        self.chats_dock = _dock("Chats", "chatsDock", self.chats_panel, scroll=False)
        self.model_dock = _dock("Model", "modelDock", self.model_panel)
        self.stats_dock = _dock("Stats", "statsDock", self.stats_panel)
        self.sampler_dock = _dock("Sampler", "samplerDock", self.sampler_panel)
        self.tokens_dock = _dock("Tokens", "tokensDock", self.tokens_panel, scroll=False)
        for dock in (self.stats_dock, self.sampler_dock):
            dock.setMinimumWidth(360)
        for dock in (self.chats_dock, self.model_dock):
            dock.setMinimumWidth(260)
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.chats_dock)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.model_dock)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.stats_dock)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.sampler_dock)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.tokens_dock)
        self.resizeDocks([self.model_dock, self.stats_dock], [320, 400], Qt.Orientation.Horizontal)
        self.resizeDocks([self.stats_dock, self.sampler_dock], [480, 520], Qt.Orientation.Vertical)
        self.resizeDocks([self.chats_dock, self.model_dock], [300, 640], Qt.Orientation.Vertical)
        self.resizeDocks([self.tokens_dock], [160], Qt.Orientation.Vertical)

        self.chat = ChatController(
            engine,
            self.chat_view,
            self.composer,
            self.turn,
            conversations,
            lambda: (self.sampler_panel.settings(), self.sampler_panel.stop_strings()),
            self.system_bar.text,
        )
        self._build_menus()
        self._wire()
        self._update_placeholder()
        self._restore_window_state()

        # Repaint on a clock, not per event (DESIGN.md, principle 6).
        self._applying_conversation = False
        self._ticks = 0
        self._cand_version: tuple[int, int] | None = None
        self._clock = QTimer(self)
        self._clock.setInterval(1000 // REFRESH_HZ)
        self._clock.timeout.connect(self._tick)
        self._clock.start()
        self._loading_path: str | None = None
        self._load_timer = QElapsedTimer()

    # ------------------------------------------------------------------------------ building
    def _nav_buttons(self, lay: QHBoxLayout, current: str) -> None:
        for name, label in (("chat", "Chat"), ("models", "Models")):
            b = QPushButton(label)
            b.setObjectName("navButton")
            b.setCheckable(True)
            b.setChecked(name == current)
            b.clicked.connect(lambda _=False, n=name: self.show_page(n))
            lay.addWidget(b)
        lay.addSpacing(8)

    def _build_models_bar(self) -> QWidget:
        bar = QFrame()
        bar.setObjectName("topBar")
        lay = QHBoxLayout(bar)
        lay.setContentsMargins(12, 6, 12, 6)
        self._nav_buttons(lay, "models")
        hint = QLabel("Models on this computer, the Hugging Face Hub, and downloads. Chatting goes on meanwhile.")
        hint.setObjectName("stateLabel")
        hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(hint)
        lay.addStretch(1)
        return bar

    def show_page(self, name: str) -> None:
        """Show the chat (``"chat"``) or the models page (``"models"``)."""
        self.pages.setCurrentIndex(0 if name == "chat" else 1)
        for bar_index in (0, 1):
            for b in self.pages.widget(bar_index).findChildren(QPushButton, "navButton"):
                b.setChecked((b.text() == "Chat") == (name == "chat"))
        if name == "chat":
            self.composer.box.setFocus()

    def _set_model_button(self, text: str) -> None:
        """The model picker's label, elided so a long file name never widens the window."""
        fm = self.model_button.fontMetrics()
        self.model_button.setText(fm.elidedText(text, Qt.TextElideMode.ElideMiddle, 280))
        self.model_button.setToolTip(text)

    def _build_top_bar(self) -> QWidget:
        bar = QFrame()
        bar.setObjectName("topBar")
        lay = QHBoxLayout(bar)
        lay.setContentsMargins(12, 6, 12, 6)
        self._nav_buttons(lay, "chat")
        self.model_button = QToolButton()
        self.model_button.setObjectName("modelButton")
        self._set_model_button("Select a model to load  ▾")
        self.model_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.model_menu = QMenu(self.model_button)
        self.model_menu.aboutToShow.connect(self._fill_model_menu)
        self.model_button.setMenu(self.model_menu)
        lay.addWidget(self.model_button)
        self.state_label = QLabel("")
        self.state_label.setObjectName("stateLabel")
        self.state_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.state_label.setMinimumWidth(120)
        lay.addWidget(self.state_label)
        lay.addStretch(1)
        return bar

    def _build_menus(self) -> None:
        m = self.menuBar().addMenu("&File")
        self.act_open = QAction("&Open model…", self)
        self.act_open.setShortcut(QKeySequence.StandardKey.Open)
        self.act_open.triggered.connect(self.open_model_dialog)
        m.addAction(self.act_open)
        self.recent_menu = m.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        m.addSeparator()
        self.act_new_chat = QAction("&New chat", self)
        self.act_new_chat.setShortcut(QKeySequence("Ctrl+N"))
        self.act_new_chat.triggered.connect(self.new_chat)
        m.addAction(self.act_new_chat)
        act_export_md = QAction("Export chat as &Markdown…", self)
        act_export_md.triggered.connect(lambda: self.export_conversation(self.chat.conversation_id, "markdown"))
        m.addAction(act_export_md)
        act_export_json = QAction("Export chat as &JSON (all branches)…", self)
        act_export_json.triggered.connect(lambda: self.export_conversation(self.chat.conversation_id, "json"))
        m.addAction(act_export_json)
        act_import = QAction("&Import chat (JSON)…", self)
        act_import.triggered.connect(self.import_conversation)
        m.addAction(act_import)
        m.addSeparator()
        act_logs = QAction("Show &logs folder", self)
        act_logs.triggered.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.paths.logs_dir))))
        m.addAction(act_logs)
        act_quit = QAction("&Quit", self)
        act_quit.setShortcut(QKeySequence.StandardKey.Quit)
        act_quit.triggered.connect(self.close)
        m.addAction(act_quit)

        e = self.menuBar().addMenu("&Engine")
        self.act_stop = QAction("&Stop reply", self)
        self.act_stop.setShortcut(QKeySequence("Ctrl+."))
        self.act_stop.triggered.connect(self.chat.stop)
        e.addAction(self.act_stop)
        self.act_restart = QAction("&Restart engine", self)
        self.act_restart.triggered.connect(self.restart_engine)
        e.addAction(self.act_restart)
        self.act_unload = QAction("&Unload model", self)
        self.act_unload.triggered.connect(self.unload_model)
        e.addAction(self.act_unload)

        v = self.menuBar().addMenu("&View")
        for d in (self.chats_dock, self.model_dock, self.stats_dock, self.sampler_dock, self.tokens_dock):
            v.addAction(d.toggleViewAction())
        h = self.menuBar().addMenu("&Help")
        about = QAction(f"About {APP_NAME}", self)
        about.triggered.connect(self._about)
        h.addAction(about)

    def _wire(self) -> None:
        eng = self.engine
        eng.state_changed.connect(self._on_state)
        eng.engine_ready.connect(self._on_engine_ready)
        eng.model_loaded.connect(self._on_model_loaded)
        eng.model_load_failed.connect(self._on_load_failed)
        eng.engine_crashed.connect(self._on_crashed)
        eng.log_line.connect(lambda ev: self.banner.show_message("warning", ev.text))
        self.chat.notice.connect(self._on_notice)
        self.chat.reply_finished.connect(lambda stats: self.sampler_panel.show_seed_used(stats.seed))
        self.chat.busy_changed.connect(self._on_busy)
        self.sampler_panel.settings_changed.connect(self._sampler_changed)
        self.system_bar.changed.connect(self._system_prompt_changed)
        self.model_panel.reload_requested.connect(self._reload_with)
        self.model_panel.policy_changed.connect(self._policy_changed)
        self.chat.context_policy_source = lambda: self.model_panel.policy.currentData()
        self.chat.candidates_source = lambda: 20 if self.sampler_dock.isVisible() or self.tokens_dock.isVisible() else 0
        self.model_panel.n_ctx.valueChanged.connect(lambda v: self.models.set_n_ctx(v or 4096))
        self.models.load_requested.connect(self._load_from_library)
        self.models.open_file_requested.connect(self.open_model_dialog)
        self.models.notice.connect(lambda kind, text: self.banner.show_message(kind, text))
        self.models.download_finished.connect(self._download_finished)
        self.chat_view.link_activated.connect(self._placeholder_link)
        self.chats_panel.open_requested.connect(self.open_conversation)
        self.chats_panel.new_requested.connect(self.new_chat)
        self.chats_panel.deleted.connect(self._conversation_deleted)
        self.chats_panel.export_requested.connect(self.export_conversation)
        self.chat.conversations_changed.connect(self.chats_panel.refresh)
        self.chat.conversation_changed.connect(self._conversation_changed)

    # ------------------------------------------------------------------------------ actions
    def open_model_dialog(self) -> None:
        start = str(self.paths.models_dir)
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", start, "GGUF models (*.gguf);;All files (*)")
        if path:
            self.load_model(path)

    def load_model(self, path: str, settings: LoadSettings | None = None) -> bool:
        """Check ``path`` and load it in the engine. Returns False (with a message) if the file is unusable."""
        try:
            check_loadable(path)
        except MissingSplitParts as exc:
            self.banner.show_message("error", exc.message, topic="model")
            return False
        except GGUFError as exc:
            self.banner.show_message(
                "error", exc.message, [("Open another model…", self.open_model_dialog)], topic="model"
            )
            return False
        if self.chat.busy:
            self.chat.stop()
        s = settings or self.model_panel.load_settings()
        self._loading_path = str(Path(path).resolve())
        self._load_timer.start()
        self.model_panel.set_loading(path)
        self._set_model_button(f"Loading {display_name(path)} …")
        self.engine.load_model(self._loading_path, s)
        self.banner.clear("model")
        self.banner.clear("engine")
        return True

    def _placeholder_link(self, link: str) -> None:
        if link == "open":
            self.open_model_dialog()
        elif link == "models":
            self.show_page("models")
        elif link.startswith("load:"):
            self.load_model(link[5:])

    def _load_from_library(self, path: str) -> None:
        if self.load_model(path):
            self.show_page("chat")

    def _download_finished(self, path: str) -> None:
        self.banner.show_message(
            "info",
            f"Downloaded {Path(path).name} (sha256 verified).",
            [("Load it", lambda: self._load_from_library(path))],
        )

    def unload_model(self) -> None:
        self.engine.shutdown()
        self.engine.start()
        self.model_panel.set_model(None)
        self.models.set_loaded_model(None)
        self._set_model_button("Select a model to load  ▾")
        self.model_changed.emit(None)
        self._update_placeholder()

    def restart_engine(self) -> None:
        self.banner.clear("engine")
        self.engine.restart()

    def new_chat(self) -> None:
        self.chat.new_chat()
        self._update_placeholder()
        self.composer.box.setFocus()

    def open_conversation(self, conv_id: int, focus_message: int | None = None) -> None:
        try:
            self.chat.open_conversation(conv_id, focus_message)
        except KeyError:
            self.banner.show_message("warning", "That chat no longer exists.")
            self.chats_panel.refresh()

    def _conversation_changed(self, conv_id: int | None) -> None:
        self.chats_panel.set_current(conv_id)
        self._update_placeholder()
        if conv_id is None:
            self.system_bar.set_text(self.settings.system_prompt)
            return
        conv = self.conversations.get_conversation(conv_id)
        self._applying_conversation = True
        try:
            self.system_bar.set_text(conv.system_prompt)
            self.sampler_panel.set_settings(conv.sampler)
        finally:
            self._applying_conversation = False
        model = self.engine.model
        # Offer the chat's model when another one (or none) is in place; not while starting or
        # loading (start-up opens the last chat before it loads the last model).
        if (
            conv.model_path
            and (model is None or model.info.path != conv.model_path)
            and Path(conv.model_path).exists()
            and self.engine.state in (EngineState.READY, EngineState.NO_MODEL)
        ):
            self.banner.show_message(
                "info",
                f"This chat was made with {display_name(conv.model_path)}, which is not the loaded model.",
                [(f"Load {display_name(conv.model_path)}", lambda: self.load_model(conv.model_path))],
                topic="chat-model",
            )

    def _conversation_deleted(self, conv_id: int, title: str) -> None:
        if self.chat.conversation_id == conv_id:
            self.chat.new_chat()

        def undo() -> None:
            self.conversations.undo_delete(conv_id)
            self.chats_panel.refresh()
            self.banner.hide()

        self.banner.show_message("info", f"Deleted “{title}”.", [("Undo", undo)])

    def export_conversation(self, conv_id: int | None, fmt: str) -> None:
        if conv_id is None:
            self.banner.show_message("info", "There is no chat to export yet.")
            return
        title = self.conversations.get_conversation(conv_id).title
        safe = re.sub(r"[^\w\- ]+", "", title).strip() or "chat"
        ext, filt = (".md", "Markdown (*.md)") if fmt == "markdown" else (".json", "Glassbox chat (*.json)")
        path, _ = QFileDialog.getSaveFileName(self, "Export chat", str(Path.home() / f"{safe}{ext}"), filt)
        if not path:
            return
        try:
            if fmt == "markdown":
                self.conversations.export_markdown(conv_id, path)
            else:
                self.conversations.export_json(conv_id, path)
        except OSError as exc:
            self.banner.show_message("error", f"Could not write {path}: {exc.strerror or exc}")
            return
        self.banner.show_message("info", f"Exported “{title}” to {path}.")

    def import_conversation(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a chat", str(Path.home()), "Glassbox chat (*.json)")
        if not path:
            return
        try:
            conv_id = self.conversations.import_json(path)
        except (ValueError, OSError) as exc:
            self.banner.show_message("error", str(exc))
            return
        self.chats_panel.refresh()
        self.open_conversation(conv_id)
        self.banner.show_message(
            "info", f"Imported “{self.conversations.get_conversation(conv_id).title}” from {Path(path).name}."
        )

    def _reload_with(self, s: LoadSettings) -> None:
        self.settings_ctl.update(load=s)
        path = self.engine.model.info.path if self.engine.model else self._loading_path
        if path:
            self.load_model(path, s)

    # ------------------------------------------------------------------------------ menus
    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        if not self.settings.recent_models:
            a = self.recent_menu.addAction("No recent models")
            a.setEnabled(False)
        for p in self.settings.recent_models:
            a = self.recent_menu.addAction(Path(p).name)
            a.setToolTip(p)
            a.triggered.connect(lambda _=False, path=p: self.load_model(path))

    def _fill_model_menu(self) -> None:
        m = self.model_menu
        m.clear()
        for p in self.settings.recent_models[:8]:
            exists = Path(p).exists()
            a = m.addAction(Path(p).name + ("" if exists else "  (missing)"))
            a.setEnabled(exists)
            a.triggered.connect(lambda _=False, path=p: self.load_model(path))
        if self.settings.recent_models:
            m.addSeparator()
        m.addAction("Open a GGUF file…", self.open_model_dialog)
        m.addAction("Browse models and the Hub…", lambda: self.show_page("models"))
        if self.engine.model is not None:
            m.addAction("Unload model", self.unload_model)

    # ------------------------------------------------------------------------------ engine events
    def _on_state(self, state: str) -> None:
        text = {
            EngineState.STARTING.value: "starting engine…",
            EngineState.NO_MODEL.value: "no model",
            EngineState.LOADING.value: "loading…",
            EngineState.READY.value: "ready",
            EngineState.GENERATING.value: "generating",
            EngineState.DEAD.value: "engine stopped",
        }.get(state, state)
        self.state_label.setText(f"● {text}")
        self.state_label.setProperty("state", state)
        self.state_label.style().unpolish(self.state_label)
        self.state_label.style().polish(self.state_label)

    def _on_engine_ready(self, ev: P.EngineReady) -> None:
        self.model_panel.set_gpu_offload(ev.gpu_offload)

    def _on_model_loaded(self, ev: P.ModelLoaded) -> None:
        info = ev.info
        self.turn.reset()  # the KV cache is new: last turn's figures no longer describe it
        self.banner.clear("chat-model")
        self.model_panel.set_model(ev)
        self.model_panel.set_load_settings(
            replace(
                ev.settings,
                n_threads=self.model_panel.n_threads.value(),
                n_gpu_layers=self.model_panel.n_gpu_layers.value(),
            )
        )
        self._set_model_button(f"{display_name(info.path)}  ▾")
        self.model_button.setToolTip(
            f"{info.path}\nn_ctx {ev.n_ctx:,} · {info.quant_type} · {format_bytes(info.file_size)}"
        )
        self.stats_panel.set_model(ev.n_ctx, ev.kv_layout)
        self.settings_ctl.apply(lambda s: s.with_recent(info.path))
        self.models.set_loaded_model(info.path)
        self.models.set_n_ctx(ev.n_ctx)
        self.setWindowTitle(f"{display_name(info.path)} — {APP_NAME}")
        self._update_placeholder()
        self.model_changed.emit(ev)
        self.composer.box.setFocus()

    def _on_load_failed(self, ev: P.Failed) -> None:
        self.model_panel.set_model(None)
        self._set_model_button("Select a model to load  ▾")
        self.banner.show_message("error", ev.message, [("Open another model…", self.open_model_dialog)], topic="model")
        self._update_placeholder()

    def _on_crashed(self, description: str) -> None:
        self.model_panel.set_model(None)
        self._set_model_button("Engine stopped  ▾")
        self.banner.show_message(
            "error",
            description + " Your conversation is kept.",
            [("Restart engine", self.restart_engine)],
            topic="engine",
        )

    def _on_notice(self, kind: str, text: str) -> None:
        self.banner.show_message(kind, text)

    def _on_busy(self, busy: bool) -> None:
        self.act_stop.setEnabled(busy)

    # ------------------------------------------------------------------------------ settings
    def _policy_changed(self, policy: str) -> None:
        self.settings_ctl.update(load=replace(self.settings.load, context_policy=policy))

    def _sampler_changed(self, s) -> None:
        self.settings_ctl.update(sampler=s)
        if self.chat.conversation_id is not None and not self._applying_conversation:
            self.conversations.update_conversation(self.chat.conversation_id, sampler=s)

    def _system_prompt_changed(self, text: str) -> None:
        if self._applying_conversation:
            return
        self.settings_ctl.update(system_prompt=text)
        if self.chat.conversation_id is not None:
            self.conversations.update_conversation(self.chat.conversation_id, system_prompt=text)

    @property
    def settings(self) -> Settings:
        """The current settings (owned by :attr:`settings_ctl`)."""
        return self.settings_ctl.settings

    def save_settings(self) -> None:
        """Record the window's geometry and the load settings, and write the settings file now."""
        geo = bytes(self.saveGeometry().toBase64()).decode("ascii")
        state = bytes(self.saveState().toBase64()).decode("ascii")
        self.settings_ctl.update(window_geometry=geo, window_state=state, load=self.model_panel.load_settings())
        self.settings_ctl.save_now()

    def _restore_window_state(self) -> None:
        if self.settings.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(self.settings.window_geometry.encode("ascii")))
        if self.settings.window_state:
            self.restoreState(QByteArray.fromBase64(self.settings.window_state.encode("ascii")))

    # ------------------------------------------------------------------------------ view
    def _tick(self) -> None:
        """The repaint clock: reply text every tick (30 Hz), panels every 3rd (10 Hz), plot every 6th (5 Hz)."""
        self._ticks += 1
        self.chat_view.refresh()
        if self._ticks % REFRESH_HZ == 0:
            self.chat.flush()  # a streaming reply reaches the disk at least once a second
        if self._ticks % 3 and self.turn.phase != "done":
            return
        self.stats_panel.refresh(plot=self._ticks % 6 == 0 or self.turn.phase == "done")
        self.tokens_panel.refresh()
        t = self.turn
        if t.candidates and self._cand_version != (t.version, len(t.tokens)):
            self._cand_version = (t.version, len(t.tokens))
            self.sampler_panel.set_candidates(t.candidates, t.candidates_lse, t.chosen_token)

    def _update_placeholder(self) -> None:
        if self.chat.conversation_id is not None:
            self.chat_view.set_placeholder("")
        elif self.engine.model is not None:
            m = self.engine.model
            self.chat_view.set_placeholder(
                f"<h2>{display_name(m.info.path)}</h2><p style='color:#8b93a1'>{m.info.architecture} · "
                f"{m.info.quant_type} · {format_bytes(m.info.file_size)} · n_ctx {m.n_ctx:,}</p>"
                "<p>Ask anything. The panels show each step: the prompt's tokens, prefill, the KV cache, "
                "time to first token, the decode loop and the sampler.</p>"
            )
        elif self.engine.state == EngineState.LOADING:
            self.chat_view.set_placeholder("<h2>Loading the model…</h2>")
        else:
            on_disk = sorted(p for p in self.paths.models_dir.rglob("*.gguf") if p.is_file())[:4]
            quick = "".join(
                f"<p><a href='load:{html.escape(str(p))}'>Load {html.escape(display_name(str(p)))}</a></p>"
                for p in on_disk
            )
            self.chat_view.set_placeholder(
                "<h2>No model loaded</h2>"
                + quick
                + "<p><a href='open'>Open a GGUF file</a> (Ctrl+O), drop one on this "
                "window, or <a href='models'>find one on the Hugging Face Hub</a>.</p>"
            )

    def _about(self) -> None:
        ready = self.engine.ready_info
        info = f"llama-cpp-python {ready.llama_cpp_version}<br>{ready.system_info}" if ready else ""
        self.banner.show_message(
            "info", f"<b>{APP_NAME} {__version__}</b> — local LLM chat that shows its work.<br>{info}"
        )

    # ------------------------------------------------------------------------------ Qt events
    def dragEnterEvent(self, e: QDragEnterEvent) -> None:
        if any(u.isLocalFile() and u.toLocalFile().lower().endswith(".gguf") for u in e.mimeData().urls()):
            e.acceptProposedAction()

    def dropEvent(self, e: QDropEvent) -> None:
        for u in e.mimeData().urls():
            if u.isLocalFile() and u.toLocalFile().lower().endswith(".gguf"):
                self.load_model(u.toLocalFile())
                e.acceptProposedAction()
                return

    def closeEvent(self, e: QCloseEvent) -> None:
        self._clock.stop()
        self.chat.flush()
        self.models.shutdown()
        self.save_settings()
        self.engine.shutdown()
        super().closeEvent(e)
