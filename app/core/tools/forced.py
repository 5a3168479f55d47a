"""The constraint that makes a reply one call of a listed tool (``tool_choice`` "required" or a name).

The reply is the JSON object ``{"name": <the tool's name>, "arguments": <its arguments>}``: a JSON
schema with the name as a ``const`` and the tool's own ``parameters`` schema for the arguments,
``anyOf`` over the tools for "required". The engine enforces it with llama.cpp's grammar sampler
(the schema through llama-cpp-python's JSON-schema-to-GBNF converter), so any model, with or
without tools in its chat template, answers with a call whose arguments match the schema.
:func:`~app.core.tools.calls.parse_tool_calls` reads the reply back.

Local references: a tool's ``parameters`` may keep its subschemas in ``$defs`` (or ``definitions``)
and point at them with ``#/$defs/X`` (the MCP SDK writes a nested pydantic argument so). ``#`` is the
root of the *document*, which here is the wrapper, so :func:`call_schema` hoists each tool's
``$defs`` / ``definitions`` to the wrapper's root (renamed ``<tool>.X`` when several tools share the
schema, so two tools' ``Person`` stay apart) and rewrites the tool's references to match; a reference
elsewhere into the parameters (``#/properties/a``) gets the path of the arguments in front
(:func:`calls_schema`).
"""

from __future__ import annotations

import json
from typing import Any

from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.tools.spec import ToolChoice, ToolChoiceKind, ToolSpec

#: Where a schema keeps subschemas for ``$ref`` (JSON Schema 2019-09's name and draft 7's).
DEFS_KEYS = ("$defs", "definitions")
#: Keywords whose values are data, not schemas: a ``$ref`` inside them is not a reference.
_DATA_KEYS = frozenset({"const", "enum", "default", "examples"})
#: Keywords whose values map names (of properties, of subschemas) to schemas.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", *DEFS_KEYS})


def _rewrite_refs(node: Any, rename: dict[str, str], base: str) -> Any:
    """A copy of the schema ``node`` with each local ``$ref`` rewritten.

    Args:
        rename: ``"#/$defs/X"``-style pointer prefixes of the hoisted subschemas -> their new pointers.
        base: the JSON pointer (without ``#``) of the arguments schema in the wrapper; any other
            local reference ``#/...`` is taken relative to the parameters and gets it in front.
    """
    if isinstance(node, list):
        return [_rewrite_refs(x, rename, base) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#/"):
            out[key] = _moved_ref(value, rename, base)
        elif key in _DATA_KEYS:
            out[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _rewrite_refs(sub, rename, base) for name, sub in value.items()}
        else:
            out[key] = _rewrite_refs(value, rename, base)
    return out


def _moved_ref(ref: str, rename: dict[str, str], base: str) -> str:
    """Where the local reference ``ref`` of a tool's parameters points in the wrapper."""
    for old, new in rename.items():
        if ref == old or ref.startswith(old + "/"):
            return new + ref[len(old) :]
    return f"#{base}{ref[1:]}"


def call_schema(
    tool: ToolSpec, defs: dict[str, dict[str, Any]] | None = None, *, prefix: str = "", base: str = ""
) -> dict[str, Any]:
    """The JSON schema of one call of ``tool``: ``{"name": const, "arguments": parameters}``, both required.

    Args:
        tool: the tool.
        defs: where to put the tool's ``$defs`` / ``definitions`` (``{"$defs": {...}, "definitions":
            {...}}``, filled in place) when the caller builds the document's root; None: this call
            schema is the root and keeps them itself.
        prefix: put before each hoisted subschema's name (``"<tool>."`` when several tools share the
            root), "" to keep the names.
        base: the JSON pointer (no ``#``) of this call schema in the document ("" when it is the root).

    Returns:
        The call schema, every local ``$ref`` of the tool resolving from the document's root.
    """
    params = dict(tool.parameters)
    own: dict[str, dict[str, Any]] = {}
    rename: dict[str, str] = {}
    for key in DEFS_KEYS:
        sub = params.pop(key, None)
        if isinstance(sub, dict):
            own[key] = {}
            for name, sub_schema in sub.items():
                own[key][f"{prefix}{name}"] = sub_schema
                rename[f"#/{key}/{name}"] = f"#/{key}/{prefix}{name}"
    args_at = f"{base}/properties/arguments"
    arguments = _rewrite_refs(params, rename, args_at)
    hoisted = {k: {n: _rewrite_refs(s, rename, args_at) for n, s in v.items()} for k, v in own.items()}
    call: dict[str, Any] = {
        "type": "object",
        "properties": {"name": {"const": tool.name}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    if defs is None:
        call.update(hoisted)
    else:
        for key, subs in hoisted.items():
            defs.setdefault(key, {}).update(subs)
    return call


def calls_schema(tools: tuple[ToolSpec, ...] | list[ToolSpec]) -> dict[str, Any]:
    """The JSON schema of a call of any of ``tools``.

    One tool: its :func:`call_schema`. Several: ``{"anyOf": [{"$ref": "#/$defs/<tool>"}, ...], "$defs":
    {...}}``, each call schema under its tool's name and each tool's own subschemas beside it as
    ``<tool>.X`` (a name with a dot, so never a tool's). The calls sit in ``$defs`` rather than inline
    because llama-cpp-python's converter resolves a pointer through objects only (``#/anyOf/1/...``
    does not resolve), and a tool may point into its own parameters (``#/properties/a``).

    Raises:
        ValueError: ``tools`` is empty.
    """
    if not tools:
        raise ValueError("a forced tool call needs at least one tool")
    if len(tools) == 1:
        return call_schema(tools[0])
    defs: dict[str, dict[str, Any]] = {}
    calls = {t.name: call_schema(t, defs, prefix=f"{t.name}.", base=f"/$defs/{t.name}") for t in tools}
    defs["$defs"] = {**calls, **defs.get("$defs", {})}
    return {"anyOf": [{"$ref": f"#/$defs/{name}"} for name in calls], **defs}


def forced_call_constraint(tools: tuple[ToolSpec, ...], choice: ToolChoice) -> OutputConstraint:
    """The output constraint for a reply that must be a call.

    Args:
        tools: the request's tools.
        choice: :attr:`ToolChoiceKind.FUNCTION` (that tool) or :attr:`ToolChoiceKind.REQUIRED` (any of them).

    Returns:
        A ``JSON_SCHEMA`` constraint: :func:`calls_schema` of the chosen tool or of all of them.

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
    return OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(calls_schema(chosen), ensure_ascii=False))
