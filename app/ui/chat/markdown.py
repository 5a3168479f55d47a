"""Markdown to Qt rich text, with highlighted code blocks.

Parsing is markdown-it-py (CommonMark + tables + strikethrough); code
highlighting is Pygments with inline styles (Qt's rich-text engine has no
stylesheet classes). A reply is cut into *segments* at top-level block
boundaries so a streaming reply re-renders only its last segment; code blocks
become their own segments so they can carry a header with a Copy button.
"""

from __future__ import annotations

import enum
import html
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from app.ui.common import palette

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)
_formatter = HtmlFormatter(nowrap=True, noclasses=True, style="monokai")

TEXT_CSS = f"""
p {{ margin-top: 0px; margin-bottom: 8px; }}
h1, h2, h3, h4 {{ margin-top: 6px; margin-bottom: 6px; }}
code {{ font-family: 'JetBrains Mono', 'DejaVu Sans Mono', monospace; background-color: {palette.CODE_BG}; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid {palette.TABLE_BORDER}; padding: 4px 8px; }}
blockquote {{ color: {palette.QUOTE}; margin-left: 12px; }}
a {{ color: {palette.LINK}; }}
"""


class SegmentKind(str, enum.Enum):
    """A reply's piece: prose or a fenced code block."""

    TEXT = "text"
    CODE = "code"


@dataclass(frozen=True)
class Segment:
    """A piece of a reply: prose (rendered HTML) or a code block (highlighted).

    Attributes:
        kind: a :class:`SegmentKind`.
        source: the Markdown source of this segment.
        html: Qt rich text.
        language: the code block's language (code only).
        code: the raw code (code only; what Copy copies).
    """

    kind: SegmentKind
    source: str
    html: str
    language: str = ""
    code: str = ""


LIST_CHUNK = 16  # list items per segment: a long streaming list re-renders only its last chunk


def split_blocks(source: str) -> list[tuple[SegmentKind, str, str, int]]:
    """Cut Markdown into ``(kind, source, info, end_line)`` pieces at top-level block boundaries.

    Code fences (closed or still open at the end) are their own pieces; prose is
    split at blank lines, and long lists every ``LIST_CHUNK`` items (an ordered
    list's later chunks keep their numbers: CommonMark starts a list at its first
    number), so that while a reply streams only the last piece changes.
    ``end_line`` is the line index (exclusive) where the piece ends.
    """
    tokens = _md.parse(source)
    lines = source.split("\n")
    pieces: list[tuple[SegmentKind, str, str, int]] = []
    last_end = 0
    list_items = 0
    for tok in tokens:
        if tok.map is None or tok.nesting == -1:
            continue
        start, end = tok.map
        if tok.level == 0:
            list_items = 0
            if tok.type == "fence":
                if start > last_end:
                    pieces.append((SegmentKind.TEXT, "\n".join(lines[last_end:start]), "", start))
                pieces.append((SegmentKind.CODE, tok.content.rstrip("\n"), tok.info.strip(), end))
                last_end = end
            elif start > last_end and _is_blank_gap(lines, last_end, start):
                pieces.append((SegmentKind.TEXT, "\n".join(lines[last_end:start]), "", start))
                last_end = start
        elif tok.level == 1 and tok.type == "list_item_open":
            list_items += 1
            if list_items > LIST_CHUNK and (list_items - 1) % LIST_CHUNK == 0 and start > last_end:
                pieces.append((SegmentKind.TEXT, "\n".join(lines[last_end:start]), "", start))
                last_end = start
    if last_end < len(lines):
        pieces.append((SegmentKind.TEXT, "\n".join(lines[last_end:]), "", len(lines)))
    return [p for p in pieces if p[0] is SegmentKind.CODE or p[1].strip()]


def _is_blank_gap(lines: list[str], a: int, b: int) -> bool:
    return b > a and not lines[b - 1].strip()


@lru_cache(maxsize=512)
def render_text(source: str) -> str:
    """Markdown prose to Qt rich text (cached: finished segments are rendered once)."""
    return _md.render(source)


@lru_cache(maxsize=256)
def render_code(code: str, language: str) -> str:
    """A code block as highlighted HTML (``<pre>`` with inline colours)."""
    try:
        lexer = get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    body = highlight(code, lexer, _formatter)
    return (
        f"<pre style=\"margin:0; font-family:'JetBrains Mono','DejaVu Sans Mono',monospace; color:{palette.CODE_TEXT};\">"
        f"{body}</pre>"
    )


def _segment(kind: SegmentKind, src: str, info: str) -> Segment:
    if kind is SegmentKind.CODE:
        lang = info.split()[0] if info else ""
        return Segment(SegmentKind.CODE, src, render_code(src, lang), lang, src)
    return Segment(SegmentKind.TEXT, src, render_text(src))


class StreamingDocument:
    """Segments of a growing reply, re-parsing only the part after the last finished segment.

    Every segment but the last is final once a later one starts; :meth:`update`
    parses only the lines from the first unfinished segment on, so the cost per
    repaint does not grow with the length of the reply.
    """

    def __init__(self) -> None:
        self.final: list[Segment] = []
        self._final_lines = 0

    def update(self, source: str) -> tuple[list[Segment], list[Segment]]:
        """Feed the whole text so far.

        Returns:
            ``(newly_final, tail)``: segments that just became final (append them), and
            the segment(s) still open (replace the previous tail with these).
        """
        lines = source.split("\n")
        rest = "\n".join(lines[self._final_lines :])
        pieces = split_blocks(rest)
        newly: list[Segment] = []
        for kind, src, info, _end in pieces[:-1]:
            newly.append(_segment(kind, src, info))
        if len(pieces) > 1:
            self._final_lines += pieces[-2][3]
        self.final.extend(newly)
        tail = [_segment(k, s, i) for k, s, i, _ in pieces[-1:]]
        return newly, tail


def plain_to_html(text: str) -> str:
    """Escape text for a rich-text label, keeping line breaks (user messages)."""
    return html.escape(text).replace("\n", "<br>")
