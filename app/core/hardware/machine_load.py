"""Whether a speed was measured while other work shared the CPUs: the load average, and Glassbox's own jobs.

A tok/s figure taken while another process (or another Glassbox job: a quantization, a comparison, a
chat reply) ran on the same CPUs is lower and noisier than a quiet one; two such runs side by side
look like a real difference when they are not (review 27 §4: q8_0 KV decode read 38, 61, 38, 29 tok/s
across runs on a shared 2-CPU machine). :class:`LoadWatch` samples the 1-minute load average
(``os.getloadavg``: runnable threads, exponentially averaged over a minute) during a measurement, less
the measurement's own threads, per CPU: the other work's share of the machine. The average lags by
up to a minute, so a short burst may be missed and one just ended still counted: a flag, not a figure.
"""

from __future__ import annotations

import os

from app.core.hardware.bandwidth import usable_cpus

#: Other work's load per CPU above which a measurement is flagged "measured under load".
UNDER_LOAD_PER_CPU = 0.25


def others_load_per_cpu(own_threads: int) -> float:
    """The 1-minute load average less ``own_threads`` (the measurement's), per CPU; -1 where the
    system has no load average (Windows)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return -1.0
    return max(0.0, load - max(0, own_threads)) / max(1, usable_cpus())


class LoadWatch:
    """The highest :func:`others_load_per_cpu` sampled during one measurement, and the jobs seen.

    Args:
        own_threads: the measurement's own threads (not counted as other work).
    """

    def __init__(self, own_threads: int) -> None:
        self.own_threads = own_threads
        self.per_cpu = -1.0
        self.others: list[str] = []
        self.sample()

    def sample(self, others: tuple[str, ...] = ()) -> None:
        """Read the load average now; ``others``: Glassbox's other jobs running now (their names)."""
        self.per_cpu = max(self.per_cpu, others_load_per_cpu(self.own_threads))
        for name in others:
            if name not in self.others:
                self.others.append(name)


def is_under_load(per_cpu: float, others: tuple[str, ...] = ()) -> bool:
    """Another Glassbox job ran, or other work's load per CPU was above :data:`UNDER_LOAD_PER_CPU`."""
    return bool(others) or per_cpu > UNDER_LOAD_PER_CPU


def load_note(per_cpu: float, others: tuple[str, ...] = ()) -> str:
    """Why a measurement was under load, e.g. "measured under load: a comparison ran meanwhile; other work
    kept 0.9 of each CPU busy (1-minute load average)"; "" when it was not."""
    if not is_under_load(per_cpu, others):
        return ""
    parts = []
    if others:
        parts.append(f"{' and '.join(others)} ran meanwhile")
    if per_cpu > UNDER_LOAD_PER_CPU:
        parts.append(f"other work kept {per_cpu:.1f} of each CPU busy (1-minute load average)")
    return "measured under load: " + "; ".join(parts)
