"""The tool-call values: :class:`ToolSpec`, :class:`ToolChoice`, :class:`ToolCall`, and OpenAI's
``tools`` / ``tool_choice`` read into them (:func:`parse_tools`, :func:`parse_tool_choice`).

OpenAI's shapes (Chat Completions API reference): a tool is ``{"type": "function", "function":
{"name", "description", "parameters"}}``, the name 1-64 characters of ``a-z A-Z 0-9 _ -``;
``tool_choice`` is ``"none"``, ``"auto"``, ``"required"`` or ``{"type": "function", "function":
{"name": ...}}``; a call is ``{"id", "type": "function", "function": {"name", "arguments"}}`` with
the arguments as JSON text.
"""

from __future__ import annotations

import enum
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class ToolError(ValueError):
    """A ``tools`` / ``tool_choice`` value that cannot be used.

    Attributes:
        param: the request field at fault, e.g. ``tools[1].function.name``.
    """

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call.

    Attributes:
        name: the function's name (1-64 of ``a-z A-Z 0-9 _ -``).
        description: what it does, for the model ("" when not given).
        parameters: a JSON schema (a dict) its arguments must match; an object with no
            properties when the tool takes none.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(EMPTY_PARAMETERS))

    def openai(self) -> dict[str, Any]:
        """The tool in OpenAI's shape (what chat templates expect in ``tools``)."""
        fn: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            fn["description"] = self.description
        return {"type": "function", "function": fn}


class ToolChoiceKind(enum.Enum):
    """Whether and how the model must call a tool."""

    NONE = "none"  # never: a text reply (the tools are not shown to the model)
    AUTO = "auto"  # the model decides (the tools go to its chat template)
    REQUIRED = "required"  # a call of one of the tools (grammar-constrained)
    FUNCTION = "function"  # a call of the named tool (grammar-constrained)


@dataclass(frozen=True)
class ToolChoice:
    """OpenAI's ``tool_choice``.

    Attributes:
        kind: none, auto, required, or one named function.
        name: the function for :attr:`ToolChoiceKind.FUNCTION`, "" otherwise.
    """

    kind: ToolChoiceKind = ToolChoiceKind.AUTO
    name: str = ""

    @property
    def forced(self) -> bool:
        """The reply must be a call (required, or a named function)."""
        return self.kind in (ToolChoiceKind.REQUIRED, ToolChoiceKind.FUNCTION)


@dataclass(frozen=True)
class ToolCall:
    """One call the model made.

    Attributes:
        id: the call's id (``call_`` and 24 random characters when Glassbox made it).
        name: the function called.
        arguments: its arguments as JSON text (an object).
    """

    id: str
    name: str
    arguments: str

    @classmethod
    def new(cls, name: str, arguments: dict[str, Any] | str) -> ToolCall:
        """A call with a fresh ``call_...`` id; ``arguments`` as a dict or JSON text (kept as given)."""
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return cls(f"call_{secrets.token_hex(12)}", name, text)

    def openai(self) -> dict[str, Any]:
        """The call in OpenAI's shape (an item of a message's ``tool_calls``)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def object_schema_problem(schema: object) -> str | None:
    """Why ``schema`` cannot be a function's parameters, or None: OpenAI (and MCP, for a tool's input
    schema) wants a JSON schema of type object, the arguments being a JSON object.

    Returns:
        e.g. 'must be a JSON schema of type object ("type": "object", "properties": {...}), not one of
        type "string"'.
    """
    want = 'must be a JSON schema of type object ("type": "object", "properties": {...})'
    if not isinstance(schema, dict):
        return f"{want}, not {json.dumps(schema)[:60]}"
    if schema.get("type") != "object":
        return f"{want}, not one of type {json.dumps(schema.get('type'))[:60]}"
    return None


def parse_tools(raw: object, param: str = "tools") -> tuple[ToolSpec, ...]:
    """OpenAI's ``tools`` list read into :class:`ToolSpec` values.

    Args:
        raw: the request's ``tools`` (None or [] for none).
        param: the field's name in error messages.

    Raises:
        ToolError: not a list, an item that is not ``{"type": "function", "function": {...}}``, a
            bad or repeated name, ``parameters`` that is not a JSON schema of type object
            (:func:`object_schema_problem`; absent or ``{}``: no arguments), ``description`` of the
            wrong type (the message and ``param`` name the item, e.g. ``tools[0].function.name``).
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ToolError(f'\'{param}\' must be a list of {{"type": "function", "function": {{...}}}} objects.', param)
    out: list[ToolSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        at = f"{param}[{i}]"
        if not isinstance(item, dict) or item.get("type", "function") != "function":
            raise ToolError(
                f'{at} must be {{"type": "function", "function": {{...}}}}; only functions are supported.', at
            )
        fn = item.get("function")
        if not isinstance(fn, dict):
            raise ToolError(
                f"{at}.function must be an object with a 'name' (and 'parameters' when the function takes arguments).",
                f"{at}.function",
            )
        name = fn.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ToolError(
                f"{at}.function.name {name!r} must be 1 to 64 letters, digits, '_' or '-'.", f"{at}.function.name"
            )
        if name in seen:
            raise ToolError(
                f"{at}.function.name {name!r} is given twice; each tool needs its own name.", f"{at}.function.name"
            )
        seen.add(name)
        description = fn.get("description") or ""
        if not isinstance(description, str):
            raise ToolError(f"{at}.function.description must be a string.", f"{at}.function.description")
        parameters = fn.get("parameters")
        if parameters is None or parameters == {}:
            parameters = dict(EMPTY_PARAMETERS)
        problem = object_schema_problem(parameters)
        if problem:
            raise ToolError(f"{at}.function.parameters {problem}.", f"{at}.function.parameters")
        out.append(ToolSpec(name, description, parameters))
    return tuple(out)


def parse_tool_choice(raw: object, tools: tuple[ToolSpec, ...], param: str = "tool_choice") -> ToolChoice:
    """OpenAI's ``tool_choice`` read and checked against ``tools``.

    Absent (None): ``auto`` when there are tools, ``none`` when there are none (OpenAI's default).

    Raises:
        ToolError: an unknown value, a named function not in ``tools``, or ``required`` /
            a named function with no tools.
    """
    if raw is None:
        return ToolChoice(ToolChoiceKind.AUTO if tools else ToolChoiceKind.NONE)
    if isinstance(raw, str):
        try:
            kind = ToolChoiceKind(raw)
        except ValueError:
            kind = ToolChoiceKind.FUNCTION
        if kind is ToolChoiceKind.FUNCTION:
            raise ToolError(
                f'\'{param}\' {raw!r} is not one of "none", "auto", "required" or '
                '{"type": "function", "function": {"name": ...}}.',
                param,
            )
        choice = ToolChoice(kind)
    elif isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        name = raw["function"].get("name")
        if not isinstance(name, str) or not name:
            raise ToolError(f"'{param}.function.name' must name one of the tools.", f"{param}.function.name")
        choice = ToolChoice(ToolChoiceKind.FUNCTION, name)
    else:
        raise ToolError(
            f'\'{param}\' must be "none", "auto", "required" or {{"type": "function", "function": {{"name": ...}}}}.',
            param,
        )
    if choice.forced and not tools:
        raise ToolError(f"'{param}' asks for a tool call but 'tools' lists none.", param)
    if choice.kind is ToolChoiceKind.FUNCTION and choice.name not in {t.name for t in tools}:
        listed = ", ".join(t.name for t in tools)
        raise ToolError(
            f"'{param}' names {choice.name!r}, which is not in 'tools' ({listed}).", f"{param}.function.name"
        )
    return choice
