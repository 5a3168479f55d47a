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
It also refuses, in words and with the path, two things the converter would raise on with its own
internals in the message: a ``pattern`` not written ``^...$``, and a local ``$ref`` that points at nothing
(resolved from the root through objects only, as the converter resolves it).
Annotations (``title``, ``description``, ``default``, ``examples``, ``$schema``...) are allowed.

Plain Python: the local API (which cannot import llama_cpp) and the engine both call it; the engine
then runs the converter itself and reports what it raises (:mod:`app.engine.constraint.grammar`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class SchemaIssue:
    """What of a JSON schema the converter cannot enforce, and where.

    Attributes:
        what: the part, in words: ``'patternProperties'``, ``type "date"``, ``the pattern "[a-z]+"``.
        path: where it is, as ``$.properties.x`` (``$`` the schema's root).
        why: a short reason ("the converter would ignore it"), "" when ``what`` says it.
    """

    what: str
    path: str
    why: str = ""

    @property
    def sentence(self) -> str:
        """``unsupported in a JSON schema: <what> at <path> (<why>)``."""
        tail = f" ({self.why})" if self.why else ""
        return f"unsupported in a JSON schema: {self.what} at {self.path}{tail}"


def schema_problem(text: str) -> str | None:
    """Why the JSON schema ``text`` cannot be enforced as it is written, or None when it can.

    Returns:
        A sentence naming the part: "The JSON schema is not valid JSON: line 3, column 5: ...",
        "unsupported in a JSON schema: 'patternProperties' at $.properties.x", an unknown type, a
        ``$ref`` that is not local or points at nothing, a ``pattern`` not written ``^...$``.
    """
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"The JSON schema is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}."
    if not isinstance(schema, dict):
        return f"A JSON schema must be a JSON object ({{...}}), not {type(schema).__name__}."
    issue = schema_issue(schema)
    return issue.sentence if issue else None


def schema_issue(schema: dict[str, Any]) -> SchemaIssue | None:
    """The first part of the JSON schema ``schema`` (a dict) the converter cannot enforce, or None."""
    return _walk(schema, "$", schema)


def _resolves(root: dict[str, Any], ref: str) -> bool:
    """The local reference ``ref`` (``#/a/b``) names a schema in ``root``, walking objects only, as
    llama-cpp-python's converter does (``SchemaConverter.resolve_refs``: no list indexes)."""
    target: Any = root
    for sel in ref[2:].split("/"):
        if not isinstance(target, dict) or sel not in target:
            return False
        target = target[sel]
    return isinstance(target, dict)


def _walk(node: Any, path: str, root: dict[str, Any]) -> SchemaIssue | None:
    """The first issue in the schema ``node`` at ``path`` (depth first, in the text's order)."""
    if not isinstance(node, dict):
        return SchemaIssue(f"{json.dumps(node)} where a schema is expected", path)
    for key, value in node.items():
        here = f"{path}.{key}"
        if key not in ENFORCED and key not in ANNOTATIONS:
            return SchemaIssue(f"'{key}'", path, "the converter would ignore it")
        if key == "type":
            kinds = value if isinstance(value, list) else [value]
            for kind in kinds:
                if kind not in TYPES:
                    return SchemaIssue(f"type {json.dumps(kind)}", path)
        elif key == "$ref":
            if not (isinstance(value, str) and value.startswith("#/")):
                return SchemaIssue(f"'$ref' {json.dumps(value)}", path, "only local '#/...' references")
            if not _resolves(root, value):
                return SchemaIssue(f"'$ref' {json.dumps(value)}", path, "it points at nothing in the schema")
        elif key == "pattern":
            if not (isinstance(value, str) and value.startswith("^") and value.endswith("$")):
                return SchemaIssue(
                    f"the pattern {json.dumps(value)}", path, "the converter needs it anchored as '^...$'"
                )
        elif key in _SUBSCHEMA_MAPS:
            if not isinstance(value, dict):
                return SchemaIssue(f"'{key}' that is not an object", path)
            for name, sub in value.items():
                issue = _walk(sub, f"{here}.{name}", root)
                if issue:
                    return issue
        elif key in _SUBSCHEMA_LISTS:
            if not isinstance(value, list):
                return SchemaIssue(f"'{key}' that is not a list", path)
            for i, sub in enumerate(value):
                issue = _walk(sub, f"{here}[{i}]", root)
                if issue:
                    return issue
        elif key == "items":
            subs = value if isinstance(value, list) else [value]
            for i, sub in enumerate(subs):
                issue = _walk(sub, f"{here}[{i}]" if isinstance(value, list) else here, root)
                if issue:
                    return issue
        elif key == "additionalProperties" and isinstance(value, dict):
            issue = _walk(value, here, root)
            if issue:
                return issue
    return None
