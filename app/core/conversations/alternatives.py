"""The alternatives half of :class:`~app.core.conversations.ConversationStore`: every generated
token's top-N candidates, kept next to the reply.

One row per reply in the ``message_alternatives`` side table (schema version 2): the message id
and :meth:`~app.core.sampling.alternatives.ReplyAlternatives.to_bytes` (a compressed binary cell, not JSON
per token). A deleted message takes its row with it (a trigger); an undoable delete keeps the rows
it takes in :attr:`~app.core.conversations.DeletedMessages.alternatives` and its undo puts them back.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable

from app.core.conversations.base import StoreBase
from app.core.sampling.alternatives import ReplyAlternatives


class AlternativesMixin(StoreBase):
    """Keep and read each reply's :class:`ReplyAlternatives` (mixed into ConversationStore)."""

    def set_alternatives(self, message_id: int, alternatives: ReplyAlternatives | None, *, durable: bool = True) -> int:
        """Keep ``alternatives`` with message ``message_id`` (None removes what was kept).

        ``durable=False``: commit without an fsync (``synchronous=NORMAL``, atomic in WAL mode),
        for a caller whose next write (a reply's :meth:`finish_message`) makes it durable anyway.

        Returns:
            Bytes stored (0 when removed).

        Raises:
            KeyError: no such message.
        """
        self._message_row(message_id)
        with contextlib.ExitStack() as stack:
            if not durable:
                stack.enter_context(self._streaming_sync())
            conn = stack.enter_context(self._write())
            if alternatives is None:
                conn.execute("DELETE FROM message_alternatives WHERE message_id = ?", (message_id,))
                return 0
            data = alternatives.to_bytes()
            conn.execute(
                "INSERT OR REPLACE INTO message_alternatives (message_id, data) VALUES (?, ?)",
                (message_id, sqlite3.Binary(data)),
            )
        return len(data)

    def alternatives(self, message_id: int) -> ReplyAlternatives | None:
        """The alternatives kept with message ``message_id``; None when none were (or they are damaged)."""
        data = self.alternatives_data(message_id)
        if data is None:
            return None
        try:
            return ReplyAlternatives.from_bytes(data)
        except ValueError:
            return None

    def sampled_tokens(self, message_id: int) -> tuple[int, ...]:
        """The token ids the model sampled for reply ``message_id`` (its kept alternatives' drawn
        tokens, a continued reply's parts joined); empty when none were kept (or they are damaged)."""
        data = self.alternatives_data(message_id)
        if data is None:
            return ()
        try:
            return ReplyAlternatives.tokens_from_bytes(data)
        except ValueError:
            return ()

    def has_alternatives(self, message_id: int) -> bool:
        """Whether message ``message_id`` kept its alternatives (reads no data)."""
        row = self._conn.execute("SELECT 1 FROM message_alternatives WHERE message_id = ?", (message_id,)).fetchone()
        return row is not None

    def alternatives_data(self, message_id: int) -> bytes | None:
        """The stored bytes of message ``message_id``'s alternatives (None: none kept)."""
        row = self._conn.execute("SELECT data FROM message_alternatives WHERE message_id = ?", (message_id,)).fetchone()
        return bytes(row[0]) if row is not None else None

    def alternatives_of(self, message_ids: Iterable[int]) -> dict[int, bytes]:
        """The stored bytes of every message of ``message_ids`` that has alternatives."""
        out: dict[int, bytes] = {}
        for mid in message_ids:
            data = self.alternatives_data(mid)
            if data is not None:
                out[mid] = data
        return out
