"""Quantization windows: making a quantization (``quantize_*``) and comparing models."""
