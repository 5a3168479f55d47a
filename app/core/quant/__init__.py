"""Quantization values shared by the engine and the window: the types Glassbox offers (:mod:`.types`) and
what making one from a given GGUF would give (:mod:`.plan`). No Qt, no llama.cpp."""
