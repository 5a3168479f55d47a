"""Quantization values shared by the engine and the window. No Qt, no llama.cpp.

Making one: the types Glassbox offers (:mod:`.types`) and what making one from a given GGUF would give
(:mod:`.plan`). Comparing two quantizations of one model token by token: the values that cross the pipe
(:mod:`.comparison`), llama-perplexity's chunks (:mod:`.chunks`), the vocabulary check's verdict
(:mod:`.compatibility`) and the statistics over a text, as llama-perplexity computes them (:mod:`.statistics`);
the run the Compare window follows (:mod:`.compare_run`), its exports (:mod:`.export`) and llama.cpp's published
reference figures (:mod:`.reference`).
"""
