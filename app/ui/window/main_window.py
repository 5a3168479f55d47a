"""The main window: composes the top bar, banner, chat, composer, panels in docks, the
menus and the repaint clock, and routes engine events and the person's commands between them.

The pieces live in their own modules (banner.py, top_bar.py, menus.py, repaint_clock.py,
conversation_export.py, chat/, panels/); settings are owned by the SettingsController and
"a reply is in flight" by the EngineClient.
"""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import QByteArray, QElapsedTimer, Qt, QTimer, Signal
from PySide6.QtGui import (
    QCloseEvent,
    QDragEnterEvent,
    QDragLeaveEvent,
    QDragMoveEvent,
    QDropEvent,
    QKeySequence,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QMainWindow,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app import APP_NAME, __version__
from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.conversations import ConversationStore
from app.core.gguf.gguf_info import GGUFError, MissingSplitParts, check_loadable, format_bytes
from app.core.remote import RemoteEndpoint
from app.core.settings import DialogFolder, Settings
from app.paths import Paths
from app.ui.chat import export as conversation_export
from app.ui.chat.chat_settings import ChatSettingsController
from app.ui.chat.composer import Composer
from app.ui.chat.controller import ChatController
from app.ui.chat.conversations import ConversationsPanel
from app.ui.chat.draft_counter import DraftCounter
from app.ui.chat.export import ExportFormat
from app.ui.chat.placeholder import (
    LOAD_LINK_PREFIX,
    MODELS_LINK,
    OPEN_LINK,
    QUICK_SHOWN,
    display_name,
    placeholder_html,
)
from app.ui.chat.shown import ShownChat
from app.ui.chat.system_prompt import SystemPromptBar
from app.ui.chat.turn import LiveTurn
from app.ui.chat.view import ChatView
from app.ui.common import dialogs
from app.ui.common.accessibility import name_widgets
from app.ui.common.highlight import search_terms
from app.ui.common.repaint_clock import RepaintClock
from app.ui.common.severity import Severity
from app.ui.common.wheel_guard import guard_wheel
from app.ui.engine.client import EngineClient, EngineState
from app.ui.funnel.controller import FunnelController, StepTarget
from app.ui.funnel.panel import FunnelPanel
from app.ui.inspect.controller import InspectController
from app.ui.models import ModelsWindow
from app.ui.panels.model import ModelPanel
from app.ui.panels.sampler import SamplerPanel
from app.ui.panels.speed_bound_view import SpeedBoundView
from app.ui.panels.stats import StatsPanel
from app.ui.panels.template import TemplateDialog
from app.ui.panels.timeline import TimelinePanel
from app.ui.panels.tokens import TokensPanel
from app.ui.server.controller import ServerController
from app.ui.server.panel import ServerPanel
from app.ui.window import chat_notices, window_layout
from app.ui.window.banner import Banner, BannerTopic
from app.ui.window.file_drop import FileDrop
from app.ui.window.first_start import FirstStart
from app.ui.window.menus import build_menus, fill_model_menu
from app.ui.window.settings_controller import SettingsController
from app.ui.window.top_bar import NO_MODEL_TEXT, ModelsBar, Page, TopBar

TOP_CANDIDATES = 20  # next-token candidates asked for while the Tokens panel shows


def _dock(title: str, name: str, widget: QWidget, scroll: bool = True) -> QDockWidget:
    d = QDockWidget(title)
    d.setObjectName(name)
    d.setFeatures(
        QDockWidget.DockWidgetFeature.DockWidgetMovable
        | QDockWidget.DockWidgetFeature.DockWidgetClosable
        | QDockWidget.DockWidgetFeature.DockWidgetFloatable
    )
    if scroll:
        # The panel takes the viewport's width (word-wrapped text wraps to it), never less than its
        # layout needs: a narrow dock scrolls sideways to the rest rather than cut it off.
        d.setWidget(window_layout.DockScroll(widget))
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
        models_page: ModelsWindow,
    ) -> None:
        super().__init__()
        self.paths = paths
        self.conversations = conversations
        self.settings_ctl = settings
        settings_now = settings.settings
        settings.save_failed.connect(lambda text: self.banner.show_message(Severity.ERROR, text))
        self.engine = engine
        self.turn = LiveTurn()
        self.shown = ShownChat(self.turn, conversations, self)  # the chat and turn shown: the panels follow it
        self.setWindowTitle(APP_NAME)
        self.setAcceptDrops(True)
        # Centre: top bar, banner, chat, composer
        centre = QWidget()
        centre.setObjectName("centre")
        col = QVBoxLayout(centre)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        self.top_bar = TopBar()
        col.addWidget(self.top_bar)
        self.system_bar = SystemPromptBar(settings_now.system_prompt)
        col.addWidget(self.system_bar)
        self.banner = Banner()
        col.addWidget(self.banner)
        self.chat_view = ChatView()
        col.addWidget(self.chat_view, 1)
        self.composer = Composer()
        col.addWidget(self.composer)
        # The centre shows the chat or the model library / Hub browser / downloads.
        self.models = models_page
        self.pages = QStackedWidget()
        self.pages.addWidget(centre)
        models_column = QWidget()
        models_column.setObjectName("centre")
        mcol = QVBoxLayout(models_column)
        mcol.setContentsMargins(0, 0, 0, 0)
        mcol.setSpacing(0)
        self.models_bar = ModelsBar()
        mcol.addWidget(self.models_bar)
        mcol.addWidget(self.models, 1)
        # The models page scrolls when the window is smaller than its minimum: a stacked widget
        # is as large as its largest page's minimum, and this page's (about 555x720) would
        # otherwise set the whole window's minimum (taller than a 1366x768 screen).
        self.models_scroll = QScrollArea()
        self.models_scroll.setObjectName("modelsScroll")
        self.models_scroll.setWidgetResizable(True)
        self.models_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.models_scroll.setWidget(models_column)
        self.pages.addWidget(self.models_scroll)
        guard_wheel(self.models)  # its combo boxes take the wheel only with focus, as the panels' fields do
        self.setCentralWidget(self.pages)
        self.file_drop = FileDrop(self, self.load_model, self.banner.show_message)

        # Panels
        self.stats_panel = StatsPanel(self.shown, SpeedBoundView(self.paths.cache_dir))
        self.sampler_panel = SamplerPanel(settings_now.sampler)
        self.model_panel = ModelPanel(settings_now.load)
        self.tokens_panel = TokensPanel(self.shown)
        self.chats_panel = ConversationsPanel(conversations)
        self.chats_dock = _dock("Chats", "chatsDock", self.chats_panel, scroll=False)
        self.model_dock = _dock("Model", "modelDock", self.model_panel)
        self.stats_dock = _dock("Stats", "statsDock", self.stats_panel)
        self.sampler_dock = _dock("Sampler", "samplerDock", self.sampler_panel)
        self.tokens_dock = _dock("Tokens", "tokensDock", self.tokens_panel, scroll=False)
        self.funnel_panel = FunnelPanel()
        self.funnel_dock = _dock("Funnel", "funnelDock", self.funnel_panel)
        self.timeline_panel = TimelinePanel(self.shown)
        self.timeline_dock = _dock("Timeline", "timelineDock", self.timeline_panel, scroll=False)
        for dock in (self.stats_dock, self.sampler_dock, self.funnel_dock):
            dock.setMinimumWidth(window_layout.RIGHT_DOCK_LEAST)
        for dock in (self.chats_dock, self.model_dock):
            dock.setMinimumWidth(window_layout.LEFT_DOCK_LEAST)
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.chats_dock)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.model_dock)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.stats_dock)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.sampler_dock)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.tokens_dock)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.timeline_dock)
        self.tabifyDockWidget(self.tokens_dock, self.timeline_dock)  # the turn's tokens, or its time axis
        self.tokens_dock.raise_()
        # The local API (off by default): its panel is a dock, hidden until the person opens it.
        self.server = ServerController(engine, settings, self)
        self.server_panel = ServerPanel(self.server, settings)
        self.server_dock = _dock("Server", "serverDock", self.server_panel, scroll=False)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.server_dock)
        self.server_dock.hide()
        # The funnel shares the place above the Sampler's sliders with Stats (a tab each), so both
        # the funnel and the sliders are on screen at once at 1366x768; Stats is shown first.
        self.tabifyDockWidget(self.stats_dock, self.funnel_dock)
        self.stats_dock.raise_()
        window_layout.fit_to_screen(self)

        self.chat_settings = ChatSettingsController(settings, conversations, self.shown, self)
        self.chat_settings.attach(self.sampler_panel, self.system_bar)
        self.chat = ChatController(
            engine, self.chat_view, self.composer, self.shown, conversations, settings, self.chat_settings
        )
        self.draft_counter = DraftCounter(
            engine,
            self.composer,
            self.chat.messages_with_draft,
            lambda: self.chat.chat_template,
            lambda: settings.settings.load.context_policy,
            self,
        )
        self.chat.conversation_changed.connect(lambda _cid: self.draft_counter.recount())
        self.system_bar.changed.connect(lambda _text: self.draft_counter.recount())
        self.chat.conversations_changed.connect(self.draft_counter.recount)  # a message deleted, edited, sent
        # The context policy or this model's chat template override (both settings) changed.
        self.settings_ctl.changed.connect(lambda _s: self.draft_counter.settings_changed())
        self._inspectors_shown: set[QDockWidget] = set()
        self.chat.top_candidates = 0
        self.funnel = FunnelController(engine, self.funnel_panel, self.chat_settings.current.sampler, self)
        self.token_inspect = InspectController(engine, self.tokens_panel, self.shown, self)
        self.menu_actions = build_menus(self)
        self.act_stop = self.menu_actions.stop
        # Stop works from anywhere in the window, not only from the composer (Esc there
        # is the composer's own; elsewhere the action takes it while a reply is in flight).
        self.act_stop.setShortcuts([*self.act_stop.shortcuts(), QKeySequence(Qt.Key.Key_Escape)])
        self._wire()
        self._update_placeholder()
        self._restore_window_state()
        name_widgets(self)

        # Repaint on a clock, not per event (docs/architecture.md, principle 6).
        self.clock = RepaintClock(self.turn, self)
        self.clock.text_due.connect(self.chat_view.refresh)
        self.clock.flush_due.connect(self.chat.flush)  # a streaming reply reaches the disk at least once a second
        self.clock.panels_due.connect(self._refresh_panels)
        self.clock.start()
        self._loading_path: str | None = None
        self._load_timer = QElapsedTimer()
        self.server.apply(settings_now.server)
        self.first_start = FirstStart(self)  # no model anywhere: the Models page, not an empty chat

    # ------------------------------------------------------------------------------ wiring
    def _wire(self) -> None:
        eng = self.engine
        eng.state_changed.connect(lambda _s: self._show_engine_state())
        eng.external_queue_changed.connect(self._show_engine_state)
        eng.engine_ready.connect(self._on_engine_ready)
        eng.model_loaded.connect(self._on_model_loaded)
        eng.model_load_failed.connect(self._on_load_failed)
        eng.engine_crashed.connect(self._on_crashed)
        eng.log_line.connect(lambda ev: self.banner.show_message(Severity(ev.level), ev.text))
        eng.generation_started.connect(lambda _rid: self.act_stop.setEnabled(True))
        # A new turn changes the chat: undoing an earlier deletion would now reshuffle its branches.
        eng.generation_started.connect(lambda _rid: self.banner.clear(BannerTopic.DELETED_MESSAGE))
        eng.generation_ended.connect(lambda _rid: self.act_stop.setEnabled(False))
        self.chat.notice.connect(lambda kind, text, topic: self.banner.show_message(kind, text, topic=topic))
        self.chat.repair_offered.connect(
            lambda text, fixes: self.banner.show_message(Severity.ERROR, text, fixes, topic=BannerTopic.GENERAL)
        )
        self.chat.reply_conversation_changed.connect(lambda _conv: chat_notices.show_reply_elsewhere(self))
        self.chat.message_deleted.connect(lambda deleted: chat_notices.message_deleted(self, deleted))
        self.chat.reply_finished.connect(lambda stats: self.sampler_panel.show_seed_used(stats.seed))
        self.chat_settings.system_prompt_edited.connect(lambda text: chat_notices.system_prompt_edited(self, text))
        self.model_panel.reload_requested.connect(self._reload_with)
        self.model_panel.load_settings_edited.connect(self._load_settings_edited)
        self.engine.generation_finished.connect(lambda ev: self.model_panel.rpc.show_turn(ev.stats))
        self.tokens_dock.visibilityChanged.connect(lambda shown: self._inspector_visibility(self.tokens_dock, shown))
        self.funnel_dock.visibilityChanged.connect(self._funnel_visibility)
        self.chat_settings.changed.connect(lambda cs: self.funnel.set_settings(cs.sampler))
        self.funnel_panel.order_chosen.connect(self.sampler_panel.set_order)
        self._wire_alternatives()
        self.models.load_requested.connect(self._load_from_library)
        self.models.remote_requested.connect(self.use_remote)
        self.models.library_tab.entries_changed.connect(self._update_placeholder)
        self.models.open_file_requested.connect(self.open_model_dialog)
        self.models.notice.connect(
            lambda kind, text: self.banner.show_message(Severity(kind), text, topic=BannerTopic.MODELS_PAGE)
        )
        self.models.download_finished.connect(self._download_finished)
        self.top_bar.page_requested.connect(self.show_page)
        self.top_bar.model_menu.aboutToShow.connect(lambda: fill_model_menu(self, self.top_bar.model_menu))
        self.models_bar.page_requested.connect(self.show_page)
        self.chat_view.link_activated.connect(self._placeholder_link)
        self.chats_panel.open_requested.connect(self.open_conversation)
        self.chats_panel.new_requested.connect(self.new_chat)
        self.chats_panel.deleted.connect(lambda conv_id, title: chat_notices.conversation_deleted(self, conv_id, title))
        self.chats_panel.export_requested.connect(self.export_conversation)
        self.chat.conversations_changed.connect(self.chats_panel.refresh)
        self.chat.conversation_changed.connect(self._conversation_changed)
        self.tokens_panel.template_requested.connect(self.show_template)
        self.model_panel.template_requested.connect(self.show_template)

    # ------------------------------------------------------------------------------ pages
    def show_page(self, page: Page | str) -> None:
        """Show the chat (:attr:`Page.CHAT`) or the models page (:attr:`Page.MODELS`)."""
        page = Page(page)
        chat_notices.place_banner(self, page)
        self.pages.setCurrentIndex(0 if page is Page.CHAT else 1)
        self.top_bar.set_page(page)
        self.models_bar.set_page(page)
        if page is Page.CHAT:
            self.composer.box.setFocus()
        name_widgets(self.pages.currentWidget())  # rows made since (Hub results, downloads)

    def show_models_page(self) -> None:
        self.show_page(Page.MODELS)

    def _set_model_button(self, text: str) -> None:
        self.top_bar.set_model_text(text)

    # ------------------------------------------------------------------------------ actions
    def dialog_folder(self, kind: DialogFolder, default: Path) -> Path:
        """Where a file dialog of ``kind`` opens: the folder it was last used in, if it still exists."""
        last = self.settings.last_folder(kind)
        return Path(last) if last and Path(last).is_dir() else default

    def _remember_folder(self, kind: DialogFolder, chosen_file: str) -> None:
        if chosen_file:
            self.settings_ctl.apply(lambda s: s.with_last_folder(kind, Path(chosen_file).parent))

    def open_model_dialog(self) -> None:
        path = dialogs.choose_gguf_file(self, self.dialog_folder(DialogFolder.OPEN_MODEL, self.paths.models_dir))
        if path:
            self._remember_folder(DialogFolder.OPEN_MODEL, path)
            self.load_model(path)

    def show_logs_folder(self) -> None:
        dialogs.open_folder(self.paths.logs_dir)

    def load_model(self, path: str, settings: LoadSettings | None = None) -> bool:
        """Check ``path`` and load it in the engine with ``settings`` (default: the load settings
        in the settings). Returns False (with a message) if the file is unusable."""
        try:
            check_loadable(path)
        except MissingSplitParts as exc:
            self.banner.show_message(Severity.ERROR, exc.message, topic=BannerTopic.MODEL)
            return False
        except GGUFError as exc:
            self.banner.show_message(
                Severity.ERROR, exc.message, [("Open another model…", self.open_model_dialog)], topic=BannerTopic.MODEL
            )
            return False
        if self.chat.busy:
            self.chat.stop()  # the reply is kept, with the model it was made with; the state stays "loading"
        s = settings or self.settings.load
        self._loading_path = str(Path(path).resolve())
        self._load_timer.start()
        self.model_panel.set_loading(path)
        self._set_model_button(f"Loading {display_name(path)} …")
        self.engine.load_model(self._loading_path, s)
        self.banner.clear(BannerTopic.MODEL)
        self.banner.clear(BannerTopic.ENGINE)
        return True

    def use_remote(self, endpoint: RemoteEndpoint) -> None:
        """Make a remote OpenAI-compatible server the engine (the Models page's Remote tab); the chat comes to the front.

        This Glassbox's own local API is refused (its requests would wait behind the very reply
        they are asked for)."""
        if self.server.url is not None and _same_server(endpoint.base_url, self.server.url):
            self.banner.show_message(
                Severity.WARNING,
                f"{html.escape(endpoint.base_url)} is this Glassbox's own local API: it can only answer with the "
                "model loaded here. Choose another server, or load the model here.",
                topic=BannerTopic.MODELS_PAGE,
            )
            return
        if self.chat.busy:
            self.chat.stop()
        self._loading_path = None
        self._load_timer.start()
        self.model_panel.set_loading(endpoint.model or urlsplit(endpoint.base_url).netloc)
        self._set_model_button(f"Connecting to {endpoint.base_url} …")
        self.engine.load_model(endpoint.model or endpoint.base_url, self.settings.load, remote=endpoint)
        self.banner.clear(BannerTopic.MODEL)
        self.banner.clear(BannerTopic.ENGINE)
        self.show_page(Page.CHAT)

    def _placeholder_link(self, link: str) -> None:
        if link == OPEN_LINK:
            self.open_model_dialog()
        elif link == MODELS_LINK:
            self.show_page(Page.MODELS)
        elif link.startswith(LOAD_LINK_PREFIX):
            self.load_model(link.removeprefix(LOAD_LINK_PREFIX))

    def _load_from_library(self, path: str) -> None:
        if self.load_model(path):
            self.show_page(Page.CHAT)

    def _download_finished(self, path: str) -> None:
        self.banner.show_message(
            Severity.INFO,
            f"Downloaded {Path(path).name} (sha256 verified).",
            [("Load it", lambda: self._load_from_library(path))],
        )

    def unload_model(self) -> None:
        self.engine.shutdown()
        self.engine.start()
        self.model_panel.set_model(None)
        self.models.set_loaded_model(None)
        self._set_model_button(NO_MODEL_TEXT)
        self.model_changed.emit(None)
        self._update_placeholder()

    def restart_engine(self) -> None:
        self.banner.clear(BannerTopic.ENGINE)
        self.engine.restart()

    def new_chat(self) -> None:
        """Show a new, empty chat. During a reply the reply goes on in its own chat (the banner
        says where, with Show it / Stop)."""
        self.chat.new_chat()
        self._update_placeholder()
        self.composer.box.setFocus()

    def open_conversation(self, conv_id: int, focus_message: int | None = None) -> None:
        """Show chat ``conv_id`` (allowed during a reply: the reply goes on in its own chat); with
        ``focus_message`` (a search hit) scroll to that message and mark the words searched for in it."""
        try:
            self.chat.open_conversation(conv_id, focus_message)
        except KeyError:
            self.banner.show_message(Severity.WARNING, "That chat no longer exists.")
            self.chats_panel.refresh()
            self.chats_panel.set_current(self.chat.conversation_id)
            return
        if self.pages.currentIndex() != 0:
            self.show_page(Page.CHAT)  # a chat chosen from the list while the Models page is shown
        terms = search_terms(self.chats_panel.search.text())
        if focus_message is not None and terms:
            self.chat_view.highlight_message(focus_message, terms)

    def _conversation_changed(self, conv_id: int | None) -> None:
        self.chats_panel.set_current(conv_id)
        self._update_placeholder()
        chat_notices.show_reply_elsewhere(self)
        for topic in (
            BannerTopic.SYSTEM_PROMPT,
            BannerTopic.CHAT_MODEL,
            BannerTopic.CONTEXT,
            BannerTopic.DELETED_MESSAGE,
        ):
            self.banner.clear(topic)  # about the chat that was shown
        if conv_id is None:
            return
        conv = self.conversations.get_conversation(conv_id)
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
                Severity.INFO,
                f"This chat was made with {display_name(conv.model_path)}, which is not the loaded model.",
                [(f"Load {display_name(conv.model_path)}", lambda: self.load_model(conv.model_path))],
                topic=BannerTopic.CHAT_MODEL,
            )

    def export_conversation(self, conv_id: int | None, fmt: ExportFormat | str) -> None:
        """Ask where to write chat ``conv_id`` as ``fmt`` and write it; the banner says how it went."""
        if conv_id is None:
            self.banner.show_message(Severity.INFO, "There is no chat to export yet.")
            return
        start = self.dialog_folder(DialogFolder.EXPORT, Path.home())
        outcome = conversation_export.export_conversation(self, self.conversations, conv_id, ExportFormat(fmt), start)
        if outcome is not None:
            self._remember_folder(DialogFolder.EXPORT, outcome.path)
            self.banner.show_message(outcome.severity, outcome.text)

    def import_conversation(self) -> None:
        """Ask for a chat exported as JSON, import it and open it."""
        start = self.dialog_folder(DialogFolder.IMPORT, Path.home())
        outcome = conversation_export.import_conversation(self, self.conversations, start)
        if outcome is None:
            return
        self._remember_folder(DialogFolder.IMPORT, outcome.path)
        if outcome.conv_id is not None:
            self.chats_panel.refresh()
            self.open_conversation(outcome.conv_id)
        self.banner.show_message(outcome.severity, outcome.text)

    def _reload_with(self, s: LoadSettings) -> None:
        self.settings_ctl.update(load=s)
        if self.engine.remote is not None:  # the server chose its n_ctx: connect again
            self.use_remote(self.engine.remote)
            return
        path = self.engine.model.info.path if self.engine.model else self._loading_path
        if path:
            self.load_model(path, s)

    # ------------------------------------------------------------------------------ engine events
    def _show_engine_state(self) -> None:
        """The top bar's state: the engine's, or the local API's requests it is answering."""
        eng = self.engine
        api = len(eng.external_queue) + (eng.external_in_flight is not None)
        self.top_bar.show_state(eng.state, api)

    def _on_engine_ready(self, ev: P.EngineReady) -> None:
        if ev.remote:  # a server: this machine's build (its GPUs, its RPC backend) is what it was
            return
        self.model_panel.set_gpu_offload(ev.gpu_offload, ev.rpc)
        self.models.set_gpu_devices(ev.devices)

    def _on_model_loaded(self, ev: P.ModelLoaded) -> None:
        info = ev.info
        for topic in (BannerTopic.CHAT_MODEL, BannerTopic.MODEL, BannerTopic.NO_MODEL, BannerTopic.MODELS_PAGE):
            self.banner.clear(topic)  # messages about a model that is now loaded
        self.model_panel.set_model(ev)
        self.sampler_panel.set_vocab_size(ev.info.n_vocab)
        # What was loaded becomes the load settings (threads and GPU layers stay as asked:
        # the engine reports the resolved numbers, the settings keep "auto" / "all").
        applied = replace(
            ev.settings, n_threads=self.settings.load.n_threads, n_gpu_layers=self.settings.load.n_gpu_layers
        )
        remote = ev.remote
        if remote is None:
            self.settings_ctl.update(load=applied)
        self.model_panel.set_load_settings(applied)
        if remote is not None:  # a server: nothing to remember as a recent file or mark in the library
            n_ctx = f"n_ctx {ev.n_ctx:,}" if ev.n_ctx else "n_ctx not reported by this server"
            self.top_bar.set_model_text(
                f"{display_name(info.path)} (remote)  ▾", f"{remote.engine_label}\nmodel {remote.model} · {n_ctx}"
            )
            self.models.set_loaded_model(None)
        else:
            self.top_bar.set_model_text(
                f"{display_name(info.path)}  ▾",
                f"{info.path}\nn_ctx {ev.n_ctx:,} · {info.quant_type} · {format_bytes(info.file_size)}",
            )
            self.settings_ctl.apply(lambda s: s.with_recent(info.path))
            self.models.set_loaded_model(info.path)
            self.models.set_n_ctx(ev.n_ctx)
        self.stats_panel.set_model(ev.n_ctx, ev.kv_layout if remote is None else None, info, ev.n_batch)
        self.setWindowTitle(f"{display_name(info.path)} — {APP_NAME}")
        self._update_placeholder()
        self.model_changed.emit(ev)
        self.composer.box.setFocus()

    def _on_load_failed(self, ev: P.Failed) -> None:
        self.model_panel.set_model(None)
        self._set_model_button(NO_MODEL_TEXT)
        self.banner.show_message(
            Severity.ERROR, ev.message, [("Open another model…", self.open_model_dialog)], topic=BannerTopic.MODEL
        )
        self._update_placeholder()

    def _on_crashed(self, description: str) -> None:
        self.model_panel.set_model(None)
        self._set_model_button("Engine stopped  ▾")
        self.banner.show_message(
            Severity.ERROR,
            description + " Your conversation is kept.",
            [("Restart engine", self.restart_engine)],
            topic=BannerTopic.ENGINE,
        )

    # ------------------------------------------------------------------------------ settings
    @property
    def settings(self) -> Settings:
        """The current settings (owned by :attr:`settings_ctl`)."""
        return self.settings_ctl.settings

    def _load_settings_edited(self, s: LoadSettings) -> None:
        # n_ctx, threads... apply with a reload; the context policy applies to the next reply.
        policy_changed = s.context_policy != self.settings.load.context_policy
        self.settings_ctl.update(load=s)
        if policy_changed:
            self.banner.clear(BannerTopic.CONTEXT)  # its advice was about the policy
            self.chat.refresh_continue()
        self.models.set_n_ctx(s.n_ctx or 4096)

    def _wire_alternatives(self) -> None:
        """Every token's alternatives: a token clicked in the chat or the Tokens panel opens its funnel
        step (the Funnel tab comes to the front) or starts a branch; the panel's two settings."""
        tp = self.tokens_panel
        tp.set_colour(self.settings.token_colour)
        tp.set_per_token(self.settings.alternatives_per_token)
        tp.colour_changed.connect(lambda mode: self.settings_ctl.update(token_colour=mode))
        tp.colour_changed.connect(self.chat.alternatives.set_token_colour)  # the chat's token views, at once
        tp.per_token_changed.connect(lambda n: self.settings_ctl.update(alternatives_per_token=n))

        def turn_message() -> int | None:
            return self.turn.message_id

        tp.funnel_requested.connect(
            lambda step: (mid := turn_message()) is not None and self.chat.open_token_funnel(mid, step)
        )
        tp.branch_requested.connect(
            lambda step, tok: (mid := turn_message()) is not None and self.chat.branch_from_alternative(mid, step, tok)
        )
        self.chat.funnel_step_requested.connect(self._open_funnel_step)
        alts = self.chat.alternatives
        self.funnel.follow(self.shown, alts.step_target, alts.newest_step_target)

    def _open_funnel_step(self, target: StepTarget) -> None:
        """Bring the Funnel panel to the front and show ``target``'s step in it."""
        self.funnel.open_step(target)  # sent when the panel is on screen
        self.funnel_dock.show()
        self.funnel_dock.raise_()
        if not self.funnel.enabled:  # offscreen platforms may not report the dock's visibility
            self._funnel_visibility(True)

    def _inspector_visibility(self, dock: QDockWidget, shown: bool) -> None:
        """Ask for next-token candidates only while the Tokens panel is on screen
        (they cost a pass over the vocabulary per token)."""
        if shown:
            self._inspectors_shown.add(dock)
        else:
            self._inspectors_shown.discard(dock)
        self.chat.top_candidates = TOP_CANDIDATES if self._inspectors_shown else 0

    def _funnel_visibility(self, shown: bool) -> None:
        """Keep logits and ask for funnels only while the Funnel panel is on screen (hidden, it costs nothing)."""
        self.funnel.set_enabled(shown)
        self.chat.keep_logits = shown

    def save_settings(self) -> None:
        """Record the window's geometry and dock layout, and write the settings file now."""
        geo = bytes(self.saveGeometry().toBase64()).decode("ascii")
        state = bytes(self.saveState().toBase64()).decode("ascii")
        self.settings_ctl.update(window_geometry=geo, window_state=state)
        self.settings_ctl.save_now()

    def _restore_window_state(self) -> None:
        if self.settings.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(self.settings.window_geometry.encode("ascii")))
        if self.settings.window_state:
            self.restoreState(QByteArray.fromBase64(self.settings.window_state.encode("ascii")))

    # ------------------------------------------------------------------------------ view
    def _refresh_panels(self, plot: bool) -> None:
        """The repaint clock's panel tick: Stats (with the plot when due), Tokens, the newest token's funnel."""
        self.stats_panel.refresh(plot=plot)
        self.tokens_panel.refresh()
        self.funnel.tick()
        if self.timeline_dock.isVisible():
            self.timeline_panel.refresh()

    def show_template(self) -> TemplateDialog | None:
        """Open the chat template and the prompt the model sees, with the per-model override (a
        dialog, returned); None with no model loaded (the banner says so)."""
        if self.engine.model is None:
            self.banner.show_message(Severity.INFO, "Load a model to see its chat template and prompt.")
            return None
        chat = self.chat
        dialog = TemplateDialog(
            self.engine, self.settings_ctl, lambda: chat.messages_for_engine() if chat.conversation_id else (), self
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.resize(min(1200, self.width() - 80), min(700, self.height() - 80))
        dialog.show()
        return dialog

    def _update_placeholder(self) -> None:
        self.chat_view.set_placeholder(
            placeholder_html(
                has_chat=self.chat.conversation_id is not None,
                model=self.engine.model,
                loading=self.engine.state == EngineState.LOADING,
                quick_models=self._quick_models(),
            )
        )

    def _quick_models(self) -> list[str]:
        """Models to offer in the empty chat: recent ones, then the library's loadable ones
        (as last scanned on the library's worker thread), no duplicates."""
        library = [str(e.path) for e in self.models.library_tab.model.entries if e.ok]
        known = set(library)
        recent = [p for p in self.settings.recent_models[:QUICK_SHOWN] if p in known or Path(p).is_file()]
        return list(dict.fromkeys(recent + library))

    def show_about(self) -> None:
        ready = self.engine.ready_info
        info = f"llama-cpp-python {ready.llama_cpp_version}<br>{ready.system_info}" if ready else ""
        self.banner.show_message(
            Severity.INFO, f"<b>{APP_NAME} {__version__}</b> — local LLM chat that shows its work.<br>{info}"
        )

    # ------------------------------------------------------------------------------ Qt events
    def dragEnterEvent(self, e: QDragEnterEvent) -> None:
        self.file_drop.enter(e)

    def dragMoveEvent(self, e: QDragMoveEvent) -> None:
        self.file_drop.move(e)

    def dragLeaveEvent(self, e: QDragLeaveEvent) -> None:
        self.file_drop.leave()
        super().dragLeaveEvent(e)

    def dropEvent(self, e: QDropEvent) -> None:
        self.file_drop.drop(e)

    def resizeEvent(self, e: QResizeEvent) -> None:
        """A window made wider gives its docks back their share (see :func:`window_layout.widen_docks`)."""
        super().resizeEvent(e)
        if e.oldSize().isValid() and e.size().width() > e.oldSize().width():
            QTimer.singleShot(0, lambda: window_layout.widen_docks(self))

    def closeEvent(self, e: QCloseEvent) -> None:
        self.clock.stop()
        self.chat.flush()
        self.models.shutdown()
        self.server.shutdown()
        self.save_settings()
        self.engine.shutdown()  # a reply in flight ends here and is stored as cut off
        self.chat.flush()
        super().closeEvent(e)


def _same_server(a: str, b: str) -> bool:
    """Whether two base URLs reach the same port on this machine (127.0.0.1, localhost, ::1 alike)."""
    local = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
    ua, ub = urlsplit(a), urlsplit(b)
    ha, hb = (ua.hostname or "").lower(), (ub.hostname or "").lower()
    return ua.port == ub.port and (ha == hb or (ha in local and hb in local))
