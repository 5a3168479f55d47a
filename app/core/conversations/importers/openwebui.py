"""Open WebUI's chat export (Settings → Chats → Export chats, or a chat's ⋯ → Download → Export
chat (.json)).

Shape read (Open WebUI's ``ChatModel`` rows, github.com/open-webui/open-webui
``backend/open_webui/models/chats.py``, with the chat's JSON as its front end keeps it; an example
export in github.com/yetanotherchris/openwebui-importer ``examples/webui-json.json``)::

    [{"id": id, "title": str, "created_at": s, "updated_at": s,
      "chat": {"title": str, "models": [str], "params": {"system"?: str}, "system"?: str,
               "history": {"currentId": id,
                           "messages": {id: {"id": id, "parentId": id|null, "childrenIds": [id],
                                             "role": "user"|"assistant"|"system",
                                             "content": str, "timestamp": s,
                                             "model"?: str, "files"?: [...]}}},
               "messages": [... the selected branch as a list ...],
               "timestamp": ms}}, ...]

A bare ``chat`` object (``{"title", "history", "messages"}``) is read too. ``history`` is a tree
(``parentId``/``childrenIds``): edits, regenerations and answers of several models side by side
are siblings, so they become branches; ``currentId`` is the branch shown. Without ``history``,
the ``messages`` list is read as one line. A message's ``files`` (images, documents) are counted.

A reasoning model's thinking is kept in the reply's text as
``<details type="reasoning" done="true" duration="3"><summary>Thought for 3 seconds</summary>
> ...</details>`` (Open WebUI's ``backend/open_webui/utils/middleware.py``, which writes it): each
such block is taken out and counted as :attr:`SkipReason.REASONING`. Tool calls are kept the same way,
``<details type="tool_calls" done="true" id=... name=... arguments=... result=...><summary>Tool
Executed</summary></details>`` (and ``type="code_interpreter"`` for its code runs): each is taken out
and counted as :attr:`SkipReason.TOOL`, the reply's own text kept.
"""

from __future__ import annotations

import re
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
_REASONING = re.compile(r"<details\s[^>]*\btype=[\"']?reasoning\b[^>]*>.*?</details>\s*", re.DOTALL | re.IGNORECASE)
_TOOL_BLOCK = re.compile(
    r"<details\s[^>]*\btype=[\"']?(?:tool_calls|code_interpreter)\b[^>]*>.*?</details>\s*", re.DOTALL | re.IGNORECASE
)


def looks_like(data: object) -> bool:
    """A list of ``{"chat": {...}}`` rows, or one bare chat with a ``history``."""
    if isinstance(data, dict):
        return isinstance(data.get("history"), dict) or isinstance(data.get("chat"), dict)
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and isinstance(data[0].get("chat"), dict)


def parse(data: object, skipped: Counter[SkipReason]) -> list[ForeignConversation]:
    """Every chat of an export (shape in the module docstring).

    Raises:
        ValueError: a value has the wrong type; the message says where.
    """
    rows = [data] if isinstance(data, dict) else need_list(data, "the top level")
    out: list[ForeignConversation] = []
    for i, raw in enumerate(rows):
        where = f"chat {i + 1}"
        row = need_dict(raw, where)
        chat = need_dict(row["chat"], f"{where}: chat") if "chat" in row else row
        title = opt_text(row.get("title"), f"{where}: title") or opt_text(chat.get("title"), f"{where}: chat.title")
        if title:
            where = f"{where} ({title[:40]!r})"
        before = Counter(skipped)
        nodes, leaf = _nodes(chat, where, skipped)
        params: dict[str, Any] = chat["params"] if isinstance(chat.get("params"), dict) else {}
        system = opt_text(params.get("system"), f"{where}: chat.params.system") or opt_text(
            chat.get("system"), f"{where}: chat.system"
        )
        created = epoch_seconds(row.get("created_at"), f"{where}: created_at")
        if created is None:
            created = epoch_seconds(chat.get("timestamp"), f"{where}: chat.timestamp")
        conv = build_conversation(
            nodes,
            title=title,
            created_at=created,
            updated_at=epoch_seconds(row.get("updated_at"), f"{where}: updated_at"),
            leaf=leaf,
            skipped=skipped,
            system_prompt=system,
            where=where,
            counted_before=before,
        )
        if conv is not None:
            out.append(conv)
    return out


def _nodes(chat: dict[str, Any], where: str, skipped: Counter[SkipReason]) -> tuple[list[RawNode], str | None]:
    """The chat's messages and its shown leaf: the ``history`` tree, else the ``messages`` line."""
    history = chat.get("history")
    if history is not None:
        h = need_dict(history, f"{where}: chat.history")
        msgs = need_dict(h.get("messages", {}), f"{where}: chat.history.messages")
        ranks: dict[str, int] = {}
        for m in msgs.values():
            if isinstance(m, dict) and isinstance(m.get("childrenIds"), list):
                for rank, child in enumerate(m["childrenIds"]):
                    ranks.setdefault(str(child), rank)
        nodes = []
        for key, raw in msgs.items():
            w = f"{where}: chat.history.messages[{key!r}]"
            m = need_dict(raw, w)
            parent = opt_key(m.get("parentId"), f"{w}.parentId")
            need_list(m.get("childrenIds", []), f"{w}.childrenIds")
            nodes.append(_node(str(key), parent, m, w, ranks.get(str(key), 0), skipped))
        return nodes, opt_key(h.get("currentId"), f"{where}: chat.history.currentId")
    line = need_list(chat.get("messages", []), f"{where}: chat.messages")
    nodes = []
    previous: str | None = None
    for j, raw in enumerate(line):
        w = f"{where}: chat.messages[{j}]"
        m = need_dict(raw, w)
        key = opt_key(m.get("id"), f"{w}.id") or f"#{j}"
        nodes.append(_node(key, previous, m, w, 0, skipped))
        previous = key
    return nodes, previous


def _node(
    key: str, parent: str | None, m: dict[str, Any], where: str, rank: int, skipped: Counter[SkipReason]
) -> RawNode:
    role_name = opt_text(m.get("role"), f"{where}.role")
    role = _ROLES.get(role_name)
    content = m.get("content")
    images = 0
    if isinstance(content, list):  # OpenAI-style parts
        texts = []
        for k, part in enumerate(content):
            p = need_dict(part, f"{where}.content[{k}]")
            if p.get("type") == "text":
                texts.append(opt_text(p.get("text"), f"{where}.content[{k}].text"))
            else:
                images += 1
        text = "\n\n".join(t for t in texts if t)
    else:
        text = opt_text(content, f"{where}.content")
    text, thoughts = _REASONING.subn("", text)
    text, calls = _TOOL_BLOCK.subn("", text)
    if role is not None:
        skipped[SkipReason.REASONING] += thoughts
        skipped[SkipReason.TOOL] += calls
    images += len(need_list(m.get("files", []) or [], f"{where}.files"))
    model = opt_text(m.get("modelName"), f"{where}.modelName") or opt_text(m.get("model"), f"{where}.model")
    created = epoch_seconds(m.get("timestamp"), f"{where}.timestamp")
    skip = None if role is not None else SkipReason.TOOL if role_name == "tool" else SkipReason.OTHER
    return RawNode(
        key, parent, role or Role.USER, text, created, model, skip, rank, images, emptied=thoughts + calls > 0
    )
