"""Glassbox's panels, each in its dock: what they are, where they go, what shares a place.

docs/CONTRIBUTING.md, "How to add a panel", adds one here: the panel, then its
:class:`~app.ui.window.docks.DockSpec` (its place, its refresh on the repaint clock). The View menu
lists the docks in the order they are added (Ctrl+Shift+1, 2, … 9, 0), the layout sizes them by
area, How it works links to those that show a :class:`LiveView`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt

from app.core.chat.context import LoadSettings
from app.core.conversations import ConversationStore
from app.core.inspection.pipeline_guide import LiveView
from app.core.settings import Settings
from app.ui.chat.conversations import ConversationsPanel
from app.ui.chat.shown import ShownChat
from app.ui.funnel.panel import FunnelPanel
from app.ui.panels.model import ModelPanel
from app.ui.panels.sampler import SamplerPanel
from app.ui.panels.speed_bound_view import SpeedBoundView
from app.ui.panels.stats import StatsPanel
from app.ui.panels.timeline import TimelinePanel
from app.ui.panels.tokens import TokensPanel
from app.ui.server.controller import ServerController
from app.ui.server.panel import ServerPanel
from app.ui.speculative.view import SpeculationView
from app.ui.window.docks import DockRegistry, DockSpec
from app.ui.window.settings_controller import SettingsController
from app.ui.window.window_layout import LEFT_DOCK_LEAST, RIGHT_DOCK_LEAST

LEFT, RIGHT, BOTTOM = (
    Qt.DockWidgetArea.LeftDockWidgetArea,
    Qt.DockWidgetArea.RightDockWidgetArea,
    Qt.DockWidgetArea.BottomDockWidgetArea,
)


class Panels:
    """Makes the panels and adds their docks to ``docks`` (see the module docstring).

    Args:
        docks: the window's docks.
        shown: the chat and turn shown, which the live panels follow (they read its turn on the repaint clock).
        settings: the settings at start (the load and sampler settings the panels show first).
        settings_ctl: the settings' owner (the Server panel edits the local API's settings).
        conversations: the stored chats (the Chats panel).
        cache_dir: where the Stats panel's speed bound keeps its measurement.
        server: the local API's controller (the Server panel).
        funnel_tick: the Funnel's tick on the repaint clock (its controller, made after its panel).

    Attributes:
        chats_panel, model_panel, stats_panel, sampler_panel, tokens_panel, server_panel,
        funnel_panel, timeline_panel, speculation_panel: the panels; each ``<name>_dock`` is its dock.
    """

    def __init__(
        self,
        docks: DockRegistry,
        shown: ShownChat,
        settings: Settings,
        settings_ctl: SettingsController,
        conversations: ConversationStore,
        cache_dir: Path,
        server: ServerController,
        funnel_tick: Callable[[], object],
    ) -> None:
        self.chats_panel = ConversationsPanel(conversations)
        self.model_panel = ModelPanel(LoadSettings())  # no model yet: the defaults (per_model.py follows the model)
        self.stats_panel = StatsPanel(shown, SpeedBoundView(cache_dir))
        self.sampler_panel = SamplerPanel(settings.sampler)
        self.tokens_panel = TokensPanel(shown)
        self.server_panel = ServerPanel(server, settings_ctl)
        self.funnel_panel = FunnelPanel()
        self.timeline_panel = TimelinePanel(shown)
        self.speculation_panel = SpeculationView(shown)
        stats, tokens, timeline = self.stats_panel, self.tokens_panel, self.timeline_panel
        add = docks.add
        self.chats_dock = add(DockSpec("Chats", "chatsDock", self.chats_panel, LEFT, False, LEFT_DOCK_LEAST, 3))
        self.model_dock = add(
            DockSpec(
                "Model",
                "modelDock",
                self.model_panel,
                LEFT,
                least_width=LEFT_DOCK_LEAST,
                share=7,
                shows=(LiveView.MODEL,),
            )
        )
        self.stats_dock = add(
            DockSpec(
                "Stats",
                "statsDock",
                stats,
                RIGHT,
                least_width=RIGHT_DOCK_LEAST,
                refresh=lambda plot: stats.refresh(plot=plot),
                refresh_hidden=True,  # its figures are read while the Funnel tab is in front
                shows=(LiveView.STATS,),
            )
        )
        self.sampler_dock = add(
            DockSpec(
                "Sampler",
                "samplerDock",
                self.sampler_panel,
                RIGHT,
                least_width=RIGHT_DOCK_LEAST,
                shows=(LiveView.SAMPLER,),
            )
        )
        self.tokens_dock = add(
            DockSpec(
                "Tokens",
                "tokensDock",
                tokens,
                BOTTOM,
                scroll=False,
                refresh=lambda _plot: tokens.refresh(),
                refresh_hidden=True,
                shows=(LiveView.TOKENS, LiveView.INSPECT),
            )
        )
        self.server_dock = add(  # the local API (off by default): there to open, not in the way
            DockSpec("Server", "serverDock", self.server_panel, RIGHT, hidden=True, shows=(LiveView.SERVER,))
        )
        # The funnel shares the place above the Sampler's sliders with Stats (a tab each), so both the
        # funnel and the sliders are on screen at once at 1366x768; Stats is in front.
        self.funnel_dock = add(
            DockSpec(
                "Funnel",
                "funnelDock",
                self.funnel_panel,
                RIGHT,
                least_width=RIGHT_DOCK_LEAST,
                tab_with="statsDock",
                refresh=lambda _plot: funnel_tick(),  # the newest token's funnel (the controller checks it is shown)
                refresh_hidden=True,
                shows=(LiveView.FUNNEL,),
            )
        )
        self.timeline_dock = add(  # the turn's tokens, or its time axis
            DockSpec(
                "Timeline",
                "timelineDock",
                timeline,
                BOTTOM,
                scroll=False,
                tab_with="tokensDock",
                refresh=lambda _plot: timeline.refresh(),
                shows=(LiveView.TIMELINE,),
            )
        )
        spec = self.speculation_panel
        self.speculation_dock = add(  # speculative decoding (off by default): there to open, beside Tokens
            DockSpec(
                "Speculation",
                "speculationDock",
                spec,
                BOTTOM,
                hidden=True,
                refresh=lambda _plot: spec.refresh(),
            )
        )
