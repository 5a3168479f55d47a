"""How many CPU threads llama.cpp gets for decode and prefill when n_threads is 0 (auto)."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def auto_threads() -> int:
    """Decode threads for llama.cpp: one CPU fewer than available (at least 1, at most 8).

    llama.cpp's threads meet at a barrier after every graph node; when one of them
    loses its CPU to another process (the window repainting, a browser), the
    others wait. Measured here on 2 CPUs with one busy process beside it:
    2 threads fell to 0.6-6.7 tok/s on SmolLM2, 1 thread kept 40-85 tok/s.
    Leaving a CPU for the window keeps decode speed steady.
    """
    return max(1, min(available_cpus() - 1, 8))


def auto_threads_batch() -> int:
    """Prefill threads: the same rule as decode (one CPU fewer than available, at most 16).

    Prefill scales with threads when the machine is idle (SmolLM2 here: 165 tok/s on
    1 thread, 260 on 2), but it collapses the same way decode does when another
    process takes a CPU: a 23-token slice took over 2 s on 2 threads beside a busy
    neighbour. Set n_threads in the Model panel to use every CPU on an idle machine.
    """
    return max(1, min(available_cpus() - 1, 16))
