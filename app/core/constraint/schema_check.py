"""What of a JSON schema llama-cpp-python's JSON-schema-to-GBNF converter enforces, checked before it runs.

The converter (``llama_cpp.llama_grammar.SchemaConverter``, llama-cpp-python 0.3.x) reads these
keywords: ``type`` (one or a list of string, number, integer, boolean, null, object, array),
``properties``, ``required``, ``additionalProperties``, ``items`` (a schema or a list),
``prefixItems``, ``minItems``, ``maxItems``, ``enum``, ``const``, ``anyOf``, ``oneOf`` (as anyOf),
``allOf`` (objects: their properties merged), ``$ref`` (local ``#/...`` only) into ``$defs`` or
``definitions``, ``pattern`` (``^...$``), ``minLength``, ``maxLength``, and ``format`` (date, time,
date-time and uuid enforced; others are annotations, as JSON Schema allows). Every other keyword it
ignores *silently*, so a reply would not be held to it (``minimum``, ``patternProperties``, ``not``,
``if``...): :func:`schema_problem` refuses those, naming the keyword and where it is
(``'patternProperties' at $.properties.x``), as OpenAI's strict mode refuses what it cannot enforce.
Annotations (``title``, ``description``, ``default``, ``examples``, ``$schema``...) are allowed.

Plain Python: the local API (which cannot import llama_cpp) and the engine both call it; the engine
then runs the converter itself and reports what it raises (:mod:`app.engine.constraint.grammar`).
"""

from __future__ import annotations

import json
from typing import Any

#: Keywords the converter enforces.
ENFORCED: frozenset[str] = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "$defs",
        "definitions",
        "pattern",
        "minLength",
        "maxLength",
        "format",
    }
)

#: Keywords that constrain nothing (JSON Schema's annotations and identifiers).
ANNOTATIONS: frozenset[str] = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)

#: The JSON types the converter knows.
TYPES: frozenset[str] = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})

_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def schema_problem(text: str) -> str | None:
    """Why the JSON schema ``text`` cannot be enforced as it is written, or None when it can.

    Returns:
        A sentence naming the part: "The JSON schema is not valid JSON: line 3, column 5: ...",
        "unsupported in a JSON schema: 'patternProperties' at $.properties.x", an unknown type, a
        ``$ref`` that is not local.
    """
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"The JSON schema is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}."
    if not isinstance(schema, dict):
        return f"A JSON schema must be a JSON object ({{...}}), not {type(schema).__name__}."
    return _walk(schema, "$")


def _walk(node: Any, path: str) -> str | None:
    """The first problem in the schema ``node`` at ``path`` (depth first, in the text's order)."""
    if not isinstance(node, dict):
        return f"unsupported in a JSON schema: {json.dumps(node)} where a schema is expected at {path}"
    for key, value in node.items():
        here = f"{path}.{key}"
        if key not in ENFORCED and key not in ANNOTATIONS:
            return f"unsupported in a JSON schema: '{key}' at {path} (the converter would ignore it)"
        if key == "type":
            kinds = value if isinstance(value, list) else [value]
            for kind in kinds:
                if kind not in TYPES:
                    return f"unsupported in a JSON schema: type {json.dumps(kind)} at {path}"
        elif key == "$ref" and not (isinstance(value, str) and value.startswith("#/")):
            return f"unsupported in a JSON schema: '$ref' {json.dumps(value)} at {path} (only local '#/...' references)"
        elif key in _SUBSCHEMA_MAPS:
            if not isinstance(value, dict):
                return f"unsupported in a JSON schema: '{key}' must be an object at {path}"
            for name, sub in value.items():
                problem = _walk(sub, f"{here}.{name}")
                if problem:
                    return problem
        elif key in _SUBSCHEMA_LISTS:
            if not isinstance(value, list):
                return f"unsupported in a JSON schema: '{key}' must be a list at {path}"
            for i, sub in enumerate(value):
                problem = _walk(sub, f"{here}[{i}]")
                if problem:
                    return problem
        elif key == "items":
            subs = value if isinstance(value, list) else [value]
            for i, sub in enumerate(subs):
                problem = _walk(sub, f"{here}[{i}]" if isinstance(value, list) else here)
                if problem:
                    return problem
        elif key == "additionalProperties" and isinstance(value, dict):
            problem = _walk(value, here)
            if problem:
                return problem
    return None
