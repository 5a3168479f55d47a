"""Quantizations in the window: comparing two of one model token by token (``compare_*``)."""
