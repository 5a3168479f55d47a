"""The window's docks: what each one holds, where it goes, its View-menu key and its tab group.

:class:`DockRegistry` is what the View menu (:mod:`app.ui.window.menus`), the layout
(:mod:`app.ui.window.window_layout`), How it works and the repaint clock read: a panel added
with :meth:`DockRegistry.add` gets its dock, its place (or a tab beside another dock), a
View-menu entry with the next free key, and its refresh on the clock. See
docs/CONTRIBUTING.md, "How to add a panel".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDockWidget, QFrame, QMainWindow, QScrollArea, QSizePolicy, QTabBar, QWidget

from app.core.inspection.pipeline_guide import LiveView

# The View menu's keys for the docks, in the order they were added; docks past the tenth have none.
DOCK_KEYS = tuple(f"Ctrl+Shift+{i}" for i in (*range(1, 10), 0))
DEFAULT_SHARE = 5  # a dock's share of its side's height at first, against the others in that area


@dataclass(frozen=True)
class DockSpec:
    """One dock: its panel and where it goes.

    Attributes:
        title: the dock's title (its tab, and "<title> panel" in the View menu).
        name: the dock's object name: what ``saveState`` / ``restoreState`` remember it by (unique).
        panel: the widget the dock holds.
        area: where it goes at first (the person may move it).
        scroll: the panel scrolls inside the dock (:class:`DockScroll`) rather than being cut off.
        least_width: the least width a person can squeeze the dock to, pixels (0: the panel's).
        share: its share of its side's height at first, against the other docks there.
        tab_with: the name of an earlier dock whose place it shares, as a tab behind it.
        hidden: closed at first (the View menu opens it).
        refresh: called on every panel tick of the repaint clock with whether the plot is due
            (principle 6: panels repaint on a clock, never per event).
        refresh_hidden: refresh also while the dock is not on screen (its figures are read
            elsewhere); otherwise only while it is.
        shows: where How it works' "Live:" links to these views lead.
    """

    title: str
    name: str
    panel: QWidget
    area: Qt.DockWidgetArea
    scroll: bool = True
    least_width: int = 0
    share: int = DEFAULT_SHARE
    tab_with: str | None = None
    hidden: bool = False
    refresh: Callable[[bool], object] | None = None
    refresh_hidden: bool = False
    shows: tuple[LiveView, ...] = ()


class DockRegistry:
    """The docks of one main window, in the order they were added.

    Args:
        main: the window the docks are added to.
    """

    def __init__(self, main: QMainWindow) -> None:
        self._main = main
        self._docks: list[QDockWidget] = []
        self._specs: dict[str, DockSpec] = {}
        _StrayTabBars(main)  # kept by its Qt parent, the window

    def add(self, spec: DockSpec) -> QDockWidget:
        """Make ``spec``'s dock and put it in the window (in its area, or as a tab behind
        ``spec.tab_with``); returns the dock.

        Raises:
            ValueError: a dock of that name is already there.
            KeyError: ``spec.tab_with`` names no dock added before.
        """
        if spec.name in self._specs:
            raise ValueError(f"a dock named {spec.name!r} is already in the window")
        dock = QDockWidget(spec.title)
        dock.setObjectName(spec.name)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        dock.setWidget(DockScroll(spec.panel) if spec.scroll else spec.panel)
        if spec.least_width:
            dock.setMinimumWidth(spec.least_width)
        if spec.tab_with is not None:
            self._main.tabifyDockWidget(self.named(spec.tab_with), dock)
        else:
            self._main.addDockWidget(spec.area, dock)
        if spec.hidden:
            dock.hide()
        self._docks.append(dock)
        self._specs[spec.name] = spec
        return dock

    def __iter__(self) -> Iterator[QDockWidget]:
        return iter(tuple(self._docks))

    def __len__(self) -> int:
        return len(self._docks)

    def named(self, name: str) -> QDockWidget:
        """The dock called ``name``.

        Raises:
            KeyError: no dock has that name.
        """
        for dock in self._docks:
            if dock.objectName() == name:
                return dock
        raise KeyError(name)

    def spec(self, dock: QDockWidget) -> DockSpec:
        """What ``dock`` was added with."""
        return self._specs[dock.objectName()]

    def panel(self, name: str) -> QWidget:
        """The panel the dock called ``name`` holds.

        Raises:
            KeyError: no dock has that name.
        """
        return self._specs[self.named(name).objectName()].panel

    def shortcut(self, dock: QDockWidget) -> QKeySequence | None:
        """The View-menu key of ``dock`` (Ctrl+Shift+1 for the first dock added … Ctrl+Shift+0 for
        the tenth); None past the tenth."""
        i = self._docks.index(dock)
        return QKeySequence(DOCK_KEYS[i]) if i < len(DOCK_KEYS) else None

    def tab_groups(self) -> list[tuple[QDockWidget, ...]]:
        """The docks that share a place, each group the first dock then its tabs (in order added)."""
        groups: dict[str, list[QDockWidget]] = {}
        for dock in self._docks:
            spec = self.spec(dock)
            root = spec.name
            while self._specs[root].tab_with is not None:
                root = self._specs[root].tab_with or root
            groups.setdefault(root, []).append(dock)
        return [tuple(g) for g in groups.values() if len(g) > 1]

    def column(self, area: Qt.DockWidgetArea) -> list[QDockWidget]:
        """The docks that stack in ``area`` at first: neither hidden nor a tab behind another dock."""
        return [
            d
            for d in self._docks
            if self.spec(d).area == area and not self.spec(d).hidden and not self.spec(d).tab_with
        ]

    def showing(self, view: LiveView) -> QDockWidget | None:
        """The dock where ``view`` is shown live, if a dock shows it."""
        return next((d for d in self._docks if view in self.spec(d).shows), None)

    def raise_fronts(self) -> None:
        """Bring the first dock of each tab group to the front (the others are tabs behind it)."""
        for group in self.tab_groups():
            group[0].raise_()

    def refresh(self, plot: bool) -> None:
        """The repaint clock's panel tick: each dock's ``refresh``, in the order added (only on
        screen unless its spec says ``refresh_hidden``)."""
        for dock in self._docks:
            spec = self.spec(dock)
            if spec.refresh is not None and (spec.refresh_hidden or dock.isVisible()):
                spec.refresh(plot)


class _StrayTabBars(QObject):
    """Hides the dock tab bars Qt leaves on screen but no longer uses.

    Qt (6.11) made three tab bars for the one Tokens | Timeline tabify, and more at each ``restoreState``
    (a workspace switch), and left the old ones visible where they were: a stray "Tokens | Timeline" or
    "Stats | Funnel" strip over the Model panel. After each layout of the window (deferred to the event
    loop, once the docks have their places), a visible tab bar that sits against none of the docks it
    names is hidden when another visible bar with the same tabs sits against them (so a group's only
    bar is never hidden), or when it lies outside the window. Hidden, not deleted: Qt's layout still
    holds them for reuse.
    """

    def __init__(self, main: QMainWindow) -> None:
        super().__init__(main)
        self._main = main
        self._due = False
        main.installEventFilter(self)

    def eventFilter(self, obj: QObject, e: QEvent) -> bool:
        if obj is self._main and e.type() in (QEvent.Type.Show, QEvent.Type.LayoutRequest) and not self._due:
            self._due = True
            QTimer.singleShot(0, self.hide_strays)
        return False

    def hide_strays(self) -> int:
        """Hide the stray tab bars now; returns how many were hidden."""
        self._due = False
        main = self._main
        direct = Qt.FindChildOption.FindDirectChildrenOnly  # not the whole widget tree (a long chat's messages)
        docks = {
            d.windowTitle(): d
            for d in main.findChildren(QDockWidget, options=direct)
            if d.isVisible() and not d.isFloating()
        }

        def tabs(bar: QTabBar) -> frozenset[str]:
            return frozenset(bar.tabText(i) for i in range(bar.count()))

        def placed(bar: QTabBar) -> bool:
            near = bar.geometry().adjusted(-4, -4, 4, 4)
            return any(t in docks and docks[t].geometry().intersects(near) for t in tabs(bar))

        bars = [b for b in main.findChildren(QTabBar, options=direct) if b.isVisible()]
        in_use = {tabs(b) for b in bars if placed(b)}
        inside = main.rect()
        strays = [b for b in bars if not placed(b) and (tabs(b) in in_use or not b.geometry().intersects(inside))]
        for bar in strays:
            bar.hide()
        return len(strays)


class DockScroll(QScrollArea):
    """A dock's scroll area: its panel takes the viewport's width (word-wrapped text wraps to it),
    but never less than the width its layout needs; a narrower dock scrolls sideways to the rest,
    and a shorter one up and down, so nothing of the panel is cut off at any dock size.

    The needed width follows the panel's content (its layout's minimum, asked again on each of
    its layout requests).
    """

    def __init__(self, panel: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        # Ignored: the panel's size hint (long unwrapped text) never widens it past the viewport;
        # its explicit minimum width (below) is what it cannot go under.
        panel.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setWidget(panel)
        panel.installEventFilter(self)
        self.fit_panel()

    def fit_panel(self) -> None:
        """Make the panel's minimum width what its layout needs now (px)."""
        panel = self.widget()
        lay = panel.layout() if panel is not None else None
        if panel is None or lay is None:
            return
        need = lay.minimumSize().width()
        if panel.minimumWidth() != need:
            panel.setMinimumWidth(need)

    def eventFilter(self, obj: QObject, e: QEvent) -> bool:
        if obj is self.widget() and e.type() == QEvent.Type.LayoutRequest:
            self.fit_panel()
        return False
