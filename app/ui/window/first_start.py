"""First start with no model to open: the window opens on the Models page, not on an empty chat.

When the library's first scan finds no loadable model, no recent model is still on disk, and
none is loaded or loading, the window shows the Models page:

- on its Library tab when folders of other apps (LM Studio's, GPT4All's, Jan's, llama.cpp's:
  :func:`~app.core.models.other_apps.folders_with_models`, looked for on the library's worker
  thread) hold models, with a hint naming them and a button that adds them to the library
  (the Library's empty page offers them too). Nothing there needs the network;
- else on its Hub tab with its search box focused and a one-line hint.

A known model leaves the chat as it is (the empty chat offers the library's models). The hint
goes once the library has a loadable model (models added, imported or downloaded). Once a model
loads from there, the chat comes back (it is where the model is used).
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QObject

from app.core.models.other_apps import folders_with_models
from app.ui.common.severity import Severity
from app.ui.models.empty_page import folder_label
from app.ui.models.window import ModelsTab, ModelsWindow
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.model_loader import ModelLoader
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.pages import Page, Pages

HINT = (
    "No model found on this computer yet: search the Hub for a GGUF model to download, "
    "or open one you have from the Library tab."
)
ADD_FOUND = "Add them"  # the hint's button when other apps' models were found


def found_hint(folders: list[Path]) -> str:
    """The hint (rich text) when ``folders`` of other apps hold models."""
    names = "; ".join(html.escape(folder_label(f), quote=False) for f in folders)
    return f"Models of other apps were found on this computer: {names}. Add them to the library to load one."


def model_known(loader: ModelLoader, models: ModelsWindow) -> bool:
    """Whether a model is known: one loaded or loading, a recent one still on disk, or a loadable
    one in the library (as last scanned)."""
    return loader.model_known() or library_has_models(models)


def library_has_models(models: ModelsWindow) -> bool:
    """Whether the library (as last scanned) lists a loadable model."""
    return any(e.ok for e in models.library_tab.model.entries)


class FirstStart(QObject):
    """Decides the first page once, on the library's first scan (see the module docstring).

    Args:
        pages: the window's pages.
        models: the Models page (its library and worker thread, its Library and Hub tabs).
        loader: the model loader (what is loaded, loading or recent; a model that loads).
        notices: where the hint is said (:attr:`NoticeTopic.FIRST_START`).

    Attributes:
        opened: the Models page was opened for a first start, and no model has loaded since.
        found: the other apps' folders with models found then (empty: none, or not looked).
    """

    def __init__(self, pages: Pages, models: ModelsWindow, loader: ModelLoader, notices: Notices) -> None:
        super().__init__(pages)
        self._pages = pages
        self._models = models
        self._loader = loader
        self._notices = notices
        self.opened = False
        self.found: list[Path] = []
        tab = models.library_tab
        if tab.scanned:
            self._decide()
        else:
            tab.entries_changed.connect(self._scanned)
        tab.entries_changed.connect(self._library_changed)
        loader.model_changed.connect(self._model_changed)

    def _scanned(self) -> None:
        self._models.library_tab.entries_changed.disconnect(self._scanned)
        self._decide()

    def _undecided(self) -> bool:
        """No model is known and the person is still on the chat they were shown."""
        return not model_known(self._loader, self._models) and self._pages.current is Page.CHAT

    def _decide(self) -> None:
        if not self._undecided():
            return  # a model is known, or the person went on already
        library = self._models.library
        self._models.library_pool.submit(
            lambda: folders_with_models(library.folders), self._open, lambda _exc: self._open([])
        )

    def _open(self, found: list[Path]) -> None:
        if not self._undecided():
            return  # a model became known, or the person went on, while the folders were looked in
        self._pages.show_page(Page.MODELS)
        self.opened = True
        self.found = list(found)
        if self._notices.showing_problem():
            # A problem said first (a --model that does not exist or is not a GGUF) stays: the person
            # learns why their file did not open; the Models page is where to pick another.
            self._models.show_tab(ModelsTab.LIBRARY if found else ModelsTab.HUB)
            return
        if found:
            self._models.show_tab(ModelsTab.LIBRARY)
            self._notices.show(
                NoticeTopic.FIRST_START, Severity.INFO, found_hint(found), [(ADD_FOUND, self._add_found)]
            )
        else:
            self._models.show_tab(ModelsTab.HUB)
            self._models.hub_tab.query.setFocus()
            self._notices.show(NoticeTopic.FIRST_START, Severity.INFO, HINT)

    def _add_found(self) -> None:
        for folder in self.found:
            self._models.library_tab.add_folder(folder)

    def _library_changed(self) -> None:
        if library_has_models(self._models):
            self._notices.clear(NoticeTopic.FIRST_START)

    def _model_changed(self, change: ModelChange) -> None:
        if change.phase is ModelPhase.LOADED and self.opened:
            self.opened = False
            self._notices.clear(NoticeTopic.FIRST_START)
            if self._pages.current is Page.MODELS:
                self._pages.show_page(Page.CHAT)
