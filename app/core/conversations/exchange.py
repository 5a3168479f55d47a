"""Export a conversation (Markdown, JSON) and import a JSON export back.

Markdown shows the active path with a stats line per reply. JSON keeps every
branch with its settings and stats::

    {"format": "glassbox.conversation", "version": 1, "exported_at": <s>,
     "conversation": {title, title_is_custom, created_at, updated_at, system_prompt,
                      model_path, sampler, stop_strings?, constraint?, current_leaf_id},
     "messages": [{id, parent_id, role, content, created_at, complete, selected_seq, meta,
                   alternatives?}]}

Times are seconds since the epoch; parents come before their children. ``alternatives``
(a reply's kept top-N per token, :mod:`app.core.sampling.alternatives`) is the stored binary form in
base64, present only on replies that kept them; ``stop_strings`` (the chat's extra stop
strings, a list of text) reads as none when absent, as does ``constraint`` (the chat's output
format, ``{"kind", "text"}``: :mod:`app.core.constraint.stored`; written only when there is one). A Glassbox that does not know a key ignores
it, so the format version stays 1. An import is checked completely (:func:`read_export`)
before anything is written.
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.chat.chat_settings import clean_stop_strings, typed_stop_string
from app.core.chat.context import Role
from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.constraint.stored import constraint_from_dict, constraint_to_dict
from app.core.conversations.base import descend, lastrowid
from app.core.conversations.model import DEFAULT_TITLE, Conversation, Message, MessageMeta, as_float, as_int
from app.core.sampling.alternatives import ReplyAlternatives
from app.core.sampling.params import SamplerSettings

EXPORT_FORMAT = "glassbox.conversation"
EXPORT_VERSION = 1


@dataclass(frozen=True)
class ImportedConversation:
    """The conversation fields of a checked export (title already whitespace-collapsed, never blank)."""

    title: str
    title_is_custom: bool
    created_at: float
    system_prompt: str
    model_path: str
    sampler: SamplerSettings
    current_leaf_id: int | None
    stop_strings: tuple[str, ...] = ()
    constraint: OutputConstraint = field(default_factory=OutputConstraint)


@dataclass(frozen=True)
class ImportedMessage:
    """One message of a checked export; ``id``/``parent_id`` are the file's ids, not the store's."""

    id: int
    parent_id: int | None
    role: Role
    content: str
    created_at: float
    complete: bool
    selected_seq: int
    meta: MessageMeta
    alternatives: bytes | None = None


# --------------------------------------------------------------------------- export


def conversation_markdown(conv: Conversation, path: list[Message]) -> str:
    """The conversation as shown (``path``: the active path, root first) in Markdown."""
    lines = [f"# {conv.title}", ""]
    info = [time.strftime("%Y-%m-%d %H:%M", time.localtime(conv.created_at))]
    if conv.model_path:
        info.append(f"model `{Path(conv.model_path).name}`")
    lines += ["*Glassbox conversation · " + " · ".join(info) + "*", ""]
    if conv.system_prompt:
        lines += ["**System prompt:**", "", _quote(conv.system_prompt), ""]
    if conv.stop_strings:
        lines += ["*" + stop_strings_line(conv.stop_strings) + "*", ""]
    names = {Role.USER: "You", Role.ASSISTANT: "Assistant", Role.SYSTEM: "System"}
    for m in path:
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


def export_dict(
    conv: Conversation,
    current_leaf_id: int | None,
    messages: list[Message],
    selected_seq: dict[int, int],
    exported_at: float,
    alternatives: dict[int, bytes] | None = None,
) -> dict[str, Any]:
    """The JSON-ready export (shape in the module docstring).

    Args:
        conv: the conversation.
        current_leaf_id: its selected leaf (message id) or None.
        messages: all its messages, parents before children.
        selected_seq: message id → when it was last on the selected path.
        exported_at: seconds since the epoch.
        alternatives: message id → its kept alternatives' stored bytes.
    """
    alts = alternatives or {}
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": exported_at,
        "conversation": {
            "title": conv.title,
            "title_is_custom": conv.title_is_custom,
            "created_at": conv.created_at,
            "updated_at": conv.updated_at,
            "system_prompt": conv.system_prompt,
            "model_path": conv.model_path,
            "sampler": conv.sampler.to_dict(),
            "stop_strings": list(conv.stop_strings),
            **(
                {"constraint": constraint_to_dict(conv.constraint)}
                if conv.constraint.kind != ConstraintKind.NONE
                else {}
            ),
            "current_leaf_id": current_leaf_id,
        },
        "messages": [
            {
                "id": m.id,
                "parent_id": m.parent_id,
                "role": m.role.value,
                "content": m.content,
                "created_at": m.created_at,
                "complete": m.complete,
                "selected_seq": selected_seq.get(m.id, 0),
                "meta": m.meta.to_dict(),
                **({"alternatives": base64.b64encode(alts[m.id]).decode("ascii")} if m.id in alts else {}),
            }
            for m in messages
        ],
    }


def stop_strings_line(stops: tuple[str, ...]) -> str:
    """``stop strings `END`, `\\n\\n``` (each as typed in the Sampler panel)."""
    return "stop strings " + ", ".join(f"`{typed_stop_string(s)}`" for s in stops)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines() or [""])


# --------------------------------------------------------------------------- import


def read_export(path: Path) -> tuple[ImportedConversation, list[ImportedMessage]]:
    """Read and check a JSON export completely.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not a valid Glassbox conversation export;
            the message names the file and the problem.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: cannot import: the file is not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: cannot import: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    try:
        return validate_export(data)
    except ValueError as exc:
        raise ValueError(f"{path}: cannot import: {exc}") from exc


def import_title(title: str, taken: Collection[str]) -> str:
    """``title``, or ``title (imported)``, ``title (imported 3)``... when a conversation already has it."""
    if title not in taken:
        return title
    n = 2
    while f"{title} (imported {n})" in taken:
        n += 1
    return f"{title} (imported{'' if n == 2 and f'{title} (imported)' not in taken else f' {n}'})"


def insert_import(
    conn: sqlite3.Connection,
    conv: ImportedConversation,
    msgs: list[ImportedMessage],
    title: str,
    now: float,
) -> int:
    """Insert a checked export as a new conversation (inside the caller's transaction).

    Args:
        conn: the history, in a write transaction.
        conv, msgs: from :func:`read_export`.
        title: the title to use (see :func:`import_title`); a title that differs
            from the export's counts as custom.
        now: ``updated_at`` of the new conversation, seconds since the epoch.

    Returns:
        The new conversation's id.
    """
    cur = conn.execute(
        "INSERT INTO conversations (created_at, updated_at, title_custom, title, model_path, system_prompt, "
        "sampler_json, stop_strings_json, constraint_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            conv.created_at,
            now,
            int(conv.title_is_custom or title != conv.title),
            title,
            conv.model_path,
            conv.system_prompt,
            json.dumps(conv.sampler.to_dict()),
            json.dumps(list(conv.stop_strings)),
            json.dumps(constraint_to_dict(conv.constraint)),
        ),
    )
    cid = lastrowid(cur)
    new_ids: dict[int, int] = {}
    for m in msgs:
        cur = conn.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, created_at, complete, selected_seq, "
            "content, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cid,
                new_ids[m.parent_id] if m.parent_id is not None else None,
                m.role.value,
                m.created_at,
                int(m.complete),
                m.selected_seq,
                m.content,
                json.dumps(m.meta.to_dict()),
            ),
        )
        new_ids[m.id] = lastrowid(cur)
        if m.alternatives is not None:
            conn.execute(
                "INSERT INTO message_alternatives (message_id, data) VALUES (?, ?)",
                (new_ids[m.id], sqlite3.Binary(m.alternatives)),
            )
    leaf = new_ids.get(conv.current_leaf_id) if conv.current_leaf_id is not None else None
    if leaf is None:
        leaf = descend(conn, cid, None)
    conn.execute("UPDATE conversations SET current_leaf_id = ? WHERE id = ?", (leaf, cid))
    return cid


def validate_export(data: object) -> tuple[ImportedConversation, list[ImportedMessage]]:
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
    text: dict[str, str] = {}
    for key in ("title", "system_prompt", "model_path"):
        v = c.get(key, "")
        if not isinstance(v, str):
            raise ValueError(f"conversation.{key} is not text")
        text[key] = v
    created_at = as_float(c.get("created_at"), None)
    if created_at is None:
        raise ValueError("conversation.created_at is not a number (seconds since the epoch)")
    sampler = c.get("sampler")
    if sampler is not None and not isinstance(sampler, dict):
        raise ValueError("conversation.sampler is not an object")
    stops = c.get("stop_strings", [])
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise ValueError("conversation.stop_strings is not a list of text")
    constraint = c.get("constraint")
    if constraint is not None and not isinstance(constraint, dict):
        raise ValueError('conversation.constraint is not an object ({"kind", "text"})')
    leaf = c.get("current_leaf_id")
    if leaf is not None and as_int(leaf) is None:
        raise ValueError("conversation.current_leaf_id is not a message id")
    conv = ImportedConversation(
        title=" ".join(text["title"].split()) or DEFAULT_TITLE,
        title_is_custom=c.get("title_is_custom") is True,
        created_at=created_at,
        system_prompt=text["system_prompt"],
        model_path=text["model_path"],
        sampler=SamplerSettings.from_dict(sampler),
        current_leaf_id=as_int(leaf),
        stop_strings=clean_stop_strings(stops),
        constraint=constraint_from_dict(constraint),
    )

    raw_msgs = data.get("messages")
    if not isinstance(raw_msgs, list):
        raise ValueError('"messages" is missing or not a list')
    roles = {r.value for r in Role}
    seen: set[int] = set()
    msgs: list[ImportedMessage] = []
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
        created = as_float(m.get("created_at"), None)
        if created is None:
            raise ValueError(f"{where}.created_at is not a number (seconds since the epoch)")
        seq = m.get("selected_seq", 0)
        alts = _alternatives(m.get("alternatives"), where)
        seen.add(mid)
        msgs.append(
            ImportedMessage(
                id=mid,
                parent_id=parent,
                role=Role(role),
                content=content,
                created_at=created,
                complete=m.get("complete", True) is not False,
                selected_seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else 0,
                meta=MessageMeta.from_dict(meta),
                alternatives=alts,
            )
        )
    if conv.current_leaf_id is not None and conv.current_leaf_id not in seen:
        raise ValueError(f"conversation.current_leaf_id {conv.current_leaf_id} is not a message in the file")
    return conv, msgs


def _alternatives(value: object, where: str) -> bytes | None:
    """A message's exported alternatives (base64 of the stored form), checked; None when absent.

    Raises:
        ValueError: present but not base64 of a readable :class:`ReplyAlternatives`.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where}.alternatives is not text (base64)")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{where}.alternatives is not base64 ({exc})") from None
    try:
        ReplyAlternatives.from_bytes(data)
    except ValueError as exc:
        raise ValueError(f"{where}.alternatives: {exc}") from None
    return data
