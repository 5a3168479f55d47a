"""What the chat view shows while no chat is: the loaded model, "Loading…", or links to a model
(recent and library models first, a file, the Models page); see :mod:`app.ui.chat.placeholder`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.ui.chat.controller import ChatController
from app.ui.chat.placeholder import (
    HINT_DONE_LINK,
    LOAD_LINK_PREFIX,
    MODELS_LINK,
    OPEN_LINK,
    QUICK_SHOWN,
    placeholder_html,
)
from app.ui.chat.view import ChatView
from app.ui.engine.client import EngineState
from app.ui.models.library_tab import LibraryTab
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.model_loader import ModelLoader
from app.ui.window.pages import Page
from app.ui.window.settings_controller import SettingsController


class EmptyChat:
    """Keeps the empty chat's text up to date and follows its links.

    Args:
        view: the chat view (its placeholder).
        chat: the chat controller (whether a chat is shown).
        loader: the model loader (the model, what loads, the recent models; the links' loads).
        library: the Models page's library (its loadable models, as last scanned).
        show_page: brings a page to the front.
        settings: the settings (whether the first turn's hint is still wanted).
    """

    def __init__(
        self,
        view: ChatView,
        chat: ChatController,
        loader: ModelLoader,
        library: LibraryTab,
        show_page: Callable[[Page], object],
        settings: SettingsController,
    ) -> None:
        self._view = view
        self._chat = chat
        self._loader = loader
        self._library = library
        self._show_page = show_page
        self._settings = settings
        view.link_activated.connect(self._link)
        chat.conversation_changed.connect(lambda _conv: self.update())
        library.entries_changed.connect(self.update)
        self.update()

    def show_model(self, change: ModelChange) -> None:
        """A model loaded, failed or was unloaded: say so."""
        if change.phase in (ModelPhase.LOADED, ModelPhase.FAILED, ModelPhase.UNLOADED):
            self.update()

    def update(self) -> None:
        """Write the empty chat's text for what is loaded now."""
        engine = self._loader.engine
        self._view.set_placeholder(
            placeholder_html(
                has_chat=self._chat.conversation_id is not None,
                model=engine.model,
                loading=engine.state == EngineState.LOADING,
                quick_models=self.quick_models(),
                first_turn_hint=self._settings.settings.first_turn_hint,
            )
        )

    def quick_models(self) -> list[str]:
        """Models to offer: recent ones, then the library's loadable ones (as last scanned on the
        library's worker thread), no duplicates."""
        library = [str(e.path) for e in self._library.model.entries if e.ok]
        known = set(library)
        recent = [p for p in self._loader.recent_models[:QUICK_SHOWN] if p in known or Path(p).is_file()]
        return list(dict.fromkeys(recent + library))

    def _link(self, link: str) -> None:
        if link == OPEN_LINK:
            self._loader.open_model_dialog()
        elif link == MODELS_LINK:
            self._show_page(Page.MODELS)
        elif link == HINT_DONE_LINK:  # never shown again, in this window or after a restart
            self._settings.update(first_turn_hint=False)
            self.update()
        elif link.startswith(LOAD_LINK_PREFIX):
            self._loader.load_model(link.removeprefix(LOAD_LINK_PREFIX))
