"""Speculative decoding in the engine: the drafters, the verifying loop, setting them up at load."""
