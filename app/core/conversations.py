"""Conversation history: one SQLite file, branches instead of deletions, damage-proof.

A conversation is a tree of messages (``parent_id``). Editing a message or
regenerating a reply adds a *sibling* (a new branch) and never deletes what
came after; the person moves between siblings with "< 2/3 >" arrows. What is
on screen is the *active path*: root to the conversation's selected leaf.
Every node remembers when it was last on the selected path (``selected_seq``),
so switching to a sibling brings back that sibling's own latest thread.

Storage (standard library ``sqlite3`` only):

* WAL journal, ``synchronous=FULL``; every write is one transaction.
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
UI thread). A second process (another Glassbox window) may open the same file;
SQLite's locking and a 5 s busy timeout keep them consistent.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.core.chat import ChatMessage, GenerationStats, LoadSettings, Role, StopReason
from app.core.sampling import SamplerSettings
from app.core.settings import atomic_write_text

EXPORT_FORMAT = "glassbox.conversation"
EXPORT_VERSION = 1
DEFAULT_TITLE = "New chat"
TITLE_MAX_CHARS = 60
STREAM_INTERVAL_S = 1.0
UNREADABLE_TEXT = "[Glassbox could not recover the text of this message from the damaged history file]"

# SQLite primary result codes that mean "the file is damaged" (not "busy" or "no permission").
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_SQLITE_HEADER = b"SQLite format 3\x00"
# Highlight markers inside search snippets before they are turned into offsets.
_HL_START, _HL_END = "\x02", "\x03"
# Rowids probed past the last readable one when the end of a damaged table is unknown.
_SALVAGE_SLACK = 2000
# Most row ids probed one by one inside a damaged table.
_SALVAGE_MAX_GAP = 1_000_000


# --------------------------------------------------------------------------- errors


class SchemaTooNewError(RuntimeError):
    """The history file was written by a newer Glassbox; it is left untouched."""

    def __init__(self, path: Path, found: int, known: int) -> None:
        super().__init__(
            f"The conversation history {path} was written by a newer version of Glassbox "
            f"(schema version {found}; this version knows up to {known}). It was not changed. "
            "Update Glassbox, or move the file away to start a new history."
        )
        self.path, self.found, self.known = path, found, known


class _NotOurs(Exception):
    """The file is a healthy SQLite database but not a Glassbox history."""


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class MessageMeta:
    """How a reply was made: enough to make it again.

    To reproduce a reply, load ``model_path`` with ``load``, use ``system_prompt``
    and the active path up to the reply's parent as the prompt, and sample with
    :meth:`reproduction_sampler` (the settings with the seed that was used).

    Attributes:
        model_path: the GGUF file, absolute path.
        model_name: display name (``general.name``), e.g. ``SmolLM2``.
        quant: quantization, e.g. ``Q4_K_M``.
        sampler: the sampler settings snapshotted for the request.
        seed: the seed the sampler actually used (also in ``stats.seed``).
        load: how the model was loaded (n_ctx, n_batch, context policy...).
        system_prompt: the system prompt in effect for this reply.
        stats: the engine's measurements (tokens, TTFT, tok/s, stop reason).
        engine: engine build, e.g. ``llama-cpp-python 0.3.36``.
        edited: the person edited this text after it was generated.
    """

    model_path: str = ""
    model_name: str = ""
    quant: str = ""
    sampler: SamplerSettings | None = None
    seed: int | None = None
    load: LoadSettings | None = None
    system_prompt: str | None = None
    stats: GenerationStats | None = None
    engine: str = ""
    edited: bool = False

    @property
    def seed_used(self) -> int | None:
        """The seed of this reply: :attr:`seed`, else the one in :attr:`stats`, else None."""
        if self.seed is not None:
            return self.seed
        return self.stats.seed if self.stats is not None else None

    def reproduction_sampler(self) -> SamplerSettings | None:
        """The sampler settings with the seed fixed to the one used; None if unknown."""
        if self.sampler is None:
            return None
        return replace(self.sampler, seed=self.seed_used)

    def stats_line(self) -> str:
        """One line for people, e.g. ``SmolLM2 · Q4_1 · 42 tokens · 98.3 tok/s · TTFT 0.12 s``.

        Parts that are unknown are left out; the stop reason is added when it
        is not the normal end of turn. Empty for a message with no meta.
        """
        parts: list[str] = []
        name = self.model_name or (Path(self.model_path).stem if self.model_path else "")
        if name:
            parts.append(name)
        if self.quant:
            parts.append(self.quant)
        s = self.stats
        if s is not None:
            parts.append(f"{s.generated_tokens} tokens")
            if s.decode_tok_s > 0:
                parts.append(f"{s.decode_tok_s:.1f} tok/s")
            if s.ttft_s > 0:
                parts.append(f"TTFT {s.ttft_s:.2f} s")
            if s.stop_reason != StopReason.EOS.value:
                try:
                    parts.append(StopReason(s.stop_reason).label)
                except ValueError:
                    parts.append(str(s.stop_reason))
        if self.seed_used is not None and (s is not None or self.sampler is not None):
            parts.append(f"seed {self.seed_used}")
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (settings and stats through their own ``to_dict``)."""
        return {
            "model_path": self.model_path,
            "model_name": self.model_name,
            "quant": self.quant,
            "sampler": self.sampler.to_dict() if self.sampler is not None else None,
            "seed": self.seed,
            "load": self.load.to_dict() if self.load is not None else None,
            "system_prompt": self.system_prompt,
            "stats": self.stats.to_dict() if self.stats is not None else None,
            "engine": self.engine,
            "edited": self.edited,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> MessageMeta:
        """Build from stored values; wrong types fall back to defaults, unknown keys are ignored."""
        if not isinstance(data, dict):
            return cls()

        def text(key: str) -> str:
            v = data.get(key)
            return v if isinstance(v, str) else ""

        def sub(key: str) -> dict[str, Any] | None:
            v = data.get(key)
            return v if isinstance(v, dict) else None

        seed = data.get("seed")
        system_prompt = data.get("system_prompt")
        stats = sub("stats")
        return cls(
            model_path=text("model_path"),
            model_name=text("model_name"),
            quant=text("quant"),
            sampler=SamplerSettings.from_dict(sub("sampler")) if sub("sampler") is not None else None,
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            load=LoadSettings.from_dict(sub("load")) if sub("load") is not None else None,
            system_prompt=system_prompt if isinstance(system_prompt, str) else None,
            stats=_stats_from_dict(stats) if stats is not None else None,
            engine=text("engine"),
            edited=data.get("edited") is True,
        )


def _stats_from_dict(data: dict[str, Any]) -> GenerationStats:
    """GenerationStats from stored values, each coerced to its field's type (bad values: default)."""
    base = GenerationStats()
    values: dict[str, Any] = {}
    for name in GenerationStats.__dataclass_fields__:
        if name not in data:
            continue
        default, v = getattr(base, name), data[name]
        if isinstance(default, str):
            if isinstance(v, str):
                values[name] = v
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            values[name] = type(default)(v)
    return replace(base, **values)


@dataclass(frozen=True)
class Message:
    """One stored message.

    Attributes:
        id: unique in the store.
        conversation_id: the conversation it belongs to.
        parent_id: the message it answers or follows; None for a first message.
        role: system, user or assistant.
        content: the text (while a reply streams, the latest text given to the store).
        created_at: seconds since the epoch.
        complete: False while streaming or when the reply was cut off
            (stopped, max_tokens, context full, engine error).
        meta: how it was made (assistant replies).
    """

    id: int
    conversation_id: int
    parent_id: int | None
    role: Role
    content: str
    created_at: float
    complete: bool
    meta: MessageMeta

    def to_chat(self) -> ChatMessage:
        """The message as the chat template sees it (role and visible text)."""
        return ChatMessage(self.role.value, self.content)


@dataclass(frozen=True)
class Conversation:
    """One conversation's settings and place in the list.

    Attributes:
        id: unique in the store.
        title: shown in the list; made from the first message unless renamed.
        title_is_custom: the person renamed it (automatic titles no longer apply).
        created_at, updated_at: seconds since the epoch; the list is newest ``updated_at`` first.
        deleted_at: when it was deleted (it can be restored until purged), else None.
        system_prompt: the system message for new replies.
        model_path: the model last used in it.
        sampler: sampler settings for new replies.
        current_leaf_id: the last message of the selected branch (None when empty).
    """

    id: int
    title: str
    title_is_custom: bool
    created_at: float
    updated_at: float
    deleted_at: float | None
    system_prompt: str
    model_path: str
    sampler: SamplerSettings
    current_leaf_id: int | None


@dataclass(frozen=True)
class Siblings:
    """A message and its alternatives (same parent), oldest first, for "< 2/3 >" arrows.

    Attributes:
        ids: sibling message ids in creation order (includes the message itself).
        index: 0-based position of the message asked about.
    """

    ids: tuple[int, ...]
    index: int

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def position(self) -> int:
        """1-based position, as shown to people."""
        return self.index + 1

    @property
    def previous_id(self) -> int | None:
        return self.ids[self.index - 1] if self.index > 0 else None

    @property
    def next_id(self) -> int | None:
        return self.ids[self.index + 1] if self.index + 1 < len(self.ids) else None

    @property
    def label(self) -> str:
        """``"2/3"``."""
        return f"{self.position}/{self.count}"


@dataclass(frozen=True)
class SearchHit:
    """A message that matches a search.

    Attributes:
        conversation_id, message_id: where the match is.
        conversation_title: the conversation's title.
        role: the message's role.
        snippet: the matching part of the message (whitespace collapsed, ``…`` where cut).
        highlights: ``(start, end)`` character offsets of the matched words in ``snippet``.
    """

    conversation_id: int
    message_id: int
    conversation_title: str
    role: Role
    snippet: str
    highlights: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class RecoveryReport:
    """What happened when a damaged history was opened.

    Attributes:
        problem: what was wrong, in SQLite's words.
        damaged_path: where the damaged file was moved (with its ``-wal``/``-shm``, if any).
        conversations: conversations recovered (including placeholders).
        messages: messages recovered.
        unreadable_rows: row ids whose lookup failed: an upper bound on the
            rows lost (ids of rows deleted earlier on can be among them).
        placeholder_conversations: conversations re-created to hold messages whose
            conversation row was lost.
        detached_messages: messages whose parent was lost; they start a branch of their own.
        text_lost: messages kept without their text (it could not be read).
        errors: what went wrong while reading the damaged file, for the log.
    """

    problem: str
    damaged_path: Path
    conversations: int = 0
    messages: int = 0
    unreadable_rows: int = 0
    placeholder_conversations: int = 0
    detached_messages: int = 0
    text_lost: int = 0
    errors: tuple[str, ...] = ()


def make_title(text: str, limit: int = TITLE_MAX_CHARS) -> str:
    """A list title from a message: whitespace collapsed, cut on a word boundary.

    Args:
        text: usually the first user message.
        limit: most characters, the ``…`` included.

    Returns:
        The title, or :data:`DEFAULT_TITLE` for blank text.
    """
    flat = " ".join(text.split())
    if not flat:
        return DEFAULT_TITLE
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-–—") + "…"


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


# Step i (0-based) takes a database from user_version i to i + 1, inside one
# transaction. Append steps; never change a released one.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_v1]

_CONV_COLS = (
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
)
_MSG_COLS = (
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
_MSG_SELECT = ", ".join(_MSG_COLS)
_CONV_SELECT = ", ".join(_CONV_COLS)

_FTS_TRIGGERS = {
    "messages_fts_ai": """CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END""",
    "messages_fts_ad": """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); END""",
    "messages_fts_au": """CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END""",
}


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
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


def _connect(path: Path, busy_timeout: float = 5.0) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=busy_timeout)
    conn.create_function("gb_fold", 1, lambda s: s.casefold() if isinstance(s, str) else s, deterministic=True)
    return conn


def _json_dict(raw: Any) -> dict[str, Any]:
    try:
        data = json.loads(raw) if isinstance(raw, (str, bytes)) else None
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


# --------------------------------------------------------------------------- the store


class ConversationStore:
    """All conversations in one SQLite file.

    Opening never fails on a damaged file: the file is set aside, what can be
    read is salvaged into a fresh one and :attr:`notice` says so. Use from one
    thread only (see the module docstring). Close it (or use ``with``) so the
    last streamed text is written and the WAL is checkpointed.

    Attributes:
        path: the database file.
        notice: set when the file was damaged, empty or had to be replaced; a
            sentence to show the person. None when all was well.
        recovery: details of the salvage when the file was damaged.
        fts_enabled: search uses SQLite FTS5 (else a substring scan).
    """

    def __init__(
        self,
        path: os.PathLike[str] | str,
        *,
        use_fts: bool | None = None,
        stream_interval: float = STREAM_INTERVAL_S,
        busy_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """Open (creating, migrating or salvaging as needed) the history at ``path``.

        Args:
            path: the database file, usually ``Paths.conversations_db``.
            use_fts: True/None = use FTS5 search when this SQLite has it; False = never.
            stream_interval: seconds between writes of a streaming reply.
            busy_timeout: seconds to wait for another process's write lock.
            clock: wall clock for timestamps (seconds since the epoch).
            monotonic: clock for the streaming throttle (seconds).

        Raises:
            SchemaTooNewError: the file comes from a newer Glassbox (left untouched).
            OSError: the file or its folder cannot be opened or written
                (permissions, disk full, locked by another program), or a damaged
                file cannot be set aside (it is then left exactly as it was); the
                message names the file.
        """
        self.path = Path(path)
        self.notice: str | None = None
        self.recovery: RecoveryReport | None = None
        self.fts_enabled = False
        self._want_fts = use_fts is not False
        self._stream_interval = stream_interval
        self._busy_timeout = busy_timeout
        self._clock = clock
        self._monotonic = monotonic
        self._last_now = 0.0
        self._pending: dict[int, str] = {}
        self._last_stream_write: dict[int, float] = {}
        self._conn: sqlite3.Connection = self._open()

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Write pending streamed text and close. Safe to call twice."""
        conn = getattr(self, "_conn", None)
        if conn is None:
            return
        try:
            if self._pending:
                self.flush()
        finally:
            conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"Glassbox cannot create the folder for its conversation history "
                f"{self.path.parent}: {exc.strerror or exc}",
            ) from exc
        if self._is_empty_file():
            self.notice = (
                f"The conversation history file {self.path} was empty (0 bytes), so there was "
                "nothing in it to recover. A new history was started."
            )
        elif not self._has_sqlite_header():
            # Decided without opening it: SQLite would delete the -wal/-shm beside it on close.
            return self._recover_or_raise("file is not a database")
        conn = None
        try:
            conn = _connect(self.path, self._busy_timeout)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise SchemaTooNewError(self.path, version, len(MIGRATIONS))
            problem = self._health_problem(conn, version)
            if problem is None:
                self._prepare(conn)
                return conn
        except _NotOurs as exc:
            problem = str(exc)
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                if conn is not None:
                    conn.close()
                raise OSError(f"Glassbox cannot open its conversation history {self.path}: {exc}") from exc
            problem = str(exc)
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        conn.close()
        return self._recover_or_raise(problem)

    def _recover_or_raise(self, problem: str) -> sqlite3.Connection:
        try:
            return self._recover(problem)
        except (OSError, sqlite3.Error) as exc:
            raise OSError(
                f"Glassbox found its conversation history {self.path} damaged ({problem}) and could "
                f"not replace it: {exc}"
            ) from exc

    def _is_empty_file(self) -> bool:
        try:
            if self.path.stat().st_size != 0:
                return False
        except FileNotFoundError:
            return False
        wal = Path(f"{self.path}-wal")
        return not wal.exists() or wal.stat().st_size == 0

    def _has_sqlite_header(self) -> bool:
        """True for a missing or empty file, or one that starts like an SQLite database."""
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(16)
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise OSError(
                exc.errno, f"Glassbox cannot read its conversation history {self.path}: {exc.strerror or exc}"
            ) from exc
        return not head or head == _SQLITE_HEADER

    @staticmethod
    def _health_problem(conn: sqlite3.Connection, version: int) -> str | None:
        """None when the file looks healthy, else what is wrong (for the notice)."""
        if version == 0:
            tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            if tables:
                raise _NotOurs("the file is an SQLite database, but not one Glassbox wrote")
            return None
        rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        if rows != ["ok"]:
            return "; ".join(rows)
        return None

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """WAL, durability, migrations, full-text index (idempotent)."""
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for target in range(version + 1, len(MIGRATIONS) + 1):
            conn.execute("BEGIN IMMEDIATE")
            try:
                MIGRATIONS[target - 1](conn)
                conn.execute(f"PRAGMA user_version = {int(target)}")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        self._setup_fts(conn)

    def _setup_fts(self, conn: sqlite3.Connection) -> None:
        """Keep the FTS5 index in step with ``messages`` through triggers.

        Without FTS5 (or with ``use_fts=False``) the triggers are dropped, so
        writes work on any SQLite build; when FTS5 is back the index is rebuilt.
        """
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        have = triggers & set(_FTS_TRIGGERS)
        self.fts_enabled = self._want_fts and _fts5_available(conn)
        if have == (set(_FTS_TRIGGERS) if self.fts_enabled else set()):
            return  # already in step: no write at open
        conn.execute("BEGIN IMMEDIATE")
        try:
            for name in have:
                conn.execute(f"DROP TRIGGER {name}")
            if self.fts_enabled:
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

    # ------------------------------------------------------------------ helpers

    def _now(self) -> float:
        """Wall-clock seconds, strictly increasing within this store (keeps list order stable)."""
        now = max(self._clock(), self._last_now + 1e-6)
        self._last_now = now
        return now

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; streamed text still pending is written in it too."""
        conn = self._conn
        pending = dict(self._pending)
        conn.execute("BEGIN IMMEDIATE")
        try:
            if pending:
                self._write_pending(conn)
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            for mid, content in pending.items():  # not written after all: keep it pending
                self._pending.setdefault(mid, content)
            raise
        conn.execute("COMMIT")

    def _write_pending(self, conn: sqlite3.Connection) -> None:
        now, mono = self._now(), self._monotonic()
        for mid, content in self._pending.items():
            self._store_content(conn, mid, content, now)
            self._last_stream_write[mid] = mono
        self._pending.clear()

    @staticmethod
    def _store_content(conn: sqlite3.Connection, message_id: int, content: str, now: float) -> bool:
        cur = conn.execute("UPDATE messages SET content = ? WHERE id = ?", (content, message_id))
        if cur.rowcount:
            conn.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = "
                "(SELECT conversation_id FROM messages WHERE id = ?)",
                (now, message_id),
            )
        return cur.rowcount > 0

    def _message_from_row(self, row: Sequence[Any]) -> Message:
        mid, conv, parent, role, created, complete, _seq, content, meta = row
        return Message(
            id=mid,
            conversation_id=conv,
            parent_id=parent,
            role=Role(role),
            content=self._pending.get(mid, content),
            created_at=created,
            complete=bool(complete),
            meta=MessageMeta.from_dict(_json_dict(meta)),
        )

    @staticmethod
    def _conversation_from_row(row: Sequence[Any]) -> Conversation:
        cid, created, updated, deleted, custom, leaf, title, model, system, sampler = row
        return Conversation(
            id=cid,
            title=title,
            title_is_custom=bool(custom),
            created_at=created,
            updated_at=updated,
            deleted_at=deleted,
            system_prompt=system,
            model_path=model,
            sampler=SamplerSettings.from_dict(_json_dict(sampler)),
            current_leaf_id=leaf,
        )

    def _message_row(self, message_id: int) -> tuple[Any, ...]:
        row = self._conn.execute(f"SELECT {_MSG_SELECT} FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise KeyError(f"no message with id {message_id}")
        return row

    def _require_conversation(self, conv_id: int) -> None:
        if self._conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone() is None:
            raise KeyError(f"no conversation with id {conv_id}")

    @staticmethod
    def _descend(conn: sqlite3.Connection, conv_id: int, start: int | None) -> int | None:
        """From ``start`` (None = the conversation's roots) follow the most recently selected child."""
        node = start
        while True:
            row = conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? "
                "ORDER BY selected_seq DESC, id DESC LIMIT 1",
                (conv_id, node),
            ).fetchone()
            if row is None:
                return node
            node = row[0]

    @staticmethod
    def _set_leaf(conn: sqlite3.Connection, conv_id: int, leaf: int | None) -> None:
        """Make ``leaf`` the selected leaf and stamp its whole path as most recently selected."""
        conn.execute("UPDATE conversations SET current_leaf_id = ? WHERE id = ?", (leaf, conv_id))
        if leaf is None:
            return
        seq = conn.execute(
            "SELECT coalesce(max(selected_seq), 0) + 1 FROM messages WHERE conversation_id = ?", (conv_id,)
        ).fetchone()[0]
        conn.execute(
            """WITH RECURSIVE up(id, parent_id, depth) AS (
                   SELECT id, parent_id, 0 FROM messages WHERE id = ?
                   UNION ALL
                   SELECT m.id, m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent_id
                   WHERE up.depth < 1000000)
               UPDATE messages SET selected_seq = ? WHERE id IN (SELECT id FROM up)""",
            (leaf, seq),
        )

    def _current_leaf(self, conv_id: int) -> int | None:
        row = self._conn.execute("SELECT current_leaf_id FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        if row is None:
            raise KeyError(f"no conversation with id {conv_id}")
        leaf = row[0]
        if (
            leaf is not None
            and self._conn.execute(
                "SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?", (leaf, conv_id)
            ).fetchone()
        ):
            return leaf
        return self._descend(self._conn, conv_id, None)

    def _retitle_if_auto(self, conn: sqlite3.Connection, conv_id: int, first_user_text: str) -> None:
        conn.execute(
            "UPDATE conversations SET title = ? WHERE id = ? AND title_custom = 0",
            (make_title(first_user_text), conv_id),
        )

    # ------------------------------------------------------------------ conversations

    def create_conversation(
        self,
        *,
        system_prompt: str = "",
        model_path: str = "",
        sampler: SamplerSettings | None = None,
        title: str | None = None,
    ) -> int:
        """Start an empty conversation.

        Args:
            system_prompt: system message for its replies.
            model_path: the model in use.
            sampler: sampler settings for its replies (defaults if None).
            title: a title; None = made from the first user message later.

        Returns:
            The new conversation's id.
        """
        now = self._now()
        custom = bool(title and title.strip())
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO conversations (created_at, updated_at, title_custom, title, model_path, "
                "system_prompt, sampler_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    now,
                    now,
                    int(custom),
                    title.strip() if custom and title else DEFAULT_TITLE,
                    model_path,
                    system_prompt,
                    json.dumps((sampler or SamplerSettings()).to_dict()),
                ),
            )
            return int(cur.lastrowid)

    def get_conversation(self, conv_id: int) -> Conversation:
        """The conversation with this id (deleted ones too).

        Raises:
            KeyError: no such conversation (or it was purged).
        """
        row = self._conn.execute(f"SELECT {_CONV_SELECT} FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        if row is None:
            raise KeyError(f"no conversation with id {conv_id}")
        return self._conversation_from_row(row)

    def list_conversations(self, *, include_deleted: bool = False) -> list[Conversation]:
        """All conversations, most recently updated first (deleted ones only when asked)."""
        where = "" if include_deleted else "WHERE deleted_at IS NULL"
        rows = self._conn.execute(
            f"SELECT {_CONV_SELECT} FROM conversations {where} ORDER BY updated_at DESC, id DESC"
        ).fetchall()
        return [self._conversation_from_row(r) for r in rows]

    def update_conversation(
        self,
        conv_id: int,
        *,
        system_prompt: str | None = None,
        model_path: str | None = None,
        sampler: SamplerSettings | None = None,
    ) -> None:
        """Change a conversation's settings (arguments left as None stay as they are).

        Raises:
            KeyError: no such conversation.
        """
        sets: list[str] = []
        args: list[Any] = []
        for column, value in (
            ("system_prompt", system_prompt),
            ("model_path", model_path),
            ("sampler_json", json.dumps(sampler.to_dict()) if sampler is not None else None),
        ):
            if value is not None:
                sets.append(f"{column} = ?")
                args.append(value)
        self._require_conversation(conv_id)
        if not sets:
            return
        with self._write() as conn:
            conn.execute(
                f"UPDATE conversations SET {', '.join(sets)}, updated_at = ? WHERE id = ?",
                (*args, self._now(), conv_id),
            )

    def rename(self, conv_id: int, title: str) -> str:
        """Give a conversation a title; a blank title goes back to the automatic one.

        Returns:
            The title now in use.

        Raises:
            KeyError: no such conversation.
        """
        self._require_conversation(conv_id)
        title = " ".join(title.split())
        with self._write() as conn:
            if title:
                conn.execute("UPDATE conversations SET title = ?, title_custom = 1 WHERE id = ?", (title, conv_id))
                return title
            root = conn.execute(
                "SELECT content FROM messages WHERE conversation_id = ? AND parent_id IS NULL AND role = 'user' "
                "ORDER BY selected_seq DESC, id LIMIT 1",
                (conv_id,),
            ).fetchone()
            auto = make_title(root[0]) if root else DEFAULT_TITLE
            conn.execute("UPDATE conversations SET title = ?, title_custom = 0 WHERE id = ?", (auto, conv_id))
            return auto

    def delete_conversation(self, conv_id: int) -> None:
        """Move a conversation to the trash (restore with :meth:`undo_delete`).

        Raises:
            KeyError: no such conversation.
        """
        self._require_conversation(conv_id)
        with self._write() as conn:
            conn.execute(
                "UPDATE conversations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL", (self._now(), conv_id)
            )

    def undo_delete(self, conv_id: int) -> None:
        """Bring back a deleted conversation (until it is purged).

        Raises:
            KeyError: no such conversation (never existed, or already purged).
        """
        self._require_conversation(conv_id)
        with self._write() as conn:
            conn.execute("UPDATE conversations SET deleted_at = NULL WHERE id = ?", (conv_id,))

    def purge_deleted(self, older_than: float = 0.0) -> int:
        """Remove for good the conversations deleted at least ``older_than`` seconds ago.

        Args:
            older_than: seconds since deletion; 0 purges everything in the trash.

        Returns:
            How many conversations were removed (with all their messages).
        """
        cutoff = self._now() - older_than
        with self._write() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at <= ?", (cutoff,)
                )
            ]
            for cid in ids:
                conn.execute("DELETE FROM messages WHERE conversation_id = ?", (cid,))
                conn.execute("DELETE FROM conversations WHERE id = ?", (cid,))
        return len(ids)

    # ------------------------------------------------------------------ messages

    def add_message(
        self,
        conv_id: int,
        parent_id: int | None,
        role: Role | str,
        content: str,
        meta: MessageMeta | None = None,
        *,
        complete: bool = True,
    ) -> int:
        """Add a message under ``parent_id`` and select it (it becomes the active leaf).

        A parent that already has children gets one more: that is how a
        regenerated reply becomes a new branch next to the old one. Start a
        streaming reply with ``content=""`` and ``complete=False``, then call
        :meth:`update_streaming` and :meth:`finish_message`.

        Args:
            conv_id: the conversation.
            parent_id: the message this one follows; None for a first message.
            role: ``Role`` or its value.
            content: the text.
            meta: how an assistant reply is made (model, settings, seed, stats).
            complete: False for a reply that is still streaming.

        Returns:
            The new message's id.

        Raises:
            KeyError: no such conversation, or the parent is not in it.
            ValueError: unknown role.
        """
        role = Role(role)
        self._require_conversation(conv_id)
        if parent_id is not None:
            if self._message_row(parent_id)[1] != conv_id:
                raise KeyError(f"message {parent_id} is not in conversation {conv_id}")
        now = self._now()
        with self._write() as conn:
            mid = self._insert_message(conn, conv_id, parent_id, role, content, meta or MessageMeta(), complete, now)
            self._set_leaf(conn, conv_id, mid)
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conv_id))
            if parent_id is None and role is Role.USER:
                self._retitle_if_auto(conn, conv_id, content)
        return mid

    @staticmethod
    def _insert_message(
        conn: sqlite3.Connection,
        conv_id: int,
        parent_id: int | None,
        role: Role,
        content: str,
        meta: MessageMeta,
        complete: bool,
        now: float,
    ) -> int:
        cur = conn.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, created_at, complete, content, meta_json) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (conv_id, parent_id, role.value, now, int(complete), content, json.dumps(meta.to_dict())),
        )
        return int(cur.lastrowid)

    def regenerate(self, message_id: int, meta: MessageMeta | None = None) -> int:
        """Start a new reply next to ``message_id`` (same parent): an empty, incomplete sibling.

        The old reply and everything after it stay reachable through :meth:`siblings`.

        Args:
            message_id: the assistant reply to generate again.
            meta: how the new reply will be made (model, settings); stats come with
                :meth:`finish_message`.

        Returns:
            The new (selected) message's id; stream into it with :meth:`update_streaming`.

        Raises:
            KeyError: no such message.
            ValueError: the message is not an assistant reply.
        """
        row = self._message_row(message_id)
        if row[3] != Role.ASSISTANT.value:
            raise ValueError(f"message {message_id} is a {row[3]} message; only assistant replies are regenerated")
        return self.add_message(row[1], row[2], Role.ASSISTANT, "", meta, complete=False)

    def edit_message(self, message_id: int, new_content: str) -> int:
        """Edit a message by adding an edited copy next to it (a new branch).

        The copy has the same role and parent, no children, and becomes the
        selected branch; the original and all that followed it stay reachable
        through :meth:`siblings`. An assistant reply's meta is kept with
        ``edited=True``. Editing a first user message re-makes an automatic title.

        Returns:
            The id of the edited copy, or ``message_id`` itself when the text is unchanged.

        Raises:
            KeyError: no such message.
        """
        row = self._message_row(message_id)
        msg = self._message_from_row(row)
        if new_content == msg.content:
            return message_id
        meta = replace(msg.meta, edited=True) if msg.role is Role.ASSISTANT else msg.meta
        now = self._now()
        with self._write() as conn:
            mid = self._insert_message(
                conn, msg.conversation_id, msg.parent_id, msg.role, new_content, meta, msg.complete, now
            )
            self._set_leaf(conn, msg.conversation_id, mid)
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, msg.conversation_id))
            if msg.parent_id is None and msg.role is Role.USER:
                self._retitle_if_auto(conn, msg.conversation_id, new_content)
        return mid

    def get_message(self, message_id: int) -> Message:
        """The message with this id.

        Raises:
            KeyError: no such message.
        """
        return self._message_from_row(self._message_row(message_id))

    def messages(self, conv_id: int) -> list[Message]:
        """Every message of a conversation, all branches, in creation order.

        Raises:
            KeyError: no such conversation.
        """
        self._require_conversation(conv_id)
        rows = self._conn.execute(
            f"SELECT {_MSG_SELECT} FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,)
        ).fetchall()
        return [self._message_from_row(r) for r in rows]

    def siblings(self, message_id: int) -> Siblings:
        """The message and its alternatives (same parent), oldest first.

        Raises:
            KeyError: no such message.
        """
        row = self._message_row(message_id)
        ids = tuple(
            r[0]
            for r in self._conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY id", (row[1], row[2])
            )
        )
        return Siblings(ids=ids, index=ids.index(message_id))

    def select_branch(self, message_id: int) -> list[Message]:
        """Show the branch through ``message_id`` (usually a sibling picked with the arrows).

        The path continues down that message's most recently selected (or
        created) descendants, so coming back to a branch shows it as it was left.

        Returns:
            The new active path, root to leaf.

        Raises:
            KeyError: no such message.
        """
        conv_id = self._message_row(message_id)[1]
        with self._write() as conn:
            self._set_leaf(conn, conv_id, self._descend(conn, conv_id, message_id))
        return self.active_path(conv_id)

    def active_path(self, conv_id: int) -> list[Message]:
        """The messages shown on screen: root to the selected leaf.

        Returns:
            Messages in order; empty for an empty conversation.

        Raises:
            KeyError: no such conversation.
        """
        leaf = self._current_leaf(conv_id)
        if leaf is None:
            return []
        rows = self._conn.execute(
            f"""WITH RECURSIVE up(id, depth) AS (
                    SELECT id, 0 FROM messages WHERE id = ?
                    UNION ALL
                    SELECT m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = up.id
                    WHERE m.parent_id IS NOT NULL AND up.depth < 1000000)
                SELECT {", ".join("m." + c for c in _MSG_COLS)} FROM up JOIN messages m ON m.id = up.id
                ORDER BY up.depth DESC""",
            (leaf,),
        ).fetchall()
        return [self._message_from_row(r) for r in rows]

    def chat_history(self, conv_id: int, *, before: int | None = None) -> list[ChatMessage]:
        """What the model should see: the system prompt, then the active path.

        Args:
            conv_id: the conversation.
            before: stop before this message of the active path (the reply
                about to be generated); None = the whole path.

        Raises:
            KeyError: no such conversation.
        """
        conv = self.get_conversation(conv_id)
        out = [ChatMessage(Role.SYSTEM.value, conv.system_prompt)] if conv.system_prompt else []
        for m in self.active_path(conv_id):
            if m.id == before:
                break
            out.append(m.to_chat())
        return out

    def delete_message(self, message_id: int) -> int:
        """Delete one message **and its whole subtree** (every reply and branch under it).

        Its siblings and everything above it stay. If the selected branch ran
        through it, the selection moves to the parent's most recently selected
        other child (or ends at the parent).

        Returns:
            How many messages were deleted.

        Raises:
            KeyError: no such message.
        """
        row = self._message_row(message_id)
        conv_id, parent = row[1], row[2]
        with self._write() as conn:
            subtree = [
                r[0]
                for r in conn.execute(
                    """WITH RECURSIVE down(id) AS (
                       SELECT ? UNION ALL SELECT m.id FROM messages m JOIN down ON m.parent_id = down.id)
                   SELECT id FROM down""",
                    (message_id,),
                )
            ]
            leaf = conn.execute("SELECT current_leaf_id FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]
            conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in subtree])
            if leaf is None or leaf in subtree:
                self._set_leaf(conn, conv_id, self._descend(conn, conv_id, parent))
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (self._now(), conv_id))
        for i in subtree:
            self._last_stream_write.pop(i, None)
        return len(subtree)

    # ------------------------------------------------------------------ streaming

    def update_streaming(self, message_id: int, content: str) -> bool:
        """Give the store a streaming reply's text so far; call it as often as you like.

        Written at once when the last write of this message was at least
        ``stream_interval`` (1 s) ago; otherwise kept and written by the next
        call after that, by any other write, by :meth:`flush`, :meth:`finish_message`
        or :meth:`close`. Reads through this store already see the latest text.
        If tokens may arrive slower than one a second, call :meth:`flush` on a timer.

        Args:
            message_id: the reply (added with ``complete=False``).
            content: its whole text so far (not a delta).

        Returns:
            True if this call wrote to disk.

        Raises:
            KeyError: the message does not exist (checked when writing).
            sqlite3.Error: the write failed (disk full...).
        """
        mono = self._monotonic()
        last = self._last_stream_write.get(message_id)
        if last is not None and mono - last < self._stream_interval:
            self._pending[message_id] = content
            return False
        self._pending.pop(message_id, None)
        with self._write() as conn:
            if not self._store_content(conn, message_id, content, self._now()):
                raise KeyError(f"no message with id {message_id}")
        self._last_stream_write[message_id] = mono
        return True

    def flush(self) -> int:
        """Write all streamed text still pending (one transaction).

        Returns:
            How many messages were written.
        """
        n = len(self._pending)
        if n:
            with self._write():
                pass
        return n

    def set_message_content(self, message_id: int, content: str) -> None:
        """Replace a message's text in place, now (no new branch; see :meth:`edit_message` for that).

        Raises:
            KeyError: no such message.
        """
        self._pending.pop(message_id, None)
        with self._write() as conn:
            if not self._store_content(conn, message_id, content, self._now()):
                raise KeyError(f"no message with id {message_id}")

    def append_to_message(self, message_id: int, text: str) -> str:
        """Add text to the end of a message, now (for "Continue" on a cut-off reply).

        Returns:
            The message's whole text after appending.

        Raises:
            KeyError: no such message.
        """
        with self._write() as conn:
            row = conn.execute("SELECT content FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise KeyError(f"no message with id {message_id}")
            content = row[0] + text
            self._store_content(conn, message_id, content, self._now())
        return content

    def finish_message(
        self,
        message_id: int,
        content: str | None = None,
        *,
        stats: GenerationStats | None = None,
        meta: MessageMeta | None = None,
        complete: bool | None = None,
    ) -> Message:
        """End a streaming reply: final text, measurements, complete flag, in one transaction.

        Args:
            message_id: the reply.
            content: final text; None = the last text given to :meth:`update_streaming`.
            stats: the engine's measurements; stored in the meta (and its seed,
                when the meta has none).
            meta: replaces the stored meta (before ``stats`` is applied); None = keep.
            complete: None = decided from ``stats.stop_reason`` (end of turn or a
                stop string = complete; stopped, max_tokens, context full, error = cut
                off); no stats = complete.

        Returns:
            The stored message.

        Raises:
            KeyError: no such message.
        """
        row = self._message_row(message_id)
        final = content if content is not None else self._pending.get(message_id, row[7])
        self._pending.pop(message_id, None)
        new_meta = meta if meta is not None else MessageMeta.from_dict(_json_dict(row[8]))
        if stats is not None:
            new_meta = replace(new_meta, stats=stats, seed=new_meta.seed if new_meta.seed is not None else stats.seed)
        if complete is None:
            complete = stats is None or stats.stop_reason in (StopReason.EOS.value, StopReason.STOP_STRING.value)
        with self._write() as conn:
            self._store_content(conn, message_id, final, self._now())
            conn.execute(
                "UPDATE messages SET complete = ?, meta_json = ? WHERE id = ?",
                (int(complete), json.dumps(new_meta.to_dict()), message_id),
            )
        self._last_stream_write.pop(message_id, None)
        return self.get_message(message_id)

    # ------------------------------------------------------------------ search

    def search(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        """Find messages (all branches of all conversations not deleted) containing every word.

        Words match case-insensitively; with FTS5 each word also matches as a
        prefix (``photo`` finds ``photosynthesis``), best matches first;
        without FTS5 it is a substring match, newest conversations first.

        Args:
            query: words as the person typed them.
            limit: most hits returned.

        Returns:
            Hits with a snippet around the match; empty for a blank query.
        """
        terms = re.findall(r"\w+", query)
        if not terms:
            return []
        if self.fts_enabled:
            try:
                return self._search_fts(terms, limit)
            except sqlite3.DatabaseError:
                pass  # a damaged index must not break search: fall back to scanning
        return self._search_scan(terms, limit)

    def _search_fts(self, terms: list[str], limit: int) -> list[SearchHit]:
        match = " ".join('"' + t.replace('"', '""') + '"*' for t in terms)
        rows = self._conn.execute(
            """SELECT m.conversation_id, m.id, c.title, m.role,
                       snippet(messages_fts, 0, char(2), char(3), '…', 16)
                FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
                JOIN conversations c ON c.id = m.conversation_id
                WHERE messages_fts MATCH ? AND c.deleted_at IS NULL
                ORDER BY rank LIMIT ?""",
            (match, limit),
        ).fetchall()
        return [SearchHit(cid, mid, title, Role(role), *_parse_marked(snip)) for cid, mid, title, role, snip in rows]

    def _search_scan(self, terms: list[str], limit: int) -> list[SearchHit]:
        where = " AND ".join("instr(gb_fold(m.content), ?) > 0" for _ in terms)
        rows = self._conn.execute(
            f"""SELECT m.conversation_id, m.id, c.title, m.role, m.content
                FROM messages m JOIN conversations c ON c.id = m.conversation_id
                WHERE c.deleted_at IS NULL AND {where}
                ORDER BY c.updated_at DESC, m.id LIMIT ?""",
            (*[t.casefold() for t in terms], limit),
        ).fetchall()
        pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.IGNORECASE)
        return [
            SearchHit(cid, mid, title, Role(role), *_parse_marked(_mark_snippet(text, pattern)))
            for cid, mid, title, role, text in rows
        ]

    # ------------------------------------------------------------------ export / import

    def to_markdown(self, conv_id: int) -> str:
        """The conversation as shown (the active path) in Markdown, with a stats line per reply.

        Raises:
            KeyError: no such conversation.
        """
        self.flush()
        conv = self.get_conversation(conv_id)
        lines = [f"# {conv.title}", ""]
        info = [time.strftime("%Y-%m-%d %H:%M", time.localtime(conv.created_at))]
        if conv.model_path:
            info.append(f"model `{Path(conv.model_path).name}`")
        lines += ["*Glassbox conversation · " + " · ".join(info) + "*", ""]
        if conv.system_prompt:
            lines += ["**System prompt:**", "", _quote(conv.system_prompt), ""]
        names = {Role.USER: "You", Role.ASSISTANT: "Assistant", Role.SYSTEM: "System"}
        for m in self.active_path(conv_id):
            lines += [f"### {names[m.role]}", "", m.content.rstrip() or "*(empty)*", ""]
            if m.role is Role.ASSISTANT:
                stats = m.meta.stats_line()
                extra = [] if m.complete else ["unfinished"]
                if m.meta.edited:
                    extra.append("edited")
                line = " · ".join(p for p in [stats, *extra] if p)
                if line:
                    lines += [f"*{line}*", ""]
        return "\n".join(lines).rstrip() + "\n"

    def to_export_dict(self, conv_id: int) -> dict[str, Any]:
        """The conversation with all branches as JSON-ready data (see :meth:`export_json`).

        Raises:
            KeyError: no such conversation.
        """
        self.flush()
        conv = self.get_conversation(conv_id)
        seqs = dict(self._conn.execute("SELECT id, selected_seq FROM messages WHERE conversation_id = ?", (conv_id,)))
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "exported_at": self._clock(),
            "conversation": {
                "title": conv.title,
                "title_is_custom": conv.title_is_custom,
                "created_at": conv.created_at,
                "updated_at": conv.updated_at,
                "system_prompt": conv.system_prompt,
                "model_path": conv.model_path,
                "sampler": conv.sampler.to_dict(),
                "current_leaf_id": self._current_leaf(conv_id),
            },
            "messages": [
                {
                    "id": m.id,
                    "parent_id": m.parent_id,
                    "role": m.role.value,
                    "content": m.content,
                    "created_at": m.created_at,
                    "complete": m.complete,
                    "selected_seq": seqs.get(m.id, 0),
                    "meta": m.meta.to_dict(),
                }
                for m in self.messages(conv_id)
            ],
        }

    def export_markdown(self, conv_id: int, path: os.PathLike[str] | str) -> None:
        """Write :meth:`to_markdown` to ``path`` atomically.

        Raises:
            KeyError: no such conversation.
            OSError: the file cannot be written; the message names it.
        """
        atomic_write_text(Path(path), self.to_markdown(conv_id))

    def export_json(self, conv_id: int, path: os.PathLike[str] | str) -> None:
        """Write the conversation, all branches with settings and stats, to ``path`` atomically.

        Format: ``{"format": "glassbox.conversation", "version": 1, "exported_at",
        "conversation": {title, title_is_custom, created_at, updated_at,
        system_prompt, model_path, sampler, current_leaf_id}, "messages": [{id,
        parent_id, role, content, created_at, complete, selected_seq, meta}]}``;
        times are seconds since the epoch, parents come before their children.

        Raises:
            KeyError: no such conversation.
            OSError: the file cannot be written; the message names it.
        """
        text = json.dumps(self.to_export_dict(conv_id), indent=2, ensure_ascii=False)
        atomic_write_text(Path(path), text + "\n")

    def import_json(self, path: os.PathLike[str] | str) -> int:
        """Add a conversation exported with :meth:`export_json`, as a new conversation.

        The file is checked completely before anything is written, and the
        import is one transaction: a bad file imports nothing.

        Returns:
            The new conversation's id.

        Raises:
            OSError: the file cannot be read.
            ValueError: the file is not a valid Glassbox conversation export;
                the message names the file and the problem.
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: cannot import: the file is not UTF-8 text ({exc.reason})") from exc
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: cannot import: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        try:
            conv, msgs = _validate_export(data)
        except ValueError as exc:
            raise ValueError(f"{path}: cannot import: {exc}") from exc
        now = self._now()
        title = conv["title"]
        taken = {c.title for c in self.list_conversations()}
        if title in taken:  # importing the same file twice: tell the copies apart
            n = 2
            while f"{title} (imported {n})" in taken:
                n += 1
            title = f"{title} (imported{'' if n == 2 and f'{title} (imported)' not in taken else f' {n}'})"
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO conversations (created_at, updated_at, title_custom, title, model_path, system_prompt, "
                "sampler_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    conv["created_at"],
                    now,
                    int(conv["title_is_custom"] or title != conv["title"]),
                    title,
                    conv["model_path"],
                    conv["system_prompt"],
                    json.dumps(conv["sampler"].to_dict()),
                ),
            )
            cid = int(cur.lastrowid)
            new_ids: dict[int, int] = {}
            for m in msgs:
                cur = conn.execute(
                    "INSERT INTO messages (conversation_id, parent_id, role, created_at, complete, selected_seq, "
                    "content, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        cid,
                        new_ids[m["parent_id"]] if m["parent_id"] is not None else None,
                        m["role"],
                        m["created_at"],
                        int(m["complete"]),
                        m["selected_seq"],
                        m["content"],
                        json.dumps(m["meta"].to_dict()),
                    ),
                )
                new_ids[m["id"]] = int(cur.lastrowid)
            leaf = new_ids.get(conv["current_leaf_id"]) if conv["current_leaf_id"] is not None else None
            if leaf is None:
                leaf = self._descend(conn, cid, None)
            conn.execute("UPDATE conversations SET current_leaf_id = ? WHERE id = ?", (leaf, cid))
        return cid

    # ------------------------------------------------------------------ damage recovery

    def _recover(self, problem: str) -> sqlite3.Connection:
        """Salvage the damaged file into a fresh one at :attr:`path`; set the damaged one aside."""
        salvage = _Salvage()
        with tempfile.TemporaryDirectory(prefix="glassbox-salvage-") as tmp:
            scratch = Path(tmp) / "damaged.sqlite3"
            try:
                shutil.copyfile(self.path, scratch)
                wal = Path(f"{self.path}-wal")
                if wal.exists():
                    shutil.copyfile(wal, f"{scratch}-wal")
            except OSError as exc:
                salvage.errors.append(f"could not copy it to read it: {exc}")
            else:
                salvage.read(scratch)

        # Build the new history beside the damaged one; the damaged one stays in
        # place until the new one is complete.
        building = self.path.with_name(self.path.name + ".recovering")
        for p in _with_sidecars(building):
            p.unlink(missing_ok=True)
        conn = _connect(building, self._busy_timeout)
        try:
            self._prepare(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                report = salvage.write(conn, self._now())
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self._clock()))
        aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        n = 1
        while any(p.exists() for p in _with_sidecars(aside)):
            aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{n}")
            n += 1
        # Sidecars first: a stale -wal must never be left beside the new file.
        moves = [
            (src, dst) for src, dst in zip(_with_sidecars(self.path)[::-1], _with_sidecars(aside)[::-1]) if src.exists()
        ]
        done: list[tuple[Path, Path]] = []
        try:
            for src, dst in moves:
                os.replace(src, dst)
                done.append((src, dst))
        except OSError:
            for src, dst in reversed(done):  # put everything back as it was
                os.replace(dst, src)
            building.unlink(missing_ok=True)
            raise
        os.replace(building, self.path)

        self.recovery = replace(report, problem=problem, damaged_path=aside, errors=tuple(salvage.errors))
        self.notice = _recovery_notice(self.path, self.recovery)
        conn = _connect(self.path, self._busy_timeout)
        try:
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn


def _with_sidecars(path: Path) -> list[Path]:
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


def _recovery_notice(path: Path, r: RecoveryReport) -> str:
    where = f"The damaged file was kept as {r.damaged_path}."
    if r.conversations:
        got = (
            _count(r.conversations, "conversation", "conversations")
            + " ("
            + _count(r.messages, "message", "messages")
            + (") was" if r.conversations == 1 else ") were")
            + " recovered"
        )
    else:
        got = "no conversations could be recovered from it"
    lost = []
    if r.unreadable_rows:
        lost.append(f"some damaged records could not be read (at most {r.unreadable_rows})")
    if r.text_lost:
        lost.append(_count(r.text_lost, "message lost its text", "messages lost their text"))
    if r.detached_messages:
        lost.append(
            _count(
                r.detached_messages,
                "message lost the message before it and now starts a branch",
                "messages lost the message before them and now start branches",
            )
        )
    if r.placeholder_conversations:
        lost.append(
            _count(
                r.placeholder_conversations,
                'conversation lost its title and settings and is listed as "Recovered conversation"',
                'conversations lost their title and settings and are listed as "Recovered conversation"',
            )
        )
    tail = (" " + "; ".join(lost) + ".") if lost else ""
    return (
        f"The conversation history {path} was damaged ({r.problem}). {where} A new history was started and {got}.{tail}"
    )


def _count(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


class _Salvage:
    """Reads what it can from a damaged database, row by row, and writes it into a fresh one."""

    def __init__(self) -> None:
        self.conversations: dict[int, dict[str, Any]] = {}
        self.messages: dict[int, dict[str, Any]] = {}
        self.unreadable = 0
        self.text_lost = 0
        self.errors: list[str] = []

    def read(self, path: Path) -> None:
        try:
            conn = sqlite3.connect(str(path), isolation_level=None)
        except sqlite3.Error as exc:
            self.errors.append(str(exc))
            return
        try:
            # Lets SQLite open a file shorter than its header says (a cut-off file).
            conn.execute("PRAGMA writable_schema = ON")
            conn.execute("PRAGMA cell_size_check = ON")
            conv_rows = [
                r
                for r in self._read_table(conn, "conversations", _CONV_COLS, None, hint_max=0)
                if _plausible(r, ("created_at",))
            ]
            self.conversations = {r["id"]: r for r in conv_rows}
            leaves = (_as_int(r.get("current_leaf_id")) or 0 for r in conv_rows)
            msg_rows = self._read_table(
                conn, "messages", _MSG_COLS, ("content", "meta_json"), hint_max=max(leaves, default=0)
            )
            self.messages = {r["id"]: r for r in msg_rows if _plausible(r, ("conversation_id", "role", "created_at"))}
        except sqlite3.Error as exc:
            self.errors.append(str(exc))
        finally:
            conn.close()

    def _read_table(
        self,
        conn: sqlite3.Connection,
        table: str,
        wanted: Sequence[str],
        droppable: Sequence[str] | None,
        hint_max: int,
    ) -> list[dict[str, Any]]:
        """Every readable row: forward scan, backward scan, then row by row over the gap."""
        try:
            names = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        except sqlite3.DatabaseError as exc:
            self.errors.append(f"{table}: {exc}")
            return []
        cols = [c for c in wanted if c in names]
        if "id" not in cols:
            return []
        select = ", ".join(cols)
        rows: dict[int, dict[str, Any]] = {}

        def scan(order: str) -> bool:
            try:
                for r in conn.execute(f"SELECT {select} FROM {table} ORDER BY id {order}"):
                    rows[r[0]] = dict(zip(cols, r))
                return True
            except sqlite3.DatabaseError:
                return False

        forward_ok = scan("ASC")
        if forward_ok:
            return list(rows.values())
        lo = max(rows, default=0)
        before_backward = set(rows)
        scan("DESC")
        backward = set(rows) - before_backward
        # Row ids known to exist end at ``known``; past it (when the end of the
        # table is unreadable) probe a little further without counting failures.
        known = min(backward) if backward else min(max(lo, hint_max), lo + _SALVAGE_MAX_GAP)
        hi = known if backward else known + _SALVAGE_SLACK
        small = [c for c in cols if not droppable or c not in droppable]
        for rid in range(lo + 1, hi):
            try:
                r = conn.execute(f"SELECT {select} FROM {table} WHERE id = ?", (rid,)).fetchone()
            except sqlite3.DatabaseError:
                r = None
                if droppable:
                    try:
                        part = conn.execute(f"SELECT {', '.join(small)} FROM {table} WHERE id = ?", (rid,)).fetchone()
                    except sqlite3.DatabaseError:
                        part = None
                    if part is not None:
                        rows[rid] = {**dict(zip(small, part)), "_text_lost": True}
                        self.text_lost += 1
                        continue
                if rid <= known:
                    self.unreadable += 1
                continue
            if r is not None:
                rows[rid] = dict(zip(cols, r))
        return list(rows.values())

    def write(self, conn: sqlite3.Connection, now: float) -> RecoveryReport:
        """Insert the salvaged rows (ids kept), repairing links that point at lost rows."""
        placeholders = detached = 0
        convs: dict[int, dict[str, Any]] = {}
        for raw in self.conversations.values():
            cid = _as_int(raw.get("id"))
            if cid is None:
                continue
            convs[cid] = raw
        msgs: dict[int, dict[str, Any]] = {}
        for raw in sorted(self.messages.values(), key=lambda r: _as_int(r.get("id")) or 0):
            mid = _as_int(raw.get("id"))
            if mid is None:
                continue
            msgs[mid] = raw
        for raw in msgs.values():
            cid = _as_int(raw.get("conversation_id"))
            if cid is None:
                cid = 0  # lost its conversation link: group such messages in one placeholder
                raw["conversation_id"] = 0
            if cid not in convs:
                convs[cid] = {"id": cid, "_placeholder": True}
                placeholders += 1
        for cid, raw in convs.items():
            created = _as_float(raw.get("created_at"), now)
            sampler = _json_dict(raw.get("sampler_json"))
            custom = bool(_as_int(raw.get("title_custom")))
            title = raw.get("title") if isinstance(raw.get("title"), str) else ""
            if raw.get("_placeholder"):
                title, custom = "Recovered conversation", True
            conn.execute(
                "INSERT INTO conversations (id, created_at, updated_at, deleted_at, title_custom, title, model_path, "
                "system_prompt, sampler_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    cid,
                    created,
                    _as_float(raw.get("updated_at"), created),
                    _as_float(raw.get("deleted_at"), None),
                    int(custom),
                    title or DEFAULT_TITLE,
                    _as_text(raw.get("model_path")),
                    _as_text(raw.get("system_prompt")),
                    json.dumps(sampler),
                ),
            )
        roles = {r.value for r in Role}
        for mid, raw in msgs.items():
            cid = _as_int(raw.get("conversation_id"))
            parent = _as_int(raw.get("parent_id"))
            if parent is not None and (
                parent not in msgs or parent >= mid or _as_int(msgs[parent].get("conversation_id")) != cid
            ):
                parent = None
                detached += 1
            role = raw.get("role") if raw.get("role") in roles else Role.USER.value
            text_lost = raw.get("_text_lost", False)
            content = UNREADABLE_TEXT if text_lost else _as_text(raw.get("content"))
            conn.execute(
                "INSERT INTO messages (id, conversation_id, parent_id, role, created_at, complete, selected_seq, "
                "content, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    mid,
                    cid,
                    parent,
                    role,
                    _as_float(raw.get("created_at"), now),
                    0 if text_lost else int(bool(_as_int(raw.get("complete")))),
                    _as_int(raw.get("selected_seq")) or 0,
                    content,
                    json.dumps(_json_dict(raw.get("meta_json"))),
                ),
            )
        for cid, raw in convs.items():
            leaf = _as_int(raw.get("current_leaf_id"))
            if leaf is None or leaf not in msgs or _as_int(msgs[leaf].get("conversation_id")) != cid:
                leaf = ConversationStore._descend(conn, cid, None)
            conn.execute("UPDATE conversations SET current_leaf_id = ? WHERE id = ?", (leaf, cid))
        return RecoveryReport(
            problem="",
            damaged_path=Path(),
            conversations=len(convs),
            messages=len(msgs),
            unreadable_rows=self.unreadable,
            placeholder_conversations=placeholders,
            detached_messages=detached,
            text_lost=self.text_lost,
        )


def _plausible(row: dict[str, Any], not_null: Sequence[str]) -> bool:
    """False for rows Glassbox cannot have written (a zeroed cell decodes as id 0 with NULLs).

    Ids start at 1 and these columns are NOT NULL, so such rows are noise, not lost data.
    """
    rid = _as_int(row.get("id"))
    return rid is not None and rid >= 1 and all(row.get(c) is not None for c in not_null)


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _as_float(v: Any, default: float | None) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return default


def _as_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return ""


# --------------------------------------------------------------------------- search helpers


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


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines() or [""])


# --------------------------------------------------------------------------- import validation


def _validate_export(data: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Check an export completely; return clean conversation fields and messages (parents first).

    Raises:
        ValueError: the first problem found, in words.
    """
    if not isinstance(data, dict):
        raise ValueError("the top level is not a JSON object")
    if data.get("format") != EXPORT_FORMAT:
        raise ValueError(f'"format" is {data.get("format")!r}, expected {EXPORT_FORMAT!r}')
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f'"version" is {version!r}, expected a whole number')
    if version > EXPORT_VERSION:
        raise ValueError(
            f"it was written by a newer Glassbox (format version {version}; this version reads up to {EXPORT_VERSION})"
        )
    c = data.get("conversation")
    if not isinstance(c, dict):
        raise ValueError('"conversation" is missing or not an object')
    conv: dict[str, Any] = {}
    for key in ("title", "system_prompt", "model_path"):
        v = c.get(key, "")
        if not isinstance(v, str):
            raise ValueError(f"conversation.{key} is not text")
        conv[key] = v
    conv["title"] = " ".join(conv["title"].split()) or DEFAULT_TITLE
    conv["title_is_custom"] = c.get("title_is_custom") is True
    conv["created_at"] = _as_float(c.get("created_at"), None)
    if conv["created_at"] is None:
        raise ValueError("conversation.created_at is not a number (seconds since the epoch)")
    sampler = c.get("sampler")
    if sampler is not None and not isinstance(sampler, dict):
        raise ValueError("conversation.sampler is not an object")
    conv["sampler"] = SamplerSettings.from_dict(sampler)
    leaf = c.get("current_leaf_id")
    if leaf is not None and _as_int(leaf) is None:
        raise ValueError("conversation.current_leaf_id is not a message id")
    conv["current_leaf_id"] = _as_int(leaf)

    raw_msgs = data.get("messages")
    if not isinstance(raw_msgs, list):
        raise ValueError('"messages" is missing or not a list')
    roles = {r.value for r in Role}
    seen: set[int] = set()
    msgs: list[dict[str, Any]] = []
    for i, m in enumerate(raw_msgs):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise ValueError(f"{where} is not an object")
        mid = m.get("id")
        if not isinstance(mid, int) or isinstance(mid, bool):
            raise ValueError(f"{where}.id is not a whole number")
        if mid in seen:
            raise ValueError(f"{where}: message id {mid} appears twice")
        parent = m.get("parent_id")
        if parent is not None:
            if not isinstance(parent, int) or isinstance(parent, bool):
                raise ValueError(f"{where}.parent_id is not a message id")
            if parent not in seen:
                raise ValueError(f"{where} (id {mid}) has parent {parent}, which is not an earlier message in the file")
        role = m.get("role")
        if role not in roles:
            raise ValueError(f"{where}.role is {role!r}; expected one of {', '.join(sorted(roles))}")
        content = m.get("content")
        if not isinstance(content, str):
            raise ValueError(f"{where}.content is not text")
        meta = m.get("meta", {})
        if meta is not None and not isinstance(meta, dict):
            raise ValueError(f"{where}.meta is not an object")
        created = _as_float(m.get("created_at"), None)
        if created is None:
            raise ValueError(f"{where}.created_at is not a number (seconds since the epoch)")
        seq = m.get("selected_seq", 0)
        seen.add(mid)
        msgs.append(
            {
                "id": mid,
                "parent_id": parent,
                "role": role,
                "content": content,
                "created_at": created,
                "complete": m.get("complete", True) is not False,
                "selected_seq": seq if isinstance(seq, int) and not isinstance(seq, bool) else 0,
                "meta": MessageMeta.from_dict(meta),
            }
        )
    if conv["current_leaf_id"] is not None and conv["current_leaf_id"] not in seen:
        raise ValueError(f"conversation.current_leaf_id {conv['current_leaf_id']} is not a message in the file")
    return conv, msgs
