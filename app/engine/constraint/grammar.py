"""An output constraint as GBNF text for llama.cpp's grammar sampler.

- ``JSON``: llama-cpp-python's ``JSON_GBNF`` (llama.cpp's ``grammars/json.gbnf``: an object at the root),
  its root ending at the closing brace (:data:`JSON_OBJECT_GBNF`; llama.cpp's lets whitespace follow);
- ``JSON_SCHEMA``: llama-cpp-python's converter (``llama_cpp.llama_grammar.json_schema_to_gbnf``), after
  :func:`app.core.constraint.schema_check.schema_problem` refused what it would silently ignore; what the
  converter itself raises (``AssertionError`` for an unrecognized schema or a pattern without ``^...$``,
  ``ValueError`` for a bad ``$ref`` or quantifier, ``KeyError`` for a ``$ref`` to nothing) is said in words
  (:func:`converter_words`), with the tool named when the schema is a forced call's;
- ``GBNF``: the text as given.
"""

from __future__ import annotations

import json
import re

from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.core import protocol as P
from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.constraint.schema_check import schema_problem
from app.core.tools.checks import call_name, call_schema_problem
from app.engine.errors import EngineError


def constraint_gbnf(constraint: OutputConstraint | None) -> str | None:
    """The GBNF grammar (start rule ``root``) that enforces ``constraint``; None for none.

    Raises:
        EngineError: ``constraint``: the schema is not JSON, uses what the converter does not enforce
            (the keyword and its path named) or makes the converter fail; the grammar is empty.
    """
    if constraint is None or constraint.kind == ConstraintKind.NONE:
        return None
    if constraint.kind == ConstraintKind.JSON:
        return JSON_OBJECT_GBNF
    if constraint.kind == ConstraintKind.GBNF:
        if not constraint.text.strip():
            raise EngineError(P.FailureKind.CONSTRAINT, "The GBNF grammar is empty: write a rule 'root ::= ...'.")
        return constraint.text
    tool_said = _call_problem(constraint.text)
    if tool_said is not None:
        raise EngineError(P.FailureKind.CONSTRAINT, tool_said)
    problem = schema_problem(constraint.text)
    if problem is not None:
        raise EngineError(P.FailureKind.CONSTRAINT, problem[0].upper() + problem[1:])
    try:
        return ending_at_root(str(json_schema_to_gbnf(constraint.text)), "space")
    except _CONVERTER_ERRORS as exc:
        tool = _failing_tool(constraint.text)
        which = f"tool {tool!r}: its arguments' JSON schema" if tool else "The JSON schema"
        raise EngineError(
            P.FailureKind.CONSTRAINT,
            f"{which} cannot be turned into a grammar by llama-cpp-python's JSON-schema converter: "
            f"{converter_words(exc)}.",
        ) from None


def ending_at_root(gbnf: str, ws: str) -> str:
    """``gbnf`` with a one-line ``root`` rule's trailing whitespace rule ``ws`` dropped, so the reply ends at
    its closing ``}`` or ``]``: the end token is then the only one the grammar leaves, where the trailing
    ``ws`` let a model go on in spaces and newlines until ``max_tokens``. A root that does not end so is
    kept as it is (the converter writes ``root ::= "{" space ... "}" space`` for an object schema)."""
    lines = gbnf.split("\n")
    for i, line in enumerate(lines):
        m = _ROOT_WS_RE.match(line)
        if m and m.group(2) == ws:
            lines[i] = m.group(1)
            break
    return "\n".join(lines)


def _json_object_gbnf() -> str:
    """llama-cpp-python's ``JSON_GBNF`` (llama.cpp's ``grammars/json.gbnf``) with ``root`` its ``object`` rule
    without the trailing ``ws`` (:func:`ending_at_root`); JSON_GBNF itself when its object rule has
    another shape."""
    m = re.search(r"^object ::=\s*(.*?)\n\n", JSON_GBNF, re.S | re.M)
    if not m:
        return JSON_GBNF
    body = " ".join(m.group(1).split())
    root = ending_at_root(f"root ::= {body}", "ws")
    if root == f"root ::= {body}":
        return JSON_GBNF
    return re.sub(r"^root\s*::=.*$", lambda _m: root, JSON_GBNF, count=1, flags=re.M)


_ROOT_WS_RE = re.compile(r'^(root\s*::=.*["\]}]) ([a-z-]+)\s*$')
JSON_OBJECT_GBNF = _json_object_gbnf()
_CONVERTER_ERRORS = (AssertionError, ValueError, KeyError, TypeError, RecursionError)
_REF_RE = re.compile(r"Error resolving ref (?:stdin)?(#\S*?): (\S+) not in")


def converter_words(exc: BaseException) -> str:
    """What the converter raised, in words: its references without the ``stdin`` it puts in front, and
    never the internal dict it appends ("Error resolving ref stdin#/$defs/P: $defs not in {...}" becomes
    "the reference '#/$defs/P' points at nothing ('$defs' is not there)")."""
    text = str(exc) or type(exc).__name__
    m = _REF_RE.search(text)
    if m:
        return f"the reference '{m.group(1)}' points at nothing ('{m.group(2)}' is not there)"
    text = text.replace("stdin#", "#")
    for cut in (": {", ": [", " in {", " in ["):  # the converter's repr of a schema or node
        at = text.find(cut)
        if at >= 0:
            text = text[:at]
    return text.rstrip(".")


def _call_problem(text: str) -> str | None:
    """:func:`~app.core.tools.checks.call_schema_problem` for the JSON text ``text`` (None when not JSON)."""
    try:
        return call_schema_problem(json.loads(text))
    except ValueError:
        return None


def _failing_tool(text: str) -> str | None:
    """The tool whose call the converter cannot handle, when ``text`` is a forced call's schema
    (:func:`~app.core.tools.forced.calls_schema`: one call, or ``anyOf`` over calls in ``$defs``)."""
    try:
        schema = json.loads(text)
    except ValueError:
        return None
    if not isinstance(schema, dict):
        return None
    name = call_name(schema)
    if name is not None:
        return name
    defs = schema.get("$defs")
    if not isinstance(defs, dict) or not isinstance(schema.get("anyOf"), list):
        return None
    for alt in schema["anyOf"]:
        ref = alt.get("$ref") if isinstance(alt, dict) else None
        call = defs.get(ref[len("#/$defs/") :]) if isinstance(ref, str) and ref.startswith("#/$defs/") else None
        if not isinstance(call, dict) or call_name(call) is None:
            continue
        try:
            json_schema_to_gbnf(json.dumps({**call, **{k: schema[k] for k in ("$defs", "definitions") if k in schema}}))
        except _CONVERTER_ERRORS:
            return call_name(call)
    return None
