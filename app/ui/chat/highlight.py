"""Code highlighting by chunks of lines, so a growing code block is never re-highlighted whole.

A fenced code block is cut into chunks of ``CODE_CHUNK`` lines. Each chunk is
highlighted once it is complete and never again; only the last, growing chunk
is re-highlighted, once per line. So that a construct that spans chunk
boundaries (a docstring, a block comment, however long) keeps its colours, a
chunk is lexed from the lexer state the previous chunk ended in (Pygments'
``RegexLexer`` takes a start state; the end state is read from the suspended
lexer, see :func:`highlight_from`). The result depends only on the code, not on
how it streamed: a block rendered at once and one that streamed token by token
give the same HTML, with the colours of the whole block lexed in one go.

Pygments with the monokai style; the output is ``<span style="color:…">``
runs (Qt's rich text has no stylesheet classes).
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

from pygments.lexer import ExtendedRegexLexer, Lexer, RegexLexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound

from app.ui.common import palette

CODE_CHUNK = (
    8  # lines per highlighted chunk (and per label) of a code block: a streaming block re-lays out at most these
)
ROOT: tuple[str, ...] = ("root",)  # a lexer's state at the start of a block
_SENTINEL = "x"  # lexed after a chunk's last newline: the state it is lexed in is the chunk's end state

# Fence languages whose lexers load on a background thread at start (see warm_up).
WARM_LANGUAGES = ("python", "bash", "javascript", "typescript", "json", "c", "cpp", "rust", "go", "java", "html", "sql")

_STYLE = get_style_by_name("monokai")
PRE_STYLE = f"margin:0; font-family:'JetBrains Mono','DejaVu Sans Mono',monospace; color:{palette.CODE_TEXT};"


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer:
    try:
        lexer: Lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False) if language else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    return lexer


@lru_cache(maxsize=512)
def _span_style(ttype: _TokenType) -> str:
    st = _STYLE.style_for_token(ttype)
    parts = []
    if st["color"]:
        parts.append(f"color:#{st['color']}")
    if st["bold"]:
        parts.append("font-weight:bold")
    if st["italic"]:
        parts.append("font-style:italic")
    return ";".join(parts)


@lru_cache(maxsize=1024)
def highlight_from(state: tuple[str, ...], chunk: str, language: str) -> tuple[str, tuple[str, ...]]:
    """HTML of ``chunk`` (lines of code) lexed from lexer state ``state``, and the state it ends in.

    Returns the runs of ``chunk`` only (no ``<pre>``), newlines kept as ``\\n``, and the lexer's
    state stack after the chunk's last line (:data:`ROOT` for lexers that are not plain
    ``RegexLexer``s: those are lexed chunk by chunk from the start state, the end state unknown).
    The end state is the stack the lexer holds when it lexes a sentinel character put after the
    chunk and its newline, read from the suspended generator's frame (``statestack`` in
    ``RegexLexer.get_tokens_unprocessed``).
    """
    lexer = _lexer(language)
    stateful = isinstance(lexer, RegexLexer) and not isinstance(lexer, ExtendedRegexLexer)
    if stateful:
        gen = lexer.get_tokens_unprocessed(f"{chunk}\n{_SENTINEL}", stack=state)
    else:
        gen = ((pos, ttype, value) for pos, (ttype, value) in _positions(lexer.get_tokens(chunk)))
    boundary = len(chunk) + 1
    out: list[str] = []
    end = ROOT
    for pos, ttype, value in gen:
        if pos + len(value) > boundary:  # the token that lexes the sentinel
            frame = getattr(gen, "gi_frame", None)
            stack = frame.f_locals.get("statestack") if frame is not None else None
            end = tuple(stack) if stack else ROOT
            value = value[: max(0, len(chunk) - pos)]
            if not value:
                break
        part = value[: max(0, len(chunk) - pos)]
        if part:
            style = _span_style(ttype)
            esc = html.escape(part, quote=False)
            out.append(f'<span style="{style}">{esc}</span>' if style and part.strip() else esc)
        if pos + len(value) >= len(chunk):
            if end is ROOT and stateful:
                continue  # the newline and the sentinel are still to come: they give the end state
            break
    if hasattr(gen, "close"):
        gen.close()
    return "".join(out), end


def _positions(tokens: Iterable[tuple[Any, str]]) -> Iterator[tuple[int, tuple[Any, str]]]:
    """Pygments' ``(token type, text)`` pairs with each text's offset in the lexed source."""
    pos = 0
    for ttype, value in tokens:
        yield pos, (ttype, value)
        pos += len(value)


def highlight_chunk(state: tuple[str, ...], chunk: str, language: str) -> str:
    """HTML of ``chunk`` lexed from ``state`` (see :func:`highlight_from`)."""
    return highlight_from(state, chunk, language)[0]


def code_chunks(code: str, language: str) -> list[tuple[tuple[str, ...], str]]:
    """``(start state, chunk)`` pairs of a code block: chunks of ``CODE_CHUNK`` lines, each with the
    lexer state the chunks before it ended in."""
    lines = code.split("\n")
    out = []
    state = ROOT
    for a in range(0, max(1, len(lines)), CODE_CHUNK):
        chunk = "\n".join(lines[a : a + CODE_CHUNK])
        out.append((state, chunk))
        state = highlight_from(state, chunk, language)[1]
    return out


def pre(body: str) -> str:
    """Wrap highlighted runs in the ``<pre>`` a code label shows."""
    return f'<pre style="{PRE_STYLE}">{body}</pre>'


_warm: list[threading.Thread] = []


def warm_up() -> None:
    """Load the lexers of ``WARM_LANGUAGES`` on a background thread (once).

    A lexer's first use imports its module and compiles its regular expressions: 50-120 ms
    for Python's, on the UI thread the first time a reply opens a code block, a stall in the
    middle of a stream. A block that arrives before its lexer is loaded waits for it (the
    import lock); another language still loads on first use.
    """
    if not _warm:

        def load() -> None:
            for language in WARM_LANGUAGES:
                highlight_chunk(ROOT, "x = 1", language)

        t = threading.Thread(target=load, name="pygments-warm-up", daemon=True)
        _warm.append(t)
        t.start()
