"""Markdown to Qt rich text, with highlighted code blocks and LaTeX formulas.

Parsing is markdown-it-py (CommonMark + tables + strikethrough); code
highlighting is Pygments with inline styles (Qt's rich-text engine has no
stylesheet classes). A reply is cut into *segments* at top-level block
boundaries so a streaming reply re-renders only its last segment; code blocks
become their own segments so they can carry a header with a Copy button.
"""

from __future__ import annotations

import enum
import html
import re
from dataclasses import dataclass, replace
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

from app.ui.chat import highlight, mathtex
from app.ui.chat.highlight import CODE_CHUNK, ROOT, code_chunks, highlight_chunk, highlight_from, pre
from app.ui.chat.mathtex import MathStyle, current_style, protect, restore
from app.ui.common import palette

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)

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
        cont: this segment continues the previous one's block (a table's later rows, a code
            block's later lines, a long list's later items): shown joined to it.
        list_cut: this segment ends where a long list was cut (the next segment continues it):
            its list has no bottom margin, as the next one has no top margin, so the items keep
            their spacing across the cut.
    """

    kind: SegmentKind
    source: str
    html: str
    language: str = ""
    code: str = ""
    cont: bool = False
    list_cut: bool = False


LIST_CHUNK = 16  # list items per segment: a long streaming list re-renders only its last chunk
LIST_LINES = 12  # ... or fewer items, once a chunk holds this many lines (nested items make items long)
TABLE_CHUNK = 8  # table body rows per segment
QUOTE_CHUNK = 4  # blocks (paragraphs, lists) of a block quote per segment


class _BlockKind(str, enum.Enum):
    """A block that a later parse continues: its segments carry on from a prefix of lines."""

    TABLE = "table"
    CODE = "code"
    LIST = "list"


@dataclass(frozen=True)
class _Resume:
    """What a parse needs to continue a cut block: lines put before the rest (not shown again).

    Attributes:
        kind: the block being continued.
        prefix: for a table, its header and delimiter rows; for code, the opening fence line.
        widths: a cut table's column widths, percent.
        state: code: the lexer state the cut part ended in (the next chunk is lexed from it).
    """

    kind: _BlockKind
    prefix: tuple[str, ...]
    widths: tuple[int, ...] = ()
    state: tuple[str, ...] = ROOT


@dataclass(frozen=True)
class _Piece:
    """A segment before rendering. ``end``: line index (exclusive, in the parsed text) where it ends."""

    kind: SegmentKind
    source: str
    info: str
    end: int
    cont: bool = False
    state: tuple[str, ...] = ROOT  # code: the lexer state this chunk starts in (the chunks before it)
    header: tuple[str, ...] = ()  # a table chunk after the first: header and delimiter rows
    widths: tuple[int, ...] = ()  # a cut table's column widths, percent
    resume: _Resume | None = None
    table: bool = False
    list_cut: bool = False  # a long list is cut at this piece's end (see Segment.list_cut)


def _split(rest: list[str], resume: _Resume | None) -> list[_Piece]:
    """Pieces of ``rest`` (lines) at top-level block boundaries; ``resume`` continues a block cut in an
    earlier parse.

    Code fences are their own pieces, cut every ``CODE_CHUNK`` lines; tables are their own
    pieces, cut every ``TABLE_CHUNK`` body rows; prose is split at blank lines, long lists
    every ``LIST_CHUNK`` items or ``LIST_LINES`` lines (an ordered list's later chunks keep their numbers: CommonMark
    starts a list at its first number) and block quotes every ``QUOTE_CHUNK`` blocks, so that
    while a reply streams only the last piece changes. A piece's ``end`` is the line index
    (exclusive) where it ends.
    """
    prefix = list(resume.prefix) if resume else []
    lines = prefix + rest
    tokens = _md.parse("\n".join(lines))
    off = len(prefix)
    pieces: list[_Piece] = []
    last_end = off
    list_items = 0
    quote_blocks = 0
    top = ""
    i = 0
    # The next prose piece continues a list cut at the previous piece's end (in this parse or,
    # resumed, in an earlier one).
    continues = resume is not None and resume.kind is _BlockKind.LIST

    def prose(end: int, cut: bool = False) -> None:
        nonlocal continues
        resume_list = _Resume(_BlockKind.LIST, ()) if cut else None
        src = "\n".join(lines[last_end:end])
        pieces.append(_Piece(SegmentKind.TEXT, src, "", end, cont=continues, resume=resume_list, list_cut=cut))
        continues = cut

    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok.map is None or tok.nesting == -1:
            continue
        start, end = tok.map
        if tok.level == 0:
            list_items = quote_blocks = 0
            top = tok.type
            if tok.type in ("fence", "table_open"):
                if start > last_end:
                    prose(start)
                continues = False
                cont = resume is not None and resume.kind is not _BlockKind.LIST and start == 0
                if tok.type == "fence":
                    pieces.extend(_code_pieces(lines, tok, resume if cont else None))
                else:
                    rows = []
                    while i < len(tokens) and tokens[i].type != "table_close":
                        t = tokens[i]
                        if t.type == "tr_open" and t.level == 2 and t.map and t.map[0] >= start + 2:
                            rows.append(t.map[0])
                        i += 1
                    pieces.extend(_table_pieces(lines, start, end, rows, resume if cont else None))
                last_end = max(last_end, end)
            elif start > last_end and _is_blank_gap(lines, last_end, start):
                prose(start)
                last_end = start
        elif tok.level == 1 and tok.type == "list_item_open":
            if list_items and (list_items >= LIST_CHUNK or start - last_end >= LIST_LINES) and start > last_end:
                prose(start, cut=True)
                last_end = start
                list_items = 0
            list_items += 1
        elif tok.level == 1 and top == "blockquote_open":
            quote_blocks += 1
            if quote_blocks > QUOTE_CHUNK and (quote_blocks - 1) % QUOTE_CHUNK == 0 and start > last_end:
                prose(start)
                last_end = start
    if last_end < len(lines):
        prose(len(lines))
    kept = [p for p in pieces if p.kind is SegmentKind.CODE or (p.cont and p.table) or p.source.strip()]
    return [replace(p, end=p.end - off) for p in kept]


def _code_pieces(lines: list[str], tok: Token, resume: _Resume | None) -> list[_Piece]:
    """A fence as chunks of ``CODE_CHUNK`` lines, each lexed from the state the one before ended in
    (a resumed fence: from the resume's state). A finished chunk's end state is computed here (its
    highlighting, cached, is what renders it); the last chunk's is not (it may still grow)."""
    start, end = tok.map or (0, 0)
    code = tok.content[:-1] if tok.content.endswith("\n") else tok.content
    code_lines = code.split("\n") if tok.content else []
    closed = start + 1 + len(code_lines) < end
    fence_line = lines[start]
    info = tok.info.strip()
    lang = info.split()[0] if info else ""
    state = resume.state if resume else ROOT
    out = []
    firsts = list(range(0, len(code_lines), CODE_CHUNK)) or [0]
    for k, a in enumerate(firsts):
        b = min(a + CODE_CHUNK, len(code_lines))
        last = k == len(firsts) - 1
        chunk = "\n".join(code_lines[a:b])
        after = ROOT if last else highlight_from(state, chunk, lang)[1]
        out.append(
            _Piece(
                SegmentKind.CODE,
                chunk,
                info,
                end if last and closed else start + 1 + b,
                cont=resume is not None or k > 0,
                state=state,
                resume=_Resume(_BlockKind.CODE, (fence_line,), state=after),
            )
        )
        state = after
    return out


def _table_pieces(lines: list[str], start: int, end: int, rows: list[int], resume: _Resume | None) -> list[_Piece]:
    """A table as chunks of ``TABLE_CHUNK`` body rows (a resumed one: only rows after its prefix)."""
    header = (lines[start], lines[start + 1]) if start + 1 < len(lines) else (lines[start],)
    if resume is None and len(rows) <= TABLE_CHUNK:
        return [_Piece(SegmentKind.TEXT, "\n".join(lines[start:end]), "", end, table=True)]
    widths = resume.widths if resume else _column_widths(lines[start : rows[TABLE_CHUNK]])
    out = []
    for k in range(0, len(rows), TABLE_CHUNK):
        a = rows[k] if (k or resume) else start
        b = rows[k + TABLE_CHUNK] if k + TABLE_CHUNK < len(rows) else end
        cont = resume is not None or k > 0
        out.append(
            _Piece(
                SegmentKind.TEXT,
                "\n".join(lines[a:b]),
                "",
                b,
                cont=cont,
                header=header if cont else (),
                widths=widths,
                resume=_Resume(_BlockKind.TABLE, header, widths=widths),
                table=True,
            )
        )
    return out


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row.removeprefix("|").removesuffix("|")
    return [c.strip() for c in row.split("|")]


def _column_widths(rows: list[str]) -> tuple[int, ...]:
    """Column widths (percent) of a cut table, from its header and first chunk (rows[1] is the delimiter row)."""
    cols = len(_cells(rows[0]))
    weight = [4] * cols
    for r in rows[:1] + rows[2:]:
        for j, c in enumerate(_cells(r)[:cols]):
            weight[j] = max(weight[j], min(len(c), 40) + 2)
    total = sum(weight)
    return tuple(max(1, round(100 * w / total)) for w in weight)


_CELL = re.compile(r"<(t[hd])((?: style=\"[^\"]*\")?)>")


def _with_widths(body: str, widths: tuple[int, ...]) -> str:
    """Set a cut table's column widths, so that its chunks line up."""
    col = [0]

    def cell(m: re.Match[str]) -> str:
        j = col[0]
        col[0] += 1
        w = f' width="{widths[j]}%"' if j < len(widths) else ""
        return f"<{m.group(1)}{m.group(2)}{w}>"

    out = []
    for part in re.split(r"(<tr>)", body):
        col[0] = 0
        out.append(_CELL.sub(cell, part))
    return "".join(out).replace("<table>", '<table width="100%">')


def render_table_chunk(header: tuple[str, ...], rows: str, widths: tuple[int, ...]) -> str:
    """A chunk of a cut table: ``header`` rows (empty for the first chunk, whose source holds them)
    put before ``rows`` to parse, and left out of the HTML."""
    src = "\n".join((*header, rows)) if header else rows
    body = render_text(src)
    if header:
        body = re.sub(r"<thead>.*?</thead>\s*", "", body, flags=re.S)
    return _with_widths(body, widths)


def render_text(source: str) -> str:
    """Markdown prose to Qt rich text, formulas drawn (cached: finished segments are rendered once)."""
    return _render_text(source, current_style())


@lru_cache(maxsize=512)
def _render_text(source: str, style: MathStyle) -> str:
    text, formulas = protect(source)
    return _quote_bars(restore(_md.render(text), formulas, style))


# Qt's rich text draws no border on a <blockquote>: a quote becomes a one-row table whose thin
# first cell is the bar (nested quotes nest the tables, each with its own bar).
_QUOTE_OPEN = (
    '<table cellspacing="0" cellpadding="0" style="margin-left:2px; margin-top:2px; margin-bottom:8px;">'
    f'<tr><td width="3" style="background-color:{palette.QUOTE_BAR}; border:none; padding:0;"></td>'
    f'<td style="border:none; padding:0 0 0 10px; color:{palette.QUOTE};">'
)
_QUOTE_CLOSE = "</td></tr></table>"


def _quote_bars(body: str) -> str:
    """``<blockquote>`` elements as tables with a bar on the left (see ``_QUOTE_OPEN``)."""
    if "<blockquote>" not in body:
        return body
    return body.replace("<blockquote>", _QUOTE_OPEN).replace("</blockquote>", _QUOTE_CLOSE)


def _is_blank_gap(lines: list[str], a: int, b: int) -> bool:
    return b > a and not lines[b - 1].strip()


def _growing_code(state: tuple[str, ...], chunk: str, language: str) -> str:
    """A streaming code chunk: its complete lines highlighted, the line being written escaped as plain text.

    Lexing is most of a code block's cost per repaint (Pygments' regex lexers: about 3 ms for a
    chunk of 24 lines here). The complete lines change only when a line ends, so they
    come from :func:`highlight_chunk`'s cache on the other repaints of that line; the line being
    written gets its colours when its newline arrives (or when the reply ends: the final render
    highlights every line).
    """
    done, sep, partial = chunk.rpartition("\n")
    head = highlight_chunk(state, done, language) + sep if sep else ""
    return head + html.escape(partial, quote=False)


def render_code(code: str, language: str) -> str:
    """A whole code block as highlighted HTML (``<pre>`` with inline colours), chunk by chunk."""
    return pre(
        "".join(highlight_chunk(state, chunk, language) + "\n" for state, chunk in code_chunks(code, language))[:-1]
    )


def _segment(p: _Piece, growing: bool = False) -> Segment:
    """Render a piece. ``growing``: the open tail of a streaming reply (a code chunk's last,
    unfinished line is then shown uncoloured: see :func:`_growing_code`)."""
    if p.kind is SegmentKind.CODE:
        lang = p.info.split()[0] if p.info else ""
        body = _growing_code(p.state, p.source, lang) if growing else highlight_chunk(p.state, p.source, lang)
        return Segment(SegmentKind.CODE, p.source, pre(body), lang, p.source, p.cont)
    if p.widths:
        return Segment(SegmentKind.TEXT, p.source, render_table_chunk(p.header, p.source, p.widths), cont=p.cont)
    return Segment(SegmentKind.TEXT, p.source, render_text(p.source), cont=p.cont, list_cut=p.list_cut)


class StreamingDocument:
    """Segments of a growing reply, re-parsing only the part after the last finished segment.

    Every segment but the last is final once a later one starts; :meth:`update`
    parses only the lines from the first unfinished segment on (with, for a table
    or code block cut in two, the lines that let the parse continue it), so the
    cost per repaint does not grow with the length of the reply. The segments do
    not depend on how the text arrived: fed at once or token by token, a text
    gives the same segments.
    """

    def __init__(self) -> None:
        self.final: list[Segment] = []
        self._final_lines = 0
        self._resume: _Resume | None = None

    def update(self, source: str, streaming: bool = False) -> tuple[list[Segment], list[Segment]]:
        """Feed the whole text so far.

        Args:
            streaming: more text is coming. A table then shows its complete rows only: the row
                being written appears when its line ends (a table re-renders once per row, not
                once per token). The last update of a reply must say ``streaming=False``.

        Returns:
            ``(newly_final, tail)``: segments that just became final (append them), and
            the segment(s) still open (replace the previous tail with these).
        """
        lines = source.split("\n")
        pieces = _split(lines[self._final_lines :], self._resume)
        newly = [_segment(p) for p in pieces[:-1]]
        if len(pieces) > 1:
            self._final_lines += pieces[-2].end
            self._resume = pieces[-2].resume if pieces[-1].cont else None
        self.final.extend(newly)
        last = pieces[-1:]
        if streaming and last and last[0].table and "\n" in last[0].source and not source.endswith("\n"):
            last = [replace(last[0], source=last[0].source.rsplit("\n", 1)[0])]
        tail = [_segment(p, growing=streaming) for p in last]
        return newly, tail


def warm_up() -> None:
    """Load the formula renderer and the common code lexers on background threads (once each), so that
    the first formula or code block of a reply does not stall the UI thread."""
    mathtex.warm_up()
    highlight.warm_up()


def plain_to_html(text: str) -> str:
    """Escape text for a rich-text label, keeping line breaks (user messages)."""
    return html.escape(text).replace("\n", "<br>")
