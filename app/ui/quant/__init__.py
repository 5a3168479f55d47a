"""Quantization windows: making a quantization (``quantize_*``) and comparing two of one model token by token (``compare_*``)."""
