"""The window's first size and its docks' sizes, from the screen's available area.

:func:`initial_layout` is a pure function of the available geometry (pixels), so the layout
at 1366x768, 1280x720 or 1920x1080 is tested without such a screen; :func:`fit_to_screen`
and :func:`widen_docks` apply it to a main window's docks, as its
:class:`~app.ui.window.docks.DockRegistry` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QRect, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMainWindow

from app.core.settings import Settings
from app.ui.window.docks import DockRegistry
from app.ui.window.settings_controller import SettingsController

PREFERRED_SIZE = (1500, 940)  # the first window on a large screen, pixels
FRAME_ALLOWANCE = (16, 40)  # the window manager's frame and title bar, pixels (not known before show)
LEFT_DOCK_MIN = 220  # Chats, Model: the least width the window's layout gives them
RIGHT_DOCK_MIN = 350  # Stats, Sampler
# The least width a person (or a small window, down to 800x500) can squeeze them to: their
# content then scrolls sideways (DockScroll) rather than being cut off.
LEFT_DOCK_LEAST = 150
RIGHT_DOCK_LEAST = 200
LEFT_DOCK_MAX = 320
RIGHT_DOCK_MAX = 420
TOKENS_DOCK_HEIGHT = (110, 160)  # the Tokens dock's height: least, most (pixels)


@dataclass(frozen=True)
class WindowLayout:
    """Pixel sizes for the window and its docks.

    Attributes:
        geometry: the window's client area (position and size) on the screen.
        left_width: the Chats / Model docks' width.
        right_width: the Stats / Sampler docks' width.
        tokens_height: the Tokens dock's height.
    """

    geometry: QRect
    left_width: int
    right_width: int
    tokens_height: int


def _clamp(v: float, lo: int, hi: int) -> int:
    return int(max(lo, min(hi, v)))


def dock_widths(window_width: int) -> tuple[int, int]:
    """The left and right docks' widths for a window ``window_width`` pixels wide
    (a fifth and a quarter of it, within their least and most widths)."""
    return (
        _clamp(window_width * 0.2, LEFT_DOCK_MIN, LEFT_DOCK_MAX),
        _clamp(window_width * 0.26, RIGHT_DOCK_MIN, RIGHT_DOCK_MAX),
    )


def initial_layout(available: QRect) -> WindowLayout:
    """Where the first window goes on a screen whose free area (without task bars) is
    ``available``: :data:`PREFERRED_SIZE` centred when it fits with its frame, else the
    whole free area less the frame."""
    fw, fh = FRAME_ALLOWANCE
    w = min(PREFERRED_SIZE[0], available.width() - fw)
    h = min(PREFERRED_SIZE[1], available.height() - fh)
    x = available.x() + (available.width() - w) // 2
    y = available.y() + max(fh - fw // 2, (available.height() - h) // 2)
    left, right = dock_widths(w)
    return WindowLayout(QRect(x, y, w, h), left, right, _clamp(h * 0.17, *TOKENS_DOCK_HEIGHT))


def fit_to_screen(main: QMainWindow, docks: DockRegistry) -> None:
    """Size and place ``main`` for its screen's free area (the first window, before a saved
    geometry is restored), with its docks sized for it: the side columns' widths from
    :func:`dock_widths`, each column's height shared by its docks' ``share``, the bottom docks
    at the Tokens height."""
    screen = main.screen() or QGuiApplication.primaryScreen()
    lay = initial_layout(screen.availableGeometry())
    main.setGeometry(lay.geometry)
    height = lay.geometry.height()
    horizontal, vertical = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
    area = Qt.DockWidgetArea
    left, right = docks.column(area.LeftDockWidgetArea), docks.column(area.RightDockWidgetArea)
    sides = [(col[0], width) for col, width in ((left, lay.left_width), (right, lay.right_width)) if col]
    if sides:
        main.resizeDocks([d for d, _ in sides], [w for _, w in sides], horizontal)
    for col in (left, right):
        total = sum(docks.spec(d).share for d in col)
        if len(col) > 1 and total > 0:
            main.resizeDocks(col, [height * docks.spec(d).share // total for d in col], vertical)
    bottom = docks.column(area.BottomDockWidgetArea)
    if bottom:
        main.resizeDocks(bottom, [lay.tokens_height] * len(bottom), vertical)


def widen_docks(main: QMainWindow, docks: DockRegistry) -> None:
    """Give the side docks their share of a window made wider: Qt gives all new width to the
    centre, so docks squeezed by a smaller window stayed narrow, their labels clipped.
    A dock already at least as wide as its share keeps its width; floating docks are left alone."""
    left, right = dock_widths(main.width())
    target = {Qt.DockWidgetArea.LeftDockWidgetArea: left, Qt.DockWidgetArea.RightDockWidgetArea: right}
    wanted = [
        (d, target[main.dockWidgetArea(d)])
        for d in docks
        if main.dockWidgetArea(d) in target and d.isVisible() and not d.isFloating()
    ]
    wanted = [(d, t) for d, t in wanted if d.width() < t]
    if wanted:
        main.resizeDocks([d for d, _ in wanted], [t for _, t in wanted], Qt.Orientation.Horizontal)


def save_geometry(main: QMainWindow, settings: SettingsController) -> None:
    """Record ``main``'s geometry in the settings (its docks' layout is each workspace's:
    :mod:`app.ui.window.workspaces`)."""
    settings.update(window_geometry=bytes(main.saveGeometry().toBase64().data()).decode("ascii"))


def restore_geometry(main: QMainWindow, settings: Settings) -> None:
    """Give ``main`` the geometry recorded in ``settings`` (none: as laid out)."""
    if settings.window_geometry:
        main.restoreGeometry(QByteArray.fromBase64(settings.window_geometry.encode("ascii")))
