"""Chats read from another app's export, before anything is written: the values and the tree.

Every format's parser (:mod:`.chatgpt`, :mod:`.claude`, :mod:`.openwebui`, :mod:`.lmstudio`)
turns one conversation into a list of :class:`RawNode` (its messages as the source has them,
each with the key of its parent) and hands it to :func:`build_conversation`, which makes the
Glassbox shape, :class:`ForeignConversation`:

- a node the parser marked with a :class:`SkipReason` (an image, a tool call, reasoning...) is
  left out and counted; a node without a role (a tree's empty root) is left out silently;
  either way its children move up to its nearest kept ancestor, so the tree stays whole;
- a message with no text left is counted as :attr:`SkipReason.EMPTY` (unless it held images,
  which are counted) and left out the same way;
- a system message at the root becomes the chat's system prompt (Glassbox keeps the system
  prompt per chat, not as a message);
- a message with the same role as its parent, when it is the parent's only child (a reply
  the source split around a tool call it made), is joined to the parent with a blank line,
  so user and assistant take turns as chat templates require;
- siblings (same parent) are branches: an edited message or a regenerated reply, in the
  order the source lists them (:attr:`RawNode.rank`, then the order of the nodes).

Times are seconds since the epoch (:func:`epoch_seconds` reads numbers in s, ms, µs or ns and
ISO 8601 text). The ``need_*`` helpers raise :class:`ValueError` naming where in the file a value
has the wrong type; a parser lets it through and the file is refused (nothing is written).
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from app.core.chat.context import Role
from app.core.conversations.model import DEFAULT_TITLE, make_title


class SkipReason(str, enum.Enum):
    """Why something in an export was not imported (each counted, shown before the import)."""

    IMAGE = "image"
    TOOL = "tool"
    REASONING = "reasoning"
    HIDDEN = "hidden"
    EMPTY = "empty"
    OTHER = "other"
    UNREACHABLE = "unreachable"
    EMPTY_CHAT = "empty_chat"
    ALREADY_IMPORTED = "already_imported"
    DUPLICATE = "duplicate"

    @property
    def label(self) -> str:
        """What was skipped, for a line ``3 × images and files``."""
        return _LABELS[self]


_LABELS = {
    SkipReason.IMAGE: "images and files (Glassbox keeps text)",
    SkipReason.TOOL: "tool calls and tool results",
    SkipReason.REASONING: "reasoning (thinking) blocks",
    SkipReason.HIDDEN: "hidden system and context messages",
    SkipReason.EMPTY: "empty messages",
    SkipReason.OTHER: "other content (code output, browsing, unknown kinds)",
    SkipReason.UNREACHABLE: "messages not connected to their chat",
    SkipReason.EMPTY_CHAT: "chats with no text",
    SkipReason.ALREADY_IMPORTED: "chats already in Glassbox (same title, start time and messages)",
    SkipReason.DUPLICATE: "chats already in this import (the same chat in two of the files)",
}


@dataclass(frozen=True)
class RawNode:
    """One message as a parser read it.

    Attributes:
        key: its id in the source (unique in its conversation).
        parent: its parent's key; None (or a key not in the conversation) for a first message.
        role: who wrote it; None for a node that holds no message (left out silently).
        text: its text (may be empty).
        created_at: seconds since the epoch, None when the source has none.
        model: the model that wrote a reply, as the source names it ("" when unknown).
        skip: why it is left out, None to keep it.
        rank: its place among its siblings in the source (a lower rank first).
        images: images and other files it held, left out (counted as :attr:`SkipReason.IMAGE`;
            a message of images only, with no text, is left out without more ado).
        emptied: the parser left out all its parts and counted them (tool calls, reasoning):
            with no text left it is not counted again as empty.
    """

    key: str
    parent: str | None
    role: Role | None
    text: str = ""
    created_at: float | None = None
    model: str = ""
    skip: SkipReason | None = None
    rank: int = 0
    images: int = 0
    emptied: bool = False


@dataclass(frozen=True)
class ForeignMessage:
    """One message to write; ``parent`` is the key of an earlier message of the same chat."""

    key: str
    parent: str | None
    role: Role
    content: str
    created_at: float
    model: str = ""


@dataclass(frozen=True)
class ForeignConversation:
    """One chat to write.

    Attributes:
        title: whitespace collapsed, never blank.
        title_is_custom: the source named it (else it was made from the first message).
        created_at, updated_at: seconds since the epoch.
        system_prompt: "" for none.
        messages: parents before children.
        leaf: the key of the message the source showed last (its selected branch), None: the
            newest branch.
        left_out: what was left out of this chat, by reason (counted in its file's skipped
            too): taken off again when the whole chat is not imported.
    """

    title: str
    title_is_custom: bool
    created_at: float
    updated_at: float
    system_prompt: str
    messages: tuple[ForeignMessage, ...]
    leaf: str | None
    left_out: tuple[tuple[SkipReason, int], ...] = ()

    @property
    def fingerprint(self) -> tuple[str, int, int]:
        """(title, start time in ms, messages): how a chat imported before is recognised."""
        return (self.title, round(self.created_at * 1000), len(self.messages))

    @property
    def branches(self) -> int:
        """How many messages start a branch beside an earlier sibling (edits, regenerations)."""
        per_parent = Counter(m.parent for m in self.messages)
        return sum(n - 1 for n in per_parent.values())


def build_conversation(
    nodes: Iterable[RawNode],
    *,
    title: str | None,
    created_at: float | None,
    updated_at: float | None,
    leaf: str | None,
    skipped: Counter[SkipReason],
    system_prompt: str = "",
    where: str = "",
    counted_before: Counter[SkipReason] | None = None,
) -> ForeignConversation | None:
    """Make the Glassbox shape of one chat (the rules in the module docstring).

    Args:
        nodes: its messages in the source's order.
        title: the source's title (None or blank: made from the first user message).
        created_at, updated_at: seconds since the epoch (None: from its messages, else 0).
        leaf: the key of the source's selected last message, None if it has none.
        skipped: counts of what was left out; added to.
        system_prompt: the source's system prompt, if it keeps one apart from the messages.
        where: the chat in words, for errors.
        counted_before: a copy of ``skipped`` made before the parser read this chat's nodes
            (when it counts parts it left out while reading them); None: as ``skipped`` is now.

    Returns:
        The chat, or None when no message is left (counted as :attr:`SkipReason.EMPTY_CHAT`).

    Raises:
        ValueError: two messages have the same key.
    """
    before = Counter(skipped) if counted_before is None else counted_before
    order = list(nodes)
    by_key: dict[str, RawNode] = {}
    for n in order:
        if n.key in by_key:
            raise ValueError(f"{where}: message id {n.key!r} appears twice")
        by_key[n.key] = n
    kids: dict[str | None, list[RawNode]] = {}
    for _, n in sorted(enumerate(order), key=lambda p: (p[1].rank, p[0])):
        parent = n.parent if n.parent in by_key and n.parent != n.key else None
        kids.setdefault(parent, []).append(n)

    # Parents first, siblings in the source's order; what no walk reaches hangs in a loop.
    walk: list[RawNode] = []
    stack = list(reversed(kids.get(None, [])))
    while stack:
        n = stack.pop()
        walk.append(n)
        stack.extend(reversed(kids.get(n.key, [])))
    skipped[SkipReason.UNREACHABLE] += sum(1 for n in order if n.role is not None) - sum(
        1 for n in walk if n.role is not None
    )

    # Leave out what is not kept; a left-out node's children go to its nearest kept ancestor.
    up: dict[str, str | None] = {}  # key -> nearest kept ancestor or itself (None: the root)
    kept: list[RawNode] = []
    system: list[str] = [system_prompt.strip()] if system_prompt.strip() else []
    for n in walk:
        above = up.get(n.parent) if n.parent in by_key and n.parent != n.key else None
        text = n.text.strip()
        if n.role is not None:
            skipped[SkipReason.IMAGE] += n.images
        if n.role is None:
            up[n.key] = above
        elif n.skip is not None:
            if text or n.skip is not SkipReason.HIDDEN:  # an empty hidden node loses nothing
                skipped[n.skip] += 1
            up[n.key] = above
        elif not text:
            if not n.images and not n.emptied:
                skipped[SkipReason.EMPTY] += 1
            up[n.key] = above
        elif n.role is Role.SYSTEM and above is None:
            if text not in system:
                system.append(text)
            up[n.key] = None
        else:
            up[n.key] = n.key
            kept.append(n)

    # Join a message to its parent of the same role when it is the parent's only child.
    parent_of = {n.key: up.get(n.parent) if n.parent in by_key and n.parent != n.key else None for n in kept}
    children: dict[str | None, list[str]] = {}
    for n in kept:
        children.setdefault(parent_of[n.key], []).append(n.key)
    alias: dict[str, str] = {}
    texts = {n.key: n.text.strip() for n in kept}
    roles = {n.key: n.role for n in kept}
    out_keys: list[str] = []
    for n in kept:
        p = parent_of[n.key]
        p = alias.get(p, p) if p is not None else None
        parent_of[n.key] = p
        if p is not None and roles[p] is n.role and len(children.get(p, [])) == 1:
            texts[p] = texts[p] + "\n\n" + texts[n.key]
            alias[n.key] = p
            children[p] = children.get(n.key, [])
            continue
        out_keys.append(n.key)

    times: dict[str, float] = {}
    first_time = next((n.created_at for n in kept if n.created_at is not None), None)
    start = created_at if created_at is not None else first_time if first_time is not None else 0.0
    messages: list[ForeignMessage] = []
    for key in out_keys:
        n = by_key[key]
        p = parent_of[key]
        t = n.created_at if n.created_at is not None else times.get(p, start) if p is not None else start
        times[key] = t
        role = roles[key]
        assert role is not None  # kept nodes have a role
        messages.append(ForeignMessage(key, p, role, texts[key], t, n.model))
    if not messages:
        skipped[SkipReason.EMPTY_CHAT] += 1
        return None

    leaf_key = up.get(leaf) if leaf is not None else None
    leaf_key = alias.get(leaf_key, leaf_key) if leaf_key is not None else None
    flat = " ".join((title or "").split())
    first_user = next((m.content for m in messages if m.parent is None and m.role is Role.USER), "")
    last = max(times.values())
    return ForeignConversation(
        title=flat or make_title(first_user) or DEFAULT_TITLE,
        title_is_custom=bool(flat),
        created_at=start,
        updated_at=updated_at if updated_at is not None else max(last, start),
        system_prompt="\n\n".join(system),
        messages=tuple(messages),
        leaf=leaf_key,
        left_out=tuple((r, skipped[r] - before[r]) for r in SkipReason if skipped[r] > before[r]),
    )


# --------------------------------------------------------------------------- reading values


def need_dict(value: object, where: str) -> dict[str, Any]:
    """``value`` when it is a JSON object. Raises ValueError naming ``where`` otherwise."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} is {_kind(value)}, expected an object")
    return value


def need_list(value: object, where: str) -> list[Any]:
    """``value`` when it is a JSON list. Raises ValueError naming ``where`` otherwise."""
    if not isinstance(value, list):
        raise ValueError(f"{where} is {_kind(value)}, expected a list")
    return value


def opt_text(value: object, where: str) -> str:
    """Text, or "" for null/absent. Raises ValueError naming ``where`` for anything else."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where} is {_kind(value)}, expected text")
    return value


def opt_key(value: object, where: str) -> str | None:
    """An id (text, or a whole number read as text), None for null/absent.

    Raises:
        ValueError: anything else, naming ``where``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{where} is {_kind(value)}, expected an id")


def epoch_seconds(value: object, where: str) -> float | None:
    """A time as seconds since the epoch; None for null/absent.

    Numbers are seconds, or ms/µs/ns when too large to be seconds (above 1e11, i.e. after the
    year 5138); text is ISO 8601 (``2024-05-01T12:00:00.123Z``; no zone: UTC).

    Raises:
        ValueError: not a number nor ISO 8601 text, naming ``where``.
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        v = float(value)
        while abs(v) > 1e11:
            v /= 1000.0
        return v
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{where} is {value!r}, expected a time (ISO 8601)") from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        return t.timestamp()
    raise ValueError(f"{where} is {_kind(value)}, expected a time")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
