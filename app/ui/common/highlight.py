"""Mark search matches in rich text (Qt's HTML subset) without touching tags or entities."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from app.ui.common import palette

# A tag, an entity, or a <style> block: none of these is text the person reads.
_NOT_TEXT = re.compile(r"(<style\b.*?</style>|<[^>]*>|&[#\w]+;)", re.IGNORECASE | re.DOTALL)
HIT_OPEN = f'<span style="background-color:{palette.SEARCH_HIT_BG}; color:{palette.WHITE};">'
HIT_CLOSE = "</span>"


def search_terms(query: str) -> list[str]:
    """The words a search for ``query`` matches (as the history's search splits it)."""
    return re.findall(r"\w+", query)


def highlight_html(rich: str, terms: Iterable[str]) -> tuple[str, int]:
    """``rich`` with each case-insensitive occurrence of a term in its text wrapped in a
    highlight span; returns the new HTML and how many matches were marked.

    Text is matched as escaped in the HTML (``&`` in a term matches ``&amp;``)."""
    words = sorted({t for t in terms if t}, key=len, reverse=True)
    if not words:
        return rich, 0
    pattern = re.compile("|".join(re.escape(html.escape(w, quote=False)) for w in words), re.IGNORECASE)
    count = 0

    def mark(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f"{HIT_OPEN}{m.group(0)}{HIT_CLOSE}"

    parts = _NOT_TEXT.split(rich)
    out = [part if i % 2 else pattern.sub(mark, part) for i, part in enumerate(parts)]
    return "".join(out), count
