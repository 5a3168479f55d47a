"""Time budgets for the window's waits on the scripted engine, sized from what the work takes here.

A budget is at least 3x the normal duration on this 2-core machine: the guard of a short reply
(tests.support.window.WAIT_MS) is too short for a reply of hundreds of tokens, whose time grows
with its length.
"""

from __future__ import annotations

# The scripted engine makes each token once the window has handled the one before: a long reply
# streams in 3.5-7 ms a token here (1,050 tokens: 3.5-4.9 s alone on this 2-core machine, 6-7 s
# with the machine loaded).
STREAM_MS_PER_TOKEN = 6


def stream_budget_ms(n_tokens: int) -> int:
    """Milliseconds to wait for a reply of ``n_tokens`` to stream and show as over: 3x the normal
    streaming time, and a second for the rest of the turn."""
    return 3 * STREAM_MS_PER_TOKEN * n_tokens + 1_000
