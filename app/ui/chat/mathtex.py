"""LaTeX formulas in replies: found in the Markdown source, drawn once, shown as images.

Delimiters: ``$...$`` and ``\\(...\\)`` inline, ``$$...$$`` and ``\\[...\\]`` on their own line
(display, centred; inside a sentence, the sentence is cut around it, as KaTeX and
MathJax do). A dollar sign is math only as Pandoc reads it: the opening ``$`` is not
followed by a space, the closing one is not preceded by a space nor followed by a digit,
both on one line; so "costs $5 and $10" stays prose. ``\\$`` is a dollar sign. Nothing inside a code span is math.

Formulas are drawn by ziamath (LaTeX → MathML → SVG in pure Python, with the STIX
Two Math font and its OpenType MATH layout; 1.3 MB installed with ziafont and
latex2mathml, against about 40 MB for matplotlib's mathtext and its dependencies),
rasterised by QtSvg at the screen's device pixel ratio, and cached per formula,
font size, colour and ratio: a formula is drawn once, however often its paragraph
is re-rendered. A formula that does not parse is shown as its source, in a code span.

Inline formulas sit on the text's baseline: the image is padded so that where Qt
puts the baseline in an ``align="middle"`` image (measured once per image height)
is the formula's own baseline; so a formula with a subscript or a fraction reaches
below the line as text does.
"""

from __future__ import annotations

import base64
import html
import math
import re
import threading
import warnings
from dataclasses import dataclass
from functools import lru_cache

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF
from PySide6.QtGui import QFont, QFontMetricsF, QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

from app.ui.common import palette

TEXT_PT = 10.5  # the reply text's size (QLabel#msgText in the theme), points
_OPEN = "\ue000"  # placeholders for formulas while markdown-it renders the prose (private-use characters)
_CLOSE = "\ue001"
_PLACEHOLDER = re.compile(f"{_OPEN}(\\d+){_CLOSE}")


@dataclass(frozen=True)
class Formula:
    """A formula found in prose: its LaTeX, whether it is display math, and its source with delimiters."""

    latex: str
    display: bool
    source: str


@dataclass(frozen=True)
class MathStyle:
    """How formulas are drawn: font size (px), colour (#rrggbb), device pixel ratio, x-height (px)."""

    px: float
    color: str
    dpr: float
    x_height: float


def current_style() -> MathStyle:
    """The style for the reply text on the primary screen (a fixed 96-dpi style without a screen)."""
    screen = QGuiApplication.primaryScreen() if QGuiApplication.instance() else None
    dpi = screen.logicalDotsPerInchY() if screen else 96.0
    dpr = screen.devicePixelRatio() if screen else 1.0
    font = QFont()
    font.setPointSizeF(TEXT_PT)
    x_height = QFontMetricsF(font).xHeight() if QGuiApplication.instance() else TEXT_PT * dpi / 72 * 0.5
    return MathStyle(round(TEXT_PT * dpi / 72, 2), palette.TEXT, dpr, round(x_height, 2))


def _closing_dollar(s: str, i: int) -> int:
    """Index of the ``$`` closing an inline formula opened at ``i``, or -1 (Pandoc's rule)."""
    if i + 1 >= len(s) or s[i + 1].isspace():
        return -1
    j = i + 1
    while j < len(s) and s[j] != "\n":
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == "`":  # a code span starts: no formula runs into it
            return -1
        if s[j] == "$":
            if not s[j - 1].isspace() and not (j + 1 < len(s) and s[j + 1].isdigit()):
                return j
            return -1
        j += 1
    return -1


def protect(source: str) -> tuple[str, tuple[Formula, ...]]:
    """Replace the formulas in ``source`` by placeholders (so Markdown leaves them alone).

    Returns:
        ``(text, formulas)``: the text with ``\\ue000N\\ue001`` where formula ``N`` was.
    """
    out: list[str] = []
    found: list[Formula] = []
    i, n = 0, len(source)

    def take(latex: str, display: bool, src: str) -> None:
        out.append(f"{_OPEN}{len(found)}{_CLOSE}")
        found.append(Formula(latex.strip(), display, src))

    while i < n:
        c = source[i]
        if c == "`":  # a code span: copied as it is
            run = len(source) - len(source[i:].lstrip("`"))
            ticks = source[i : i + run]
            end = source.find(ticks, i + run)
            stop = end + run if end >= 0 else i + run
            out.append(source[i:stop])
            i = stop
            continue
        if c == "\\" and i + 1 < n and source[i + 1] in "([":
            closer = "\\)" if source[i + 1] == "(" else "\\]"
            end = source.find(closer, i + 2)
            if end > i + 2 and source[i + 2 : end].strip():
                take(source[i + 2 : end], source[i + 1] == "[", source[i : end + 2])
                i = end + 2
                continue
        if c == "\\" and i + 1 < n:  # an escaped character (\$ among them) stays as it is
            out.append(source[i : i + 2])
            i += 2
            continue
        if c == "$" and source.startswith("$$", i):
            end = source.find("$$", i + 2)
            if end > i + 2 and source[i + 2 : end].strip():
                take(source[i + 2 : end], True, source[i : end + 2])
                i = end + 2
                continue
            out.append("$$")
            i += 2
            continue
        if c == "$":
            end = _closing_dollar(source, i)
            if end > i + 1:
                take(source[i + 1 : end], False, source[i : end + 1])
                i = end + 1
                continue
        out.append(c)
        i += 1
    return "".join(out), tuple(found)


def restore(rendered: str, formulas: tuple[Formula, ...], style: MathStyle) -> str:
    """Put the formulas back into rendered HTML: images, or their source inside code."""
    if not formulas:
        return rendered

    def in_code(m: re.Match[str]) -> str:
        return _PLACEHOLDER.sub(lambda p: html.escape(formulas[int(p.group(1))].source, quote=False), m.group(0))

    rendered = re.sub(r"<code>.*?</code>", in_code, rendered, flags=re.S)

    def alone(m: re.Match[str]) -> str:
        f = formulas[int(m.group(1))]
        if not f.display:
            return m.group(0)
        return f'<p align="center">{formula_html(f, style)}</p>'

    rendered = re.sub(f"<p>{_OPEN}(\\d+){_CLOSE}</p>", alone, rendered)
    rendered = _PARAGRAPH.sub(lambda m: _display_on_own_lines(m, formulas, style), rendered)
    return _PLACEHOLDER.sub(lambda p: formula_html(formulas[int(p.group(1))], style), rendered)


_PARAGRAPH = re.compile(r"<p>(.*?)</p>", re.S)
_EDGE_BREAKS = re.compile(r"^(?:\s|<br\s*/?>)+|(?:\s|<br\s*/?>)+$")


def _display_on_own_lines(m: re.Match[str], formulas: tuple[Formula, ...], style: MathStyle) -> str:
    """A paragraph with display math inside a sentence ("the formula \\[x^2\\] is shown"): the formula
    goes on its own centred line between the sentence's two parts, as KaTeX and MathJax show it."""
    body = m.group(1)
    parts = _PLACEHOLDER.split(body)  # text, index, text, index, ..., text
    if not any(formulas[int(i)].display for i in parts[1::2]):
        return m.group(0)
    out: list[str] = []
    text = ""
    for k, part in enumerate(parts):
        if k % 2 == 0:
            text += part
            continue
        f = formulas[int(part)]
        if not f.display:
            text += f"{_OPEN}{part}{_CLOSE}"  # inline: stays in the sentence
            continue
        text = _EDGE_BREAKS.sub("", text)
        if text:
            out.append(f"<p>{text}</p>")
        out.append(f'<p align="center">{formula_html(f, style)}</p>')
        text = ""
    text = _EDGE_BREAKS.sub("", text)
    if text:
        out.append(f"<p>{text}</p>")
    return "\n".join(out)


@lru_cache(maxsize=1024)
def formula_html(f: Formula, style: MathStyle) -> str:
    """An ``<img>`` of the formula (a data URL), or its source in a code span if it does not parse."""
    image = render_formula(f.latex, f.display, style)
    if image is None:
        return f'<code title="This formula does not parse">{html.escape(f.source, quote=False)}</code>'
    url, w, h = image
    return f'<img src="{url}" width="{w}" height="{h}" align="middle">'


@lru_cache(maxsize=1024)
def render_formula(latex: str, display: bool, style: MathStyle) -> tuple[str, int, int] | None:
    """Draw ``latex``: ``(PNG data URL, width px, height px)`` in logical pixels, or None if it does not parse."""
    try:
        svg = _ziamath().Latex(latex, size=style.px * (1.15 if display else 1.0), color=style.color).svg()
    except Exception:  # ziamath / latex2mathml raise their own errors (and KeyError, IndexError) on bad input
        return None
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    if not renderer.isValid():
        return None
    box = renderer.viewBoxF()
    ascent, depth = -box.top(), box.bottom()  # the formula's baseline is y = 0 in ziamath's SVG
    if box.width() <= 0 or box.height() <= 0:
        return None
    if display:  # a paragraph of its own: no baseline to meet
        top, height = ascent, box.height()
    else:
        top, height = _fit_baseline(ascent, depth, style)
    w_px, h_px = math.ceil(box.width()), math.ceil(height)
    dpr = style.dpr
    img = QImage(math.ceil(w_px * dpr), math.ceil(h_px * dpr), QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(0)
    painter = QPainter(img)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.scale(dpr, dpr)
    renderer.render(painter, QRectF(0, top - ascent, box.width(), box.height()))
    painter.end()
    return _png_url(img), w_px, h_px


def _fit_baseline(ascent: float, depth: float, style: MathStyle) -> tuple[float, float]:
    """``(baseline from the image's top, image height)``, px, that put the formula on the text's baseline.

    Qt places an ``align="middle"`` image by rules that depend on the line's height; rather
    than copy them, the smallest image height whose measured baseline leaves room for the
    formula above and below it is searched (each height is measured once, :func:`_baseline_in_image`).
    """
    need = math.ceil(ascent + depth)
    for h in range(max(1, need), 4 * need + 40):
        base = _baseline_in_image(h, style)
        if base is not None and base >= ascent and h - base >= depth:
            return float(base), float(h)
    return ascent, ascent + depth


@lru_cache(maxsize=512)
def _baseline_in_image(height: int, style: MathStyle) -> int | None:
    """Where Qt puts the text's baseline in an ``align="middle"`` image ``height`` px tall: rows from its top.

    Measured: a line of "xxxx" (black) and a white image of that height are laid out and drawn at the
    reply text's size; the baseline is the row under the lowest black row. None if it cannot be seen.
    """
    if not QGuiApplication.instance():
        return None
    from PySide6.QtGui import QColor, QTextDocument

    probe = QImage(4, height, QImage.Format.Format_ARGB32)
    probe.fill(QColor("white"))
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    font = QFont()
    font.setPointSizeF(TEXT_PT)
    doc.setDefaultFont(font)
    doc.setHtml(f'<span style="color:#000000">xxxx</span><img src="{_png_url(probe)}" align="middle">')
    size = doc.size().toSize()
    img = QImage(size, QImage.Format.Format_ARGB32)
    img.fill(0)
    painter = QPainter(img)
    doc.drawContents(painter)
    painter.end()
    dark_bottom = top = -1
    for y in range(img.height()):
        row = [img.pixelColor(x, y) for x in range(img.width())]
        if any(c.alpha() > 200 and c.lightness() < 100 for c in row):
            dark_bottom = y
        if top < 0 and any(c.alpha() > 200 and c.lightness() > 200 for c in row):
            top = y
    if dark_bottom < 0 or top < 0:
        return None
    return dark_bottom + 1 - top


def _png_url(img: QImage) -> str:
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    # PySide6's stub wants the format as bytes, but the binding (6.11) takes only a str.
    img.save(buf, "PNG")  # type: ignore[call-overload]
    return "data:image/png;base64," + base64.b64encode(data.data()).decode("ascii")


_warm: list[threading.Thread] = []


def warm_up() -> None:
    """Load ziamath and its font on a background thread (once), so the first formula does not stall the UI.

    Its import and first layout take 0.5-2 s of pure Python; on the UI thread that is a visible
    freeze when a reply's first formula arrives. A formula that arrives before it is done waits
    for it (the import lock).
    """
    if not _warm:
        t = threading.Thread(target=lambda: _ziamath().Latex("x", size=12).svg(), name="ziamath-warm-up", daemon=True)
        _warm.append(t)
        t.start()


@lru_cache(maxsize=1)
def _ziamath():  # type: ignore[no-untyped-def]
    """ziamath, imported on first use (it loads its font; its import warns of a deprecated API on 3.11+)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import ziamath
        from ziamath.config import config

    config.svg2 = False  # SVG 1.1 (no <symbol>): what QtSvg draws
    return ziamath
