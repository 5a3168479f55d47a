"""Speculative decoding in the window (issue 22 §3): its load settings in the Model panel, the drafted
tokens marked in a reply, the Speculation view, and "Measure speed-up"."""
