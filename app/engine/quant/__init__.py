"""Comparing two quantizations of one model token by token, in the engine process: one side's model and
context (:mod:`~app.engine.quant.model`), the logits reduced a block at a time (:mod:`~app.engine.quant.reduce`),
the run (:mod:`~app.engine.quant.compare`). The values and the statistics are :mod:`app.core.quant`'s."""
