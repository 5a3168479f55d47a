"""Quantization values shared by the engine and the window (no Qt, no llama.cpp): the types Glassbox
offers (:mod:`.types`) and what making one from a given GGUF would give (:mod:`.plan`); comparing two
quantizations of one model token by token: the values that cross the pipe
(:mod:`~app.core.quant.comparison`), the vocabulary check's verdict (:mod:`~app.core.quant.compatibility`),
the statistics over a text as llama-perplexity computes them (:mod:`~app.core.quant.statistics`), the run
the window follows, its exports and llama.cpp's reference figures."""
