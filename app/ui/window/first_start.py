"""First start with no model anywhere: the window opens on the Models page, not on an empty chat.

When the library's first scan finds no loadable model, no recent model is still on disk, and
none is loaded or loading, the window shows the Models page's Hub tab with its search box
focused and a one-line hint. A known model leaves the chat as it is. Once a model loads from
there, the chat comes back (it is where the model is used).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from app.ui.common.severity import Severity
from app.ui.engine.client import EngineState
from app.ui.models.window import ModelsTab
from app.ui.window.banner import BannerTopic
from app.ui.window.top_bar import Page

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow

HINT = (
    "No model found on this computer yet: search the Hub for a GGUF model to download, "
    "or open one you have from the Library tab."
)


def model_known(w: MainWindow) -> bool:
    """Whether the window knows a model: one loaded or loading, a recent one still on disk, or a
    loadable one in the library (as last scanned)."""
    eng = w.engine
    if eng.model is not None or eng.state == EngineState.LOADING:
        return True
    if any(Path(p).is_file() for p in w.settings.recent_models):
        return True
    return any(e.ok for e in w.models.library_tab.model.entries)


class FirstStart(QObject):
    """Decides the first page once, on the library's first scan (see the module docstring).

    Attributes:
        opened: the Models page was opened for a first start, and no model has loaded since.
    """

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self._w = window
        self.opened = False
        tab = window.models.library_tab
        if tab.scanned:
            self._decide()
        else:
            tab.entries_changed.connect(self._scanned)
        window.engine.model_loaded.connect(lambda _ev: self._model_loaded())

    def _scanned(self) -> None:
        self._w.models.library_tab.entries_changed.disconnect(self._scanned)
        self._decide()

    def _decide(self) -> None:
        w = self._w
        if model_known(w) or w.pages.currentIndex() != 0:  # a model is known, or the person went on already
            return
        w.show_page(Page.MODELS)
        w.models.show_tab(ModelsTab.HUB)
        w.models.hub_tab.query.setFocus()
        w.banner.show_message(Severity.INFO, HINT, topic=BannerTopic.MODELS_PAGE)
        self.opened = True

    def _model_loaded(self) -> None:
        if self.opened:
            self.opened = False
            if self._w.pages.currentIndex() == 1:
                self._w.show_page(Page.CHAT)
