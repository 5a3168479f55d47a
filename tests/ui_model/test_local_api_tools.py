"""``tools`` and ``tool_choice`` in the local API against the window with the real engine, on SmolLM2
and Gemma 3 (issue 23 §2).

The official ``openai`` client talks to the server the window runs (client calls in worker threads
while the Qt event loop turns, as in :mod:`tests.ui_model.test_local_api`). Neither test model's
chat template offers tools (SmolLM2's ChatML does not read ``tools``; Gemma 3 270M has none), so a
forced ``tool_choice`` is what makes them call, under the grammar; "auto" is a 400 on both, and is
tried on SmolLM2 with a tool-aware template set as the person's override.
"""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.support.local_api import (  # noqa: F401 - the fixtures api, bg and window_model
    api_fixture,
    bg_fixture,
    smollm2_only,
    wait,
    window_model_fixture,
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, ADD)}
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]


def create(qtbot, bg, c, **kw):
    kw.setdefault("model", "any")
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 120)
    return wait(qtbot, bg.submit(c.chat.completions.create, **kw))


def check_call(call, names):
    """A call of one of ``names`` whose arguments (a JSON string) validate against its schema."""
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name in names
    assert isinstance(call.function.arguments, str)
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_a_forced_call_is_a_listed_function_with_arguments_that_match_its_schema(qtbot, api, bg):
    _win, c = api
    named = create(
        qtbot,
        bg,
        c,
        messages=ASK,
        tools=[WEATHER, ADD],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    choice = named.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    check_call(call, {"get_weather"})
    # "required", streamed: a call of either tool, whole in one delta, finish_reason tool_calls, no text
    stream = wait(
        qtbot,
        bg.submit(
            lambda: list(
                c.chat.completions.create(
                    model="any",
                    messages=[{"role": "user", "content": "What is 2 plus 3?"}],
                    tools=[WEATHER, ADD],
                    tool_choice="required",
                    temperature=0,
                    max_tokens=120,
                    stream=True,
                )
            )
        ),
    )
    deltas = [ch.choices[0].delta for ch in stream if ch.choices]
    calls = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert len(calls) == 1 and calls[0].index == 0
    check_call(calls[0], {"get_weather", "add"})
    assert not "".join(d.content or "" for d in deltas)
    assert stream[-1].choices[0].finish_reason == "tool_calls"


def test_a_tool_result_in_the_history_is_accepted_and_answered(qtbot, api, bg):
    win, c = api
    first = create(qtbot, bg, c, messages=ASK, tools=[WEATHER], tool_choice="required")
    call = first.choices[0].message.tool_calls[0]
    # the client's own round trip: its assistant message back as it came, then the tool's result
    history = [
        *ASK,
        first.choices[0].message,
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21, "sky": "sunny"}'},
    ]
    reply = create(qtbot, bg, c, messages=history, tools=[WEATHER], tool_choice="none", max_tokens=8)
    choice = reply.choices[0]
    assert choice.message.content and choice.message.tool_calls is None
    assert choice.finish_reason in ("stop", "length") and reply.usage.completion_tokens > 0
    sent = win.server.entries[-1].messages  # as the template saw them: the call and its result as text
    assert [m.role.value for m in sent] == ["user", "assistant", "user"]
    assert json.loads(sent[1].content) == {"name": "get_weather", "arguments": json.loads(call.function.arguments)}
    assert json.loads(sent[2].content)["tool_response"]["tool_call_id"] == call.id and "sunny" in sent[2].content


def test_auto_on_a_template_without_tools_is_a_400_that_says_what_to_do(qtbot, api, bg):
    win, c = api
    with pytest.raises(openai.BadRequestError) as err:
        create(qtbot, bg, c, messages=ASK, tools=[WEATHER])  # tool_choice absent: "auto"
    message = err.value.body["message"]
    assert err.value.body["param"] == "tool_choice"
    if "gemma" in str(win.engine.model.info.path).lower():  # one true thing per case
        assert message.startswith("This model has no chat template") and "Jinja" not in message
    else:
        assert message.startswith("This model's chat template does not offer tools (its Jinja source never reads")
    assert '"required"' in message
    with pytest.raises(openai.BadRequestError) as err:  # streamed: the same 400, not a stream that fails
        create(qtbot, bg, c, messages=ASK, tools=[WEATHER], stream=True)
    assert '"required"' in err.value.body["message"] and err.value.body["param"] == "tool_choice"
    ok = create(qtbot, bg, c, messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=4)  # still answers
    assert ok.choices[0].message.content is not None


HERMES_LIKE = (
    "{%- if tools %}<|im_start|>system\nYou may call functions. Signatures in <tools></tools>:\n<tools>\n"
    "{%- for tool in tools %}{{ tool | tojson }}\n{%- endfor %}</tools>\nAnswer a call as "
    '<tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\n{%- endif %}'
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


@smollm2_only
def test_auto_sends_the_tools_through_a_template_that_reads_them(qtbot, api, bg):
    win, c = api
    path = win.engine.model.info.path
    win.settings_ctl.apply(lambda s: s.with_chat_template(path, HERMES_LIKE))
    auto = create(qtbot, bg, c, messages=ASK, tools=[WEATHER, ADD], max_tokens=24)
    plain = create(qtbot, bg, c, messages=ASK, tools=[WEATHER, ADD], tool_choice="none", max_tokens=4)
    tool_tokens = auto.usage.prompt_tokens - plain.usage.prompt_tokens
    assert tool_tokens > 80  # both signatures rendered by the template (about 130 tokens)
    choice = auto.choices[0]
    if choice.message.tool_calls:  # whatever the model chose, the answer is well formed
        assert choice.finish_reason == "tool_calls"
        for call in choice.message.tool_calls:
            assert call.function.name in SCHEMAS and call.id.startswith("call_")
    else:
        assert choice.message.content is not None and choice.finish_reason in ("stop", "length")
    streamed = wait(
        qtbot,
        bg.submit(
            lambda: list(
                c.chat.completions.create(
                    model="any", messages=ASK, tools=[WEATHER, ADD], temperature=0, max_tokens=24, stream=True
                )
            )
        ),
    )
    deltas = [ch.choices[0].delta for ch in streamed if ch.choices]
    assert "".join(d.content or "" for d in deltas) == (choice.message.content or "")  # greedy: the same reply
    assert streamed[-1].choices[0].finish_reason == choice.finish_reason


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
REGISTER = {  # a nested pydantic argument, as the MCP SDK writes it: a $ref into the parameters' $defs
    "type": "function",
    "function": {
        "name": "register_person",
        "description": "Register a person.",
        "parameters": {
            "type": "object",
            "properties": {"person": {"$ref": "#/$defs/Person"}},
            "required": ["person"],
            "$defs": {"Person": PERSON},
        },
    },
}


@smollm2_only
def test_a_forced_call_whose_arguments_use_a_ref_validates(qtbot, api, bg):
    """Before: "Error resolving ref stdin#/$defs/Person", a 400 for this tool and every tool beside it."""
    _win, c = api
    reply = create(
        qtbot,
        bg,
        c,
        messages=[{"role": "user", "content": "Register Ann, who is 31."}],
        tools=[REGISTER, ADD],
        tool_choice={"type": "function", "function": {"name": "register_person"}},
        max_tokens=60,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    assert call.function.name == "register_person"
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, REGISTER["function"]["parameters"])
    assert isinstance(args["person"]["age"], int)
