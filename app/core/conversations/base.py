"""What every part of :class:`~app.core.conversations.ConversationStore` shares.

:class:`StoreBase` holds the store's state (the connection, the clocks, streamed
text not yet written) and the helpers its parts use: the write transaction,
row → value conversion, lookups that raise ``KeyError``. :func:`descend` and
:func:`set_leaf` walk and select branches of the message tree; salvage and
import use them on connections of their own.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core.chat.chat_settings import clean_stop_strings
from app.core.chat.context import Role
from app.core.constraint.model import OutputConstraint
from app.core.constraint.stored import constraint_from_dict, constraint_to_dict
from app.core.conversations.model import Conversation, Message, MessageMeta, json_dict, make_title
from app.core.conversations.schema import MSG_SELECT
from app.core.sampling.params import SamplerSettings

# A row as sqlite3 returns it: column values in SELECT order.
Row = Sequence[Any]


def descend(conn: sqlite3.Connection, conv_id: int, start: int | None) -> int | None:
    """From ``start`` (None = the conversation's roots) follow the most recently selected child.

    Returns:
        The leaf reached (message id); ``start`` itself when it has no children
        (None for an empty conversation).
    """
    node = start
    while True:
        row = conn.execute(
            "SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? "
            "ORDER BY selected_seq DESC, id DESC LIMIT 1",
            (conv_id, node),
        ).fetchone()
        if row is None:
            return node
        node = int(row[0])


def set_leaf(conn: sqlite3.Connection, conv_id: int, leaf: int | None) -> None:
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


def lastrowid(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just added.

    Raises:
        sqlite3.DatabaseError: the cursor reports none (the statement was not an INSERT).
    """
    if cur.lastrowid is None:
        raise sqlite3.DatabaseError("INSERT reported no row id")
    return cur.lastrowid


def conversation_from_row(row: Row) -> Conversation:
    """A :class:`Conversation` from a row selected with ``CONV_SELECT``."""
    cid, created, updated, deleted, custom, leaf, title, model, system, sampler, stops, constraint = row
    return Conversation(
        id=cid,
        title=title,
        title_is_custom=bool(custom),
        created_at=created,
        updated_at=updated,
        deleted_at=deleted,
        system_prompt=system,
        model_path=model,
        sampler=SamplerSettings.from_dict(json_dict(sampler)),
        current_leaf_id=leaf,
        stop_strings=stop_strings_from_cell(stops),
        constraint=constraint_from_cell(constraint),
    )


def constraint_cell(c: OutputConstraint) -> str:
    """A chat's output constraint as its stored JSON (:mod:`app.core.constraint.stored`)."""
    return json.dumps(constraint_to_dict(c))


def constraint_from_cell(raw: object) -> OutputConstraint:
    """A chat's output constraint from its stored JSON (anything unreadable: none)."""
    try:
        return constraint_from_dict(json.loads(raw) if isinstance(raw, (str, bytes)) else None)
    except ValueError:
        return OutputConstraint()


def stop_strings_from_cell(raw: object) -> tuple[str, ...]:
    """A chat's stop strings from their stored JSON list (anything else reads as none)."""
    try:
        data = json.loads(raw) if isinstance(raw, (str, bytes)) else None
    except ValueError:
        return ()
    return clean_stop_strings(data)


class StoreBase:
    """The store's state and shared helpers (see the module docstring).

    Attributes:
        path: the database file.
    """

    path: Path
    _conn: sqlite3.Connection
    _clock: Callable[[], float]
    _monotonic: Callable[[], float]
    _last_now: float
    # Streamed text given to the store but not yet written: message id → whole text.
    _pending: dict[int, str]
    # Monotonic time (seconds) of each streaming message's last write.
    _last_stream_write: dict[int, float]

    def _now(self) -> float:
        """Wall-clock seconds, strictly increasing within this store (keeps list order stable)."""
        now = max(self._clock(), self._last_now + 1e-6)
        self._last_now = now
        return now

    @contextmanager
    def _streaming_sync(self) -> Iterator[None]:
        """A streaming reply's periodic write commits without an fsync (``synchronous=NORMAL``).

        In WAL mode that is still atomic and never corrupts the file; what an OS crash or a
        power cut may lose is the last second or so of a reply being written, which the next
        write with ``synchronous=FULL`` (the reply's end, any other change) makes durable. An
        app crash loses nothing: the write has reached the OS. The fsync took 15-120 ms on
        the UI thread on a busy disk, once a second, mid-stream (bench/stream_render.py).
        """
        self._conn.execute("PRAGMA synchronous=NORMAL")
        try:
            yield
        finally:
            self._conn.execute("PRAGMA synchronous=FULL")

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
        """Set a message's text and touch its conversation; False when there is no such message."""
        cur = conn.execute("UPDATE messages SET content = ? WHERE id = ?", (content, message_id))
        if cur.rowcount:
            conn.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = "
                "(SELECT conversation_id FROM messages WHERE id = ?)",
                (now, message_id),
            )
        return cur.rowcount > 0

    def _message_from_row(self, row: Row) -> Message:
        """A :class:`Message` from a row selected with ``MSG_SELECT`` (pending streamed text wins)."""
        mid, conv, parent, role, created, complete, _seq, content, meta = row
        return Message(
            id=mid,
            conversation_id=conv,
            parent_id=parent,
            role=Role.parse(role),
            content=self._pending.get(mid, str(content)),
            created_at=created,
            complete=bool(complete),
            meta=MessageMeta.from_dict(json_dict(meta)),
        )

    def _message_row(self, message_id: int) -> Row:
        """The message's row (``MSG_SELECT`` columns).

        Raises:
            KeyError: no such message.
        """
        row: Row | None = self._conn.execute(
            f"SELECT {MSG_SELECT} FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise KeyError(f"no message with id {message_id}")
        return row

    def _require_conversation(self, conv_id: int) -> None:
        """Raises KeyError when there is no conversation with this id."""
        if self._conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone() is None:
            raise KeyError(f"no conversation with id {conv_id}")

    def _current_leaf(self, conv_id: int) -> int | None:
        """The selected leaf; when the stored one is gone, the leaf reached by :func:`descend`.

        Raises:
            KeyError: no such conversation.
        """
        row = self._conn.execute("SELECT current_leaf_id FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        if row is None:
            raise KeyError(f"no conversation with id {conv_id}")
        leaf: int | None = row[0]
        if (
            leaf is not None
            and self._conn.execute(
                "SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?", (leaf, conv_id)
            ).fetchone()
        ):
            return leaf
        return descend(self._conn, conv_id, None)

    @staticmethod
    def _retitle_if_auto(conn: sqlite3.Connection, conv_id: int, first_user_text: str) -> None:
        """Re-make the title from the first user message unless the person renamed the conversation."""
        conn.execute(
            "UPDATE conversations SET title = ? WHERE id = ? AND title_custom = 0",
            (make_title(first_user_text), conv_id),
        )
