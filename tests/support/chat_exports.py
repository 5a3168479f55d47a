"""Small chat exports of other apps, built to each documented shape (see the modules of
:mod:`app.core.conversations.importers`), for the import tests.

Each builder returns the JSON value; :func:`write_json` and :func:`write_zip` put it in a file.
The texts hold emoji, Arabic and CJK on purpose. What each export should import to is written
beside it (``CHATGPT_EXPECTED``...), counted by hand from the builder.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

EMOJI = "Party 🎉🧪 time"
ARABIC = "مرحبا بالعالم"
CJK = "你好，世界。日本語のテキスト"
T0 = 1_700_000_000.0  # 2023-11-14, seconds since the epoch


def _gpt_msg(role: str, content: dict[str, Any], t: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "m",
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": t,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": extra.pop("metadata", {}),
        "recipient": extra.pop("recipient", "all"),
    }


def _text(*parts: Any) -> dict[str, Any]:
    return {"content_type": "text", "parts": list(parts)}


def chatgpt_export() -> list[dict[str, Any]]:
    """Three conversations as ChatGPT exports them.

    1. "Edited question": a hidden empty system root; the user's question, then the same question
       edited (a second child of the system node: two branches); on the edited branch a reply
       and a regenerated reply (two more siblings). ``current_node`` is the regenerated reply.
    2. "Tools and pictures": a user message with an image and text; the model's reasoning
       (``thoughts``), a text before a tool call, a call to the python tool (``code``), the
       tool's output (``execution_output``) and the answer.
    3. An untitled chat with nothing but its empty root.
    """
    edited = {
        "root": {"id": "root", "message": None, "parent": None, "children": ["sys"]},
        "sys": {
            "id": "sys",
            "message": _gpt_msg("system", _text(""), None, metadata={"is_visually_hidden_from_conversation": True}),
            "parent": "root",
            "children": ["u1", "u1b"],
        },
        "u1": {
            "id": "u1",
            "message": _gpt_msg("user", _text("What is 2+2?"), T0 + 10),
            "parent": "sys",
            "children": ["a1"],
        },
        "a1": {
            "id": "a1",
            "message": _gpt_msg("assistant", _text("4"), T0 + 11, metadata={"model_slug": "gpt-4o"}),
            "parent": "u1",
            "children": [],
        },
        "u1b": {
            "id": "u1b",
            "message": _gpt_msg("user", _text(f"What is 2+3? {EMOJI} {ARABIC} {CJK}"), T0 + 20),
            "parent": "sys",
            "children": ["a1b", "a1c"],
        },
        "a1b": {
            "id": "a1b",
            "message": _gpt_msg("assistant", _text("5"), T0 + 21, metadata={"model_slug": "gpt-4o"}),
            "parent": "u1b",
            "children": [],
        },
        "a1c": {
            "id": "a1c",
            "message": _gpt_msg("assistant", _text(f"Five. {ARABIC}"), T0 + 30, metadata={"model_slug": "gpt-4o-mini"}),
            "parent": "u1b",
            "children": [],
        },
    }
    tools = {
        "r": {"id": "r", "message": None, "parent": None, "children": ["u"]},
        "u": {
            "id": "u",
            "message": _gpt_msg(
                "user",
                {
                    "content_type": "multimodal_text",
                    "parts": [
                        {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                        "What is this?",
                    ],
                },
                T0 + 100,
            ),
            "parent": "r",
            "children": ["th"],
        },
        "th": {
            "id": "th",
            "message": _gpt_msg("assistant", {"content_type": "thoughts", "thoughts": []}, T0 + 101),
            "parent": "u",
            "children": ["pre"],
        },
        "pre": {
            "id": "pre",
            "message": _gpt_msg("assistant", _text("Let me check."), T0 + 102),
            "parent": "th",
            "children": ["code"],
        },
        "code": {
            "id": "code",
            "message": _gpt_msg(
                "assistant", {"content_type": "code", "language": "python", "text": "1+1"}, T0 + 103, recipient="python"
            ),
            "parent": "pre",
            "children": ["out"],
        },
        "out": {
            "id": "out",
            "message": _gpt_msg("tool", {"content_type": "execution_output", "text": "2"}, T0 + 104),
            "parent": "code",
            "children": ["ans"],
        },
        "ans": {
            "id": "ans",
            "message": _gpt_msg("assistant", _text("It is a cat."), T0 + 105),
            "parent": "out",
            "children": [],
        },
    }
    return [
        {
            "title": "Edited question",
            "create_time": T0,
            "update_time": T0 + 30,
            "mapping": edited,
            "current_node": "a1c",
            "conversation_id": "c1",
            "id": "c1",
            "moderation_results": [],
            "plugin_ids": None,
        },
        {
            "title": "Tools and pictures",
            "create_time": T0 + 100,
            "update_time": T0 + 105,
            "mapping": tools,
            "current_node": "ans",
            "conversation_id": "c2",
            "id": "c2",
        },
        {
            "title": None,
            "create_time": T0 + 200,
            "update_time": T0 + 200,
            "mapping": {"x": {"id": "x", "message": None, "parent": None, "children": []}},
            "current_node": "x",
        },
    ]


# chats, messages, branches, skipped by reason value
CHATGPT_EXPECTED = (2, 7, 2, {"image": 1, "reasoning": 1, "tool": 2, "empty_chat": 1})


def claude_export() -> list[dict[str, Any]]:
    """Two conversations as claude.ai's data export has them.

    1. "Linear chat" (no ``parent_message_uuid``): a human message with a thinking-free text and
       an attachment's extracted text and an image file; a reply with a thinking block, a tool
       use, a tool result and two text blocks.
    2. "Edited on Claude" (with ``parent_message_uuid``; roots' parent is the all-zero uuid): a
       question, its reply; the question edited (a second root) and its reply;
       ``current_leaf_message_uuid`` is the edited branch's reply.
    """
    zero = "00000000-0000-4000-8000-000000000000"

    def msg(uuid: str, sender: str, blocks: list[dict[str, Any]], t: str, **extra: Any) -> dict[str, Any]:
        return {
            "uuid": uuid,
            "text": "",
            "content": blocks,
            "sender": sender,
            "created_at": t,
            "updated_at": t,
            "attachments": extra.pop("attachments", []),
            "files": extra.pop("files", []),
            **extra,
        }

    def text(t: str) -> dict[str, Any]:
        return {"type": "text", "text": t, "start_timestamp": None, "stop_timestamp": None, "citations": []}

    linear = [
        msg(
            "h1",
            "human",
            [text(f"Summarise this. {CJK}")],
            "2024-05-01T10:00:00.000000Z",
            attachments=[
                {"file_name": "notes.txt", "file_size": 12, "file_type": "txt", "extracted_content": "line one"}
            ],
            files=[{"file_name": "photo.png"}],
        ),
        msg(
            "a1",
            "assistant",
            [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "tool_use", "name": "search", "input": {}},
                {"type": "tool_result", "content": []},
                text("Here is the summary."),
                text(EMOJI),
            ],
            "2024-05-01T10:00:05Z",
        ),
    ]
    tree = [
        msg("q1", "human", [text("Old question")], "2024-05-02T09:00:00Z", parent_message_uuid=zero),
        msg("r1", "assistant", [text("Old answer")], "2024-05-02T09:00:01Z", parent_message_uuid="q1"),
        msg("q2", "human", [text(f"New question {ARABIC}")], "2024-05-02T09:01:00Z", parent_message_uuid=zero),
        msg("r2", "assistant", [], "2024-05-02T09:01:01Z", parent_message_uuid="q2", text="New answer"),
    ]
    return [
        {
            "uuid": "c1",
            "name": "Linear chat",
            "created_at": "2024-05-01T10:00:00Z",
            "updated_at": "2024-05-01T10:00:05Z",
            "account": {"uuid": "acc"},
            "chat_messages": linear,
        },
        {
            "uuid": "c2",
            "name": "Edited on Claude",
            "created_at": "2024-05-02T09:00:00Z",
            "updated_at": "2024-05-02T09:01:01Z",
            "account": {"uuid": "acc"},
            "chat_messages": tree,
            "current_leaf_message_uuid": "r2",
        },
    ]


CLAUDE_EXPECTED = (2, 6, 1, {"image": 1, "reasoning": 1, "tool": 2})


def openwebui_export() -> list[dict[str, Any]]:
    """One chat as Open WebUI's "Export chats" writes it: a user message with a file, two
    answers side by side (a regeneration: siblings), ``currentId`` the second; a system prompt
    in ``params``."""
    messages = {
        "u1": {
            "id": "u1",
            "parentId": None,
            "childrenIds": ["a1", "a2"],
            "role": "user",
            "content": f"Hello {ARABIC}",
            "timestamp": 1_744_577_557,
            "models": ["llama3"],
            "files": [{"type": "image", "url": "data:..."}],
        },
        "a1": {
            "id": "a1",
            "parentId": "u1",
            "childrenIds": [],
            "role": "assistant",
            "content": "First answer",
            "model": "llama3:8b",
            "timestamp": 1_744_577_560,
            "done": True,
        },
        "a2": {
            "id": "a2",
            "parentId": "u1",
            "childrenIds": [],
            "role": "assistant",
            "content": f"Second answer {CJK}",
            "model": "llama3:8b",
            "modelName": "Llama 3 8B",
            "timestamp": 1_744_577_590,
            "done": True,
        },
    }
    chat = {
        "id": "",
        "title": "Web chat",
        "models": ["llama3:8b"],
        "params": {"system": "Be brief."},
        "history": {"messages": messages, "currentId": "a2"},
        "messages": [messages["u1"], messages["a2"]],
        "tags": [],
        "timestamp": 1_744_577_557_127,
        "files": [],
    }
    return [
        {
            "id": "w1",
            "user_id": "u",
            "title": "Web chat",
            "chat": chat,
            "updated_at": 1_744_577_590,
            "created_at": 1_744_577_557,
            "share_id": None,
            "archived": False,
            "pinned": False,
            "meta": {},
            "folder_id": None,
        }
    ]


OPENWEBUI_EXPECTED = (1, 3, 1, {"image": 1})


def lmstudio_conversation() -> dict[str, Any]:
    """One LM Studio conversation file: a question; a reply in two versions (the second
    selected, with a thinking block); a follow-up and its reply; a file attached."""

    def user(*parts: dict[str, Any]) -> dict[str, Any]:
        return {"type": "singleStep", "role": "user", "content": list(parts)}

    def reply(*steps: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "multiStep",
            "role": "assistant",
            "steps": list(steps),
            "senderInfo": {"senderName": "qwen2.5-7b-instruct"},
        }

    def block(t: str, **extra: Any) -> dict[str, Any]:
        return {"type": "contentBlock", "stepIdentifier": "s", "content": [{"type": "text", "text": t}], **extra}

    return {
        "name": "Studio chat",
        "pinned": False,
        "createdAt": 1_730_000_000_000,
        "systemPrompt": "",
        "perChatPredictionConfig": {"fields": [{"key": "llm.prediction.systemPrompt", "value": "You are terse."}]},
        "lastUsedModel": {"identifier": "qwen2.5-7b-instruct"},
        "messages": [
            {
                "versions": [user({"type": "text", "text": f"Hi {EMOJI}"}, {"type": "file", "fileIdentifier": "f1"})],
                "currentlySelected": 0,
            },
            {
                "versions": [
                    reply(block("Hello!")),
                    reply(block("thinking...", style={"type": "thinking"}), block(f"Hi there {CJK}")),
                ],
                "currentlySelected": 1,
            },
            {"versions": [user({"type": "text", "text": "Bye"})], "currentlySelected": 0},
            {"versions": [reply(block("Goodbye."))], "currentlySelected": 0},
        ],
    }


LMSTUDIO_EXPECTED = (1, 5, 1, {"image": 1, "reasoning": 1})


def write_json(path: Path, data: object) -> Path:
    """``data`` as UTF-8 JSON (non-ASCII written as is) at ``path``."""
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def write_zip(path: Path, data: object, member: str = "conversations.json") -> Path:
    """A zip at ``path`` as the apps' downloads are: ``member`` beside other files."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("user.json", json.dumps({"id": "user-1"}))
        z.writestr(member, json.dumps(data, ensure_ascii=False))
        z.writestr("chat.html", "<html></html>")
    return path
