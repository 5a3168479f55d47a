"""How a token's text is shown, the same in every panel: white space made visible.

· for a space, ⏎ for a newline, → for a tab, ∅ for an empty piece (the Tokens panel's marks, used
by the chat's token view, the funnel, the Timeline, the inspector and the template view alike).
"""

from __future__ import annotations

import html

SPACE, NEWLINE, TAB, EMPTY = "·", "⏎", "→", "∅"


def visible_piece(text: str) -> str:
    """``text`` with its white space visible (plain text)."""
    return text.replace(" ", SPACE).replace("\n", NEWLINE).replace("\t", TAB) or EMPTY


def visible_piece_html(text: str) -> str:
    """``text`` with its white space visible, HTML-escaped (for rich text)."""
    return visible_piece(html.escape(text)) if text else EMPTY
