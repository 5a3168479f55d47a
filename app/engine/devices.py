"""The GPU devices llama.cpp's ggml backends see, and their memory, in bytes.

llama-cpp-python 0.3.36 binds no ``ggml_backend_dev_*`` function, so this
module declares the few it needs (``ggml-backend.h``) on the libggml that
llama_cpp loaded (``llama_cpp._ggml.libggml``): ``ggml_backend_dev_count``,
``ggml_backend_dev_get``, ``ggml_backend_dev_type``, ``ggml_backend_dev_name``,
``ggml_backend_dev_description`` and ``ggml_backend_dev_memory``.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

from app.core.protocol import DeviceMemory


class DeviceType(enum.IntEnum):
    """``enum ggml_backend_dev_type`` (ggml-backend.h)."""

    CPU = 0
    GPU = 1  # a device with its own memory
    IGPU = 2  # an integrated GPU using host memory
    ACCEL = 3  # an accelerator used with the CPU (BLAS, AMX): host memory


GPU_TYPES = (DeviceType.GPU, DeviceType.IGPU)


def _declare(lib: Any) -> None:
    lib.ggml_backend_dev_count.argtypes = []
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_name.restype = ctypes.c_char_p
    lib.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_description.restype = ctypes.c_char_p
    lib.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.ggml_backend_dev_memory.restype = None


def gpu_devices(lib: Any | None = None) -> tuple[DeviceMemory, ...]:
    """Every GPU device llama.cpp can offload to, with its free and total memory as ggml reports them.

    CPU and accelerator devices (host memory) are left out, so a CPU build gives ``()``.

    Args:
        lib: the libggml ``ctypes.CDLL``; default the one llama_cpp loaded.

    Raises:
        AttributeError: the library lacks the ggml backend device functions.
    """
    if lib is None:
        from llama_cpp import _ggml

        lib = _ggml.libggml
    _declare(lib)
    out: list[DeviceMemory] = []
    for i in range(int(lib.ggml_backend_dev_count())):
        dev = lib.ggml_backend_dev_get(i)
        kind = int(lib.ggml_backend_dev_type(dev))
        if kind not in GPU_TYPES:
            continue
        free = ctypes.c_size_t(0)
        total = ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        name = (lib.ggml_backend_dev_name(dev) or b"").decode("utf-8", errors="replace")
        desc = (lib.ggml_backend_dev_description(dev) or b"").decode("utf-8", errors="replace")
        out.append(DeviceMemory(name, desc, DeviceType(kind) == DeviceType.IGPU, int(free.value), int(total.value)))
    return tuple(out)


def local_gpu_offload(lib: Any | None = None) -> bool:
    """Whether layers can go to a GPU of this machine (a GPU or integrated GPU device exists).

    ``llama_supports_gpu_offload()`` is not this: it also says yes for any build with the RPC
    backend (``GGML_RPC=ON``), GPU or not. RPC servers are :mod:`app.engine.rpc`'s.
    """
    try:
        return bool(gpu_devices(lib))
    except (AttributeError, OSError):
        return False
