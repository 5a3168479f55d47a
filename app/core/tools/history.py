"""Tool calls and results in a conversation's history, as text any chat template can render.

Glassbox's messages have three roles (system, user, assistant), so a conversation with tools is
written in them, as llama.cpp's template polyfills (minja's) write it for templates with no tool
roles: an assistant's calls become its text, each call the ``{"name", "arguments"}`` object a
forced call is (so :func:`~app.core.tools.calls.parse_tool_calls` reads them back), and a tool's
result becomes a user message ``{"tool_response": {"name", "tool_call_id", "content"}}``.

A template that offers tools (Qwen, Hermes, Llama 3.1...) has its own way of showing calls and
results (``<tool_call>``, ``<tool_response>``, ``ipython`` turns): :func:`template_messages` turns
that text back into its messages with ``tool_calls`` and ``role: "tool"``, as transformers and
llama.cpp hand them to such a template (arguments as objects).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.core.chat.context import ChatMessage, Role
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


def _results(text: str) -> list[dict[str, Any]] | None:
    """The ``tool_response`` objects a user message written by :func:`tool_result_text` holds (one
    per line), or None when it is not (only) tool results."""
    out = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            return None
        response = value.get("tool_response") if isinstance(value, dict) and len(value) == 1 else None
        if not isinstance(response, dict) or not {"name", "tool_call_id", "content"} <= response.keys():
            return None
        out.append(response)
    return out or None


def _calls(text: str) -> tuple[str, list[tuple[str, Any]]] | None:
    """An assistant message written by :func:`tool_calls_text` split into its words and its calls
    ``(name, arguments)``, or None when its last line is not such a call."""
    lines = text.split("\n")
    calls: list[tuple[str, Any]] = []
    while lines:
        try:
            value = json.loads(lines[-1])
        except ValueError:
            break
        if not (isinstance(value, dict) and value.keys() == {"name", "arguments"} and isinstance(value["name"], str)):
            break
        calls.insert(0, (value["name"], value["arguments"]))
        lines.pop()
    return ("\n".join(lines), calls) if calls else None


def template_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """``messages`` as a chat template that offers tools takes them (``[{"role", "content", ...}]``).

    An assistant message whose last lines are calls (:func:`tool_calls_text`) gets ``tool_calls``
    (``{"id", "type": "function", "function": {"name", "arguments": <an object>}}``; the ids are
    those its results answer, in order, or ``call_<n>``); a user message of tool results
    (:func:`tool_result_text`) becomes one ``{"role": "tool", "tool_call_id", "name", "content"}``
    message per result. Every other message is ``{"role", "content"}`` as it is.
    """
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if m.role is Role.USER and (results := _results(m.content)) is not None:
            out.extend(
                {"role": "tool", "tool_call_id": r["tool_call_id"], "name": r["name"], "content": r["content"]}
                for r in results
            )
            continue
        if m.role is Role.ASSISTANT and (split := _calls(m.content)) is not None:
            words, calls = split
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = (_results(nxt.content) or []) if nxt is not None and nxt.role is Role.USER else []
            ids = [str(r["tool_call_id"]) for r in answered]
            if len(ids) != len(calls):
                ids = [f"call_{i}_{k}" for k in range(len(calls))]
            tool_calls = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, (name, args) in zip(ids, calls, strict=True)
            ]
            out.append({"role": m.role, "content": words, "tool_calls": tool_calls})
            continue
        out.append({"role": m.role, "content": m.content})
    return out
