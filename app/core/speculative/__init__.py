"""Speculative decoding's values: the settings (a load setting), why a round ended, one reply's stats."""
