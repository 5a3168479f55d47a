"""Reading the tool calls a model wrote: :func:`parse_tool_calls`.

The shapes read (what models write when their chat template offers tools, and what a
:func:`~app.core.tools.forced.forced_call_constraint` reply is):

- Hermes / Qwen 2.5 / Qwen 3: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one or
  more, with text around them (the text before is the reply's content); a last one left open
  (the end token came before ``</tool_call>``) is read too;
- Llama 3.1 / 3.2: ``{"name": ..., "parameters": {...}}``, after ``<|python_tag|>`` or not;
- a bare ``{"name": ..., "arguments": ...}`` object (arguments an object or JSON text), several
  separated by whitespace or ``;``, or a JSON list of them; inside a fenced ```` ```json ```` block;
- llama.cpp's generic format ``{"tool_call": {...}}`` / ``{"tool_calls": [...]}`` and Mistral's
  ``[TOOL_CALLS][...]``; OpenAI's own ``{"function": {"name", "arguments"}}`` items.

Anything else is content, not a call: a reply is never half read. Each call gets a fresh ``call_`` id,
and its arguments are the text the model wrote (not decoded and dumped again).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from app.core.tools.spec import ToolCall

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_ARGUMENTS_KEY = re.compile(r'"(?:arguments|parameters)"\s*:\s*')


def _as_written(content: str, calls: list[ToolCall]) -> list[ToolCall]:
    """``calls`` with their arguments exactly as the model wrote them in ``content`` (decoding and dumping
    them changes spacing, key order and number forms): the value after an ``"arguments"`` or
    ``"parameters"`` key, in order, that reads as the same JSON; the dumped form when none does."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, str, object]] = []  # (end, text, value) of each argument value written
    for m in _ARGUMENTS_KEY.finditer(content):
        try:
            value, end = decoder.raw_decode(content, m.end())
        except ValueError:
            continue
        raw = content[m.end() : end]
        if isinstance(value, str):  # arguments written as JSON text: the text inside the string
            raw = value
            try:
                value = json.loads(value)
            except ValueError:
                continue
        found.append((end, raw, value))
    out: list[ToolCall] = []
    start = 0
    for call in calls:
        try:
            parsed = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            parsed = None
        hit = next((i for i in range(start, len(found)) if found[i][2] == parsed), None)
        if hit is None:
            out.append(call)
        else:
            out.append(dataclasses.replace(call, arguments=found[hit][1]))
            start = hit + 1
    return out


_PREFIXES = ("<|python_tag|>", "[TOOL_CALLS]")


@dataclass(frozen=True)
class ParsedReply:
    """A reply split into its text and its calls.

    Attributes:
        content: the text that is not a call (stripped; "" when the reply is only calls).
        calls: the calls, in the order written; empty when the reply holds none.
    """

    content: str
    calls: tuple[ToolCall, ...]


def _arguments(value: object) -> str | None:
    """A call's arguments as JSON text of an object (text kept as written), or None when they are not an object."""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        return None
    if not value.strip():
        return "{}"
    try:
        decoded = json.loads(value)
    except ValueError:
        return None
    return value if isinstance(decoded, dict) else None


def _one_call(value: object) -> ToolCall | None:
    if not isinstance(value, dict):
        return None
    obj: dict[str, Any] = value["function"] if isinstance(value.get("function"), dict) else value  # OpenAI's shape
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    for key in ("arguments", "parameters"):
        if key in obj:
            args = _arguments(obj[key])
            return None if args is None else ToolCall.new(name, args)
    return None


def _calls_in(value: object) -> list[ToolCall] | None:
    """The calls a decoded JSON value holds, or None when it is not (only) calls."""
    if isinstance(value, dict):
        if isinstance(value.get("tool_calls"), list):
            return _calls_in(value["tool_calls"])
        if isinstance(value.get("tool_call"), dict):
            value = value["tool_call"]
        call = _one_call(value)
        return None if call is None else [call]
    if isinstance(value, list) and value:
        calls: list[ToolCall] = []
        for item in value:
            one = _calls_in(item)
            if one is None:
                return None
            calls.extend(one)
        return calls
    return None


def _json_values(text: str) -> list[Any] | None:
    """The JSON values ``text`` is made of (separated by whitespace, ``;`` or ``,``), or None."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n;,":
            pos += 1
        if pos == len(text):
            return values or None
        if text[pos] not in "{[":
            return None
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        values.append(value)


def _bare(text: str) -> list[ToolCall] | None:
    body = text.strip()
    for prefix in _PREFIXES:
        if body.startswith(prefix):
            body = body[len(prefix) :].strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    values = _json_values(body)
    if values is None:
        return None
    return _calls_in(values if len(values) > 1 else values[0])


def parse_tool_calls(text: str, names: Collection[str] | None = None) -> ParsedReply:
    """The tool calls in a model's reply (see the module docstring for the shapes read).

    Args:
        text: the reply's text.
        names: the tools offered; a call of any other name makes the reply plain content.
            None: any name.

    Returns:
        The content and the calls; no calls (and ``content`` the whole text, stripped) when the
        reply is not a call, a call is malformed, or names a tool not offered. Never raises.
    """
    plain = ParsedReply(text.strip(), ())
    calls: list[ToolCall] | None
    if "<tool_call>" in text:
        calls = []
        for m in _TAGGED.finditer(text):
            found = _bare(m.group(1))
            if found is None:
                return plain
            calls.extend(found)
        first = text.index("<tool_call>")
        last = max(m.end() for m in _TAGGED.finditer(text))
        content = (text[:first] + text[last:]).strip()
    else:
        calls, content = _bare(text), ""
    if not calls or (names is not None and any(c.name not in names for c in calls)):
        return plain
    return ParsedReply(content, tuple(_as_written(text, calls)))
