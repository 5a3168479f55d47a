"""ConversationStore: all conversations in one SQLite file (opening, lifecycle, conversations).

The message tree and streaming writes are in :mod:`.messages` (mixed in); this
module opens the file (creating, migrating or salvaging it), lists and changes
conversations, and hands search, export and import to :mod:`.search` and
:mod:`.exchange` with its connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.core.chat.context import ChatMessage, Role
from app.core.constraint.model import OutputConstraint
from app.core.conversations import schema
from app.core.conversations.alternatives import AlternativesMixin
from app.core.conversations.base import constraint_cell, conversation_from_row, lastrowid
from app.core.conversations.exchange import (
    conversation_markdown,
    export_dict,
    import_title,
    insert_import,
    read_export,
)
from app.core.conversations.importers.preview import ImportPreview
from app.core.conversations.importers.write import insert_foreign
from app.core.conversations.messages import MessagesMixin
from app.core.conversations.model import (
    DEFAULT_TITLE,
    Conversation,
    RecoveryReport,
    SearchHit,
    make_title,
)
from app.core.conversations.openlock import open_lock
from app.core.conversations.salvage import recover, recovery_notice
from app.core.conversations.schema import (
    CONV_SELECT,
    SQLITE_HEADER,
    NotOurs,
    SchemaTooNewError,
    connect,
    health_problem,
    is_damage,
    prepare,
    user_version,
)
from app.core.conversations.search import search as search_messages
from app.core.sampling.params import SamplerSettings
from app.core.settings import atomic_write_text

STREAM_INTERVAL_S = 1.0
# Seconds to wait for another Glassbox process to finish opening (or salvaging) the same file.
OPEN_LOCK_TIMEOUT_S = 60.0


class ConversationStore(MessagesMixin, AlternativesMixin):
    """All conversations in one SQLite file.

    Opening never fails on a damaged file: the file is set aside, what can be
    read is salvaged into a fresh one and :attr:`notice` says so. Use from one
    thread only (see :mod:`app.core.conversations`). Close it (or use ``with``) so the
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
        self._pending = {}
        self._last_stream_write = {}
        self._conn = self._open()

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
            del self._conn  # a second close finds nothing to do

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (every other method then raises AttributeError)."""
        return not hasattr(self, "_conn")

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
        # One process at a time checks, creates, migrates or salvages the file (see .openlock).
        with open_lock(self.path, OPEN_LOCK_TIMEOUT_S):
            return self._open_checked()

    def _open_checked(self) -> sqlite3.Connection:
        """Open the file under the open lock: an empty, damaged or old file is dealt with here."""
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
            conn = connect(self.path, self._busy_timeout)
            version = user_version(conn)
            known = len(schema.MIGRATIONS)
            if version > known:
                raise SchemaTooNewError(self.path, version, known)
            problem = health_problem(conn, version)
            if problem is None:
                self.fts_enabled = prepare(conn, self._want_fts)
                return conn
        except NotOurs as exc:
            problem = str(exc)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                if conn is not None:
                    conn.close()
                raise OSError(f"Glassbox cannot open its conversation history {self.path}: {exc}") from exc
            problem = str(exc)
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        if conn is not None:
            conn.close()
        return self._recover_or_raise(problem)

    def _recover_or_raise(self, problem: str) -> sqlite3.Connection:
        """Salvage the damaged file (see :mod:`.salvage`) and open the new one.

        Raises:
            OSError: the salvage failed; the message names the file and the problem.
        """
        try:
            self.recovery = recover(
                self.path,
                problem,
                busy_timeout=self._busy_timeout,
                want_fts=self._want_fts,
                now=self._now,
                clock=self._clock,
            )
            self.notice = recovery_notice(self.path, self.recovery)
            conn = connect(self.path, self._busy_timeout)
            try:
                self.fts_enabled = prepare(conn, self._want_fts)
            except BaseException:
                conn.close()
                raise
            return conn
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
        return not head or head == SQLITE_HEADER

    # ------------------------------------------------------------------ conversations

    def create_conversation(
        self,
        *,
        system_prompt: str = "",
        model_path: str = "",
        sampler: SamplerSettings | None = None,
        title: str | None = None,
        stop_strings: tuple[str, ...] = (),
        constraint: OutputConstraint | None = None,
    ) -> int:
        """Start an empty conversation.

        Args:
            system_prompt: system message for its replies.
            model_path: the model in use.
            sampler: sampler settings for its replies (defaults if None).
            title: a title; None = made from the first user message later.
            stop_strings: extra stop strings for its replies.
            constraint: the output constraint of its replies (None: none).

        Returns:
            The new conversation's id.
        """
        now = self._now()
        custom = bool(title and title.strip())
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO conversations (created_at, updated_at, title_custom, title, model_path, "
                "system_prompt, sampler_json, stop_strings_json, constraint_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    now,
                    now,
                    int(custom),
                    title.strip() if custom and title else DEFAULT_TITLE,
                    model_path,
                    system_prompt,
                    json.dumps((sampler or SamplerSettings()).to_dict()),
                    json.dumps(list(stop_strings)),
                    constraint_cell(constraint or OutputConstraint()),
                ),
            )
            return lastrowid(cur)

    def get_conversation(self, conv_id: int) -> Conversation:
        """The conversation with this id (deleted ones too).

        Raises:
            KeyError: no such conversation (or it was purged).
        """
        row = self._conn.execute(f"SELECT {CONV_SELECT} FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        if row is None:
            raise KeyError(f"no conversation with id {conv_id}")
        return conversation_from_row(row)

    def list_conversations(self, *, include_deleted: bool = False) -> list[Conversation]:
        """All conversations, most recently updated first (deleted ones only when asked)."""
        where = "" if include_deleted else "WHERE deleted_at IS NULL"
        rows = self._conn.execute(
            f"SELECT {CONV_SELECT} FROM conversations {where} ORDER BY updated_at DESC, id DESC"
        ).fetchall()
        return [conversation_from_row(r) for r in rows]

    def update_conversation(
        self,
        conv_id: int,
        *,
        system_prompt: str | None = None,
        model_path: str | None = None,
        sampler: SamplerSettings | None = None,
        stop_strings: tuple[str, ...] | None = None,
        constraint: OutputConstraint | None = None,
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
            ("stop_strings_json", json.dumps(list(stop_strings)) if stop_strings is not None else None),
            ("constraint_json", constraint_cell(constraint) if constraint is not None else None),
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

    def discard_if_empty(self, conv_id: int) -> bool:
        """Remove for good conversation ``conv_id`` if it has no messages (a chat whose only message
        was refused and taken out); no trash, no Undo: there is nothing in it to bring back.

        Returns:
            True when it was removed; False when it has messages (it is left as it is).

        Raises:
            KeyError: no such conversation.
        """
        self._require_conversation(conv_id)
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM messages WHERE conversation_id = ? LIMIT 1", (conv_id,)).fetchone():
                return False
            conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
        return True

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
    def chat_history(
        self, conv_id: int, *, before: int | None = None, tokens_of: str | None = None
    ) -> list[ChatMessage]:
        """What the model should see: the system prompt, then the active path.

        Args:
            conv_id: the conversation.
            before: stop before this message of the active path (the reply
                about to be generated); None = the whole path.
            tokens_of: a model's path: each reply written by that model (the same file name)
                carries the token ids it sampled (:meth:`sampled_tokens`), so the prompt holds
                them rather than the reply's text tokenized again; None: text only.

        Raises:
            KeyError: no such conversation.
        """
        conv = self.get_conversation(conv_id)
        out = [ChatMessage(Role.SYSTEM, conv.system_prompt)] if conv.system_prompt else []
        model = Path(tokens_of).name if tokens_of else None
        for m in self.active_path(conv_id):
            if m.id == before:
                break
            msg = m.to_chat()
            if model is not None and m.role is Role.ASSISTANT and Path(m.meta.model_path).name == model:
                msg = ChatMessage(msg.role, msg.content, self.sampled_tokens(m.id))
            out.append(msg)
        return out

    # ------------------------------------------------------------------ search

    def search(self, query: str, *, limit: int = 50, titles: bool = True) -> list[SearchHit]:
        """Find chats whose title holds every word (first; ``message_id`` None), then messages
        (all branches of all conversations not deleted) containing every word.

        Words match case-insensitively; with FTS5 each word also matches as a
        prefix (``photo`` finds ``photosynthesis``), best matches first;
        without FTS5 it is a substring match, newest conversations first.

        Args:
            query: words as the person typed them.
            limit: most hits returned.
            titles: look in chat titles too (False: messages only).

        Returns:
            Hits with a snippet around the match; empty for a blank query.
        """
        return search_messages(self._conn, query, limit=limit, use_fts=self.fts_enabled, titles=titles)

    # ------------------------------------------------------------------ export / import

    def to_markdown(self, conv_id: int) -> str:
        """The conversation as shown (the active path) in Markdown, with a stats line per reply.

        Raises:
            KeyError: no such conversation.
        """
        self.flush()
        return conversation_markdown(self.get_conversation(conv_id), self.active_path(conv_id))

    def to_export_dict(self, conv_id: int) -> dict[str, Any]:
        """The conversation with all branches as JSON-ready data (see :meth:`export_json`).

        Raises:
            KeyError: no such conversation.
        """
        self.flush()
        conv = self.get_conversation(conv_id)
        seqs = {
            int(mid): int(seq)
            for mid, seq in self._conn.execute(
                "SELECT id, selected_seq FROM messages WHERE conversation_id = ?", (conv_id,)
            )
        }
        msgs = self.messages(conv_id)
        alts = self.alternatives_of(m.id for m in msgs)
        return export_dict(conv, self._current_leaf(conv_id), msgs, seqs, self._clock(), alts)

    def export_markdown(self, conv_id: int, path: os.PathLike[str] | str) -> None:
        """Write :meth:`to_markdown` to ``path`` atomically.

        Raises:
            KeyError: no such conversation.
            OSError: the file cannot be written; the message names it.
        """
        atomic_write_text(Path(path), self.to_markdown(conv_id))

    def export_json(self, conv_id: int, path: os.PathLike[str] | str) -> None:
        """Write the conversation, all branches with settings and stats, to ``path`` atomically.

        Format: see :mod:`app.core.conversations.exchange`.

        Raises:
            KeyError: no such conversation.
            OSError: the file cannot be written; the message names it.
        """
        text = json.dumps(self.to_export_dict(conv_id), indent=2, ensure_ascii=False)
        atomic_write_text(Path(path), text + "\n")

    def import_json(self, path: os.PathLike[str] | str) -> int:
        """Add a conversation exported with :meth:`export_json`, as a new conversation.

        The file is checked completely before anything is written, and the
        import is one transaction: a bad file imports nothing. A title already
        in the list gets `` (imported)`` (then `` (imported 3)``...) added.

        Returns:
            The new conversation's id.

        Raises:
            OSError: the file cannot be read.
            ValueError: the file is not a valid Glassbox conversation export;
                the message names the file and the problem.
        """
        conv, msgs = read_export(Path(path))
        now = self._now()
        title = import_title(conv.title, {c.title for c in self.list_conversations()})
        with self._write() as conn:
            return insert_import(conn, conv, msgs, title, now)

    def fingerprints(self) -> set[tuple[str, int, int]]:
        """(title, start time in ms, messages) of every chat not deleted: how an import recognises
        a chat it brought in before (``ImportPreview.without``)."""
        rows = self._conn.execute(
            "SELECT c.title, c.created_at, count(m.id) FROM conversations c LEFT JOIN messages m "
            "ON m.conversation_id = c.id WHERE c.deleted_at IS NULL GROUP BY c.id"
        )
        return {(str(title), round(float(created) * 1000), int(n)) for title, created, n in rows}

    def import_chats(self, preview: ImportPreview) -> list[int]:
        """Add every chat of a checked import (:func:`~app.core.conversations.importers.read_import_files`)
        as new conversations, in one transaction: all of them or, on an error, none.

        Chats from other apps keep their source's titles and times; a Glassbox export's title
        already in the list gets `` (imported)`` as with :meth:`import_json`.

        Returns:
            The new conversations' ids, in the order of the files and of the chats in each.

        Raises:
            sqlite3.Error: the write failed (disk full...); nothing was written.
        """
        now = self._now()
        taken = {c.title for c in self.list_conversations()}
        ids: list[int] = []
        with self._write() as conn:
            for f in preview.files:
                for conv, msgs in f.exports:
                    title = import_title(conv.title, taken)
                    taken.add(title)
                    ids.append(insert_import(conn, conv, msgs, title, now))
                ids.extend(insert_foreign(conn, conv) for conv in f.conversations)
        return ids
