"""Every colour the window paints with, by name.

Widgets, delegates, painters, stylesheets written in code and HTML snippets take
their colours from here (``palette.TEXT`` as a hex string, :func:`qcolor` for a
``QColor``), so a colour has one definition and a meaning. ``resources/style.qss``
uses the same values; :func:`app.ui.theme.apply_theme` builds Qt's palette from them.
"""

from __future__ import annotations

from PySide6.QtGui import QColor

# ----------------------------------------------------------------- surfaces (dark to light)
WINDOW = "#17191e"
PLOT_BG = "#1b1d23"
BASE = "#1d2026"
HOVER = "#20242c"
ALTERNATE = "#22252c"
GRID = "#23272f"
BUTTON = "#262a32"
TRACK = "#2a2e36"  # empty part of bars and meters; tooltips
CODE_BG = "#2b2f37"
DIVIDER = "#3b4250"
BORDER = "#444a55"
TABLE_BORDER = "#4a4f5a"
QUOTE_BAR = "#5b6372"  # the bar left of a block quote
SELECTED = "#1c2b45"

# ----------------------------------------------------------------- text
TEXT = "#e6e9ef"
TEXT_SOFT = "#c9ced8"  # secondary text in tables
QUOTE = "#aab1bd"
TEXT_DIM = "#9aa2b1"
MUTED = "#8b93a1"
MUTED_2 = "#7c8391"
FAINT = "#6b7280"
DISABLED = "#5b6170"
WHITE = "#ffffff"
CODE_TEXT = "#f8f8f2"  # Pygments' monokai foreground

# ----------------------------------------------------------------- meaning
ACCENT = "#3b82f6"  # selection, the KV cache's reused prefix
LINK = "#7aa7ff"
GREEN = "#22c55e"  # fits, done, generated tokens, the drawn token
AMBER = "#f59e0b"  # tight, prefill, TTFT
YELLOW = "#f5c451"  # paused
RED = "#f87171"  # does not fit, failed
PURPLE = "#a78bfa"

# ----------------------------------------------------------------- backgrounds with meaning
GREEN_BG = "#143d25"  # a "fits" badge
RECOMMENDED_BG = "#132a1d"  # the recommended quant's row
CACHED_BG = "#1e3a66"  # the reused-prefix chip
CACHED_TEXT = "#cfe0ff"
SPECIAL_TOKEN_BG = "#4a2d6b"  # chat-template special tokens
SPECIAL_TOKEN_BG_ALT = "#5e3a87"  # the next special token, where two touch (the template view)
PROMPT_TOKEN_BG = "#4d3b12"
SEARCH_HIT_BG = "#7a5d00"  # a search match highlighted in a message
# Generated tokens by the probability the model gave them, high to low.
PROB_BG = ("#1f4d36", "#35512a", "#5a4b1c", "#5e3a1a", "#5e2226")


def qcolor(hex_color: str) -> QColor:
    """A ``QColor`` for one of the names above."""
    return QColor(hex_color)
