"""Chat templates as the person sees them: the sample conversation an override is checked on.

A chat template override (a model's template replaced by the person's, per model, kept in
the settings) is validated before use by rendering :data:`SAMPLE_CONVERSATION` in the engine
the way llama-cpp-python renders the GGUF's template; it must compile, render without an
exception and produce text.
"""

from __future__ import annotations

from app.core.chat.context import ChatMessage, Role

#: System, user, assistant and a second user turn: every role a template has to handle,
#: taking turns as strict templates (Gemma 3's) require.
SAMPLE_CONVERSATION: tuple[ChatMessage, ...] = (
    ChatMessage(Role.SYSTEM, "You are a helpful assistant."),
    ChatMessage(Role.USER, "What is the capital of France?"),
    ChatMessage(Role.ASSISTANT, "The capital of France is Paris."),
    ChatMessage(Role.USER, "And of Italy?"),
)
