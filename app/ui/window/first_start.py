"""First start with no model anywhere: the window opens on the Models page, not on an empty chat.

When the library's first scan finds no loadable model, no recent model is still on disk, and
none is loaded or loading, the window shows the Models page's Hub tab with its search box
focused and a one-line hint. A known model leaves the chat as it is. Once a model loads from
there, the chat comes back (it is where the model is used).
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.ui.common.severity import Severity
from app.ui.models.window import ModelsTab, ModelsWindow
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.model_loader import ModelLoader
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.pages import Page, Pages

HINT = (
    "No model found on this computer yet: search the Hub for a GGUF model to download, "
    "or open one you have from the Library tab."
)


def model_known(loader: ModelLoader, models: ModelsWindow) -> bool:
    """Whether a model is known: one loaded or loading, a recent one still on disk, or a loadable
    one in the library (as last scanned)."""
    return loader.model_known() or any(e.ok for e in models.library_tab.model.entries)


class FirstStart(QObject):
    """Decides the first page once, on the library's first scan (see the module docstring).

    Args:
        pages: the window's pages.
        models: the Models page (its library, its Hub tab).
        loader: the model loader (what is loaded, loading or recent; a model that loads).
        notices: where the hint is said.

    Attributes:
        opened: the Models page was opened for a first start, and no model has loaded since.
    """

    def __init__(self, pages: Pages, models: ModelsWindow, loader: ModelLoader, notices: Notices) -> None:
        super().__init__(pages)
        self._pages = pages
        self._models = models
        self._loader = loader
        self._notices = notices
        self.opened = False
        tab = models.library_tab
        if tab.scanned:
            self._decide()
        else:
            tab.entries_changed.connect(self._scanned)
        loader.model_changed.connect(self._model_changed)

    def _scanned(self) -> None:
        self._models.library_tab.entries_changed.disconnect(self._scanned)
        self._decide()

    def _decide(self) -> None:
        if model_known(self._loader, self._models) or self._pages.current is not Page.CHAT:
            return  # a model is known, or the person went on already
        self._pages.show_page(Page.MODELS)
        self._models.show_tab(ModelsTab.HUB)
        self._models.hub_tab.query.setFocus()
        self._notices.show(NoticeTopic.MODELS_PAGE, Severity.INFO, HINT)
        self.opened = True

    def _model_changed(self, change: ModelChange) -> None:
        if change.phase is ModelPhase.LOADED and self.opened:
            self.opened = False
            if self._pages.current is Page.MODELS:
                self._pages.show_page(Page.CHAT)
