"""ChatGPT's data export (``conversations.json``, alone or in the .zip as downloaded).

Shape read (observed, OpenAI publishes no schema; as described by the community's parsers,
e.g. github.com/mitkury/chatgpt-export-parser ``docs/chatgpt-data-export-format.md`` and
github.com/yetanotherchris/openwebui-importer ``schemas/chatgpt-schema.json``)::

    [{"title": str|null, "create_time": s, "update_time": s, "current_node": id,
      "mapping": {id: {"id": id, "parent": id|null, "children": [id, ...],
                       "message": null | {"author": {"role": "system"|"user"|"assistant"|"tool"},
                                          "create_time": s|null, "recipient": "all"|tool name,
                                          "content": {"content_type": ..., "parts": [...]},
                                          "metadata": {"model_slug"?, "is_visually_hidden_from_conversation"?}}}},
      ...}, ...]

``mapping`` is a tree: an edited message or a regenerated reply is a second child of the same
parent, so it becomes a Glassbox branch; ``current_node`` is the leaf shown last. Content kinds:
``text`` (``parts``: text) is kept; ``multimodal_text`` keeps its text parts and an audio
transcription's text, and counts each image or other file; ``code`` and ``execution_output``
(and any message to a tool, ``recipient`` not ``all``, or from one, role ``tool``) count as tool
messages; ``thoughts`` and ``reasoning_recap`` as reasoning; ``user_editable_context`` (custom
instructions) and messages marked hidden as hidden; any other kind as other.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.core.chat.context import Role
from app.core.conversations.importers.foreign import (
    ForeignConversation,
    RawNode,
    SkipReason,
    build_conversation,
    epoch_seconds,
    need_dict,
    need_list,
    opt_key,
    opt_text,
)

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}
_TOOL_KINDS = {"code", "execution_output", "tether_browsing_code", "system_error"}
_REASONING_KINDS = {"thoughts", "reasoning_recap"}
_HIDDEN_KINDS = {"user_editable_context", "model_editable_context"}


def looks_like(data: object) -> bool:
    """A list of conversations with a ``mapping`` (or such a list under ``"conversations"``)."""
    items = _conversations(data)
    return items is not None and bool(items) and isinstance(items[0], dict) and "mapping" in items[0]


def parse(data: object, skipped: Counter[SkipReason]) -> list[ForeignConversation]:
    """Every conversation of an export (shape in the module docstring).

    Raises:
        ValueError: a value has the wrong type; the message says where.
    """
    items = _conversations(data)
    if items is None:
        raise ValueError("the top level is not a list of conversations")
    out: list[ForeignConversation] = []
    for i, raw in enumerate(items):
        where = f"conversation {i + 1}"
        c = need_dict(raw, where)
        title = opt_text(c.get("title"), f"{where}: title")
        if title:
            where = f"{where} ({title[:40]!r})"
        mapping = need_dict(c.get("mapping"), f"{where}: mapping")
        ranks: dict[str, int] = {}  # a node's place in its parent's "children": the order of branches
        for node in mapping.values():
            if isinstance(node, dict) and isinstance(node.get("children"), list):
                for rank, child in enumerate(node["children"]):
                    ranks.setdefault(str(child), rank)
        nodes = [
            _node(str(key), node, f"{where}: mapping[{key!r}]", ranks.get(str(key), 0)) for key, node in mapping.items()
        ]
        conv = build_conversation(
            nodes,
            title=title,
            created_at=epoch_seconds(c.get("create_time"), f"{where}: create_time"),
            updated_at=epoch_seconds(c.get("update_time"), f"{where}: update_time"),
            leaf=opt_key(c.get("current_node"), f"{where}: current_node"),
            skipped=skipped,
            where=where,
        )
        if conv is not None:
            out.append(conv)
    return out


def _conversations(data: object) -> list[Any] | None:
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        data = data["conversations"]
    return data if isinstance(data, list) else None


def _node(key: str, raw: object, where: str, rank: int) -> RawNode:
    node = need_dict(raw, where)
    parent = opt_key(node.get("parent"), f"{where}.parent")
    need_list(node.get("children", []), f"{where}.children")
    msg = node.get("message")
    if msg is None:
        return RawNode(key, parent, None, rank=rank)
    msg = need_dict(msg, f"{where}.message")
    author = need_dict(msg.get("author"), f"{where}.message.author")
    role_name = opt_text(author.get("role"), f"{where}.message.author.role")
    created = epoch_seconds(msg.get("create_time"), f"{where}.message.create_time")
    meta: dict[str, Any] = msg["metadata"] if isinstance(msg.get("metadata"), dict) else {}
    model = str(meta["model_slug"]) if isinstance(meta.get("model_slug"), str) else ""
    content = need_dict(msg.get("content"), f"{where}.message.content")
    kind = opt_text(content.get("content_type"), f"{where}.message.content.content_type") or "text"
    text, images = _text(content, f"{where}.message.content")
    role = _ROLES.get(role_name)
    recipient = msg.get("recipient")
    skip: SkipReason | None = None
    if role_name == "tool" or kind in _TOOL_KINDS or (recipient not in (None, "all") and role is Role.ASSISTANT):
        skip = SkipReason.TOOL
    elif kind in _REASONING_KINDS:
        skip = SkipReason.REASONING
    elif kind in _HIDDEN_KINDS or meta.get("is_visually_hidden_from_conversation") is True:
        skip = SkipReason.HIDDEN
    elif role is None or kind not in ("text", "multimodal_text"):
        skip = SkipReason.OTHER
    return RawNode(key, parent, role or Role.USER, text, created, model, skip, rank, images)


def _text(content: dict[str, Any], where: str) -> tuple[str, int]:
    """The text of a message's content and how many images or files it held."""
    parts = content.get("parts")
    if parts is None:
        text = content.get("text")
        return (text if isinstance(text, str) else ""), 0
    parts = need_list(parts, f"{where}.parts")
    texts: list[str] = []
    images = 0
    for j, part in enumerate(parts):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            said = part.get("text")
            if part.get("content_type") == "audio_transcription" and isinstance(said, str):
                texts.append(said)
            else:
                images += 1
        elif part is not None:
            raise ValueError(f"{where}.parts[{j}] is neither text nor an object")
    return "\n\n".join(t for t in texts if t), images
