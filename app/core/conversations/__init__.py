"""Conversation history: one SQLite file, branches instead of deletions, damage-proof.

A conversation is a tree of messages (``parent_id``). Editing a message or
regenerating a reply adds a *sibling* (a new branch) and never deletes what
came after; the person moves between siblings with "< 2/3 >" arrows. What is
on screen is the *active path*: root to the conversation's selected leaf.
Every node remembers when it was last on the selected path (``selected_seq``),
so switching to a sibling brings back that sibling's own latest thread.

Storage (standard library ``sqlite3`` only):

* WAL journal, ``synchronous=FULL``; every write is one transaction (a streaming reply's once-a-second
  update commits with ``synchronous=NORMAL``: atomic, without the fsync).
* Schema version in ``PRAGMA user_version``; :data:`MIGRATIONS` lists the steps
  from version 1 on. A file from a newer Glassbox raises :class:`SchemaTooNewError`
  and is left untouched.
* A streaming reply is written at most once per ``stream_interval`` (1 s) and
  at least once per second while updates keep coming
  (:meth:`ConversationStore.update_streaming`), so killing the app mid-reply
  loses at most the last second of that reply and nothing earlier.
* A damaged file (not a database, cut off, pages failing ``quick_check``) is
  salvaged table by table and row by row into a fresh database, set aside as
  ``conversations.sqlite3.damaged-<time>`` (with its ``-wal``/``-shm``), and
  :attr:`ConversationStore.notice` says what happened.
* Search uses FTS5 when the SQLite build has it, else a case-insensitive
  substring scan; both return the same :class:`SearchHit` shape.
* Export to Markdown (the active path, with a stats line per reply) and to JSON
  (all branches, every message's settings and stats); the JSON imports back.

Threading: a store holds one connection made with sqlite3's default
``check_same_thread=True``, so it must be created and used on one thread (the
UI thread). A second process (another Glassbox window) may open the same file:
opening (creating, migrating, salvaging) runs one process at a time under an
OS lock on ``conversations.sqlite3.lock`` (:mod:`.openlock`), and SQLite's
locking and a 5 s busy timeout keep later writes consistent.

Modules: :mod:`.model` (the values), :mod:`.schema` (tables, migrations, FTS5),
:mod:`.base` and :mod:`.messages` and :mod:`.alternatives` (every token's alternatives, a
side table) and :mod:`.store` (:class:`ConversationStore`),
:mod:`.search`, :mod:`.exchange` (export/import), :mod:`.salvage` (damaged files),
:mod:`.openlock` (one process at a time opens the file).
The names below are the public API; import them from this package.
"""

from __future__ import annotations

from app.core.conversations.exchange import EXPORT_FORMAT, EXPORT_VERSION
from app.core.conversations.model import (
    DEFAULT_TITLE,
    TITLE_MAX_CHARS,
    Conversation,
    DeletedMessages,
    Message,
    MessageMeta,
    RecoveryReport,
    SearchHit,
    Siblings,
    make_title,
)
from app.core.conversations.salvage import UNREADABLE_TEXT
from app.core.conversations.schema import MIGRATIONS, SchemaTooNewError
from app.core.conversations.store import STREAM_INTERVAL_S, ConversationStore

__all__ = [
    "DEFAULT_TITLE",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "MIGRATIONS",
    "STREAM_INTERVAL_S",
    "TITLE_MAX_CHARS",
    "UNREADABLE_TEXT",
    "Conversation",
    "ConversationStore",
    "DeletedMessages",
    "Message",
    "MessageMeta",
    "RecoveryReport",
    "SchemaTooNewError",
    "SearchHit",
    "Siblings",
    "make_title",
]
