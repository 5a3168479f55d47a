"""The window's first size and its docks' sizes, from the screen's available area.

:func:`initial_layout` is a pure function of the available geometry (pixels), so the layout
at 1366x768, 1280x720 or 1920x1080 is tested without such a screen; :func:`fit_to_screen`
and :func:`widen_docks` apply it to the window. :class:`DockScroll` keeps a dock's content
reachable at any dock size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QRect, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFrame, QScrollArea, QSizePolicy, QWidget

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow

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


def fit_to_screen(w: MainWindow) -> None:
    """Size and place the window for its screen's free area (the first window, before a
    saved geometry is restored), with the docks sized for it."""
    screen = w.screen() or QGuiApplication.primaryScreen()
    lay = initial_layout(screen.availableGeometry())
    w.setGeometry(lay.geometry)
    height = lay.geometry.height()
    horizontal, vertical = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
    w.resizeDocks([w.model_dock, w.stats_dock], [lay.left_width, lay.right_width], horizontal)
    w.resizeDocks([w.chats_dock, w.model_dock], [height * 3 // 10, height * 7 // 10], vertical)
    w.resizeDocks([w.stats_dock, w.sampler_dock], [height // 2, height // 2], vertical)
    w.resizeDocks([w.tokens_dock], [lay.tokens_height], vertical)


def widen_docks(w: MainWindow) -> None:
    """Give the side docks their share of a window made wider: Qt gives all new width to the
    centre, so docks squeezed by a smaller window stayed narrow, their labels clipped.
    A dock already at least as wide as its share keeps its width; floating docks are left alone."""
    left, right = dock_widths(w.width())
    wanted = [
        (d, target)
        for d, target in ((w.chats_dock, left), (w.model_dock, left), (w.stats_dock, right), (w.sampler_dock, right))
        if d.isVisible() and not d.isFloating() and d.width() < target
    ]
    if wanted:
        w.resizeDocks([d for d, _ in wanted], [t for _, t in wanted], Qt.Orientation.Horizontal)


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
