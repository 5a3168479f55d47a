"""The token panels (Tokens, Funnel) and the chat: a token clicked in the chat or the Tokens panel
opens its funnel step (the Funnel tab comes to the front) or starts a branch; what they cost the
engine is paid only while they are on screen.

- Next-token candidates are asked for only while the Tokens panel is on screen (they cost a pass
  over the vocabulary per token); logits are kept and funnels computed only while the Funnel is.
- The Tokens panel's two settings (colour, alternatives per token) are settings; the Funnel's
  sampler order goes to the Sampler panel.
"""

from __future__ import annotations

from PySide6.QtWidgets import QDockWidget

from app.ui.chat.controller import ChatController
from app.ui.chat.shown import ShownChat
from app.ui.funnel.controller import FunnelController, StepTarget
from app.ui.window.panels import Panels
from app.ui.window.settings_controller import SettingsController

TOP_CANDIDATES = 20  # next-token candidates asked for while the Tokens panel shows


class TokenPanels:
    """Connects the Tokens and Funnel panels to the chat (see the module docstring).

    Args:
        chat: the chat controller (the reply the panels show; what the next reply asks for).
        funnel: the Funnel's controller.
        panels: the panels (Tokens and Funnel in their docks; the Sampler, where the Funnel's
            order chosen goes).
        settings: the settings (the Tokens panel's colour and alternatives per token).
        shown: the chat and turn shown (the Funnel follows it; the live turn's reply is the Tokens panel's).
    """

    def __init__(
        self,
        chat: ChatController,
        funnel: FunnelController,
        panels: Panels,
        settings: SettingsController,
        shown: ShownChat,
    ) -> None:
        tokens, tokens_dock, funnel_dock = panels.tokens_panel, panels.tokens_dock, panels.funnel_dock
        self._chat = chat
        self._shown = shown
        self._funnel = funnel
        self._funnel_dock = funnel_dock
        self._inspectors_shown: set[QDockWidget] = set()
        chat.top_candidates = 0
        tokens_dock.visibilityChanged.connect(lambda shown: self._inspector_visibility(tokens_dock, shown))
        funnel_dock.visibilityChanged.connect(self._funnel_visibility)
        panels.funnel_panel.order_chosen.connect(panels.sampler_panel.set_order)
        tokens.set_colour(settings.settings.token_colour)
        tokens.set_per_token(settings.settings.alternatives_per_token)
        tokens.colour_changed.connect(lambda mode: settings.update(token_colour=mode))
        tokens.colour_changed.connect(chat.alternatives.set_token_colour)  # the chat's token views, at once
        tokens.per_token_changed.connect(lambda n: settings.update(alternatives_per_token=n))
        tokens.funnel_requested.connect(self._open_funnel)
        tokens.branch_requested.connect(self._branch)
        chat.funnel_step_requested.connect(self.open_funnel_step)
        alts = chat.alternatives
        funnel.follow(shown, alts.step_target, alts.newest_step_target, alts.uncertain_step_target)

    def turn_message(self) -> int | None:
        """The message id of the reply whose tokens the Tokens panel shows (the live turn's, or a stored
        reply's; None: none)."""
        return self._shown.turn_reply

    def _open_funnel(self, step: int) -> None:
        """The Tokens panel's step of the turn's reply, in the Funnel."""
        mid = self.turn_message()
        if mid is not None:
            self._chat.open_token_funnel(mid, step)

    def _branch(self, step: int, token: int) -> None:
        """A branch of the turn's reply from ``token`` at ``step`` (chosen in the Tokens panel)."""
        mid = self.turn_message()
        if mid is not None:
            self._chat.branch_from_alternative(mid, step, token)

    def open_funnel_step(self, target: StepTarget) -> None:
        """Bring the Funnel panel to the front and show ``target``'s step in it."""
        self._funnel.open_step(target)  # sent when the panel is on screen
        self._funnel_dock.show()
        self._funnel_dock.raise_()
        if not self._funnel.enabled:  # offscreen platforms may not report the dock's visibility
            self._funnel_visibility(True)

    def _inspector_visibility(self, dock: QDockWidget, shown: bool) -> None:
        if shown:
            self._inspectors_shown.add(dock)
        else:
            self._inspectors_shown.discard(dock)
        self._chat.top_candidates = TOP_CANDIDATES if self._inspectors_shown else 0

    def _funnel_visibility(self, shown: bool) -> None:
        self._funnel.set_enabled(shown)
        self._chat.keep_logits = shown
