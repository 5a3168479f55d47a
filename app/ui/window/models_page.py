"""What the Models page asks of the window: load a model from the library (the chat comes to the
front), connect to a server, open a file; its notices; a finished download offered for loading.
The top bar's model picker lists the library's models too."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMenu

from app.ui.common.severity import Severity
from app.ui.models.window import ModelsWindow
from app.ui.window.menus import fill_model_menu
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.model_loader import ModelLoader
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.pages import Page, Pages


class ModelsPageActions:
    """Carries out the Models page's requests.

    Args:
        models: the Models page.
        loader: the model loader.
        pages: the window's pages.
        notices: where the Models page's notices are said.
        picker: the top bar's model picker (filled just before it opens).
    """

    def __init__(
        self, models: ModelsWindow, loader: ModelLoader, pages: Pages, notices: Notices, picker: QMenu
    ) -> None:
        self._loader = loader
        self._pages = pages
        self._notices = notices
        models.load_requested.connect(self.load_from_library)
        models.remote_requested.connect(loader.use_remote)
        models.open_file_requested.connect(loader.open_model_dialog)
        models.notice.connect(lambda kind, text: notices.show(NoticeTopic.MODELS_PAGE, Severity(kind), text))
        models.download_finished.connect(self._download_finished)
        picker.aboutToShow.connect(
            lambda: fill_model_menu(
                picker, loader, models.library_tab.model.entries, lambda: pages.show_page(Page.MODELS)
            )
        )

    def load_from_library(self, path: str) -> None:
        """Load ``path``; the chat, where the model is used, comes to the front."""
        if self._loader.load_model(path):
            self._pages.show_page(Page.CHAT)

    def show_model(self, change: ModelChange) -> None:
        """A connection to a server brings the chat to the front (where its replies are)."""
        if change.phase is ModelPhase.LOADING and change.request is not None and change.request.remote is not None:
            self._pages.show_page(Page.CHAT)

    def _download_finished(self, path: str) -> None:
        self._notices.show(
            NoticeTopic.GENERAL,
            Severity.INFO,
            f"Downloaded {Path(path).name} (sha256 verified).",
            [("Load it", lambda: self.load_from_library(path))],
        )
