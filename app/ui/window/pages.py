"""The window's centre: the chat page or the Models page (the model library, the Hub, downloads)."""

from __future__ import annotations

import enum
from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QScrollArea, QStackedWidget, QVBoxLayout, QWidget

from app.ui.common.accessibility import name_widgets
from app.ui.common.wheel_guard import guard_wheel


class Page(str, enum.Enum):
    """The window's two pages."""

    CHAT = "chat"
    MODELS = "models"


def _column(parts: Sequence[tuple[QWidget, int]]) -> QWidget:
    """A page's column: ``parts`` top to bottom, each ``(widget, stretch)``."""
    page = QWidget()
    page.setObjectName("centre")
    col = QVBoxLayout(page)
    col.setContentsMargins(0, 0, 0, 0)
    col.setSpacing(0)
    for widget, stretch in parts:
        col.addWidget(widget, stretch)
    return page


class Pages(QStackedWidget):
    """The two pages, one shown at a time.

    Args:
        chat: the chat page's parts, top to bottom, each ``(widget, stretch)``.
        models_bar: the Models page's bar.
        models: the Models page.

    Signals:
        page_shown(Page): a page was brought to the front (also when it already was).
    """

    page_shown = Signal(Page)

    def __init__(self, chat: Sequence[tuple[QWidget, int]], models_bar: QWidget, models: QWidget) -> None:
        super().__init__()
        self.addWidget(_column(chat))
        # The models page scrolls when the window is smaller than its minimum: a stacked widget
        # is as large as its largest page's minimum, and this page's (about 555x720) would
        # otherwise set the whole window's minimum (taller than a 1366x768 screen).
        scroll = QScrollArea()
        scroll.setObjectName("modelsScroll")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(_column([(models_bar, 0), (models, 1)]))
        self.addWidget(scroll)
        guard_wheel(models)  # its combo boxes take the wheel only with focus, as the panels' fields do

    @property
    def current(self) -> Page:
        """The page shown."""
        return Page.CHAT if self.currentIndex() == 0 else Page.MODELS

    def show_page(self, page: Page | str) -> None:
        """Show the chat (:attr:`Page.CHAT`) or the Models page (:attr:`Page.MODELS`)."""
        page = Page(page)
        self.setCurrentIndex(0 if page is Page.CHAT else 1)
        self.page_shown.emit(page)
        shown = self.currentWidget()
        if shown is not None:
            name_widgets(shown)  # rows made since (Hub results, downloads)
