"""Claude's data export (claude.ai → Settings → Privacy → Export data: ``conversations.json``,
alone or in the .zip as downloaded).

Shape read (observed, Anthropic publishes no schema; as in
github.com/yetanotherchris/openwebui-importer ``schemas/claude-schema.json``, "Claude June 2025",
and github.com/Sinity/polylogue ``docs/providers/claude-ai.md``)::

    [{"uuid": id, "name": str, "created_at": ISO 8601, "updated_at": ISO 8601,
      "current_leaf_message_uuid"?: id,
      "chat_messages": [{"uuid": id, "sender": "human"|"assistant", "text": str,
                         "content": [{"type": "text", "text": str} | {"type": "thinking", ...}
                                     | {"type": "tool_use", ...} | {"type": "tool_result", ...}],
                         "created_at": ISO 8601, "parent_message_uuid"?: id,
                         "attachments": [{"file_name": str, "extracted_content": str}],
                         "files": [{"file_name": str}]}]}, ...]

``chat_messages`` is in time order. When the messages carry ``parent_message_uuid`` (newer
exports; a root's parent is the all-zero uuid), that tree is kept: edits and retries become
branches, ``current_leaf_message_uuid`` the branch shown. Without it the messages form one line.
A message's text is its ``content`` text blocks (the flat ``text`` when there are none);
``thinking`` blocks count as reasoning, ``tool_use``/``tool_result`` as tool messages, other
blocks as other. An attachment's extracted text (a long paste, a text file) is kept, after the
message's text under the file's name; ``files`` (images, PDFs without extracted text) are counted.
"""

from __future__ import annotations

from collections import Counter

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

_ROLES = {"human": Role.USER, "user": Role.USER, "assistant": Role.ASSISTANT}
_BLOCK_SKIPS = {
    "thinking": SkipReason.REASONING,
    "redacted_thinking": SkipReason.REASONING,
    "tool_use": SkipReason.TOOL,
    "tool_result": SkipReason.TOOL,
    "image": SkipReason.IMAGE,
}


def looks_like(data: object) -> bool:
    """A list of conversations with ``chat_messages``."""
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "chat_messages" in data[0]


def parse(data: object, skipped: Counter[SkipReason]) -> list[ForeignConversation]:
    """Every conversation of an export (shape in the module docstring).

    Raises:
        ValueError: a value has the wrong type; the message says where.
    """
    out: list[ForeignConversation] = []
    for i, raw in enumerate(need_list(data, "the top level")):
        where = f"conversation {i + 1}"
        c = need_dict(raw, where)
        title = opt_text(c.get("name"), f"{where}: name")
        if title:
            where = f"{where} ({title[:40]!r})"
        msgs = need_list(c.get("chat_messages"), f"{where}: chat_messages")
        tree = any(isinstance(m, dict) and "parent_message_uuid" in m for m in msgs)
        before = Counter(skipped)
        nodes: list[RawNode] = []
        previous: str | None = None
        for j, m in enumerate(msgs):
            node = _node(m, f"{where}: chat_messages[{j}]", j, previous, tree, skipped)
            nodes.append(node)
            previous = node.key
        leaf = opt_key(c.get("current_leaf_message_uuid"), f"{where}: current_leaf_message_uuid")
        conv = build_conversation(
            nodes,
            title=title,
            created_at=epoch_seconds(c.get("created_at"), f"{where}: created_at"),
            updated_at=epoch_seconds(c.get("updated_at"), f"{where}: updated_at"),
            leaf=leaf if leaf is not None else (previous if not tree else None),
            skipped=skipped,
            where=where,
            counted_before=before,
        )
        if conv is not None:
            out.append(conv)
    return out


def _node(
    raw: object, where: str, index: int, previous: str | None, tree: bool, skipped: Counter[SkipReason]
) -> RawNode:
    m = need_dict(raw, where)
    key = opt_key(m.get("uuid"), f"{where}.uuid") or f"#{index}"
    parent = opt_key(m.get("parent_message_uuid"), f"{where}.parent_message_uuid") if tree else previous
    sender = opt_text(m.get("sender"), f"{where}.sender")
    role = _ROLES.get(sender)
    created = epoch_seconds(m.get("created_at"), f"{where}.created_at")
    texts: list[str] = []
    left_out = 0
    content = m.get("content")
    if content is not None:
        for k, block in enumerate(need_list(content, f"{where}.content")):
            b = need_dict(block, f"{where}.content[{k}]")
            kind = opt_text(b.get("type"), f"{where}.content[{k}].type")
            if kind == "text":
                texts.append(opt_text(b.get("text"), f"{where}.content[{k}].text"))
            else:
                skipped[_BLOCK_SKIPS.get(kind, SkipReason.OTHER)] += 1
                left_out += 1
    if not any(t.strip() for t in texts):
        texts = [opt_text(m.get("text"), f"{where}.text")]
    for k, att in enumerate(need_list(m.get("attachments", []), f"{where}.attachments")):
        a = need_dict(att, f"{where}.attachments[{k}]")
        extracted = opt_text(a.get("extracted_content"), f"{where}.attachments[{k}].extracted_content")
        name = opt_text(a.get("file_name"), f"{where}.attachments[{k}].file_name") or "attachment"
        if extracted.strip():
            texts.append(f"[{name}]\n{extracted}")
        else:
            skipped[SkipReason.IMAGE] += 1
    files = need_list(m.get("files", []), f"{where}.files")
    text = "\n\n".join(t.strip() for t in texts if t.strip())
    skip = None if role is not None else SkipReason.OTHER
    return RawNode(key, parent, role or Role.USER, text, created, "", skip, images=len(files), emptied=left_out > 0)
