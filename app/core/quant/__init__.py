"""Comparing two quantizations of one model token by token: the values that cross the pipe
(:mod:`~app.core.quant.comparison`), the vocabulary check's verdict
(:mod:`~app.core.quant.compatibility`) and the statistics over a text, as llama-perplexity
computes them (:mod:`~app.core.quant.statistics`)."""
