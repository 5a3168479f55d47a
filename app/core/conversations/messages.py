"""The message half of :class:`~app.core.conversations.ConversationStore`: the tree and streaming.

A conversation is a tree of messages (``parent_id``). Editing a message or
regenerating a reply adds a *sibling* (a new branch) and never deletes what
came after; the *active path* runs from the root to the conversation's
selected leaf. A streaming reply is written at most once per ``stream_interval``
(1 s) and at least once per second while updates keep coming, so killing the
app mid-reply loses at most the last second of that reply.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

from app.core.chat.context import GenerationStats, Role, StopReason
from app.core.conversations.base import StoreBase, descend, lastrowid, set_leaf
from app.core.conversations.model import DeletedMessages, Message, MessageMeta, Siblings, json_dict
from app.core.conversations.schema import MSG_COLS, MSG_SELECT


class MessagesMixin(StoreBase):
    """Add, branch, read, delete and stream messages (mixed into ConversationStore)."""

    _stream_interval: float

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
        if parent_id is not None and self._message_row(parent_id)[1] != conv_id:
            raise KeyError(f"message {parent_id} is not in conversation {conv_id}")
        now = self._now()
        with self._write() as conn:
            mid = self._insert_message(conn, conv_id, parent_id, role, content, meta or MessageMeta(), complete, now)
            set_leaf(conn, conv_id, mid)
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
        return lastrowid(cur)

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
        if row[3] != Role.ASSISTANT:
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
            set_leaf(conn, msg.conversation_id, mid)
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
            f"SELECT {MSG_SELECT} FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,)
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
            set_leaf(conn, conv_id, descend(conn, conv_id, message_id))
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
                SELECT {", ".join("m." + c for c in MSG_COLS)} FROM up JOIN messages m ON m.id = up.id
                ORDER BY up.depth DESC""",
            (leaf,),
        ).fetchall()
        return [self._message_from_row(r) for r in rows]

    def delete_message_undoable(self, message_id: int) -> DeletedMessages:
        """Delete like :meth:`delete_message`, and return what :meth:`restore_messages` needs to undo it.

        Raises:
            KeyError: no such message.
        """
        conv_id = self._message_row(message_id)[1]
        self.flush()  # a reply streamed into the subtree is kept as last shown
        leaf = self._conn.execute("SELECT current_leaf_id FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]
        rows = self._conn.execute(
            f"""WITH RECURSIVE down(id, depth) AS (
                   SELECT ?, 0 UNION ALL
                   SELECT m.id, down.depth + 1 FROM messages m JOIN down ON m.parent_id = down.id)
               SELECT {", ".join("m." + c for c in MSG_COLS)} FROM down JOIN messages m ON m.id = down.id
               ORDER BY down.depth, m.id""",
            (message_id,),
        ).fetchall()
        ids = [r[0] for r in rows]
        alts = [
            (int(mid), bytes(data))
            for mid, data in self._conn.execute(
                f"SELECT message_id, data FROM message_alternatives WHERE message_id IN ({', '.join('?' * len(ids))})",
                ids,
            )
        ]
        self.delete_message(message_id)
        return DeletedMessages(conv_id, leaf, tuple(tuple(r) for r in rows), tuple(alts))

    def restore_messages(self, deleted: DeletedMessages) -> None:
        """Put back messages taken out by :meth:`delete_message_undoable`, with their ids, and
        select the leaf that was selected before the delete.

        Raises:
            KeyError: the conversation is gone (purged), or the deleted messages' parent is.
            sqlite3.IntegrityError: the messages are already back.
        """
        self._require_conversation(deleted.conversation_id)
        if deleted.rows:
            parent = deleted.rows[0][2]
            if parent is not None:
                self._message_row(parent)  # KeyError when the parent was deleted since
        cols = ", ".join(MSG_COLS)
        marks = ", ".join("?" for _ in MSG_COLS)
        with self._write() as conn:
            conn.executemany(f"INSERT INTO messages ({cols}) VALUES ({marks})", deleted.rows)
            conn.executemany(
                "INSERT OR REPLACE INTO message_alternatives (message_id, data) VALUES (?, ?)",
                [(mid, sqlite3.Binary(data)) for mid, data in deleted.alternatives],
            )
            if deleted.leaf_id is not None:
                set_leaf(conn, deleted.conversation_id, deleted.leaf_id)
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (self._now(), deleted.conversation_id))

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
                set_leaf(conn, conv_id, descend(conn, conv_id, parent))
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (self._now(), conv_id))
        for i in subtree:
            self._last_stream_write.pop(i, None)
        return len(subtree)

    def merge_with_parent(self, message_id: int) -> int:
        """Append a message's text to its parent of the same role, and take it out of the tree.

        Repairs two messages in a row with the same role (see :mod:`.turns`): the parent's
        text becomes ``parent + "\n\n" + message``, the message's replies and branches
        move under the parent, and the message is deleted. No text is lost. When the
        selected branch ended at the message, it ends at the parent.

        Returns:
            The parent's id (the merged message).

        Raises:
            KeyError: no such message.
            ValueError: the message has no parent, or its parent has another role.
        """
        row = self._message_row(message_id)
        msg = self._message_from_row(row)
        if msg.parent_id is None:
            raise ValueError(f"message {message_id} is the first of its conversation; there is nothing to merge into")
        parent = self._message_from_row(self._message_row(msg.parent_id))
        if parent.role is not msg.role:
            raise ValueError(
                f"message {message_id} is a {msg.role.value} message and follows a {parent.role.value} one"
            )
        now = self._now()
        merged = "\n\n".join(t for t in (parent.content.rstrip(), msg.content.lstrip()) if t)
        with self._write() as conn:
            self._store_content(conn, parent.id, merged, now)
            conn.execute("UPDATE messages SET parent_id = ? WHERE parent_id = ?", (parent.id, message_id))
            self._take_out(conn, msg.conversation_id, message_id, parent.id)
            if parent.parent_id is None and parent.role is Role.USER:
                self._retitle_if_auto(conn, msg.conversation_id, merged)
        self._pending.pop(parent.id, None)
        return parent.id

    def delete_keeping_replies(self, message_id: int) -> None:
        """Delete one message; its replies and branches move up to its parent (unlike
        :meth:`delete_message`, which deletes the whole subtree).

        Repairs two messages in a row with the same role by deleting the earlier one
        (see :mod:`.turns`). When the selected branch ended at the message, it ends at
        its parent.

        Raises:
            KeyError: no such message.
        """
        row = self._message_row(message_id)
        conv_id, parent = row[1], row[2]
        with self._write() as conn:
            conn.execute("UPDATE messages SET parent_id = ? WHERE parent_id = ?", (parent, message_id))
            self._take_out(conn, conv_id, message_id, parent)
            if parent is None:
                first = descend(conn, conv_id, None)
                path = self._path_to(conn, first)
                if path and path[0][1] is Role.USER:
                    self._retitle_if_auto(conn, conv_id, path[0][2])

    def _take_out(self, conn: sqlite3.Connection, conv_id: int, message_id: int, new_parent: int | None) -> None:
        """Delete one message whose children were already moved to ``new_parent``; keep the selection valid."""
        leaf = conn.execute("SELECT current_leaf_id FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]
        conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
        if leaf is None or leaf == message_id:
            set_leaf(conn, conv_id, descend(conn, conv_id, new_parent))
        conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (self._now(), conv_id))
        self._pending.pop(message_id, None)
        self._last_stream_write.pop(message_id, None)

    @staticmethod
    def _path_to(conn: sqlite3.Connection, leaf: int | None) -> list[tuple[int, Role, str]]:
        """(id, role, text) from the root down to ``leaf`` (empty for None)."""
        out: list[tuple[int, Role, str]] = []
        node = leaf
        while node is not None:
            row = conn.execute("SELECT id, parent_id, role, content FROM messages WHERE id = ?", (node,)).fetchone()
            if row is None:
                break
            out.append((int(row[0]), Role.parse(row[2]), str(row[3])))
            node = row[1]
        return out[::-1]

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
        with self._streaming_sync(), self._write() as conn:
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
            with self._streaming_sync(), self._write():
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
            content = str(row[0]) + text
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
        final = content if content is not None else self._pending.get(message_id, str(row[7]))
        self._pending.pop(message_id, None)
        new_meta = meta if meta is not None else MessageMeta.from_dict(json_dict(row[8]))
        if stats is not None:
            new_meta = replace(new_meta, stats=stats, seed=new_meta.seed if new_meta.seed is not None else stats.seed)
        if complete is None:
            complete = stats is None or stats.stop_reason in (StopReason.EOS, StopReason.STOP_STRING)
        with self._write() as conn:
            self._store_content(conn, message_id, final, self._now())
            conn.execute(
                "UPDATE messages SET complete = ?, meta_json = ? WHERE id = ?",
                (int(complete), json.dumps(new_meta.to_dict()), message_id),
            )
        self._last_stream_write.pop(message_id, None)
        return self.get_message(message_id)

    # ------------------------------------------------------------------ search
