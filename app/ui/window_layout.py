"""The window's first size and its docks' sizes, from the screen's available area.

A pure function of the available geometry (pixels), so the layout at 1366x768, 1280x720 or
1920x1080 is tested without such a screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect

PREFERRED_SIZE = (1500, 940)  # the first window on a large screen, pixels
FRAME_ALLOWANCE = (16, 40)  # the window manager's frame and title bar, pixels (not known before show)
LEFT_DOCK_MIN = 220  # Chats, Model
RIGHT_DOCK_MIN = 350  # Stats, Sampler
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
