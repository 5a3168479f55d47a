"""Code highlighting by chunks of lines, so a growing code block is never re-highlighted whole.

A fenced code block is cut into chunks of ``CODE_CHUNK`` lines. Each chunk is
highlighted once it is complete and never again; only the last, growing chunk
is re-highlighted on a repaint. So that a construct that spans a chunk
boundary (a docstring, a block comment) keeps its colours, a chunk is lexed
together with up to ``CODE_CONTEXT`` lines before it and only its own
characters are kept. The result depends only on the code, not on how it
streamed: a block rendered at once and one that streamed token by token give
the same HTML.

Pygments with the monokai style; the output is ``<span style="color:…">``
runs (Qt's rich text has no stylesheet classes).
"""

from __future__ import annotations

import html
import threading
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound

from app.ui.common import palette

CODE_CHUNK = (
    8  # lines per highlighted chunk (and per label) of a code block: a streaming block re-lays out at most these
)
CODE_CONTEXT = 12  # lines before a chunk lexed with it, for constructs that span chunks

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
def highlight_chunk(context: str, chunk: str, language: str) -> str:
    """HTML of ``chunk`` (lines of code), lexed after ``context`` (the lines before it, or "").

    Returns the runs of ``chunk`` only (no ``<pre>``), newlines kept as ``\\n``.
    """
    lexer = _lexer(language)
    skip = len(context) + 1 if context else 0
    text = f"{context}\n{chunk}" if context else chunk
    out: list[str] = []
    pos = 0
    for ttype, value in lexer.get_tokens(text):
        end = pos + len(value)
        if end > skip:
            part = value[max(0, skip - pos) :]
            style = _span_style(ttype)
            esc = html.escape(part, quote=False)
            out.append(f'<span style="{style}">{esc}</span>' if style and part.strip() else esc)
        pos = end
    return "".join(out)


def code_chunks(code: str) -> list[tuple[str, str]]:
    """``(context, chunk)`` pairs of a code block: chunks of ``CODE_CHUNK`` lines, each with its context lines."""
    lines = code.split("\n")
    out = []
    for a in range(0, max(1, len(lines)), CODE_CHUNK):
        ctx = "\n".join(lines[max(0, a - CODE_CONTEXT) : a])
        out.append((ctx, "\n".join(lines[a : a + CODE_CHUNK])))
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
                highlight_chunk("", "x = 1", language)

        t = threading.Thread(target=load, name="pygments-warm-up", daemon=True)
        _warm.append(t)
        t.start()
