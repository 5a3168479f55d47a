"""LaTeX in replies: which text is math, how it is drawn, cached, aligned, and what a bad formula shows."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest
from PySide6.QtGui import QImage, QTextDocument
from PySide6.QtWidgets import QLabel

from app.ui.chat import mathtex
from app.ui.chat.markdown import render_text
from app.ui.chat.mathtex import current_style, protect, render_formula
from tests.support.fake_engine import reply
from tests.support.window import send


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("It costs $5 and $10 to try.", []),  # money, not math
        ("from $5 to $x$", [("x", False)]),
        ("$x$5 is not math, nor is $ x$ or $x $", []),
        ("an escaped \\$x\\$ stays text", []),
        ("`$x$` is code, and so is ``a $y$ b``", []),
        ("inline $a^2$ and \\(b_1\\)", [("a^2", False), ("b_1", False)]),
        ("display $$\\int_0^1 x\\,dx$$ and \\[ \\sum_k k \\]", [("\\int_0^1 x\\,dx", True), ("\\sum_k k", True)]),
        ("a lone $$ here", []),
        ("empty: $$$$", []),
        ("one line only: $x\ny$", []),
    ],
)
def test_what_is_math(text, found):
    _protected, formulas = protect(text)
    assert [(f.latex, f.display) for f in formulas] == found


def test_prose_with_dollars_renders_as_before():
    html = render_text("It costs $5 and $10; `$x$` is code.")
    assert "<img" not in html and "costs $5 and $10" in html and "<code>$x$</code>" in html


def test_formulas_become_images_and_display_math_is_centred(qapp):
    html = render_text("Let $x^2$ be.\n\n$$\\frac{a}{b}$$")
    assert html.count("<img") == 2 and '<p align="center"><img' in html and "\ue000" not in html


def test_a_formula_that_does_not_parse_shows_its_source(qapp):
    html = render_text("bad $\\frac{a}{$ here and a good $y$")
    assert "<code" in html and "$\\frac{a}{$" in html and html.count("<img") == 1


def test_a_formula_is_drawn_once_per_size_and_colour(qapp):
    render_formula.cache_clear()
    mathtex.formula_html.cache_clear()
    render_text("first $\\sqrt{17}$ paragraph")
    render_text("another paragraph with $\\sqrt{17}$ again")
    assert render_formula.cache_info().misses == 1
    style = current_style()
    bigger = mathtex.MathStyle(style.px * 2, style.color, style.dpr, style.x_height * 2)
    a, b = render_formula("\\sqrt{17}", False, style), render_formula("\\sqrt{17}", False, bigger)
    assert a is not None and b is not None and b[2] > a[2]
    assert render_formula.cache_info().misses == 2


def _ink_rows(img: QImage, x0: int, x1: int, light: bool) -> list[int]:
    rows = []
    for y in range(img.height()):
        for x in range(x0, x1):
            c = img.pixelColor(x, y)
            if c.alpha() > 200 and ((c.lightness() > 150) == light):
                rows.append(y)
                break
    return rows


def test_an_inline_formula_sits_on_the_text_baseline(qapp):
    """'x' drawn as text and 'x' drawn as a formula end on the same pixel row (within 1 px)."""
    style = current_style()
    image = render_formula("x", False, style)
    assert image is not None
    url, w, _h = image
    doc = QTextDocument()
    doc.setDefaultFont(QLabel().font())
    font = doc.defaultFont()
    font.setPointSizeF(mathtex.TEXT_PT)
    doc.setDefaultFont(font)
    doc.setHtml(f'<span style="color:#000000">xxxx</span><img src="{url}" width="{w}" align="middle">')
    size = doc.size().toSize()
    img = QImage(size, QImage.Format.Format_ARGB32)
    img.fill(0)
    from PySide6.QtGui import QPainter

    p = QPainter(img)
    doc.drawContents(p)
    p.end()
    text_bottom = max(_ink_rows(img, 0, img.width(), light=False))
    math_bottom = max(_ink_rows(img, 0, img.width(), light=True))
    assert abs(text_bottom - math_bottom) <= 1, (text_bottom, math_bottom)
    assert QImage.fromData(base64.b64decode(url.split(",", 1)[1])).width() >= w


def test_a_streamed_reply_with_formulas_shows_them_in_the_window(qtbot, window):
    text = "The area is $\\pi r^2$, it costs $5 and $10.\n\n$$E = mc^2$$\n\nDone \\(x\\)."
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    window.engine.script(reply(*pieces))
    window.sampler_panel.set_settings(replace(window.sampler_panel.settings(), max_tokens=400), emit=True)
    send(qtbot, window, "Formulas please.")
    body = window.chat_view.messages[-1].body
    shown = "".join(lbl.text() for lbl in body.findChildren(QLabel))
    assert shown.count("<img") == 3 and "costs $5 and $10" in shown
