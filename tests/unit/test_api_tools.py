"""The local API's tools (app/server): tools / tool_choice into the engine request, tool history
written as text, and replies turned into OpenAI's tool_calls, whole and streamed."""

from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest

from app.core import protocol as P
from app.core.chat.context import GenerationStats, Role, StopReason
from app.core.constraint.model import ConstraintKind
from app.core.tools.spec import ToolChoiceKind
from app.server.errors import ApiError
from app.server.gateway import ApiJob, ModelCard
from app.server.responses import ReplyBuilder
from app.server.schema import Endpoint, parse_request

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = {"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [WEATHER]}
MODEL = ModelCard("smol", "/m/smol.gguf", 2048, (2,), 0)
DONE = GenerationStats(generated_tokens=9, stop_reason=StopReason.EOS)
CALL_TEXT = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'


def test_a_forced_choice_asks_the_engine_for_a_call_under_the_constraint():
    named = parse_request(
        {**ASK, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, Endpoint.CHAT
    )
    gen = named.generate
    assert gen.tool_choice is not None and gen.tool_choice.kind is ToolChoiceKind.FUNCTION
    assert [t.name for t in gen.tools] == ["get_weather"]
    assert gen.constraint is not None and gen.constraint.kind is ConstraintKind.JSON_SCHEMA
    jsonschema.validate(json.loads(CALL_TEXT), json.loads(gen.constraint.text))
    required = parse_request({**ASK, "tool_choice": "required"}, Endpoint.CHAT).generate
    assert required.constraint is not None


def test_auto_offers_the_tools_unconstrained_and_none_leaves_them_out():
    auto = parse_request(ASK, Endpoint.CHAT)  # tool_choice absent: auto
    assert auto.tool_choice.kind is ToolChoiceKind.AUTO and auto.generate.constraint is None
    assert auto.generate.tools and auto.tool_names == {"get_weather"}
    none = parse_request({**ASK, "tool_choice": "none"}, Endpoint.CHAT)
    assert none.generate.tools == () and none.generate.constraint is None and none.tool_names is None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({**ASK, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
        ({**ASK, "tool_choice": "sometimes"}, "tool_choice"),
        ({**ASK, "tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
        ({"messages": ASK["messages"], "tool_choice": "required"}, "tool_choice"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
                    }
                ]
            },
            "messages[0].tool_calls[0].function.arguments",
        ),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": "x"}]}, "messages[0].tool_calls"),
    ],
)
def test_bad_tools_are_a_400_naming_the_field(body, param):
    with pytest.raises(ApiError) as err:
        parse_request(body, Endpoint.CHAT)
    assert err.value.status == 400 and err.value.param == param


@pytest.mark.parametrize("choice", [None, "required", "none"])
@pytest.mark.parametrize("parameters", [{"type": "string"}, {"properties": {"a": {}}}, [1], "object"])
def test_parameters_that_are_not_an_object_schema_are_a_400_naming_the_field(parameters, choice):
    """Before: {"type": "string"} was accepted, and "required" then sampled a bare string as the arguments."""
    tool = {"type": "function", "function": {"name": "a", "parameters": parameters}}
    body = {**ASK, "tools": [WEATHER, tool]}
    if choice:
        body["tool_choice"] = choice
    with pytest.raises(ApiError) as err:
        parse_request(body, Endpoint.CHAT)
    assert err.value.status == 400 and err.value.param == "tools[1].function.parameters"
    assert "must be a JSON schema of type object" in err.value.message
    for fine in ({}, None):  # no arguments: an empty object schema
        tool["function"]["parameters"] = fine
        (_, empty) = parse_request(body, Endpoint.CHAT).tools
        assert empty.parameters == {"type": "object", "properties": {}}


def test_an_mcp_input_schema_that_is_not_an_object_is_named():
    from app.core.tools.checks import tool_problem, usable_tools
    from app.core.tools.spec import ToolSpec

    text = ToolSpec("echo", "", {"type": "string"})
    assert tool_problem(text) == (
        'tool \'echo\': its arguments\' schema must be a JSON schema of type object ("type": "object", '
        '"properties": {...}), not one of type "string"'
    )
    ok = ToolSpec("ok", "", {"type": "object", "properties": {}})
    assert usable_tools((text, ok)) == ((ok,), (tool_problem(text),))


def test_a_forced_call_to_a_schema_the_grammar_cannot_hold_is_a_400_naming_the_tool_and_keyword():
    bounded = {
        "type": "function",
        "function": {
            "name": "roll",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
        },
    }
    with pytest.raises(ApiError) as err:
        parse_request({**ASK, "tools": [WEATHER, bounded], "tool_choice": "required"}, Endpoint.CHAT)
    assert err.value.param == "tools[1].function.parameters"
    assert "roll" in str(err.value) and "'minimum'" in str(err.value) and "$.properties.n" in str(err.value)
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert parse_request({**ASK, "tools": [WEATHER, bounded], "tool_choice": named}, Endpoint.CHAT).generate.constraint
    assert parse_request({**ASK, "tools": [WEATHER, bounded]}, Endpoint.CHAT).tool_names  # auto constrains nothing


def test_a_forced_call_and_a_response_format_are_not_both_taken():
    fmt = {"response_format": {"type": "json_object"}}
    with pytest.raises(ApiError) as err:
        parse_request({**ASK, **fmt, "tool_choice": "required"}, Endpoint.CHAT)
    assert err.value.param == "response_format" and "send one of them" in str(err.value)
    auto = parse_request({**ASK, **fmt}, Endpoint.CHAT).generate  # auto: the tools offered, the format kept
    assert auto.tools and auto.constraint is not None and auto.constraint.kind is ConstraintKind.JSON


def test_completions_take_no_tools():
    with pytest.raises(ApiError) as err:
        parse_request({"prompt": "x", "tools": [WEATHER]}, Endpoint.COMPLETIONS)
    assert err.value.param == "tools" and "/v1/chat/completions" in str(err.value)


def test_tool_history_becomes_text_with_results_named_and_joined():
    body = {
        "messages": [
            {"role": "user", "content": "Weather in Oslo and Bergen?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Bergen"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "4 °C"},
            {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "9 °C"}]},
        ],
        "tools": [WEATHER],
    }
    msgs = parse_request(body, Endpoint.CHAT).generate.messages
    assert [m.role for m in msgs] == [Role.USER, Role.ASSISTANT, Role.USER]  # the two results in one turn
    assert [json.loads(line) for line in msgs[1].content.splitlines()] == [
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_weather", "arguments": {"city": "Bergen"}},
    ]
    results = [json.loads(line)["tool_response"] for line in msgs[2].content.splitlines()]
    assert results == [
        {"name": "get_weather", "tool_call_id": "call_a", "content": "4 °C"},
        {"name": "get_weather", "tool_call_id": "call_b", "content": "9 °C"},
    ]


def _builder(body):
    loop = asyncio.new_event_loop()
    try:
        return ReplyBuilder(ApiJob(parse_request(body, Endpoint.CHAT), "127.0.0.1:1", loop), MODEL)
    finally:
        loop.close()


def _tokens(*texts):
    return [P.TokenEvent(1, t, 10 + i, t, i, 0.1, 20 + i) for i, t in enumerate(texts)]


def test_a_call_comes_back_as_tool_calls_with_null_content():
    b = _builder({**ASK, "tool_choice": "required"})
    body = b.completion(P.Finished(1, CALL_TEXT, DONE), 0.0)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Oslo"}


def test_a_forced_call_cut_by_max_tokens_is_text_with_length():
    b = _builder({**ASK, "tool_choice": "required"})
    fin = P.Finished(1, CALL_TEXT[:20], GenerationStats(generated_tokens=5, stop_reason=StopReason.MAX_TOKENS))
    choice = b.completion(fin, 0.0)["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"] == {"role": "assistant", "content": CALL_TEXT[:20]}


def test_auto_text_reply_is_plain_content():
    b = _builder(ASK)
    choice = b.completion(P.Finished(1, "It is sunny.", DONE), 0.0)["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"] == {"role": "assistant", "content": "It is sunny."}


def _stream(b, pieces, final=None):
    sent = [c for c in (b.text_chunk(_tokens(p)) for p in pieces) if c is not None]
    fin = P.Finished(1, final if final is not None else "".join(pieces), DONE)
    return sent, b.call_chunks(fin), b.last_chunk(fin, 0.0)


def test_a_streamed_forced_call_is_held_back_and_sent_whole_in_one_delta():
    pieces = ['{"name": "get_', 'weather", "arguments": {"city"', ': "Oslo"}}']
    sent, calls, last = _stream(_builder({**ASK, "tool_choice": "required", "stream": True}), pieces)
    assert sent == []
    (chunk,) = calls
    delta = chunk["choices"][0]["delta"]
    assert "content" not in delta and delta["tool_calls"][0]["index"] == 0
    assert delta["tool_calls"][0]["function"]["name"] == "get_weather"
    assert last["choices"][0]["finish_reason"] == "tool_calls" and last["choices"][0]["delta"] == {}


def test_auto_streams_text_once_it_cannot_be_a_call_and_holds_back_a_tag():
    b = _builder({**ASK, "stream": True})
    pieces = [
        "Let me",
        " check.\n<tool",
        '_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    ]
    sent, calls, last = _stream(b, pieces)
    assert "".join(c["choices"][0]["delta"]["content"] for c in sent) == "Let me check.\n"
    assert calls[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert last["choices"][0]["finish_reason"] == "tool_calls"
    # JSON that is not a call: held while it might be one, then sent whole at the end
    sent, calls, last = _stream(_builder({**ASK, "stream": True}), ['{"answer"', ": 4}"])
    assert sent == [] and calls == []
    assert last["choices"][0]["delta"] == {"content": '{"answer": 4}'} and last["choices"][0]["finish_reason"] == "stop"


def test_engine_refusals_name_the_field_they_are_about():
    from app.server.app import failed_error

    def refused(kind, message, body):
        err = failed_error(P.Failed(1, kind, message), parse_request(body, Endpoint.CHAT))
        assert err.status == 400
        return err.param

    no_tools = "This model's chat template does not offer tools (its Jinja source never reads 'tools'): ..."
    assert refused(P.FailureKind.TEMPLATE, no_tools, ASK) == "tool_choice"  # "auto", the default
    bad_schema = "tool 'get_weather': its arguments' JSON schema cannot be turned into a grammar ..."
    assert refused(P.FailureKind.CONSTRAINT, bad_schema, {**ASK, "tool_choice": "required"}) == (
        "tools[0].function.parameters"
    )
    rf = {"messages": ASK["messages"], "response_format": {"type": "json_object"}}
    assert refused(P.FailureKind.CONSTRAINT, "The JSON schema cannot be ...", rf) == "response_format"
    assert refused(P.FailureKind.CONTEXT_OVERFLOW, "too long", ASK) is None


def test_a_function_without_parameters_is_fine_and_the_error_does_not_claim_it_is_required():
    (fn,) = parse_request({**ASK, "tools": [{"type": "function", "function": {"name": "now"}}]}, Endpoint.CHAT).tools
    assert fn.parameters == {"type": "object", "properties": {}}
    with pytest.raises(ApiError) as err:
        parse_request({**ASK, "tools": [{"type": "function"}]}, Endpoint.CHAT)
    assert err.value.param == "tools[0].function" and "'parameters' when the function takes arguments" in str(err.value)
