"""LM Studio's conversation files (``~/.lmstudio/conversations/<id>.conversation.json``, one chat
each).

Shape read (observed, LM Studio publishes no schema; as read by
github.com/YorkieDev/lm-studio-conversation-converter ``script.js``)::

    {"name": str, "createdAt": ms, "systemPrompt"?: str,
     "perChatPredictionConfig"?: {"fields": [{"key": "llm.prediction.systemPrompt", "value": str}]},
     "lastUsedModel"?: {"identifier": str},
     "messages": [{"currentlySelected": int,
                   "versions": [{"type": "singleStep", "role": "user"|"assistant"|"system",
                                 "content": [{"type": "text", "text": str} | {"type": "file", ...}]}
                                | {"type": "multiStep", "role": "assistant",
                                   "senderInfo"?: {"senderName": str},
                                   "steps": [{"type": "contentBlock",
                                              "content": [{"type": "text", "text": str}],
                                              "style"?: {"type": "thinking"}} | ...]}]}]}

Each message keeps its versions (edits, regenerations); the chat goes on after the selected one
(``currentlySelected``). Glassbox makes every version a sibling branch: the selected one carries
the rest of the chat, the others end where they are (LM Studio keeps no continuation for them).
Messages carry no times: each gets the chat's ``createdAt``. ``file`` parts are counted as files,
``contentBlock`` steps styled as thinking as reasoning, tool call steps as tool messages, other
steps as other.
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
    opt_text,
)

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}
_SYSTEM_FIELD = "llm.prediction.systemPrompt"


def looks_like(data: object) -> bool:
    """One object with a ``messages`` list whose entries have ``versions``."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    msgs = data["messages"]
    return (isinstance(msgs[0], dict) and "versions" in msgs[0]) if msgs else "createdAt" in data


def parse(data: object, skipped: Counter[SkipReason]) -> list[ForeignConversation]:
    """The file's one chat (shape in the module docstring); [] when it has no text.

    Raises:
        ValueError: a value has the wrong type; the message says where.
    """
    c = need_dict(data, "the top level")
    title = opt_text(c.get("name"), "name")
    created = epoch_seconds(c.get("createdAt"), "createdAt")
    used = c.get("lastUsedModel")
    default_model = opt_text(used.get("identifier"), "lastUsedModel.identifier") if isinstance(used, dict) else ""
    before = Counter(skipped)
    nodes: list[RawNode] = []
    previous: str | None = None
    for i, raw in enumerate(need_list(c.get("messages"), "messages")):
        where = f"messages[{i}]"
        m = need_dict(raw, where)
        versions = need_list(m.get("versions"), f"{where}.versions")
        chosen = m.get("currentlySelected", 0)
        if not isinstance(chosen, int) or isinstance(chosen, bool):
            raise ValueError(f"{where}.currentlySelected is not a whole number")
        chosen = min(max(chosen, 0), len(versions) - 1)
        for j, version in enumerate(versions):
            nodes.append(
                _node(f"{i}.{j}", previous, version, f"{where}.versions[{j}]", j, created, default_model, skipped)
            )
        if versions:
            previous = f"{i}.{chosen}"
    conv = build_conversation(
        nodes,
        title=title,
        created_at=created,
        updated_at=None,
        leaf=previous,
        skipped=skipped,
        system_prompt=_system_prompt(c),
        where="the chat",
        counted_before=before,
    )
    return [conv] if conv is not None else []


def _system_prompt(c: dict[str, Any]) -> str:
    """The chat's own system prompt: ``perChatPredictionConfig``'s field, else ``systemPrompt``."""
    config = c.get("perChatPredictionConfig")
    fields = config.get("fields") if isinstance(config, dict) else None
    for f in fields if isinstance(fields, list) else []:
        if isinstance(f, dict) and f.get("key") == _SYSTEM_FIELD and isinstance(f.get("value"), str):
            return str(f["value"])
    return opt_text(c.get("systemPrompt"), "systemPrompt")


def _node(
    key: str,
    parent: str | None,
    raw: object,
    where: str,
    rank: int,
    created: float | None,
    default_model: str,
    skipped: Counter[SkipReason],
) -> RawNode:
    v = need_dict(raw, where)
    role_name = opt_text(v.get("role"), f"{where}.role")
    role = _ROLES.get(role_name)
    texts: list[str] = []
    images = 0
    left_out = 0
    if v.get("type") == "multiStep" or "steps" in v:
        for k, step in enumerate(need_list(v.get("steps", []), f"{where}.steps")):
            s = need_dict(step, f"{where}.steps[{k}]")
            kind = s.get("type")
            style = s.get("style")
            if kind == "contentBlock" and isinstance(style, dict) and style.get("type") == "thinking":
                skipped[SkipReason.REASONING] += 1
                left_out += 1
            elif kind == "contentBlock":
                t, n = _parts(s.get("content", []), f"{where}.steps[{k}].content")
                texts.append(t)
                images += n
            elif isinstance(kind, str) and kind.startswith("toolCall"):
                skipped[SkipReason.TOOL] += 1
                left_out += 1
            elif kind != "debugInfoBlock":
                skipped[SkipReason.OTHER] += 1
                left_out += 1
    else:
        t, images = _parts(v.get("content", []), f"{where}.content")
        texts.append(t)
    sender = v.get("senderInfo")
    model = opt_text(sender.get("senderName"), f"{where}.senderInfo.senderName") if isinstance(sender, dict) else ""
    text = "\n\n".join(t for t in texts if t.strip())
    skip = None if role is not None else SkipReason.TOOL if role_name == "tool" else SkipReason.OTHER
    if role is Role.ASSISTANT and not model:
        model = default_model
    return RawNode(key, parent, role or Role.USER, text, created, model, skip, rank, images, left_out > 0)


def _parts(value: object, where: str) -> tuple[str, int]:
    """The text of a ``content`` list (or plain text) and how many file parts it held."""
    if isinstance(value, str):
        return value, 0
    texts: list[str] = []
    files = 0
    for k, part in enumerate(need_list(value, where)):
        p = need_dict(part, f"{where}[{k}]")
        if p.get("type") == "text":
            texts.append(opt_text(p.get("text"), f"{where}[{k}].text"))
        else:
            files += 1
    return "".join(texts), files
