"""Plain-Python core: GGUF facts, memory math, sampler settings, chat values,
settings, the conversation history, the model library, the Hub client and
downloads. Imports neither PySide6 nor llama_cpp (a test checks this)."""
