"""Quantization in the engine process (a job's engine): llama.cpp's own quantizer (:mod:`.quantize`); comparing
two quantizations of one model token by token: one side's model and context (:mod:`.model`), the logits reduced a
block at a time (:mod:`.reduce`), the run (:mod:`.compare`). The values and the statistics are :mod:`app.core.quant`'s.
"""
