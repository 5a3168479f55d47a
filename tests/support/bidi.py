"""Where Qt draws each character of a line of text, to check the visual order of mixed-direction text.

:func:`drawn_before` lays ``text`` out as a left-to-right line (the direction of Glassbox's
widgets) with :class:`QTextLayout`, which applies the Unicode bidirectional algorithm as every Qt
widget does, and compares the glyphs' horizontal centres: with a right-to-left token next to
digits, the digits can end up drawn left of the token although they come after it in the text.
Needs a QGuiApplication (pytest-qt's ``qapp``).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QTextDocument, QTextLayout, QTextOption


def glyph_centres(text: str) -> list[float | None]:
    """The horizontal centre (px) of each character of ``text`` drawn on one left-to-right line (None:
    no glyph, e.g. an invisible directional mark)."""
    layout = QTextLayout(text, QFont())
    opt = QTextOption()
    opt.setTextDirection(Qt.LayoutDirection.LeftToRight)
    layout.setTextOption(opt)
    layout.beginLayout()
    line = layout.createLine()
    line.setLineWidth(1e6)
    layout.endLayout()
    out: list[float | None] = []
    for k in range(len(text)):
        rects = [r.boundingRect() for r in layout.glyphRuns(k, 1)]
        rects = [r for r in rects if r.width() > 0]
        out.append(sum(r.center().x() for r in rects) / len(rects) if rects else None)
    return out


def drawn_before(text: str, first: str, then: str) -> bool:
    """Every character of the first ``first`` in ``text`` is drawn left of every character of the first
    ``then`` after it (``first`` and ``then`` must both occur, in that order)."""
    i = text.index(first)
    j = text.index(then, i + len(first))
    xs = glyph_centres(text)
    a = [x for x in xs[i : i + len(first)] if x is not None]
    b = [x for x in xs[j : j + len(then)] if x is not None]
    assert a and b, f"nothing drawn for {first!r} or {then!r} in {text!r}"
    return max(a) < min(b)


def plain(rich: str) -> str:
    """The text a rich-text label shows (tags dropped, entities decoded), as Qt reads it."""
    doc = QTextDocument()
    doc.setHtml(rich)
    return doc.toPlainText()
