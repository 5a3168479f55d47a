"""The compute roof of a prefill: how fast llama.cpp's own matrix kernels multiply this model's weights here.

The roofline model (Williams, Waterman and Patterson 2009, CACM 52(4)) bounds work by the machine's
peak arithmetic rate. A float32 BLAS product (numpy's, :mod:`app.core.hardware.bandwidth`) is not
that peak for llama.cpp: its CPU kernels multiply quantized weights by int8-quantized activations
(``vec_dot_type`` Q8_0 / Q8_1 / Q8_K; AVX2 / AVX-512 VNNI integer dot products, repacked 8x8 layouts
in the ``CPU_REPACK`` buffer), which do more multiply-adds per instruction than float32 FMA: on this
2-CPU machine SmolLM2's Q4_1 prefill reached 32 GFLOP/s on one thread while numpy's float32 BLAS
said 30 GFLOP/s on two (review 27 §2).

So the roof is measured with llama.cpp's own kernels (ggml, the same library the model runs on):
for each ggml type of the model's matrix weights, one ``ggml_mul_mat`` of its largest weight's shape
(``ne0`` × ``ne1``) by ``n_tokens`` float32 activation columns, on the context's prefill threads,
in each buffer type the CPU device offers that can hold it (llama.cpp's ``weight_buft_supported``
test: the extra ``CPU_REPACK`` type first, then plain ``CPU``; the faster counts), best of several
passes. FLOPs: ``2 × ne0 × ne1 × n_tokens`` (a multiply and an add per term). The weights are zeros:
the integer kernels' time does not depend on the values.

The calls are ggml's public C API (ggml.h, ggml-backend.h, ggml-alloc.h, ggml-cpu.h) through ctypes,
on the libraries llama-cpp-python ships; the only layout assumed is ``ggml_tensor.buffer`` at byte 8
(after the ``type`` enum), which is how llama.cpp's own loader sets a dummy buffer.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import gguf
import llama_cpp

from app.core.gguf.gguf_facts import TensorInfo

log = logging.getLogger(__name__)

TENSOR_BUFFER_OFFSET = 8  # struct ggml_tensor { enum ggml_type type; struct ggml_backend_buffer * buffer; ...
GGML_TYPE_F32 = 0
CPU_DEVICE = 0  # GGML_BACKEND_DEVICE_TYPE_CPU
MIN_PASSES = 3
_vp = ctypes.c_void_p


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", _vp), ("no_alloc", ctypes.c_bool)]


class _Ggml:
    """The few ggml functions the probe calls."""

    def __init__(self) -> None:
        lib = Path(llama_cpp.__file__).parent / "lib"
        base = ctypes.CDLL(str(next(lib.glob("libggml-base.*"))))
        cpu = ctypes.CDLL(str(next(lib.glob("libggml-cpu.*"))))
        top = ctypes.CDLL(str(next(p for p in lib.glob("libggml.*") if "base" not in p.name and "cpu" not in p.name)))

        def fn(library: ctypes.CDLL, name: str, res: object, *args: object) -> Any:
            f = getattr(library, name)
            f.restype = res
            f.argtypes = list(args)
            return f

        sz, i64, i32 = ctypes.c_size_t, ctypes.c_int64, ctypes.c_int
        self.init = fn(base, "ggml_init", _vp, _InitParams)
        self.free = fn(base, "ggml_free", None, _vp)
        self.tensor_overhead = fn(base, "ggml_tensor_overhead", sz)
        self.graph_overhead = fn(base, "ggml_graph_overhead", sz)
        self.new_2d = fn(base, "ggml_new_tensor_2d", _vp, _vp, i32, i64, i64)
        self.mul_mat = fn(base, "ggml_mul_mat", _vp, _vp, _vp, _vp)
        self.new_graph = fn(base, "ggml_new_graph", _vp, _vp)
        self.expand = fn(base, "ggml_build_forward_expand", None, _vp, _vp)
        self.nbytes = fn(base, "ggml_nbytes", sz, _vp)
        self.alloc_ctx = fn(base, "ggml_backend_alloc_ctx_tensors_from_buft", _vp, _vp, _vp)
        self.buffer_free = fn(base, "ggml_backend_buffer_free", None, _vp)
        self.buft_alloc = fn(base, "ggml_backend_buft_alloc_buffer", _vp, _vp, sz)
        self.buft_name = fn(base, "ggml_backend_buft_name", ctypes.c_char_p, _vp)
        self.tensor_set = fn(base, "ggml_backend_tensor_set", None, _vp, _vp, sz, sz)
        self.compute = fn(base, "ggml_backend_graph_compute", i32, _vp, _vp)
        self.backend_free = fn(base, "ggml_backend_free", None, _vp)
        self.dev_buft = fn(base, "ggml_backend_dev_buffer_type", _vp, _vp)
        self.dev_reg = fn(base, "ggml_backend_dev_backend_reg", _vp, _vp)
        self.proc = fn(base, "ggml_backend_reg_get_proc_address", _vp, _vp, ctypes.c_char_p)
        self.supports = fn(base, "ggml_backend_dev_supports_op", ctypes.c_bool, _vp, _vp)
        self.dev_by_type = fn(top, "ggml_backend_dev_by_type", _vp, i32)
        self.cpu_init = fn(cpu, "ggml_backend_cpu_init", _vp)
        self.set_threads = fn(cpu, "ggml_backend_cpu_set_n_threads", None, _vp, i32)

    def bufts(self, dev: int) -> list[int]:
        """The CPU device's buffer types: its extra ones (``CPU_REPACK``...) first, then its own."""
        out: list[int] = []
        extra = self.proc(self.dev_reg(dev), b"ggml_backend_dev_get_extra_bufts")
        if extra:
            arr = ctypes.CFUNCTYPE(ctypes.POINTER(_vp), _vp)(extra)(dev)
            i = 0
            while arr and arr[i]:
                out.append(int(arr[i]))
                i += 1
        return [*out, int(self.dev_buft(dev))]


def _ctx(g: _Ggml, n_tensors: int) -> int:
    ctx = g.init(_InitParams(g.tensor_overhead() * n_tensors + g.graph_overhead(), None, True))
    if not ctx:
        raise MemoryError("ggml_init failed")
    return int(ctx)


def _supported(g: _Ggml, dev: int, buft: int, gtype: int, k: int, n: int, m: int) -> bool:
    """llama.cpp's ``weight_buft_supported``: can ``buft`` hold the weight for this ``ggml_mul_mat``?"""
    ctx = _ctx(g, 4)
    try:
        w = g.new_2d(ctx, gtype, k, n)
        y = g.mul_mat(ctx, w, g.new_2d(ctx, GGML_TYPE_F32, k, m))
        dummy = g.buft_alloc(buft, 0)
        slot = _vp.from_address(w + TENSOR_BUFFER_OFFSET)
        slot.value = dummy
        ok = bool(g.supports(dev, y))
        slot.value = None
        g.buffer_free(dummy)
        return ok
    finally:
        g.free(ctx)


def _time_mul_mat(
    g: _Ggml, dev: int, buft: int, gtype: int, k: int, n: int, m: int, threads: int, budget_s: float
) -> float:
    """Best seconds of one ``ggml_mul_mat`` (weights in ``buft``, activations and result in the CPU's own)."""
    wctx, octx = _ctx(g, 2), _ctx(g, 4)
    wbuf = obuf = backend = None
    try:
        w = g.new_2d(wctx, gtype, k, n)
        wbuf = g.alloc_ctx(wctx, buft)
        if not wbuf:
            raise MemoryError(f"could not allocate a {k}x{n} weight")
        size = int(g.nbytes(w))
        g.tensor_set(w, (ctypes.c_uint8 * size)(), 0, size)
        y = g.mul_mat(octx, w, g.new_2d(octx, GGML_TYPE_F32, k, m))
        graph = g.new_graph(octx)
        g.expand(graph, y)
        obuf = g.alloc_ctx(octx, g.dev_buft(dev))
        if not obuf:
            raise MemoryError(f"could not allocate {m} activation columns")
        backend = g.cpu_init()
        g.set_threads(backend, threads)
        g.compute(backend, graph)  # warm-up
        best, passes, end = float("inf"), 0, time.perf_counter() + budget_s
        while passes < MIN_PASSES or time.perf_counter() < end:
            t0 = time.perf_counter_ns()
            g.compute(backend, graph)
            best = min(best, (time.perf_counter_ns() - t0) / 1e9)
            passes += 1
        return best
    finally:
        if backend:
            g.backend_free(backend)
        for b in (obuf, wbuf):
            if b:
                g.buffer_free(b)
        g.free(octx)
        g.free(wctx)


def roof_shapes(tensors: Iterable[TensorInfo]) -> dict[str, tuple[int, int]]:
    """Per ggml type of the model's matrix weights (2-D ``*.weight`` tensors, ``token_embd`` as a tied
    head included), the largest one's ``(ne0, ne1)``: the shape the roof is measured on (a block's
    weight when the type has one; the output head only for a type of its own)."""
    out: dict[str, tuple[int, int]] = {}
    block: set[str] = set()  # types with a block weight: measured on it (the head's shape costs seconds)
    for t in sorted(tensors, key=lambda t: not t.name.startswith("blk.")):
        if len(t.shape) != 2 or not t.name.endswith(".weight") or t.type_name in ("F32",):
            continue
        k, n = int(t.shape[0]), int(t.shape[1])
        if t.name.startswith("blk."):
            block.add(t.type_name)
        elif t.type_name in block:
            continue
        if t.type_name not in out or k * n > out[t.type_name][0] * out[t.type_name][1]:
            out[t.type_name] = (k, n)
    return out


def matmul_flop_s(
    tensors: Iterable[TensorInfo], n_tokens: int, threads: int, budget_s: float = 0.12
) -> tuple[tuple[str, float], ...]:
    """llama.cpp's matrix-multiply rate here for each weight type of the model (see the module docstring).

    Args:
        tensors: the model's tensor table.
        n_tokens: activation columns (the prefill's tokens per llama_decode call).
        threads: the prefill threads (``llama_n_threads_batch``).
        budget_s: seconds of passes per type (at least ``MIN_PASSES``).

    Returns:
        ``((type name, FLOP/s), ...)``; empty when ggml could not be called (logged), a type left out
        when it could not be measured.
    """
    try:
        g = _Ggml()
        dev = int(g.dev_by_type(CPU_DEVICE) or 0)
        if not dev:
            return ()
        bufts = g.bufts(dev)
    except (OSError, AttributeError, StopIteration) as exc:
        log.warning("the matmul roof could not be measured: %s", exc)
        return ()
    m = max(1, n_tokens)
    out: list[tuple[str, float]] = []
    for name, (k, n) in sorted(roof_shapes(tensors).items()):
        try:
            gtype = int(gguf.GGMLQuantizationType[name].value)
        except KeyError:
            continue
        best = 0.0
        for buft in bufts:
            try:
                if not _supported(g, dev, buft, gtype, k, n, m):
                    continue
                s = _time_mul_mat(g, dev, buft, gtype, k, n, m, max(1, threads), budget_s)
            except MemoryError as exc:
                log.warning("the %s matmul roof in %s: %s", name, g.buft_name(buft), exc)
                continue
            best = max(best, 2.0 * k * n * m / s if s > 0 else 0.0)
        if best > 0:
            out.append((name, best))
    return tuple(out)
