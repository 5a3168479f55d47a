"""``response_format`` (OpenAI's shape) into an output constraint for the engine (issue 23 §1).

- absent, null or ``{"type": "text"}``: no constraint;
- ``{"type": "json_object"}``: any JSON object (llama.cpp's JSON grammar);
- ``{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}``: the schema,
  converted by llama-cpp-python's converter in the engine. The schema is always enforced as
  ``strict`` would (``strict`` is read and checked, not needed). Without ``schema``, any JSON object:
  OpenAI's API description makes ``json_schema.schema`` optional for Chat Completions
  (``ResponseFormatJsonSchema`` in its OpenAPI document 2.3.0; only ``name`` is required), without saying
  what it then enforces, so Glassbox enforces what ``json_object`` does.

A schema that uses what the converter would silently ignore is refused here with 400 naming the part
(:func:`app.core.constraint.schema_check.schema_problem`, the list the engine checks too); what the
converter itself refuses comes back from the engine as a ``constraint`` failure before anything is
evaluated, also a 400 (:mod:`app.server.app`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.constraint.schema_check import schema_problem
from app.server.errors import bad_request

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's rule for json_schema.name


def parse_response_format(body: dict[str, Any]) -> OutputConstraint | None:
    """The output constraint ``body["response_format"]`` asks for; None for free text.

    Raises:
        ApiError: 400 naming the field (``response_format``, ``response_format.json_schema.schema``...).
    """
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise bad_request("'response_format' must be an object with a 'type'.", "response_format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputConstraint(ConstraintKind.JSON)
    if kind != "json_schema":
        raise bad_request(
            f"'response_format.type' must be 'text', 'json_object' or 'json_schema', not {json.dumps(kind)}.",
            "response_format",
        )
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict):
        raise bad_request(
            "'response_format.json_schema' must be an object with a 'name' and the 'schema' the reply must match.",
            "response_format",
        )
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise bad_request(
            "'response_format.json_schema.name' must be 1 to 64 letters, digits, '_' or '-'.", "response_format"
        )
    if "strict" in spec and not isinstance(spec["strict"], bool | None):
        raise bad_request("'response_format.json_schema.strict' must be true or false.", "response_format")
    schema = spec.get("schema")
    if schema is None:
        return OutputConstraint(ConstraintKind.JSON)
    if not isinstance(schema, dict):
        raise bad_request("'response_format.json_schema.schema' must be a JSON schema object.", "response_format")
    text = json.dumps(schema)
    problem = schema_problem(text)
    if problem is not None:
        raise bad_request(f"'response_format.json_schema.schema': {problem}.", "response_format")
    return OutputConstraint(ConstraintKind.JSON_SCHEMA, text)
