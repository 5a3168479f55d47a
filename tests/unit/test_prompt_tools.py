"""app/engine/prompt.py: tools offered with a request reach the chat template's ``tools`` (a template
that reads them), the system message (a forced call on a template without them), or are refused
("auto" on a template, or a plain transcript, with no place for them)."""

from __future__ import annotations

import json

import pytest

from app.core.chat.context import ChatMessage, Role
from app.core.protocol import FailureKind
from app.core.tools.history import tool_calls_text, tool_result_text
from app.core.tools.spec import ToolCall, parse_tools
from app.engine.errors import EngineError
from app.engine.prompt import PromptBuilder, compile_template

TOOLS = parse_tools(
    [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WITH_TOOLS = "{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>\n{% endif %}" + CHATML
ASK = [ChatMessage(Role.SYSTEM, "Be brief."), ChatMessage(Role.USER, "Weather in Oslo?")]


def builder(source: str | None) -> PromptBuilder:
    formatter = compile_template(source, "<|im_end|>", "") if source is not None else None
    return PromptBuilder(None, None, formatter, (), 2048, 2048)  # type: ignore[arg-type]  # render needs neither


def test_a_template_that_reads_tools_gets_them_as_openai_tool_objects_inside_the_block_only():
    b = builder(WITH_TOOLS)
    with b.tools_offered(TOOLS, forced=False):
        text = b.render(ASK)
    tools_json = text[text.index("<tools>") + 7 : text.index("</tools>")]
    assert json.loads(tools_json) == TOOLS[0].openai()
    assert "<tools>" not in b.render(ASK)  # after the block: no tools


def test_a_forced_call_on_a_template_without_tools_describes_them_in_the_system_message():
    for source in (CHATML, None):  # ChatML without tools; no template (the plain transcript)
        b = builder(source)
        with b.tools_offered(TOOLS, forced=True):
            text = b.render(ASK)
        assert text.count("Be brief.") == 1 and '"name": "get_weather"' in text
        assert text.index("Be brief.") < text.index("get_weather") < text.index("Weather in Oslo?")
        with b.tools_offered(TOOLS, forced=True):
            alone = b.render(ASK[1:])  # no system message: one is added
        assert alone.index("get_weather") < alone.index("Weather in Oslo?")


@pytest.mark.parametrize(("source", "words"), [(CHATML, "chat template does not"), (None, "has no chat template")])
def test_auto_with_no_place_for_the_tools_is_refused_with_what_to_do(source, words):
    b = builder(source)
    with b.tools_offered(TOOLS, forced=False), pytest.raises(EngineError) as err:
        b.render(ASK)
    assert err.value.kind is FailureKind.TEMPLATE
    assert words in err.value.message and 'tool_choice "required"' in err.value.message


QWEN_LIKE = (
    "{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>\n{% endif %}"
    "{% for m in messages %}{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n{% elif m.tool_calls %}<|im_start|>assistant\n{{ m.content }}"
    "{% for c in m.tool_calls %}<tool_call>\n{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}"
    "\n</tool_call>{% endfor %}<|im_end|>\n{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_tool_aware_template_shows_the_history_s_calls_and_results_its_own_way():
    call = ToolCall("call_1", "get_weather", '{"city": "Oslo"}')
    history = [
        ChatMessage(Role.USER, "Weather in Oslo?"),
        ChatMessage(Role.ASSISTANT, tool_calls_text("", [call])),
        ChatMessage(Role.USER, tool_result_text("get_weather", "call_1", "4 C")),
    ]
    native = builder(QWEN_LIKE)
    with native.tools_offered(TOOLS, forced=False):
        text = native.render(history)
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>' in text
    assert "<tool_response>\n4 C\n</tool_response>" in text and 'tool_response"' not in text
    plain = builder(CHATML).render(history)  # a template without tools: the text as written
    assert '{"tool_response": {"name": "get_weather", "tool_call_id": "call_1", "content": "4 C"}}' in plain
