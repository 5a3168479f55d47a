"""Loadable ggml backends: a ``GGML_BACKEND_DL`` build picks its CPU variant at run time.

A llama.cpp built with ``-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON`` has no CPU code in
``libggml.so``: each x86-64 level is a separate library in ``llama_cpp/lib``
(``libggml-cpu-x64.so``, ``-sse42``, ``-haswell``, ``-skylakex``, ``-zen4``...), and
``ggml_backend_load_all_from_path`` loads the best one this CPU can run (so no SIGILL where
AVX2 is missing, and AVX-512 where it exists). llama-cpp-python does not make that call, so
the engine makes it once, before the first model load. With today's default build
(``GGML_NATIVE=OFF``, the CPU backend linked in) there is nothing to load and this does nothing.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

log = logging.getLogger(__name__)

CPU_VARIANT_GLOB = "libggml-cpu-*"  # libggml-cpu-haswell.so (Linux), ggml-cpu-haswell.dll (Windows)


def library_dir() -> Path:
    """llama-cpp-python's library folder (``llama_cpp/lib``). Imports llama_cpp."""
    import llama_cpp

    return Path(llama_cpp.__file__).resolve().parent / "lib"


def cpu_variants(lib_dir: Path) -> list[Path]:
    """The CPU backend variants a ``GGML_CPU_ALL_VARIANTS`` build put in ``lib_dir`` ([] for other builds)."""
    return sorted(p for p in lib_dir.glob(CPU_VARIANT_GLOB) if p.suffix in (".so", ".dll", ".dylib"))


def loaded_cpu_variant() -> str | None:
    """The CPU variant this process loaded (e.g. ``zen4``), from ``/proc/self/maps`` (Linux); None if unknown."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in maps.splitlines():
        name = line.rsplit("/", 1)[-1]
        if name.startswith("libggml-cpu-") and ".so" in name:
            return name[len("libggml-cpu-") :].split(".so")[0]
    return None


def load_backends(lib_dir: Path | None = None) -> str | None:
    """Load the dynamic backends of a ``GGML_BACKEND_DL`` build (the best CPU variant) from ``lib_dir``.

    Call once per process, before the first model load. Returns the CPU variant loaded
    (``haswell``, ``zen4``...; ``"unknown"`` where it cannot be read back), or None when the
    build links its CPU backend in (nothing to load).

    Raises:
        OSError: libggml cannot be opened, or no CPU variant could be loaded on this CPU.
    """
    lib_dir = lib_dir or library_dir()
    variants = cpu_variants(lib_dir)
    if not variants:
        return None
    ggml = _open_ggml(lib_dir)
    ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_load_all_from_path.restype = None
    ggml.ggml_backend_load_all_from_path(str(lib_dir).encode())
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    if ggml.ggml_backend_reg_count() == 0:
        raise OSError(f"no CPU backend of {[p.name for p in variants]} in {lib_dir} loads on this CPU")
    variant = loaded_cpu_variant() or "unknown"
    log.info("ggml backends loaded from %s; CPU variant: %s (of %d)", lib_dir, variant, len(variants))
    return variant


def _open_ggml(lib_dir: Path) -> ctypes.CDLL:
    """The libggml that libllama uses. The wheel holds ``libggml.so``, ``.so.0`` and ``.so.0.25.3`` as
    separate copies (a zip has no links), and each copy opened is a separate library with its own
    backend registry: only the soname libllama links against (``libggml.so.0``) is the right one."""
    sonames = sorted(lib_dir.glob("libggml.so.*"), key=lambda p: (p.name.count("."), p.name))
    for path in [*sonames, lib_dir / "libggml.so", lib_dir / "libggml.dylib", lib_dir / "ggml.dll"]:
        if path.exists():
            return ctypes.CDLL(str(path))
    raise OSError(f"no libggml in {lib_dir}")
