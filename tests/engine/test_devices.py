"""EngineReady.devices: the GPU devices and their memory as llama.cpp's ggml backends report them."""

from __future__ import annotations

import ctypes

from app.core import protocol as P
from app.engine.devices import DeviceType, gpu_devices
from app.engine.host import EngineHost

GIB = 1024**3


class _Fn:
    """A stand-in for a ctypes function: accepts argtypes/restype, calls ``impl``."""

    def __init__(self, impl):
        self.impl = impl
        self.argtypes = None
        self.restype = None

    def __call__(self, *args):
        return self.impl(*args)


class _FakeGgml:
    """A libggml with a CPU, a discrete GPU, an integrated GPU and a BLAS accelerator."""

    def __init__(self):
        devs = [
            (DeviceType.CPU, b"CPU", b"AMD Ryzen", 64 * GIB, 128 * GIB),
            (DeviceType.GPU, b"CUDA0", b"NVIDIA GeForce RTX 4090", 20 * GIB, 24 * GIB),
            (DeviceType.IGPU, b"Vulkan0", b"AMD Radeon 780M", 3 * GIB, 4 * GIB),
            (DeviceType.ACCEL, b"BLAS", b"OpenBLAS", 0, 0),
        ]

        def memory(i, free, total):
            free._obj.value, total._obj.value = devs[i][3], devs[i][4]

        self.ggml_backend_dev_count = _Fn(lambda: len(devs))
        self.ggml_backend_dev_get = _Fn(lambda i: i)
        self.ggml_backend_dev_type = _Fn(lambda i: int(devs[i][0]))
        self.ggml_backend_dev_name = _Fn(lambda i: devs[i][1])
        self.ggml_backend_dev_description = _Fn(lambda i: devs[i][2])
        self.ggml_backend_dev_memory = _Fn(memory)


def test_only_gpu_devices_are_listed_with_their_memory():
    lib = _FakeGgml()
    assert gpu_devices(lib) == (
        P.DeviceMemory("CUDA0", "NVIDIA GeForce RTX 4090", False, 20 * GIB, 24 * GIB),
        P.DeviceMemory("Vulkan0", "AMD Radeon 780M", True, 3 * GIB, 4 * GIB),
    )
    assert lib.ggml_backend_dev_memory.argtypes[1] is ctypes.POINTER(ctypes.c_size_t)
    assert lib.ggml_backend_dev_count.restype is ctypes.c_size_t


def test_engine_ready_reports_the_devices_of_this_build():
    host = EngineHost()
    host.start()
    try:
        ready = host.recv(60)
        assert isinstance(ready, P.EngineReady), ready
        if ready.gpu_offload:
            assert ready.devices, "a GPU build reported no GPU device"
            assert all(0 < d.free_bytes <= d.total_bytes and d.name for d in ready.devices), ready.devices
        else:
            assert ready.devices == ()  # a CPU build: only the CPU device, which is not listed
    finally:
        host.stop()
