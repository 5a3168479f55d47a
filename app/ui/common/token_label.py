"""A token's text as the token views write it next to other text: white space made visible, direction isolated.

A token of a right-to-left script (Arabic, Hebrew) written next to a number or another token is
reordered by the Unicode bidirectional algorithm (UAX #9): in ``'مرحبا' 37%`` the digits join the
Arabic run and are drawn to its left, so a lens cell reads "37% 'ابحرم'" and the probability seems
to belong to the cell before. Every token's text is therefore wrapped in FIRST STRONG ISOLATE …
POP DIRECTIONAL ISOLATE (U+2068 … U+2069, UAX #9 section 2.7; Qt's text layout honours them): the
token is laid out in its own direction, as one unit, and the text around it keeps its order
("token, then probability"; chips in context order).

A line of tokens is laid out left to right whatever the script of its first token: Qt takes a
paragraph's direction from its first strong letter (isolates included), so a Tokens line starting
with an Arabic token was right-aligned and read from the right (:func:`ltr_lines`, :data:`LTR_OPEN`).

Used by the inspect views (:mod:`app.ui.inspect.panel`), the Tokens panel's chips, hover and menu
(:mod:`app.ui.panels.tokens`, :mod:`app.ui.common.token_alts`) and the funnel (:mod:`app.ui.funnel.panel`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextOption

from app.ui.common.pieces import visible_piece, visible_piece_html

FSI = "\u2068"  #: FIRST STRONG ISOLATE: the text up to PDI takes the direction of its first strong letter
PDI = "\u2069"  #: POP DIRECTIONAL ISOLATE: ends the isolate


def isolate(text: str) -> str:
    """``text`` between FSI and PDI: laid out in its own direction, as one unit among the text around it."""
    return f"{FSI}{text}{PDI}"


def visible(text: str) -> str:
    """A token's text, plain, isolated, with its white space visible as every panel shows it
    (:func:`app.ui.common.pieces.visible_piece`: · space, ⏎ newline, → tab, ∅ empty)."""
    return isolate(visible_piece(text))


def visible_html(text: str) -> str:
    """:func:`visible`, HTML-escaped (for rich text)."""
    return isolate(visible_piece_html(text))


def quoted(text: str) -> str:
    """A token's text as a Python literal (quotes, escapes: ``'\\n'``), isolated."""
    return isolate(repr(text))


LTR_OPEN = "<div dir='ltr'>"  #: opens rich text whose paragraphs are laid out left to right (close with ``</div>``)


def ltr_lines(option: QTextOption) -> QTextOption:
    """``option`` with its text direction left to right: a document given it lays out every paragraph
    left to right (Qt's ``QTextBlock::textDirection`` reads the document's option before the text)."""
    option.setTextDirection(Qt.LayoutDirection.LeftToRight)
    return option
