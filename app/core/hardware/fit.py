"""Will a model fit this machine? A verdict from the one memory formula.

:func:`fit_verdict` puts :func:`app.core.hardware.memory.estimate_memory` (weights + KV
cache at n_ctx + compute buffer) against the memory this machine has free
(:func:`system_memory`: RAM, and VRAM when the caller knows it). It works from
a :class:`~app.core.gguf.gguf_info.GGUFInfo`, so it serves a file on disk and a file
on the Hub alike (the Hub client fetches only the header).

Verdicts (``budget`` = available RAM, plus available VRAM when given):

- ``fits``: the total is at most :data:`COMFORT` (80%) of the budget;
- ``tight``: it fits in the budget but leaves less than 20% for the rest of
  the system (expect swapping or other programs to suffer);
- ``does not fit``: it needs more than the budget.
"""

from __future__ import annotations

import enum
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from app.core.gguf.gguf_info import GGUFInfo, format_bytes
from app.core.hardware.memory import DEFAULT_N_UBATCH, MemoryEstimate, estimate_memory

COMFORT = 0.8  # "fits" leaves at least 20% of the budget free


class Verdict(str, enum.Enum):
    FITS = "fits"
    TIGHT = "tight"
    DOES_NOT_FIT = "does not fit"


@dataclass(frozen=True)
class SystemMemory:
    """Memory of this machine, in bytes.

    Attributes:
        ram_total: physical RAM.
        ram_available: RAM that can be used without swapping (Linux
            MemAvailable), or the best estimate the platform gives.
        vram_total, vram_available: the GPU's memory when known (None on a
            CPU build; the engine knows it, core does not query GPUs).
        source: where the RAM figures came from (for the UI's tooltip).
    """

    ram_total: int
    ram_available: int
    vram_total: int | None = None
    vram_available: int | None = None
    source: str = ""


def _linux_meminfo(path: Path = Path("/proc/meminfo")) -> SystemMemory | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    if "MemTotal" not in values:
        return None
    avail = values.get("MemAvailable")
    if avail is None:  # kernels before 3.14
        avail = values.get("MemFree", 0) + values.get("Cached", 0) + values.get("Buffers", 0)
    return SystemMemory(values["MemTotal"], avail, source="/proc/meminfo MemAvailable")


def _windows_memory() -> SystemMemory | None:  # pragma: no cover - Windows only
    import ctypes

    class MEMORYSTATUSEX(ctypes.Structure):
        _fields_ = [
            ("dwLength", ctypes.c_ulong),
            ("dwMemoryLoad", ctypes.c_ulong),
            ("ullTotalPhys", ctypes.c_ulonglong),
            ("ullAvailPhys", ctypes.c_ulonglong),
            ("ullTotalPageFile", ctypes.c_ulonglong),
            ("ullAvailPageFile", ctypes.c_ulonglong),
            ("ullTotalVirtual", ctypes.c_ulonglong),
            ("ullAvailVirtual", ctypes.c_ulonglong),
            ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
        ]

    st = MEMORYSTATUSEX()
    st.dwLength = ctypes.sizeof(MEMORYSTATUSEX)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(st)):  # type: ignore[attr-defined]
        return None
    return SystemMemory(int(st.ullTotalPhys), int(st.ullAvailPhys), source="GlobalMemoryStatusEx")


def system_memory() -> SystemMemory:
    """This machine's RAM: total and available, in bytes.

    Linux: ``/proc/meminfo`` (MemAvailable). Otherwise psutil when it is
    installed (it is not a Glassbox dependency), Windows' GlobalMemoryStatusEx,
    and last ``os.sysconf`` (available pages where the platform has them; on
    macOS without psutil, half of the physical RAM is assumed available, and
    ``source`` says so).
    """
    if sys.platform.startswith("linux"):
        m = _linux_meminfo()
        if m is not None:
            return m
    try:
        import psutil

        vm = psutil.virtual_memory()
        return SystemMemory(int(vm.total), int(vm.available), source="psutil")
    except Exception:
        pass
    if sys.platform == "win32":  # pragma: no cover
        m = _windows_memory()
        if m is not None:
            return m
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return SystemMemory(0, 0, source="unknown")
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * page
        return SystemMemory(total, avail, source="sysconf")
    except (ValueError, OSError):  # pragma: no cover - macOS
        return SystemMemory(total, total // 2, source="sysconf (available unknown: assumed half of RAM)")


@dataclass(frozen=True)
class FitReport:
    """A verdict with its breakdown (bytes).

    Attributes:
        verdict: fits / tight / does not fit.
        estimate: weights, KV cache and compute buffer.
        n_ctx: context length the estimate is for, tokens.
        ram_available, vram_available: what the verdict was measured against.
        budget: ram_available + (vram_available or 0).
        all_on_gpu: with VRAM given, whether everything fits comfortably in VRAM
            alone; None without VRAM.
        draft_bytes: a draft model's weights and KV cache loaded beside the model (speculative
            decoding, ``DraftInfo.total_bytes``), counted in the verdict; 0 without one.
    """

    verdict: Verdict
    estimate: MemoryEstimate
    n_ctx: int
    ram_available: int
    vram_available: int | None
    budget: int
    all_on_gpu: bool | None = None
    draft_bytes: int = 0

    @property
    def fits(self) -> bool:
        return self.verdict is Verdict.FITS

    def breakdown(self) -> str:
        """``weights 70 MiB + KV cache 90 MiB + compute 100 MiB = 260 MiB of 20.1 GiB free RAM``."""
        against = f"{format_bytes(self.ram_available)} free RAM"
        if self.vram_available is not None:
            against += f" + {format_bytes(self.vram_available)} free VRAM"
        draft = f" + draft model {format_bytes(self.draft_bytes)}" if self.draft_bytes else ""
        return f"{self.estimate.breakdown()}{draft} (n_ctx {self.n_ctx:,}) of {against}"

    def summary(self) -> str:
        """The verdict and the breakdown in one line."""
        return f"{self.verdict.value}: {self.breakdown()}"


def fit_verdict(
    info: GGUFInfo,
    n_ctx: int,
    *,
    memory: SystemMemory | None = None,
    weights_bytes: int | None = None,
    n_ubatch: int = DEFAULT_N_UBATCH,
    swa_full: bool = True,
    type_k: str = "f16",
    type_v: str = "f16",
    draft_bytes: int = 0,
) -> FitReport:
    """Whether ``info``'s model fits this machine at ``n_ctx`` tokens.

    Args:
        info: the model's GGUF header.
        n_ctx: context length, tokens (0: the trained length).
        memory: the machine's memory; default :func:`system_memory`. Set
            ``vram_available`` for a GPU build.
        weights_bytes: weights of all parts of a split model (each part's
            header lists only its own tensors); default the header's tensor bytes.
        n_ubatch, swa_full, type_k, type_v: as for :func:`~app.core.hardware.memory.estimate_memory`.
        draft_bytes: a draft model's weights and KV cache (speculative decoding), bytes, added to the total.

    Returns:
        A :class:`FitReport`.

    Raises:
        ValueError: the header has no attention shape to size a KV cache
            (from :func:`~app.core.hardware.memory.kv_cache_layout`).
    """
    mem = memory or system_memory()
    est = estimate_memory(
        info, n_ctx, n_ubatch=n_ubatch, swa_full=swa_full, type_k=type_k, type_v=type_v, weights_bytes=weights_bytes
    )
    vram = mem.vram_available
    budget = mem.ram_available + (vram or 0)
    total = est.total + draft_bytes
    if total <= COMFORT * budget:
        verdict = Verdict.FITS
    elif total <= budget:
        verdict = Verdict.TIGHT
    else:
        verdict = Verdict.DOES_NOT_FIT
    n = n_ctx if n_ctx > 0 else (info.context_length or 4096)
    return FitReport(
        verdict,
        est,
        n,
        mem.ram_available,
        vram,
        budget,
        None if vram is None else total <= COMFORT * vram,
        draft_bytes,
    )


# Before a file's header is read (the first-run starters: no network until the person acts),
# the KV cache and compute buffer of a sub-1B model at n_ctx 4096 are taken as this much:
# measured here, SmolLM2 135M takes 90 MiB of KV cache and 99 MiB of compute buffer.
SMALL_MODEL_RUNTIME_BYTES = 512 * 1024 * 1024


def size_verdict(file_bytes: int, memory: SystemMemory | None = None) -> tuple[Verdict, int]:
    """A rough verdict from a small model's file size alone: ``(verdict, bytes needed)``.

    Needed = ``file_bytes`` (the weights) + :data:`SMALL_MODEL_RUNTIME_BYTES`; the thresholds
    are :func:`fit_verdict`'s. The Hub tab's verdict (from the file's header) is exact.
    """
    mem = memory or system_memory()
    budget = mem.ram_available + (mem.vram_available or 0)
    need = file_bytes + SMALL_MODEL_RUNTIME_BYTES
    if need <= COMFORT * budget:
        return Verdict.FITS, need
    if need <= budget:
        return Verdict.TIGHT, need
    return Verdict.DOES_NOT_FIT, need
