"""Plain-Python core: GGUF facts, memory math, sampler settings, chat values,
settings, the model library and the Hub client. Imports neither PySide6 nor
llama_cpp (a test checks this)."""
