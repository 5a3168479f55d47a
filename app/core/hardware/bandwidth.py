"""This machine's memory bandwidth and arithmetic rate: a short probe, cached in the app's cache folder.

:func:`measure_bandwidth` copies a buffer much larger than any CPU's last-level cache
(256 MiB by default) with numpy, on as many threads as this process may use (numpy releases
the GIL while it copies, so the threads copy in parallel, as llama.cpp's decode threads read
in parallel), and keeps the best of several passes (about 1 s in all). A copy reads the
source and writes the destination, so each pass moves ``2 × buffer`` bytes: the convention
of McCalpin's STREAM "Copy" kernel (https://www.cs.virginia.edu/stream/ref.html, "Counting
Bytes and FLOPS"), which counts neither the write-allocate read of the destination nor
caches. The figure is what decode's bytes per token are held against
(:mod:`app.core.hardware.speed_bound`).

The same probe then times a ``FLOP_MATRIX`` square float32 matrix product with numpy (its BLAS,
on the BLAS library's own threads), best of several passes in about ``DEFAULT_FLOP_BUDGET_S``:
``2 n³`` FLOPs per product (a multiply and an add per term), the convention of LINPACK-style peak
figures. It stands for the compute roof of the roofline model (Williams, Waterman and Patterson
2009, "Roofline: An Insightful Visual Performance Model for Multicore Architectures", CACM 52(4)):
with the bandwidth it gives the ridge point that says whether prefill is bound by memory or by
arithmetic. llama.cpp's quantized kernels reach a different rate than float32 BLAS, so the ridge is
an estimate, good for telling a few-token prefill (a few FLOPs per byte) from a batch (hundreds).

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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

CACHE_FILE = "bandwidth.json"
DEFAULT_BUFFER_BYTES = 256 * 1024 * 1024
DEFAULT_BUDGET_S = 1.0
MIN_PASSES = 3
TOUCH_SLICE_BYTES = 8 * 1024 * 1024
FLOP_MATRIX = 1024  # n of the n x n float32 matrices multiplied: 2.1 GFLOP a product, 12 MiB of operands
DEFAULT_FLOP_BUDGET_S = 0.3


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
        flop_s: the best float32 matrix product's FLOP/s (0: not measured, a file from before it was).
    """

    bytes_s: float
    buffer_bytes: int
    threads: int
    passes: int
    seconds: float
    measured_at: float
    machine: str
    flop_s: float = 0.0

    @property
    def gb_s(self) -> float:
        """Decimal GB/s."""
        return self.bytes_s / 1e9

    @property
    def ridge_flop_per_byte(self) -> float:
        """The roofline's ridge point: ``flop_s / bytes_s``, FLOPs per byte (0 when either is unknown).

        Work doing fewer FLOPs per byte it moves than this cannot keep the arithmetic busy: memory
        bandwidth bounds it; work doing more is bounded by arithmetic (Williams et al. 2009).
        """
        return self.flop_s / self.bytes_s if self.flop_s > 0 and self.bytes_s > 0 else 0.0


class ProbeCancelled(Exception):
    """:func:`measure_bandwidth` was told to stop before it finished."""


def measure_bandwidth(
    buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    threads: int | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    stop: threading.Event | None = None,
    flop_budget_s: float = DEFAULT_FLOP_BUDGET_S,
) -> Bandwidth:
    """Copy a ``buffer_bytes`` buffer, best of N passes within about ``budget_s`` seconds, then
    time float32 matrix products for about ``flop_budget_s`` (:func:`measure_flop_s`).

    Args:
        buffer_bytes: bytes of the source (and of the destination); keep it far above the
            last-level cache (the default 256 MiB is above any desktop CPU's L3).
        threads: copying threads; None: :func:`usable_cpus`.
        budget_s: passes run until this much time is spent (at least ``MIN_PASSES``).
        stop: when set, the probe ends after the pass in progress (the window is closing).
        flop_budget_s: seconds of matrix products (at least ``MIN_PASSES``).

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

    def copy() -> None:
        if n_threads == 1:
            np.copyto(dst, src)
            return
        workers = [
            threading.Thread(target=np.copyto, args=(dst[a:b], src[a:b]), name=f"glassbox-bandwidth-{i}")
            for i, (a, b) in enumerate(itertools.pairwise(bounds))
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    t_start = time.perf_counter()
    best, passes = _best_time(copy, budget_s, stop, "passes")
    moved = 2 * n * 8
    src = dst = np.empty(0)  # the matrix products run without 2 x 256 MiB held (the closure keeps no copy)
    flop_s = measure_flop_s(budget_s=flop_budget_s, stop=stop)
    return Bandwidth(
        bytes_s=moved / best,
        buffer_bytes=n * 8,
        threads=n_threads,
        passes=passes,
        seconds=time.perf_counter() - t_start,
        measured_at=time.time(),
        machine=machine_key(),
        flop_s=flop_s,
    )


def measure_flop_s(
    n: int = FLOP_MATRIX, budget_s: float = DEFAULT_FLOP_BUDGET_S, stop: threading.Event | None = None
) -> float:
    """FLOP/s of the best of N ``n × n`` float32 matrix products (``2 n³`` FLOPs each) within about
    ``budget_s`` seconds, after one untimed product (the BLAS threads start).

    Raises:
        ProbeCancelled: ``stop`` was set.
    """
    a = np.full((n, n), 0.5, dtype=np.float32)
    b = np.full((n, n), 0.25, dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=out)
    best, _passes = _best_time(lambda: np.matmul(a, b, out=out), budget_s, stop, "matrix products")
    return 2.0 * n**3 / best


def _best_time(
    run: Callable[[], object], budget_s: float, stop: threading.Event | None, what: str
) -> tuple[float, int]:
    """Run ``run`` until ``budget_s`` seconds are spent (at least ``MIN_PASSES`` times); returns the
    fastest run's seconds and the runs made.

    Raises:
        ProbeCancelled: ``stop`` was set (``what``: what the runs are, for its message).
    """
    t_start = time.perf_counter()
    best = float("inf")
    passes = 0
    while passes < MIN_PASSES or time.perf_counter() - t_start < budget_s:
        if stop is not None and stop.is_set():
            raise ProbeCancelled(f"stopped after {passes} {what}")
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        passes += 1
    return best, passes


def cached_bandwidth(cache_dir: Path) -> Bandwidth | None:
    """The measurement saved in ``cache_dir`` when it was taken on this machine, else None
    (no file, a damaged one, another machine's, or one from before the FLOP/s was measured)."""
    try:
        data = json.loads((cache_dir / CACHE_FILE).read_text(encoding="utf-8"))
        bw = Bandwidth(**data)
    except (OSError, ValueError, TypeError):
        return None
    if bw.machine != machine_key() or bw.bytes_s <= 0 or bw.flop_s <= 0:
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
