"""Quantization in the engine process: llama.cpp's own quantizer (:mod:`.quantize`), run in a job's engine."""
