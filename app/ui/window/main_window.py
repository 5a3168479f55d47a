"""The main window: it composes the pages (top bar, notices, chat, composer; the Models page), the
panels in their docks, the controllers, the menus and the repaint clock. It does not mediate:
each part it builds owns its concern and subscribes to what it follows (the loaded model through
:attr:`ModelLoader.model_changed <app.ui.window.model_loader.ModelLoader.model_changed>`, the chat
and turn shown through :class:`~app.ui.chat.shown.ShownChat`, the settings through the settings controller).

Settings are owned by the SettingsController, "a reply is in flight" by the EngineClient, what is
loading by the ModelLoader, what the banner says by Notices, the docks by the DockRegistry, the chat
and turn shown by ShownChat, what applies to that chat by the ChatSettingsController.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent, QResizeEvent
from PySide6.QtWidgets import QMainWindow

from app import APP_NAME
from app.core import protocol as P
from app.core.chat.context import ContextPolicy
from app.core.conversations import ConversationStore
from app.core.settings import Settings, Workspace
from app.paths import Paths
from app.ui.chat.chat_settings import ChatSettingsController
from app.ui.chat.composer import Composer
from app.ui.chat.controller import ChatController
from app.ui.chat.draft_counter import DraftCounter
from app.ui.chat.placeholder import display_name
from app.ui.chat.shown import ShownChat
from app.ui.chat.system_prompt import SystemPromptBar
from app.ui.chat.turn import LiveTurn
from app.ui.chat.view import ChatView
from app.ui.common.accessibility import name_widgets
from app.ui.common.repaint_clock import RepaintClock
from app.ui.common.severity import Severity
from app.ui.constraint.feature import OutputFormat
from app.ui.depth_sweep.feature import DepthSweep
from app.ui.engine.client import EngineClient
from app.ui.funnel.controller import FunnelController
from app.ui.inspect.controller import InspectController
from app.ui.models import ModelsWindow
from app.ui.panels.template import TemplateDialog
from app.ui.server.controller import ServerController
from app.ui.speculative.feature import SpeculationFeature
from app.ui.window import window_layout
from app.ui.window.banner import Banner
from app.ui.window.base_model import BaseModelNotice
from app.ui.window.bias_vocabulary import BiasVocabularyCheck
from app.ui.window.chat_notices import ChatNotices
from app.ui.window.chat_page import ChatPage, open_template
from app.ui.window.docks import DockRegistry
from app.ui.window.empty_chat import EmptyChat
from app.ui.window.file_dialogs import FileDialogs
from app.ui.window.file_drop import FileDrop
from app.ui.window.first_start import FirstStart
from app.ui.window.how_it_works import HowItWorks
from app.ui.window.menus import Menus
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.model_loader import ModelLoader
from app.ui.window.models_page import ModelsPageActions
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.pages import Page, Pages
from app.ui.window.panels import Panels
from app.ui.window.per_chat import PerChatSettings
from app.ui.window.per_model import PerModelSettings
from app.ui.window.settings_controller import SettingsController
from app.ui.window.token_panels import TokenPanels
from app.ui.window.top_bar import ModelsBar, TopBar
from app.ui.window.workspaces import Workspaces


class MainWindow(QMainWindow):
    """Glassbox's window.

    Its commands are its parts' (the same bound methods): ``load_model``, ``use_remote``,
    ``unload_model``, ``restart_engine``, ``open_model_dialog`` (:attr:`loader`); ``new_chat``,
    ``open_conversation``, ``export_conversation``, ``import_conversation`` (:attr:`chat_page`);
    ``show_page`` (:attr:`pages`).
    """

    def __init__(
        self,
        paths: Paths,
        settings: SettingsController,
        engine: EngineClient,
        conversations: ConversationStore,
        models_page: ModelsWindow,
    ) -> None:
        super().__init__()
        self.paths, self.settings_ctl, self.engine, self.conversations = paths, settings, engine, conversations
        self.models, self.turn = models_page, LiveTurn()
        self.shown = ShownChat(self.turn, conversations, self)  # the chat and turn shown: the panels follow it
        self.setWindowTitle(APP_NAME)
        self.setAcceptDrops(True)
        # The pages: the chat (top bar, system prompt, notices, chat, composer) and the Models page.
        self.top_bar, self.models_bar, self.banner = TopBar(), ModelsBar(), Banner()
        self.system_bar = SystemPromptBar(self.settings.system_prompt)
        self.chat_view, self.composer = view, composer = ChatView(), Composer()
        chat_column = [(self.top_bar, 0), (self.system_bar, 0), (self.banner, 0), (view, 1), (composer, 0)]
        self.pages = pages = Pages(chat_column, self.models_bar, self.models)
        self.setCentralWidget(pages)
        self.show_page = pages.show_page
        self.notices = notices = Notices(self.banner, {Page.CHAT: self.system_bar, Page.MODELS: self.models_bar})
        pages.page_shown.connect(notices.place)
        for bar in (self.top_bar, self.models_bar):
            bar.page_requested.connect(self.show_page)
            pages.page_shown.connect(bar.set_page)
        self.top_bar.follow_engine(engine)
        settings.save_failed.connect(lambda text: notices.show(NoticeTopic.GENERAL, Severity.ERROR, text))
        engine.log_line.connect(lambda ev: notices.show(NoticeTopic.GENERAL, Severity(ev.level), ev.text))
        engine.engine_ready.connect(self._engine_ready)

        # The panels in their docks (app/ui/window/panels.py); the local API's among them.
        self.server = ServerController(engine, settings, self)
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.docks = DockRegistry(self)
        tick = self._funnel_tick
        self.panels = p = Panels(
            self.docks, self.shown, self.settings, settings, conversations, paths.cache_dir, self.server, tick
        )
        self.docks.raise_fronts()
        self.chats_panel, self.chats_dock = p.chats_panel, p.chats_dock
        self.model_panel, self.model_dock = p.model_panel, p.model_dock
        self.stats_panel, self.stats_dock = p.stats_panel, p.stats_dock
        self.sampler_panel, self.sampler_dock = p.sampler_panel, p.sampler_dock
        self.tokens_panel, self.tokens_dock = p.tokens_panel, p.tokens_dock
        self.server_panel, self.server_dock = p.server_panel, p.server_dock
        self.funnel_panel, self.funnel_dock = p.funnel_panel, p.funnel_dock
        self.timeline_panel, self.timeline_dock = p.timeline_panel, p.timeline_dock
        window_layout.fit_to_screen(self, self.docks)

        # The controllers and the parts that own each concern, each subscribing to what it follows.
        self.chat_settings = chat_settings = ChatSettingsController(settings, conversations, self.shown, self)
        chat_settings.attach(self.sampler_panel, self.system_bar)  # what applies to the chat shown
        self.chat = chat = ChatController(engine, view, composer, self.shown, conversations, settings, chat_settings)
        self.draft_counter = DraftCounter(
            engine, composer, chat.messages_with_draft, lambda: chat.chat_template, self._policy, self
        )
        chat.conversation_changed.connect(lambda _cid: self.draft_counter.recount())
        self.system_bar.changed.connect(lambda _text: self.draft_counter.recount())
        chat.conversations_changed.connect(self.draft_counter.recount)  # a message deleted, edited, sent
        # The context policy or this model's chat template override (both settings) changed.
        settings.changed.connect(lambda _s: self.draft_counter.settings_changed())
        self.funnel = FunnelController(engine, self.funnel_panel, chat_settings.current.sampler, self)
        self.token_inspect = InspectController(engine, self.tokens_panel, self.shown, self)
        self.files = FileDialogs(self, settings, conversations, paths.models_dir)
        self.loader = loader = ModelLoader(
            engine, settings, notices, stop_reply=chat.stop, choose_file=self.files.choose_model, own_api_url=self._api
        )
        self.load_model, self.use_remote = loader.load_model, loader.use_remote
        self.open_model_dialog, self.unload_model = loader.open_model_dialog, loader.unload_model
        self.restart_engine, chats = loader.restart_engine, self.chats_panel
        page = ChatPage(chat, view, composer, chats, self.chats_dock, conversations, pages, notices, self.files)
        self.chat_page, self.new_chat, self.open_conversation = page, page.new_chat, page.open_conversation
        self.export_conversation, self.import_conversation = page.export_conversation, page.import_conversation
        self.chat_notices = ChatNotices(page, chats, conversations, engine, notices, self.load_model)
        self.base_model = BaseModelNotice(chat, engine, settings, notices, self.show_template, self)
        self.bias_vocabulary = BiasVocabularyCheck(chat_settings, engine, notices, self)
        self.output_format = OutputFormat(engine, chat_settings, composer, self, self)  # the chat's output format
        sampler = self.sampler_panel
        self.per_chat = PerChatSettings(chat, chat_settings, settings, sampler, self.funnel, notices)
        self.token_panels = TokenPanels(chat, self.funnel, p, settings, self.shown)
        self.models_actions = ModelsPageActions(self.models, loader, pages, notices, self.top_bar.model_menu)
        self.empty_chat = EmptyChat(view, chat, loader, self.models.library_tab, self.show_page, settings)
        self.model_panel.reload_requested.connect(loader.reload_with)
        self.model_panel.show_templates(settings.settings.chat_templates)
        settings.changed.connect(lambda s: self.model_panel.show_templates(s.chat_templates))
        self.per_model = PerModelSettings(loader, settings, self.model_panel, self.models.library_tab)
        self.model_panel.load_settings_edited.connect(lambda s: self.models.set_n_ctx(s.n_ctx or 4096))
        engine.generation_finished.connect(lambda ev: self.model_panel.rpc.show_turn(ev.stats))
        for panel in (self.tokens_panel, self.model_panel):
            panel.template_requested.connect(self.show_template)
        followers = (page, self.model_panel, sampler, self.top_bar, self.models, self.stats_panel)
        for follower in (*followers, self.empty_chat, self.models_actions):
            loader.model_changed.connect(follower.show_model)
        loader.model_changed.connect(self._model_changed)
        loader.model_changed.connect(self.base_model.show_model)
        loader.model_changed.connect(self.bias_vocabulary.show_model)
        self.file_drop = FileDrop(
            self, self.load_model, lambda kind, text: notices.show(NoticeTopic.GENERAL, kind, text)
        )
        self.guide = HowItWorks(self, loader, chat_settings, self.docks, pages, notices)
        self.workspaces = Workspaces(self, self.docks, settings)  # the chat layout and the sampling lab
        # Speed vs context (app/ui/depth_sweep): its own window, opened from the Stats panel and the View menu.
        self.depth_sweep = DepthSweep(engine, composer, notices, paths.data_dir, paths.cache_dir, self)
        self.stats_panel.sweep_requested.connect(self.depth_sweep.open)
        # Speculative decoding (app/ui/speculative): the Model panel's settings, the Speculation dock, the speed-up.
        self.speculation = SpeculationFeature(
            engine,
            loader,
            chat,
            self.shown,
            self.model_panel.speculation,
            p.speculation_panel,
            p.speculation_dock,
            p.tokens_dock,
            p.model_dock,
            lambda: [(f"{e.file_name} · {e.quant}", str(e.path)) for e in self.models.library.entries],
            self.files.choose_model,
            notices,
            paths.cache_dir,
            self,
        )
        measure = self.speculation.measure
        self.top_bar.name_own_requests("measuring speed-up", measure.tickets, measure.progressed)
        self.menus = Menus(
            self,
            loader,
            page,
            pages,
            self.docks,
            self.workspaces,
            self.guide,
            engine,
            notices,
            paths.logs_dir,
            open_sweep=self.depth_sweep.open,
        )
        self.menu_actions, self.act_stop = self.menus.actions, self.menus.actions.stop
        self.top_bar.workspace_requested.connect(self.workspaces.show)
        self.workspaces.switched.connect(self.top_bar.set_workspace)
        window_layout.restore_geometry(self, self.settings)
        self.workspaces.restore()
        name_widgets(self)

        # Repaint on a clock, not per event (docs/architecture.md, principle 6).
        self.clock = RepaintClock(self.turn, self)
        self.clock.text_due.connect(view.refresh)
        self.clock.flush_due.connect(chat.flush)  # a streaming reply reaches the disk at least once a second
        self.clock.panels_due.connect(self.docks.refresh)
        self.clock.start()
        self.server.apply(self.settings.server)
        self.first_start = FirstStart(pages, self.models, loader, notices)  # no model anywhere: the Models page

    @property
    def settings(self) -> Settings:
        """The current settings (owned by :attr:`settings_ctl`)."""
        return self.settings_ctl.settings

    def show_template(self) -> TemplateDialog | None:
        """The chat template and the prompt the model sees (a dialog; None without a model)."""
        return open_template(self, self.engine, self.settings_ctl, self.chat, self.notices)

    def _funnel_tick(self) -> None:
        self.funnel.tick()

    def _policy(self) -> ContextPolicy:
        return self.chat.context_policy

    def _api(self) -> str | None:
        return self.server.url

    def _engine_ready(self, ev: P.EngineReady) -> None:
        if not ev.remote:  # a server: this machine's build (its GPUs, its RPC backend) is what it was
            self.model_panel.set_gpu_offload(ev.gpu_offload, ev.rpc)
            self.models.set_gpu_devices(ev.devices)

    def _model_changed(self, change: ModelChange) -> None:
        if change.phase is ModelPhase.LOADED and change.loaded is not None:
            self.setWindowTitle(f"{display_name(change.loaded.info.path)} — {APP_NAME}")

    def save_settings(self) -> None:
        """Record the window's geometry and the dock layout of the workspace shown, and write the settings file now."""
        window_layout.save_geometry(self, self.settings_ctl)
        self.workspaces.save()
        self.settings_ctl.save_now()

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
        """A window made wider gives its docks back their share (see :func:`window_layout.widen_docks`);
        in the sampling lab the docks keep their share of any new size (:meth:`Workspaces.window_resized`)."""
        super().resizeEvent(e)
        old, new = e.oldSize(), e.size()
        if not old.isValid():
            return
        if self.workspaces.current is Workspace.SAMPLING:
            QTimer.singleShot(0, lambda: self.workspaces.window_resized(old, new))
        elif new.width() > old.width():
            QTimer.singleShot(0, lambda: window_layout.widen_docks(self, self.docks))

    def closeEvent(self, e: QCloseEvent) -> None:
        self.clock.stop()
        self.chat.flush()
        self.models.shutdown()
        self.server.shutdown()
        self.save_settings()
        self.engine.shutdown()  # a reply in flight ends here and is stored as cut off
        self.chat.flush()
        super().closeEvent(e)
