"""The history file's schema: tables, migrations, the full-text index, opening checks.

* Schema version in ``PRAGMA user_version``; :data:`MIGRATIONS` lists the steps
  from version 1 on. A file from a newer Glassbox raises :class:`SchemaTooNewError`
  and is left untouched.
* WAL journal, ``synchronous=FULL`` (a streaming reply's once-a-second update: ``NORMAL``,
  see ``StoreBase._streaming_sync``).
* FTS5 index on ``messages.content`` kept in step by triggers when this SQLite
  build has FTS5 (:func:`prepare`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

# SQLite primary result codes that mean "the file is damaged" (not "busy" or "no permission").
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
SQLITE_HEADER = b"SQLite format 3\x00"


class SchemaTooNewError(RuntimeError):
    """The history file was written by a newer Glassbox; it is left untouched."""

    def __init__(self, path: Path, found: int, known: int) -> None:
        super().__init__(
            f"The conversation history {path} was written by a newer version of Glassbox "
            f"(schema version {found}; this version knows up to {known}). It was not changed. "
            "Update Glassbox, or move the file away to start a new history."
        )
        self.path, self.found, self.known = path, found, known


class NotOurs(Exception):
    """The file is a healthy SQLite database but not a Glassbox history."""


# --------------------------------------------------------------------------- schema


def _migrate_v1(conn: sqlite3.Connection) -> None:
    # Small columns first, long text last: a row whose text spills onto a damaged
    # overflow page can still be salvaged without its text. AUTOINCREMENT: an id
    # the UI still holds never comes back as a different message.
    conn.execute(
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            deleted_at REAL,
            title_custom INTEGER NOT NULL DEFAULT 0,
            current_leaf_id INTEGER,
            title TEXT NOT NULL DEFAULT '',
            model_path TEXT NOT NULL DEFAULT '',
            system_prompt TEXT NOT NULL DEFAULT '',
            sampler_json TEXT NOT NULL DEFAULT '{}'
        )"""
    )
    conn.execute(
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL,
            parent_id INTEGER,
            role TEXT NOT NULL,
            created_at REAL NOT NULL,
            complete INTEGER NOT NULL DEFAULT 1,
            selected_seq INTEGER NOT NULL DEFAULT 0,
            content TEXT NOT NULL DEFAULT '',
            meta_json TEXT NOT NULL DEFAULT '{}'
        )"""
    )
    conn.execute("CREATE INDEX messages_by_conversation ON messages(conversation_id, parent_id)")
    conn.execute("CREATE INDEX messages_by_parent ON messages(parent_id)")
    conn.execute("CREATE INDEX conversations_by_updated ON conversations(updated_at)")


def _migrate_v2(conn: sqlite3.Connection) -> None:
    # Every generated token's alternatives (app.core.sampling.alternatives), one compressed binary cell per
    # reply, in a side table: messages rows stay small (listing, search and the active path never
    # read it). A message's row goes with it (the trigger), whichever way the message is deleted.
    conn.execute(
        """CREATE TABLE message_alternatives (
            message_id INTEGER PRIMARY KEY,
            data BLOB NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TRIGGER message_alternatives_ad AFTER DELETE ON messages BEGIN
            DELETE FROM message_alternatives WHERE message_id = old.id; END"""
    )


def _migrate_v3(conn: sqlite3.Connection) -> None:
    # A chat's extra stop strings (a JSON list of text), kept with it as its sampler is
    # (app.core.chat.chat_settings); chats stored before read as none.
    conn.execute("ALTER TABLE conversations ADD COLUMN stop_strings_json TEXT NOT NULL DEFAULT '[]'")


def _migrate_v4(conn: sqlite3.Connection) -> None:
    # A chat's output constraint (issue 23 §1: none, JSON, a JSON schema, a GBNF grammar) as JSON
    # {"kind", "text"}, kept with it as its stop strings are; chats stored before read as none.
    conn.execute("ALTER TABLE conversations ADD COLUMN constraint_json TEXT NOT NULL DEFAULT '{}'")


# Step i (0-based) takes a database from user_version i to i + 1, inside one
# transaction. Append steps; never change a released one.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_v1, _migrate_v2, _migrate_v3, _migrate_v4]

CONV_COLS = (
    "id",
    "created_at",
    "updated_at",
    "deleted_at",
    "title_custom",
    "current_leaf_id",
    "title",
    "model_path",
    "system_prompt",
    "sampler_json",
    "stop_strings_json",
    "constraint_json",
)
MSG_COLS = (
    "id",
    "conversation_id",
    "parent_id",
    "role",
    "created_at",
    "complete",
    "selected_seq",
    "content",
    "meta_json",
)
MSG_SELECT = ", ".join(MSG_COLS)
CONV_SELECT = ", ".join(CONV_COLS)

_FTS_TRIGGERS = {
    "messages_fts_ai": """CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END""",
    "messages_fts_ad": """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); END""",
    "messages_fts_au": """CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END""",
}


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """True when SQLite says the file is corrupt or not a database (not busy, not denied)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def _fts5_available(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.glassbox_fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.glassbox_fts5_probe")
        return True
    except sqlite3.OperationalError:
        return False


def connect(path: Path, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) with the ``gb_fold`` casefold function.

    Args:
        path: the database file.
        busy_timeout: seconds to wait for another process's write lock.
    """
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=busy_timeout)
    conn.create_function("gb_fold", 1, _fold, deterministic=True)
    return conn


def _fold(s: str | bytes | int | float | None) -> str | bytes | int | float | None:
    """``gb_fold(x)`` in SQL: casefolded text (other values unchanged), for case-insensitive search."""
    return s.casefold() if isinstance(s, str) else s


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version stored in the file (0 for a new, empty file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def health_problem(conn: sqlite3.Connection, version: int) -> str | None:
    """None when the file looks healthy, else what is wrong (SQLite's words, for the notice).

    Raises:
        NotOurs: a healthy SQLite database with tables but no Glassbox schema version.
        sqlite3.DatabaseError: SQLite could not read the file at all.
    """
    if version == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if tables:
            raise NotOurs("the file is an SQLite database, but not one Glassbox wrote")
        return None
    rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
    if rows != ["ok"]:
        return "; ".join(rows)
    return _cut_off(conn)


def _cut_off(conn: sqlite3.Connection) -> str | None:
    """SQLite writes whole pages: a main file whose size is not a multiple of the page size was cut
    off. ``quick_check`` misses it when the cut falls in an overflow page (the tail of a long text,
    which then reads back as zeros)."""
    file = conn.execute("PRAGMA database_list").fetchone()[2]
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    try:
        size = os.path.getsize(file) if file else 0
    except OSError:
        return None
    if page and size % page:
        return f"the file is cut off ({size:,} bytes is not a whole number of {page:,}-byte pages)"
    return None


def prepare(conn: sqlite3.Connection, want_fts: bool) -> bool:
    """WAL, durability, migrations, full-text index (idempotent).

    Each migration step is its own transaction; a step that fails is rolled back
    and re-raised, leaving the file at the last good version.

    Args:
        conn: an open connection to the history file.
        want_fts: use FTS5 when this SQLite has it.

    Returns:
        True when search can use FTS5.
    """
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    while user_version(conn) < len(MIGRATIONS):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Read again under the write lock: another process may have migrated meanwhile.
            target = user_version(conn) + 1
            if target <= len(MIGRATIONS):
                MIGRATIONS[target - 1](conn)
                conn.execute(f"PRAGMA user_version = {int(target)}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return _setup_fts(conn, want_fts)


def _setup_fts(conn: sqlite3.Connection, want_fts: bool) -> bool:
    """Keep the FTS5 index in step with ``messages`` through triggers; True when it is in use.

    Without FTS5 (or with ``want_fts=False``) the triggers are dropped, so
    writes work on any SQLite build; when FTS5 is back the index is rebuilt.
    """
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    have = triggers & set(_FTS_TRIGGERS)
    enabled = want_fts and _fts5_available(conn)
    if have == (set(_FTS_TRIGGERS) if enabled else set()):
        return enabled  # already in step: no write at open
    conn.execute("BEGIN IMMEDIATE")
    try:
        for name in have:
            conn.execute(f"DROP TRIGGER {name}")
        if enabled:
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING "
                "fts5(content, content='messages', content_rowid='id')"
            )
            for sql in _FTS_TRIGGERS.values():
                conn.execute(sql)
            conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return enabled
