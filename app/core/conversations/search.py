"""Full-text search over every message: FTS5 when the SQLite build has it, else a scan.

Both paths return the same :class:`~app.core.conversations.SearchHit` shape: a
snippet with whitespace collapsed and ``(start, end)`` offsets of the matched words.
"""

from __future__ import annotations

import re
import sqlite3

from app.core.chat.context import Role
from app.core.conversations.model import SearchHit

# Highlight markers inside search snippets before they are turned into offsets.
_HL_START, _HL_END = "\x02", "\x03"


def search(
    conn: sqlite3.Connection, query: str, *, limit: int = 50, use_fts: bool = True, titles: bool = True
) -> list[SearchHit]:
    """Find chats whose title holds every word, then messages (all branches of all conversations
    not deleted) containing every word.

    Title hits come first (newest chat first, ``message_id`` and ``role`` None, the snippet is
    the title). Words match case-insensitively; with FTS5 each word also matches as a
    prefix (``photo`` finds ``photosynthesis``), best matches first;
    without FTS5 it is a substring match, newest conversations first.

    Args:
        conn: the history (opened with :func:`~app.core.conversations.schema.connect`,
            which provides ``gb_fold``).
        query: words as the person typed them.
        limit: most hits returned.
        use_fts: the FTS5 index is in step (see :func:`~app.core.conversations.schema.prepare`).
        titles: look in chat titles too (False: messages only).

    Returns:
        Hits with a snippet around the match; empty for a blank query.
    """
    terms = re.findall(r"\w+", query)
    if not terms:
        return []
    by_title = _search_titles(conn, terms, limit) if titles else []
    limit -= len(by_title)
    if limit <= 0:
        return by_title
    if use_fts:
        try:
            return by_title + _search_fts(conn, terms, limit)
        except sqlite3.DatabaseError:
            pass  # a damaged index must not break search: fall back to scanning
    return by_title + _search_scan(conn, terms, limit)


def _search_titles(conn: sqlite3.Connection, terms: list[str], limit: int) -> list[SearchHit]:
    where = " AND ".join("instr(gb_fold(title), ?) > 0" for _ in terms)
    rows = conn.execute(
        f"""SELECT id, title FROM conversations WHERE deleted_at IS NULL AND {where}
            ORDER BY updated_at DESC LIMIT ?""",
        (*[t.casefold() for t in terms], limit),
    ).fetchall()
    pattern = _pattern(terms)
    return [SearchHit(cid, None, title, None, *_parse_marked(_mark_snippet(title, pattern))) for cid, title in rows]


def _pattern(terms: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.IGNORECASE)


def _search_fts(conn: sqlite3.Connection, terms: list[str], limit: int) -> list[SearchHit]:
    match = " ".join('"' + t.replace('"', '""') + '"*' for t in terms)
    rows = conn.execute(
        """SELECT m.conversation_id, m.id, c.title, m.role,
                   snippet(messages_fts, 0, char(2), char(3), '…', 16)
            FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
            JOIN conversations c ON c.id = m.conversation_id
            WHERE messages_fts MATCH ? AND c.deleted_at IS NULL
            ORDER BY rank LIMIT ?""",
        (match, limit),
    ).fetchall()
    return [SearchHit(cid, mid, title, Role.parse(role), *_parse_marked(snip)) for cid, mid, title, role, snip in rows]


def _search_scan(conn: sqlite3.Connection, terms: list[str], limit: int) -> list[SearchHit]:
    where = " AND ".join("instr(gb_fold(m.content), ?) > 0" for _ in terms)
    rows = conn.execute(
        f"""SELECT m.conversation_id, m.id, c.title, m.role, m.content
            FROM messages m JOIN conversations c ON c.id = m.conversation_id
            WHERE c.deleted_at IS NULL AND {where}
            ORDER BY c.updated_at DESC, m.id LIMIT ?""",
        (*[t.casefold() for t in terms], limit),
    ).fetchall()
    pattern = _pattern(terms)
    return [
        SearchHit(cid, mid, title, Role.parse(role), *_parse_marked(_mark_snippet(text, pattern)))
        for cid, mid, title, role, text in rows
    ]


def _mark_snippet(text: str, pattern: re.Pattern[str], width: int = 80) -> str:
    """A window of ``text`` around the first match, matches wrapped in highlight markers."""
    first = pattern.search(text)
    if first is None:
        start, end = 0, min(len(text), 2 * width)
    else:
        start = max(0, first.start() - width // 2)
        end = min(len(text), first.end() + width)
        if start > 0:
            space = text.find(" ", start, first.start())
            start = space + 1 if space != -1 else start
        if end < len(text):
            space = text.rfind(" ", first.end(), end)
            end = space if space != -1 else end
    window = pattern.sub(lambda m: _HL_START + m.group(0) + _HL_END, text[start:end])
    return ("…" if start > 0 else "") + window + ("…" if end < len(text) else "")


def _parse_marked(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Collapse whitespace and turn highlight markers into ``(start, end)`` offsets."""
    flat = " ".join(marked.split())
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    start = -1
    for ch in flat:
        if ch == _HL_START:
            start = pos
        elif ch == _HL_END:
            if start >= 0 and pos > start:
                spans.append((start, pos))
            start = -1
        else:
            out.append(ch)
            pos += 1
    return "".join(out), tuple(spans)
