"""This machine's memory bandwidth: a short probe, cached in the app's cache folder.

:func:`measure_bandwidth` copies a buffer much larger than any CPU's last-level cache
(256 MiB by default) with numpy, on as many threads as this process may use (numpy releases
the GIL while it copies, so the threads copy in parallel, as llama.cpp's decode threads read
in parallel), and keeps the best of several passes (about 1 s in all). A copy reads the
source and writes the destination, so each pass moves ``2 × buffer`` bytes: the convention
of McCalpin's STREAM "Copy" kernel (https://www.cs.virginia.edu/stream/ref.html, "Counting
Bytes and FLOPS"), which counts neither the write-allocate read of the destination nor
caches. The figure is what decode's bytes per token are held against
(:mod:`app.core.hardware.speed_bound`).

:func:`cached_bandwidth` reads the last measurement from ``bandwidth.json`` when it was taken
on this machine (same CPU description and CPU count); :func:`save_bandwidth` writes it.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

CACHE_FILE = "bandwidth.json"
DEFAULT_BUFFER_BYTES = 256 * 1024 * 1024
DEFAULT_BUDGET_S = 1.0
MIN_PASSES = 3
TOUCH_SLICE_BYTES = 8 * 1024 * 1024


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def machine_key() -> str:
    """What identifies this machine's memory system for the cache: CPU description and count."""
    return f"{platform.machine()} | {platform.processor() or platform.node()} | {os.cpu_count() or 1} CPUs"


@dataclass(frozen=True)
class Bandwidth:
    """One measurement.

    Attributes:
        bytes_s: the best pass's bytes moved (read + written) per second.
        buffer_bytes: the buffer copied, bytes.
        threads: threads that copied.
        passes: passes run; the best counts.
        seconds: the probe's wall time, s.
        measured_at: when, seconds since the epoch.
        machine: :func:`machine_key` at the time.
    """

    bytes_s: float
    buffer_bytes: int
    threads: int
    passes: int
    seconds: float
    measured_at: float
    machine: str

    @property
    def gb_s(self) -> float:
        """Decimal GB/s."""
        return self.bytes_s / 1e9


class ProbeCancelled(Exception):
    """:func:`measure_bandwidth` was told to stop before it finished."""


def measure_bandwidth(
    buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    threads: int | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    stop: threading.Event | None = None,
) -> Bandwidth:
    """Copy a ``buffer_bytes`` buffer, best of N passes within about ``budget_s`` seconds.

    Args:
        buffer_bytes: bytes of the source (and of the destination); keep it far above the
            last-level cache (the default 256 MiB is above any desktop CPU's L3).
        threads: copying threads; None: :func:`usable_cpus`.
        budget_s: passes run until this much time is spent (at least ``MIN_PASSES``).
        stop: when set, the probe ends after the pass in progress (the window is closing).

    Returns:
        A :class:`Bandwidth`.

    Raises:
        ValueError: ``buffer_bytes`` under 1 MiB.
        MemoryError: the buffers cannot be allocated.
        ProbeCancelled: ``stop`` was set.
    """
    if buffer_bytes < 1024 * 1024:
        raise ValueError(f"a {buffer_bytes}-byte buffer fits in a cache; use at least 1 MiB")
    n_threads = max(1, threads if threads is not None else usable_cpus())
    n = buffer_bytes // 8
    # Both buffers are written once before the timing (a fresh buffer's first touch is page
    # faults, the kernel mapping memory, not memory traffic), in slices so that ``stop`` is
    # heard within one slice.
    src = np.empty(n, dtype=np.float64)
    dst = np.empty(n, dtype=np.float64)
    step = TOUCH_SLICE_BYTES // 8
    for a in range(0, n, step):
        if stop is not None and stop.is_set():
            raise ProbeCancelled("stopped while preparing its buffers")
        src[a : a + step] = 1.0
        dst[a : a + step] = 0.0
    bounds = [n * i // n_threads for i in range(n_threads + 1)]
    t_start = time.perf_counter()
    best = float("inf")
    passes = 0
    while passes < MIN_PASSES or time.perf_counter() - t_start < budget_s:
        if stop is not None and stop.is_set():
            raise ProbeCancelled(f"stopped after {passes} passes")
        t0 = time.perf_counter()
        if n_threads == 1:
            np.copyto(dst, src)
        else:
            workers = [
                threading.Thread(target=np.copyto, args=(dst[a:b], src[a:b]), name=f"glassbox-bandwidth-{i}")
                for i, (a, b) in enumerate(itertools.pairwise(bounds))
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        best = min(best, time.perf_counter() - t0)
        passes += 1
    moved = 2 * n * 8
    return Bandwidth(
        bytes_s=moved / best,
        buffer_bytes=n * 8,
        threads=n_threads,
        passes=passes,
        seconds=time.perf_counter() - t_start,
        measured_at=time.time(),
        machine=machine_key(),
    )


def cached_bandwidth(cache_dir: Path) -> Bandwidth | None:
    """The measurement saved in ``cache_dir`` when it was taken on this machine, else None
    (no file, a damaged one, or another machine's)."""
    try:
        data = json.loads((cache_dir / CACHE_FILE).read_text(encoding="utf-8"))
        bw = Bandwidth(**data)
    except (OSError, ValueError, TypeError):
        return None
    if bw.machine != machine_key() or bw.bytes_s <= 0:
        return None
    return bw


def save_bandwidth(cache_dir: Path, bw: Bandwidth) -> None:
    """Write ``bw`` to ``cache_dir/bandwidth.json`` (the folder is created if needed).

    Raises:
        OSError: the file cannot be written.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / (CACHE_FILE + ".tmp")
    tmp.write_text(json.dumps(asdict(bw), indent=1), encoding="utf-8")
    tmp.replace(cache_dir / CACHE_FILE)
