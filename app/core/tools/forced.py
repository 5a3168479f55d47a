"""The constraint that makes a reply one call of a listed tool (``tool_choice`` "required" or a name).

The reply is the JSON object ``{"name": <the tool's name>, "arguments": <its arguments>}``: a JSON
schema with the name as a ``const`` and the tool's own ``parameters`` schema for the arguments,
``anyOf`` over the tools for "required". The engine enforces it with llama.cpp's grammar sampler
(the schema through llama-cpp-python's JSON-schema-to-GBNF converter), so any model, with or
without tools in its chat template, answers with a call whose arguments match the schema.
:func:`~app.core.tools.calls.parse_tool_calls` reads the reply back.
"""

from __future__ import annotations

import json
from typing import Any

from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.tools.spec import ToolChoice, ToolChoiceKind, ToolSpec


def call_schema(tool: ToolSpec) -> dict[str, Any]:
    """The JSON schema of one call of ``tool``: ``{"name": const, "arguments": parameters}``, both required."""
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "arguments": tool.parameters},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def forced_call_constraint(tools: tuple[ToolSpec, ...], choice: ToolChoice) -> OutputConstraint:
    """The output constraint for a reply that must be a call.

    Args:
        tools: the request's tools.
        choice: :attr:`ToolChoiceKind.FUNCTION` (that tool) or :attr:`ToolChoiceKind.REQUIRED` (any of them).

    Returns:
        A ``JSON_SCHEMA`` constraint: one tool's :func:`call_schema`, or ``anyOf`` over all of them.

    Raises:
        ValueError: ``choice`` does not force a call, or names a tool not in ``tools``, or
            ``tools`` is empty.
    """
    if not choice.forced:
        raise ValueError(f"tool_choice {choice.kind.value!r} does not force a call")
    if choice.kind is ToolChoiceKind.FUNCTION:
        chosen = [t for t in tools if t.name == choice.name]
        if not chosen:
            raise ValueError(f"tool {choice.name!r} is not among the tools given")
    else:
        chosen = list(tools)
    if not chosen:
        raise ValueError("a forced tool call needs at least one tool")
    schema = call_schema(chosen[0]) if len(chosen) == 1 else {"anyOf": [call_schema(t) for t in chosen]}
    return OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False))
