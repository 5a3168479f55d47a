"""``response_format`` parsed into an output constraint, and the schema check that names what the converter
would ignore (issue 23 §1); plain Python, no engine."""

from __future__ import annotations

import json

import pytest

from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.constraint.schema_check import schema_problem
from app.server.errors import ApiError
from app.server.response_format import parse_response_format


def fmt(schema=None, **spec):
    js = {"name": "x", **spec}
    if schema is not None:
        js["schema"] = schema
    return {"response_format": {"type": "json_schema", "json_schema": js}}


def test_text_json_object_and_json_schema():
    assert parse_response_format({}) is None
    assert parse_response_format({"response_format": {"type": "text"}}) is None
    assert parse_response_format({"response_format": {"type": "json_object"}}) == OutputConstraint(ConstraintKind.JSON)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    c = parse_response_format(fmt(schema, strict=True))
    assert c is not None and c.kind == ConstraintKind.JSON_SCHEMA and json.loads(c.text) == schema
    assert parse_response_format(fmt()) == OutputConstraint(ConstraintKind.JSON)  # no schema: any object


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"response_format": "json"}, "must be an object"),
        ({"response_format": {"type": "xml"}}, '"xml"'),
        ({"response_format": {"type": "json_schema"}}, "a 'name' and the 'schema'"),
        (
            fmt({"type": "object", "properties": {"x": {"$ref": "#/$defs/none"}}}),
            "'$ref' \"#/$defs/none\" at $.properties.x",
        ),
        (fmt({"type": "object", "properties": {"x": {"type": "string", "pattern": "[a-z]+"}}}), "at $.properties.x"),
        (fmt({}, name="has space"), "json_schema.name"),
        (fmt({}, strict="yes"), "strict"),
        (fmt([1]), "must be a JSON schema object"),
        (fmt({"type": "object", "patternProperties": {"^a": {}}}), "'patternProperties' at $"),
    ],
)
def test_bad_formats_are_400_naming_the_field(body, says):
    with pytest.raises(ApiError) as bad:
        parse_response_format(body)
    assert bad.value.status == 400 and bad.value.param == "response_format" and says in bad.value.message


def test_schema_problem_names_the_keyword_and_its_path():
    ok = {
        "title": "T",
        "type": "object",
        "properties": {"a": {"anyOf": [{"type": "string", "format": "date"}, {"$ref": "#/$defs/n"}]}},
        "$defs": {"n": {"type": ["integer", "null"], "description": "a number"}},
        "additionalProperties": False,
    }
    assert schema_problem(json.dumps(ok)) is None
    deep = {"type": "array", "items": {"type": "object", "properties": {"v": {"anyOf": [{"not": {}}]}}}}
    assert schema_problem(json.dumps(deep)) == (
        "unsupported in a JSON schema: 'not' at $.items.properties.v.anyOf[0] (the converter would ignore it)"
    )
    assert 'type "date"' in (schema_problem('{"type": "date"}') or "")
    assert "only local" in (schema_problem('{"$ref": "https://example.com/s.json"}') or "")
    assert (schema_problem('{"type": "object",\n "x": }') or "").startswith("The JSON schema is not valid JSON: line 2")
    assert "must be a JSON object" in (schema_problem("[1]") or "")


def test_a_remote_engine_is_asked_for_the_same_format():
    from app.core import protocol as P
    from app.core.chat.context import ChatMessage
    from app.core.remote import RemoteFacts, ServerKind
    from app.core.sampling.params import SamplerSettings
    from app.remote.generation import request_body

    facts = RemoteFacts("http://127.0.0.1:1/v1", ServerKind.LLAMA_SERVER, ("m",), "m")
    msgs = (ChatMessage("user", "hi"),)

    def body(c):
        return request_body(P.Generate(1, msgs, SamplerSettings(), constraint=c), facts)

    assert "response_format" not in body(None) and "grammar" not in body(None)
    assert body(OutputConstraint(ConstraintKind.JSON))["response_format"] == {"type": "json_object"}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = body(OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(schema)))["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == schema
    assert body(OutputConstraint(ConstraintKind.GBNF, 'root ::= "a"'))["grammar"] == 'root ::= "a"'


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/none"}}},
        {"type": "object", "properties": {"x": {"type": "string", "pattern": "[a-z]+"}}},
        {"type": "object", "properties": {"p": {"$ref": "#/$defs/P/x"}}, "$defs": {"P": {"type": "string"}}},
    ],
)
def test_what_the_converter_would_raise_on_is_said_in_words_before_it_runs(schema):
    """Before: the engine's 400 quoted the converter ("Error resolving ref stdin#/$defs/none: $defs not in
    {'type': 'object', ...}") and named no field."""
    with pytest.raises(ApiError) as bad:
        parse_response_format(fmt(schema))
    said = bad.value.message
    assert bad.value.param == "response_format" and "$.properties." in said
    assert "stdin" not in said and "{'" not in said


def test_the_json_grammars_root_ends_at_the_closing_bracket():
    """Trailing whitespace after the root let a reply run on to max_tokens (llama.cpp's json.gbnf ends
    ``"}" ws``); the engine's grammars end at the bracket, the end token then the only one left."""
    from app.engine.constraint.grammar import JSON_OBJECT_GBNF, constraint_gbnf

    (root,) = [line for line in JSON_OBJECT_GBNF.split("\n") if line.startswith("root")]
    assert root.endswith('"}"') and root.startswith('root ::= "{" ws')
    obj = {"type": "object", "properties": {"a": {"type": "integer"}}}
    for schema, end in ((obj, '"}"'), ({"type": "array", "items": {"type": "integer"}}, '"]"')):
        gbnf = constraint_gbnf(OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(schema))) or ""
        (root,) = [line for line in gbnf.split("\n") if line.startswith("root")]
        assert root.endswith(end), root
