"""Salvage a damaged history: set the file aside and recover what is readable.

A damaged file (not a database, cut off, pages failing ``quick_check``) is read
table by table and row by row (:class:`_Salvage`) into a fresh database built
beside it; only when that is complete is the damaged file moved aside as
``conversations.sqlite3.damaged-<time>`` (with its ``-wal``/``-shm``) and the new
one put in its place. :func:`recovery_notice` says in words what happened.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.core.chat.context import Role
from app.core.conversations.base import descend, stop_strings_from_cell
from app.core.conversations.model import DEFAULT_TITLE, RecoveryReport, as_float, as_int, as_text, json_dict
from app.core.conversations.schema import CONV_COLS, MSG_COLS, connect, prepare

UNREADABLE_TEXT = "[Glassbox could not recover the text of this message from the damaged history file]"

# Rowids probed past the last readable one when the end of a damaged table is unknown.
_SALVAGE_SLACK = 2000
# Most row ids probed one by one inside a damaged table.
_SALVAGE_MAX_GAP = 1_000_000

# A row read from the damaged file: column name → value, plus "_text_lost"/"_placeholder" flags.
_RawRow = dict[str, Any]


def recover(
    path: Path,
    problem: str,
    *,
    busy_timeout: float,
    want_fts: bool,
    now: Callable[[], float],
    clock: Callable[[], float],
) -> RecoveryReport:
    """Salvage the damaged file at ``path`` into a fresh one there; set the damaged one aside.

    Args:
        path: the history file.
        problem: what is wrong with it (SQLite's words), kept in the report.
        busy_timeout: seconds to wait for a write lock.
        want_fts: build the full-text index in the new file when SQLite has FTS5.
        now: the store's strictly increasing clock (seconds since the epoch), for
            rows whose times were lost.
        clock: wall clock, for the ``damaged-<time>`` name.

    Returns:
        What was recovered and where the damaged file went.

    Raises:
        OSError, sqlite3.Error: the new file could not be built or the damaged
            one could not be moved; everything is then left as it was.
    """
    salvage = _Salvage()
    with tempfile.TemporaryDirectory(prefix="glassbox-salvage-") as tmp:
        scratch = Path(tmp) / "damaged.sqlite3"
        try:
            shutil.copyfile(path, scratch)
            wal = Path(f"{path}-wal")
            if wal.exists():
                shutil.copyfile(wal, f"{scratch}-wal")
        except OSError as exc:
            salvage.errors.append(f"could not copy it to read it: {exc}")
        else:
            salvage.read(scratch)

    # Build the new history beside the damaged one; the damaged one stays in
    # place until the new one is complete.
    building = path.with_name(path.name + ".recovering")
    for p in _with_sidecars(building):
        p.unlink(missing_ok=True)
    conn = connect(building, busy_timeout)
    try:
        prepare(conn, want_fts)
        conn.execute("BEGIN IMMEDIATE")
        try:
            report = salvage.write(conn, now())
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()

    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while any(p.exists() for p in _with_sidecars(aside)):
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        n += 1
    # Sidecars first: a stale -wal must never be left beside the new file.
    moves = [
        (src, dst)
        for src, dst in zip(_with_sidecars(path)[::-1], _with_sidecars(aside)[::-1], strict=True)
        if src.exists()
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
    os.replace(building, path)
    return replace(report, problem=problem, damaged_path=aside, errors=tuple(salvage.errors))


def _with_sidecars(path: Path) -> list[Path]:
    """The database file and its ``-wal`` and ``-shm`` companions."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


def recovery_notice(path: Path, r: RecoveryReport) -> str:
    """The sentence shown to the person after a salvage (``ConversationStore.notice``)."""
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
        self.conversations: dict[int, _RawRow] = {}
        self.messages: dict[int, _RawRow] = {}
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
                for r in self._read_table(conn, "conversations", CONV_COLS, None, hint_max=0)
                if _plausible(r, ("created_at",))
            ]
            self.conversations = {r["id"]: r for r in conv_rows}
            leaves = (as_int(r.get("current_leaf_id")) or 0 for r in conv_rows)
            msg_rows = self._read_table(
                conn, "messages", MSG_COLS, ("content", "meta_json"), hint_max=max(leaves, default=0)
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
    ) -> list[_RawRow]:
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
        rows: dict[int, _RawRow] = {}

        def scan(order: str) -> bool:
            try:
                for r in conn.execute(f"SELECT {select} FROM {table} ORDER BY id {order}"):
                    rows[r[0]] = dict(zip(cols, r, strict=True))
                return True
            except sqlite3.DatabaseError:
                return False

        forward_ok = scan("ASC")
        if forward_ok:
            return self._without_zeros(rows, droppable)
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
                        rows[rid] = {**dict(zip(small, part, strict=True)), "_text_lost": True}
                        self.text_lost += 1
                        continue
                if rid <= known:
                    self.unreadable += 1
                continue
            if r is not None:
                rows[rid] = dict(zip(cols, r, strict=True))
        return self._without_zeros(rows, droppable)

    def _without_zeros(self, rows: dict[int, _RawRow], droppable: Sequence[str] | None) -> list[_RawRow]:
        """The rows, with a droppable text that reads back zero-filled (see :func:`_zero_filled`)
        dropped: a lost message text is marked ``_text_lost`` (shown as ``UNREADABLE_TEXT``)."""
        for row in rows.values():
            for c in droppable or ():
                if _zero_filled(row.get(c)):
                    del row[c]
                    if c == "content" and not row.get("_text_lost"):
                        row["_text_lost"] = True
                        self.text_lost += 1
        return list(rows.values())

    def write(self, conn: sqlite3.Connection, now: float) -> RecoveryReport:
        """Insert the salvaged rows (ids kept), repairing links that point at lost rows."""
        placeholders = detached = 0
        convs: dict[int, _RawRow] = {}
        for raw in self.conversations.values():
            cid = as_int(raw.get("id"))
            if cid is None:
                continue
            convs[cid] = raw
        msgs: dict[int, _RawRow] = {}
        for raw in sorted(self.messages.values(), key=lambda r: as_int(r.get("id")) or 0):
            mid = as_int(raw.get("id"))
            if mid is None:
                continue
            msgs[mid] = raw
        for raw in msgs.values():
            cid = as_int(raw.get("conversation_id"))
            if cid is None:
                cid = 0  # lost its conversation link: group such messages in one placeholder
                raw["conversation_id"] = 0
            if cid not in convs:
                convs[cid] = {"id": cid, "_placeholder": True}
                placeholders += 1
        for cid, raw in convs.items():
            created = as_float(raw.get("created_at"), now)
            sampler = json_dict(raw.get("sampler_json"))
            stops = stop_strings_from_cell(raw.get("stop_strings_json"))
            custom = bool(as_int(raw.get("title_custom")))
            title = raw.get("title") if isinstance(raw.get("title"), str) else ""
            if raw.get("_placeholder"):
                title, custom = "Recovered conversation", True
            conn.execute(
                "INSERT INTO conversations (id, created_at, updated_at, deleted_at, title_custom, title, model_path, "
                "system_prompt, sampler_json, stop_strings_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    cid,
                    created,
                    as_float(raw.get("updated_at"), created),
                    as_float(raw.get("deleted_at"), None),
                    int(custom),
                    title or DEFAULT_TITLE,
                    as_text(raw.get("model_path")),
                    as_text(raw.get("system_prompt")),
                    json.dumps(sampler),
                    json.dumps(list(stops)),
                ),
            )
        for mid, raw in msgs.items():
            cid = as_int(raw.get("conversation_id"))
            parent = as_int(raw.get("parent_id"))
            if parent is not None and (
                parent not in msgs or parent >= mid or as_int(msgs[parent].get("conversation_id")) != cid
            ):
                parent = None
                detached += 1
            role = Role.parse(raw.get("role")).value
            text_lost = raw.get("_text_lost", False)
            content = UNREADABLE_TEXT if text_lost else as_text(raw.get("content"))
            conn.execute(
                "INSERT INTO messages (id, conversation_id, parent_id, role, created_at, complete, selected_seq, "
                "content, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    mid,
                    cid,
                    parent,
                    role,
                    as_float(raw.get("created_at"), now),
                    0 if text_lost else int(bool(as_int(raw.get("complete")))),
                    as_int(raw.get("selected_seq")) or 0,
                    content,
                    json.dumps(json_dict(raw.get("meta_json"))),
                ),
            )
        for cid, raw in convs.items():
            leaf = as_int(raw.get("current_leaf_id"))
            if leaf is None or leaf not in msgs or as_int(msgs[leaf].get("conversation_id")) != cid:
                leaf = descend(conn, cid, None)
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


def _zero_filled(value: object) -> bool:
    """Whether a text read from the damaged file holds NUL characters: a long text whose overflow
    pages lay past the end of a cut-off file reads back padded with zeros (SQLite zero-fills a short
    read), which Glassbox never writes. Such a text is cut, not recovered."""
    return isinstance(value, str) and "\x00" in value


def _plausible(row: _RawRow, not_null: Sequence[str]) -> bool:
    """False for rows Glassbox cannot have written (a zeroed cell decodes as id 0 with NULLs).

    Ids start at 1 and these columns are NOT NULL, so such rows are noise, not lost data.
    """
    rid = as_int(row.get("id"))
    return rid is not None and rid >= 1 and all(row.get(c) is not None for c in not_null)
