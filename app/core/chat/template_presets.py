"""Chat template presets: the standard Jinja2 templates of the common model families.

A base model's GGUF (Gemma 3 270M's, for one) often has no ``tokenizer.chat_template``, and a
fine-tune may carry a broken one. The Template… dialog offers these presets: one fills the
override field, and it is checked like a typed template (rendered on the sample conversation in
the engine, :mod:`app.engine.prompt_requests`) before it is kept.

Each template is rendered as llama-cpp-python renders a GGUF's (``Jinja2ChatFormatter``: an
``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``; ``messages``,
``bos_token``, ``eos_token``, ``add_generation_prompt`` and ``raise_exception`` given). Sources,
each the ``chat_template`` field of the family's ``tokenizer_config.json`` on the Hugging Face Hub:

- ChatML: the format of OpenAI's ChatML as Qwen2/Qwen2.5 and SmolLM2 write it
  (``HuggingFaceTB/SmolLM2-135M-Instruct``), without SmolLM2's default system prompt.
- Gemma: ``google/gemma-3-270m-it`` (Gemma 3; the text parts; image items left out): the
  system prompt goes at the start of the first user turn, the assistant is ``model``, user and
  model turns must alternate.
- Llama 3: ``meta-llama/Meta-Llama-3-8B-Instruct``, as published.
- Mistral: ``mistralai/Mistral-7B-Instruct-v0.3`` without its tool-calling branches: the
  system prompt goes into the last ``[INST]``, user and assistant turns must alternate.
- Phi-3: ``microsoft/Phi-3-mini-4k-instruct``, as first published.

The templates the families publish change over time (tool calls, images, dates); these are the
text-chat cores, enough for a model of that family that came without its template.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TemplateFamily(str, enum.Enum):
    """A model family whose chat format a preset writes."""

    CHATML = "ChatML"
    GEMMA = "Gemma"
    LLAMA3 = "Llama 3"
    MISTRAL = "Mistral"
    PHI3 = "Phi-3"


@dataclass(frozen=True)
class TemplatePreset:
    """One family's chat template.

    Attributes:
        family: whose format it is (its value is the button's label).
        source: the Jinja2 template.
        models: models that use it, for the button's tooltip.
        turn_marker: a text every rendered turn holds (e.g. ``<|im_start|>``): the format at a glance.
    """

    family: TemplateFamily
    source: str
    models: str
    turn_marker: str


CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

GEMMA = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}
    {{- '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\\n' }}
{%- endif -%}
"""

LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

MISTRAL = """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message["role"] == "user") != (loop.index0 % 2 == 0) %}
        {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"] + eos_token }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

PHI3 = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
)

#: The presets, in the order the dialog offers them.
PRESETS: tuple[TemplatePreset, ...] = (
    TemplatePreset(TemplateFamily.CHATML, CHATML, "Qwen 2/2.5, SmolLM2, OpenHermes, many fine-tunes", "<|im_start|>"),
    TemplatePreset(TemplateFamily.GEMMA, GEMMA, "Gemma 2 and Gemma 3", "<start_of_turn>"),
    TemplatePreset(TemplateFamily.LLAMA3, LLAMA3, "Llama 3, 3.1, 3.2 and 3.3", "<|start_header_id|>"),
    TemplatePreset(TemplateFamily.MISTRAL, MISTRAL, "Mistral 7B Instruct v0.3, Mixtral, Mistral Nemo", "[INST]"),
    TemplatePreset(TemplateFamily.PHI3, PHI3, "Phi-3 and Phi-3.5", "<|user|>"),
)


def preset(family: TemplateFamily) -> TemplatePreset:
    """The preset for ``family``."""
    return next(p for p in PRESETS if p.family is family)
