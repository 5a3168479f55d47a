"""The chat template presets render a two-turn chat through the override check the engine runs
(:func:`app.engine.prompt.compile_template`, jinja2 as llama-cpp-python sets it up), in each family's format."""

from __future__ import annotations

import pytest

from app.core.chat.chat_template import SAMPLE_CONVERSATION
from app.core.chat.context import ChatMessage, Role
from app.core.chat.template_presets import PRESETS, TemplateFamily, preset
from app.core.protocol import FailureKind
from app.engine.errors import EngineError
from app.engine.prompt import PromptBuilder

SYSTEM, Q1, A1, Q2 = (m.content for m in SAMPLE_CONVERSATION)

# Each family's prompt for the sample conversation (system, user, assistant, user), from its model card.
EXPECTED = {
    TemplateFamily.CHATML: (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{Q1}<|im_end|>\n"
        f"<|im_start|>assistant\n{A1}<|im_end|>\n<|im_start|>user\n{Q2}<|im_end|>\n<|im_start|>assistant\n"
    ),
    TemplateFamily.GEMMA: (
        f"<bos><start_of_turn>user\n{SYSTEM}\n\n{Q1}<end_of_turn>\n<start_of_turn>model\n{A1}<end_of_turn>\n"
        f"<start_of_turn>user\n{Q2}<end_of_turn>\n<start_of_turn>model\n"
    ),
    TemplateFamily.LLAMA3: (
        f"<bos><|start_header_id|>system<|end_header_id|>\n\n{SYSTEM}<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{Q1}<|eot_id|>"
        f"<|start_header_id|>assistant<|end_header_id|>\n\n{A1}<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{Q2}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    ),
    TemplateFamily.MISTRAL: f"<bos>[INST] {Q1}[/INST] {A1}<eos>[INST] {SYSTEM}\n\n{Q2}[/INST]",
    TemplateFamily.PHI3: (
        f"<|system|>\n{SYSTEM}<|end|>\n<|user|>\n{Q1}<|end|>\n<|assistant|>\n{A1}<|end|>\n"
        f"<|user|>\n{Q2}<|end|>\n<|assistant|>\n"
    ),
}


def _builder() -> PromptBuilder:
    """A prompt builder with no model: rendering needs none (tokenizing would)."""
    return PromptBuilder(None, None, None, (), n_ctx=4096, trained_ctx=4096, bos_text="<bos>", eos_text="<eos>")  # type: ignore[arg-type]


@pytest.mark.parametrize("family", list(TemplateFamily), ids=[f.name for f in TemplateFamily])
def test_each_preset_renders_a_two_turn_chat_in_its_familys_format(family):
    b = _builder()
    b.use_template(preset(family).source)  # compiled as the engine compiles an override
    assert b.has_template and b.override == preset(family).source
    assert b.render(SAMPLE_CONVERSATION) == EXPECTED[family]
    assert preset(family).turn_marker in EXPECTED[family]


@pytest.mark.parametrize("family", [TemplateFamily.GEMMA, TemplateFamily.MISTRAL], ids=["GEMMA", "MISTRAL"])
def test_the_strict_presets_refuse_turns_that_do_not_alternate_as_their_families_do(family):
    b = _builder()
    b.use_template(preset(family).source)
    twice = (ChatMessage(Role.USER, "a"), ChatMessage(Role.USER, "b"))
    with pytest.raises(EngineError) as caught:
        b.render(twice)
    assert caught.value.kind is FailureKind.TEMPLATE and "alternate" in str(caught.value)


def test_the_presets_are_the_five_families_in_order():
    assert [p.family.value for p in PRESETS] == ["ChatML", "Gemma", "Llama 3", "Mistral", "Phi-3"]
