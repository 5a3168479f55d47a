"""app/core/tools: OpenAI's tools / tool_choice read and checked, the forced-call constraint, the
calls models write read back, and which chat templates offer tools."""

from __future__ import annotations

import json

import jsonschema
import pytest

from app.core.chat.context import ChatMessage, Role
from app.core.constraint.model import ConstraintKind
from app.core.gguf.gguf_info import read_gguf_info
from app.core.tools.calls import parse_tool_calls
from app.core.tools.forced import forced_call_constraint
from app.core.tools.history import template_messages, tool_calls_text, tool_result_text
from app.core.tools.spec import (
    ToolCall,
    ToolChoice,
    ToolChoiceKind,
    ToolError,
    ToolSpec,
    parse_tool_choice,
    parse_tools,
)
from app.core.tools.template import template_supports_tools, tools_system_prompt

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
            "required": ["city", "unit"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time"}}


def test_tools_are_read_with_their_schema_and_a_missing_schema_means_no_arguments():
    tools = parse_tools([WEATHER, TIME])
    assert [t.name for t in tools] == ["get_weather", "get_time"]
    assert tools[0].description == "The weather in a city."
    assert tools[0].parameters["required"] == ["city", "unit"]
    assert tools[1].parameters == {"type": "object", "properties": {}}
    assert tools[0].openai() == WEATHER
    assert parse_tools(None) == ()


@pytest.mark.parametrize(
    ("raw", "param", "words"),
    [
        ({"type": "function"}, "tools", "must be a list"),
        ([{"type": "code_interpreter"}], "tools[0]", "only functions"),
        ([{"type": "function", "function": "f"}], "tools[0].function", "must be an object"),
        ([{"type": "function", "function": {"name": "has space"}}], "tools[0].function.name", "1 to 64"),
        ([TIME, TIME], "tools[1].function.name", "given twice"),
        (
            [{"type": "function", "function": {"name": "f", "parameters": "x"}}],
            "tools[0].function.parameters",
            "JSON schema",
        ),
        (
            [{"type": "function", "function": {"name": "f", "description": 3}}],
            "tools[0].function.description",
            "string",
        ),
    ],
)
def test_bad_tools_are_refused_naming_the_item(raw, param, words):
    with pytest.raises(ToolError, match=words) as err:
        parse_tools(raw)
    assert err.value.param == param


def test_tool_choice_is_read_and_checked_against_the_tools():
    tools = parse_tools([WEATHER, TIME])
    assert parse_tool_choice(None, tools) == ToolChoice(ToolChoiceKind.AUTO)
    assert parse_tool_choice(None, ()) == ToolChoice(ToolChoiceKind.NONE)
    assert parse_tool_choice("required", tools).forced
    assert not parse_tool_choice("auto", tools).forced and not parse_tool_choice("none", tools).forced
    named = parse_tool_choice({"type": "function", "function": {"name": "get_time"}}, tools)
    assert named == ToolChoice(ToolChoiceKind.FUNCTION, "get_time") and named.forced
    with pytest.raises(ToolError, match="not in 'tools' \\(get_weather, get_time\\)"):
        parse_tool_choice({"type": "function", "function": {"name": "nope"}}, tools)
    with pytest.raises(ToolError, match="lists none"):
        parse_tool_choice("required", ())
    for bad in ("always", "function", 3, {"type": "function"}):
        with pytest.raises(ToolError):
            parse_tool_choice(bad, tools)


def test_the_forced_constraint_is_a_call_of_the_named_tool_or_any_of_them():
    tools = parse_tools([WEATHER, TIME])
    named = forced_call_constraint(tools, ToolChoice(ToolChoiceKind.FUNCTION, "get_weather"))
    assert named.kind is ConstraintKind.JSON_SCHEMA
    schema = json.loads(named.text)
    good = {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}
    jsonschema.validate(good, schema)
    for bad in (
        {"name": "get_time", "arguments": {}},
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "K"}},
        {"name": "get_weather"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    anyone = json.loads(forced_call_constraint(tools, ToolChoice(ToolChoiceKind.REQUIRED)).text)
    jsonschema.validate(good, anyone)
    jsonschema.validate({"name": "get_time", "arguments": {}}, anyone)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "other", "arguments": {}}, anyone)
    with pytest.raises(ValueError, match="does not force"):
        forced_call_constraint(tools, ToolChoice(ToolChoiceKind.AUTO))
    with pytest.raises(ValueError, match="not among"):
        forced_call_constraint(tools, ToolChoice(ToolChoiceKind.FUNCTION, "nope"))


def test_llama_cpp_python_turns_the_forced_constraint_into_a_grammar():
    """The engine converts the schema with llama-cpp-python's converter: ``const`` and ``anyOf`` must survive."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    tools = parse_tools([WEATHER, TIME])
    gbnf = json_schema_to_gbnf(forced_call_constraint(tools, ToolChoice(ToolChoiceKind.REQUIRED)).text)
    assert '\\"get_weather\\"' in gbnf and '\\"get_time\\"' in gbnf and "root ::=" in gbnf


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
REGISTER = {  # as the MCP SDK writes a nested pydantic argument
    "type": "function",
    "function": {
        "name": "register_person",
        "parameters": {
            "type": "object",
            "properties": {
                "person": {"$ref": "#/$defs/Person"},
                "friends": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
            },
            "required": ["person"],
            "$defs": {"Person": PERSON},
        },
    },
}
LABEL = {  # another tool whose own 'Person' is something else, in draft 7's 'definitions', and a ref into itself
    "type": "function",
    "function": {
        "name": "label",
        "parameters": {
            "type": "object",
            "properties": {"who": {"$ref": "#/definitions/Person"}, "again": {"$ref": "#/properties/who"}},
            "required": ["who", "again"],
            "definitions": {"Person": {"type": "string", "enum": ["ann", "bob"]}},
        },
    },
}


def _validator(text):
    """A validator whose every ``$ref`` must resolve from the document's root (``referencing`` raises otherwise)."""
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    registry = Registry().with_resource("urn:call", DRAFT202012.create_resource(schema))
    return jsonschema.Draft202012Validator({"$ref": "urn:call"}, registry=registry)


def test_a_tools_defs_are_hoisted_so_its_refs_resolve_from_the_wrapper():
    tools = parse_tools([REGISTER, LABEL, WEATHER])
    ann = {"name": "register_person", "arguments": {"person": {"name": "Ann", "age": 31}}}
    for choice in (ToolChoice(ToolChoiceKind.FUNCTION, "register_person"), ToolChoice(ToolChoiceKind.REQUIRED)):
        v = _validator(forced_call_constraint(tools, choice).text)
        assert v.is_valid(ann)
        assert v.is_valid({**ann, "arguments": {**ann["arguments"], "friends": [{"name": "Bo", "age": 2}]}})
        assert not v.is_valid({"name": "register_person", "arguments": {"person": {"name": "Ann"}}})
        assert not v.is_valid({"name": "register_person", "arguments": {"person": "ann"}})
    anyone = _validator(forced_call_constraint(tools, ToolChoice(ToolChoiceKind.REQUIRED)).text)
    assert anyone.is_valid({"name": "label", "arguments": {"who": "ann", "again": "bob"}})  # its own Person
    assert not anyone.is_valid({"name": "label", "arguments": {"who": "ann", "again": "cy"}})  # the ref into itself
    assert not anyone.is_valid({"name": "label", "arguments": {"who": {"name": "Ann", "age": 31}, "again": "ann"}})
    assert anyone.is_valid({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}})
    one = _validator(forced_call_constraint(tools, ToolChoice(ToolChoiceKind.FUNCTION, "label")).text)
    assert one.is_valid({"name": "label", "arguments": {"who": "bob", "again": "bob"}})
    assert not one.is_valid({"name": "label", "arguments": {"who": "bob", "again": 3}})


def test_llama_cpp_python_converts_calls_whose_arguments_use_refs():
    """Before the hoisting the converter raised "Error resolving ref stdin#/$defs/Person" for every tool offered."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    tools = parse_tools([REGISTER, LABEL, WEATHER])
    for choice in (ToolChoice(ToolChoiceKind.REQUIRED), ToolChoice(ToolChoiceKind.FUNCTION, "register_person")):
        gbnf = json_schema_to_gbnf(forced_call_constraint(tools, choice).text)
        assert '\\"age\\"' in gbnf and "root ::=" in gbnf


def test_a_tool_the_grammar_cannot_express_is_named_and_left_out_of_the_offer():
    from app.core.tools.checks import tool_problem, usable_tools

    bounded = {
        "type": "function",
        "function": {"name": "roll", "parameters": {"type": "object", "properties": {"n": {"minimum": 1}}}},
    }
    dangling = {
        "type": "function",
        "function": {"name": "lost", "parameters": {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}},
    }
    tools = parse_tools([WEATHER, bounded, REGISTER, dangling])
    assert tool_problem(tools[0]) is None and tool_problem(tools[2]) is None
    assert tool_problem(tools[1]) == (
        "tool 'roll': its arguments' JSON schema uses 'minimum' at $.properties.n, which llama.cpp's grammar "
        "cannot express (the converter would ignore it)"
    )
    usable, problems = usable_tools(tools)
    assert [t.name for t in usable] == ["get_weather", "register_person"]
    assert problems[1].startswith("tool 'lost': its arguments' JSON schema uses '$ref' \"#/$defs/P\" at $.properties.p")


def test_the_engine_names_the_tool_whose_schema_the_grammar_cannot_express():
    """What the window's chat gets for a forced call over MCP tools: before, "Unsupported in a JSON schema:
    'minimum' at $.anyOf[1].properties.arguments.properties.n", no tool named."""
    from app.engine.constraint.grammar import constraint_gbnf
    from app.engine.errors import EngineError

    roll = ToolSpec("roll", "", {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}})
    odd_def = {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"not": {}}}}
    reg = ToolSpec("reg", "", odd_def)
    (weather,) = parse_tools([WEATHER])
    cases = [
        ((roll,), "tool 'roll': its arguments' JSON schema uses 'minimum' at $.properties.n, "),
        ((weather, roll), "tool 'roll': its arguments' JSON schema uses 'minimum' at $.properties.n, "),
        ((weather, reg), "tool 'reg': its arguments' JSON schema uses 'not' at $.$defs.P, "),
        ((reg,), "tool 'reg': its arguments' JSON schema uses 'not' at $.$defs.P, "),
    ]
    for tools, said in cases:
        with pytest.raises(EngineError) as err:
            constraint_gbnf(forced_call_constraint(tools, ToolChoice(ToolChoiceKind.REQUIRED)))
        assert str(err.value).startswith(said) and "which llama.cpp's grammar cannot express" in str(err.value)


def test_what_the_converter_still_refuses_names_the_tool_in_words():
    from app.engine.constraint.grammar import constraint_gbnf, converter_words
    from app.engine.errors import EngineError

    quantifier = {
        "type": "function",
        "function": {
            "name": "odd",
            "parameters": {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a{x}$"}}},
        },
    }
    tools = parse_tools([WEATHER, quantifier, REGISTER])
    for choice in (ToolChoice(ToolChoiceKind.REQUIRED), ToolChoice(ToolChoiceKind.FUNCTION, "odd")):
        with pytest.raises(EngineError) as err:
            constraint_gbnf(forced_call_constraint(tools, choice))
        assert str(err.value).startswith("tool 'odd': its arguments' JSON schema cannot be turned into a grammar")
    said = converter_words(AssertionError("Error resolving ref stdin#/$defs/P: $defs not in {'type': 'object'}"))
    assert said == "the reference '#/$defs/P' points at nothing ('$defs' is not there)"
    assert converter_words(AssertionError("Unrecognized schema: {'a': 1}")) == "Unrecognized schema"


def _calls(text, names=None):
    return [(c.name, json.loads(c.arguments)) for c in parse_tool_calls(text, names).calls]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',  # Hermes / Qwen
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}',  # left open at the end token
        '{"name": "get_weather", "parameters": {"city": "Oslo"}}',  # Llama 3.1
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        '  {"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\n',  # arguments as JSON text
        '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
        '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```',
        '{"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}}}',  # llama.cpp's generic
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}]',  # Mistral
        '{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\":\\"Oslo\\"}"}}',
    ],
)
def test_each_shape_models_write_is_read_as_one_call(text):
    parsed = parse_tool_calls(text)
    assert _calls(text) == [("get_weather", {"city": "Oslo"})]
    assert parsed.content == ""
    assert parsed.calls[0].id.startswith("call_") and len(parsed.calls[0].id) == 29


def test_several_calls_and_the_text_around_them():
    text = (
        "Let me check both.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    )
    parsed = parse_tool_calls(text)
    assert parsed.content == "Let me check both."
    assert [c.name for c in parsed.calls] == ["get_weather", "get_time"]
    assert len({c.id for c in parsed.calls}) == 2
    llama = '{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_time", "parameters": {}}'
    assert _calls(llama) == [("get_weather", {"city": "Oslo"}), ("get_time", {})]
    generic = '{"tool_calls": [{"name": "get_time", "arguments": {}}, {"name": "get_time", "arguments": {}}]}'
    assert len(_calls(generic)) == 2


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Oslo is mild.",
        '{"city": "Oslo", "temperature": 4}',  # JSON, but not a call
        '{"name": "Oslo"}',  # a name and no arguments: data, not a call
        '{"name": "get_weather", "arguments": [1, 2]}',  # arguments not an object
        '{"name": "get_weather", "arguments": "not json"}',
        '<tool_call>{"name": "get_weather", "argu</tool_call>',  # cut off inside
        '{"name": "get_weather", "arguments": {}} and then some words',
        "",
    ],
)
def test_anything_else_is_content_never_half_a_call(text):
    parsed = parse_tool_calls(text)
    assert parsed.calls == () and parsed.content == text.strip()


def test_a_call_of_a_tool_not_offered_is_content():
    text = '{"name": "rm_rf", "arguments": {}}'
    assert _calls(text) == [("rm_rf", {})]
    assert parse_tool_calls(text, names={"get_weather"}).calls == ()


def test_history_text_reads_back_as_the_same_calls():
    calls = [ToolCall.new("get_weather", {"city": "Zürich"}), ToolCall("call_1", "get_time", "")]
    text = tool_calls_text("Checking.", calls)
    assert text.startswith("Checking.\n") and "Zürich" in text
    assert _calls(text.split("\n", 1)[1]) == [("get_weather", {"city": "Zürich"}), ("get_time", {})]
    result = json.loads(tool_result_text("get_weather", "call_1", '{"temp": 4}'))
    assert result == {"tool_response": {"name": "get_weather", "tool_call_id": "call_1", "content": '{"temp": 4}'}}


QWEN_LIKE = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n' }}{%- for tool in tools %}{{- tool | tojson }}"
    "{%- endfor %}{%- endif %}{%- for message in messages %}{{ message.content }}{%- endfor %}"
)


def test_a_template_offers_tools_when_its_jinja_reads_the_tools_variable(smollm2):
    assert template_supports_tools(QWEN_LIKE)
    assert template_supports_tools("{% set t = tools | default([]) %}{{ messages[0].content }}")
    assert not template_supports_tools("{{ 'tools are not used here' }}{{ messages[0].content }}")
    assert not template_supports_tools("You may use tools. {{ messages[0].content }}")  # text, not code
    assert not template_supports_tools("{{ message.tools_used }}")
    assert not template_supports_tools(None) and not template_supports_tools("")
    smol = read_gguf_info(smollm2).chat_template
    assert smol and not template_supports_tools(smol)  # SmolLM2's ChatML template has no tools


def test_the_system_prompt_lists_each_tool_and_the_call_shape():
    text = tools_system_prompt(parse_tools([WEATHER, TIME]))
    assert '"name": "get_weather"' in text and '"name": "get_time"' in text
    assert '"required": ["city", "unit"]' in text and '{"name": <the tool' in text


def test_a_tool_aware_template_gets_the_calls_and_results_back_as_its_messages():
    calls = [ToolCall("call_a", "get_weather", '{"city": "Oslo"}'), ToolCall("call_b", "get_time", "{}")]
    results = "\n".join(
        [tool_result_text("get_weather", "call_a", "4 C"), tool_result_text("get_time", "call_b", "9:00")]
    )
    history = [
        ChatMessage(Role.USER, "Weather and time?"),
        ChatMessage(Role.ASSISTANT, tool_calls_text("Checking.", calls)),
        ChatMessage(Role.USER, results),
        ChatMessage(Role.ASSISTANT, '{"answer": 4}'),  # JSON, but not a call: as it is
        ChatMessage(Role.USER, '{"tool_response": "not one"}'),
    ]
    out = template_messages(history)
    assert out[0] == {"role": "user", "content": "Weather and time?"}
    assert out[1] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": {}}},
        ],
    }
    assert out[2:4] == [
        {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "4 C"},
        {"role": "tool", "tool_call_id": "call_b", "name": "get_time", "content": "9:00"},
    ]
    assert out[4] == {"role": "assistant", "content": '{"answer": 4}'}
    assert out[5] == {"role": "user", "content": '{"tool_response": "not one"}'}
    unanswered = template_messages([ChatMessage(Role.ASSISTANT, tool_calls_text("", calls[:1]))])
    assert unanswered[0]["content"] == "" and unanswered[0]["tool_calls"][0]["id"] == "call_0_0"


def test_parsed_arguments_are_the_text_the_model_wrote() -> None:
    """Not re-serialized (the confirmation dialog and the API's tool_calls show what the model wrote): several
    calls, a Llama 3.1 "parameters" call, arguments written as JSON text."""
    text = (
        '<tool_call>{"name": "add", "arguments": {"b":2,  "a":1}}</tool_call>\n'
        '<tool_call>{"name": "add", "parameters": {"a": 1.50}}</tool_call>\n'
        '<tool_call>{"name": "echo", "arguments": "{\\"text\\":\\"hi\\"}"}</tool_call>'
    )
    calls = parse_tool_calls(text).calls
    assert [c.arguments for c in calls] == ['{"b":2,  "a":1}', '{"a": 1.50}', '{"text":"hi"}']
    assert [c.name for c in calls] == ["add", "add", "echo"]
