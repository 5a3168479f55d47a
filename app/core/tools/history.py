"""Tool calls and results in a conversation's history, as text any chat template can render.

Glassbox's messages have three roles (system, user, assistant), so a conversation with tools is
written in them, as llama.cpp's template polyfills (minja's) write it for templates with no tool
roles: an assistant's calls become its text, each call the ``{"name", "arguments"}`` object a
forced call is (so :func:`~app.core.tools.calls.parse_tool_calls` reads them back), and a tool's
result becomes a user message ``{"tool_response": {"name", "tool_call_id", "content"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.core.tools.spec import ToolCall


def tool_calls_text(content: str, calls: Sequence[ToolCall]) -> str:
    """An assistant message's text with its calls: ``content`` (if any), then one JSON object per
    call and line, ``{"name": ..., "arguments": {...}}`` (arguments that are not JSON kept as text)."""
    lines = [content.strip()] if content.strip() else []
    for call in calls:
        try:
            args: object = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            args = call.arguments
        lines.append(json.dumps({"name": call.name, "arguments": args}, ensure_ascii=False))
    return "\n".join(lines)


def tool_result_text(name: str, call_id: str, content: str) -> str:
    """A tool's result as a user message's text: ``{"tool_response": {"name", "tool_call_id", "content"}}``.

    Args:
        name: the tool that was called ("" when unknown).
        call_id: the call's id.
        content: what the tool returned (text, often JSON).
    """
    response = {"name": name, "tool_call_id": call_id, "content": content}
    return json.dumps({"tool_response": response}, ensure_ascii=False)
