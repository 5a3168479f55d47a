"""Copy named graph tensors out of a llama.cpp evaluation through the eval callback (``cb_eval``).

llama.cpp's scheduler (``ggml_backend_sched_compute_splits``, ggml/src/ggml-backend.cpp) calls
``cb_eval(t, ask=True, user_data)`` for each graph node; where it answers True, the scheduler
computes the graph up to that node, then calls ``cb_eval(t, ask=False, ...)`` with the node's
data ready (returning False then aborts the computation). Nodes are named by the graph builder's
``cb(cur, "l_out", il)`` which ``llama_context::graph_get_cb`` (src/llama-context.cpp) turns into
``"l_out-<il>"`` (``ggml_format_name(cur, "%s-%d", name, il)``); layer-less nodes keep the plain
name (``result_norm``). A node is copied only when :class:`TensorCapture` wants its name, inside
the callback, with ``ggml_backend_tensor_get`` (works for host and device buffers alike).

The callback never raises into C: an error is kept in :attr:`TensorCapture.error` and the
computation is aborted (``llama_decode`` then fails; the caller raises the kept error).
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import _ggml

log = logging.getLogger(__name__)

GGML_MAX_DIMS = 4
GGML_MAX_SRC = 10
GGML_MAX_OP_PARAMS = 64
GGML_MAX_NAME = 64

#: ggml_type values (ggml/include/ggml.h) the capture can read, and their numpy types.
GGML_DTYPES: dict[int, type[np.generic]] = {0: np.float32, 1: np.float16, 26: np.int32}


class GGMLTensor(ctypes.Structure):
    """``struct ggml_tensor`` of the vendored ggml (ggml/include/ggml.h), read-only here."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * GGML_MAX_DIMS),
        ("nb", ctypes.c_size_t * GGML_MAX_DIMS),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * (GGML_MAX_OP_PARAMS // 4)),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * GGML_MAX_SRC),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * GGML_MAX_NAME),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


_lib = _ggml.libggml
_lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
_lib.ggml_backend_tensor_get.restype = None
_lib.ggml_tensor_overhead.argtypes = []
_lib.ggml_tensor_overhead.restype = ctypes.c_size_t


def read_tensor(ptr: int) -> npt.NDArray[Any]:
    """A numpy copy of a computed tensor, shaped ``ne`` reversed (ggml's innermost dimension last).

    Works for non-contiguous views (``ffn_moe_topk`` is a view of the argsort): the bytes from the
    first to the last element are copied, then read with the tensor's strides.

    Raises:
        TypeError: a ggml type this reader does not know (quantized intermediate tensors).
    """
    t = GGMLTensor.from_address(ptr)
    dtype = GGML_DTYPES.get(int(t.type))
    if dtype is None:
        raise TypeError(f"tensor {t.name.decode(errors='replace')} has ggml type {t.type}, which is not read")
    ne = [int(t.ne[i]) for i in range(GGML_MAX_DIMS)]
    nb = [int(t.nb[i]) for i in range(GGML_MAX_DIMS)]
    if min(ne) <= 0:
        return np.empty(tuple(reversed(ne)), dtype=dtype)
    item = np.dtype(dtype).itemsize
    span = sum((n - 1) * s for n, s in zip(ne, nb, strict=True)) + item
    buf = np.empty(span, dtype=np.uint8)
    _lib.ggml_backend_tensor_get(ptr, buf.ctypes.data, 0, span)
    view = np.lib.stride_tricks.as_strided(
        buf.view(dtype),
        shape=tuple(reversed(ne)),
        strides=tuple(reversed(nb)),
    )
    return np.array(view, copy=True)


class TensorCapture:
    """The ``cb_eval`` callback of one llama context: copies the tensors ``wants`` names.

    Args:
        wants: which node names to copy (called for every node of every graph: keep it cheap).

    Attributes:
        tensors: name → the last copy of that node (cleared by :meth:`reset`).
        names_seen: every node name asked about since :meth:`reset`, when ``record_names`` is on.
        error: the first exception raised inside the callback (the evaluation was aborted).
        callback: the ctypes function pointer for ``llama_context_params.cb_eval`` (kept alive here).
    """

    def __init__(self, wants: Callable[[str], bool]) -> None:
        self.wants = wants
        self.tensors: dict[str, npt.NDArray[Any]] = {}
        self.names_seen: list[str] = []
        self.record_names = False
        self.error: BaseException | None = None
        self.enabled = True
        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._cb)

    def reset(self) -> None:
        """Forget the copies, names and error of the last evaluation."""
        self.tensors = {}
        self.names_seen = []
        self.error = None

    def _cb(self, ptr: int | None, ask: bool, _user: int | None) -> bool:
        if not ptr:
            return not ask
        try:
            if not self.enabled:
                return not ask
            name = GGMLTensor.from_address(ptr).name.decode("utf-8", errors="replace")
            if ask:
                if self.record_names:
                    self.names_seen.append(name)
                return bool(self.wants(name))
            self.tensors[name] = read_tensor(ptr)
            return True
        except BaseException as exc:  # never into C: keep it, abort the computation
            if self.error is None:
                self.error = exc
                log.error("eval callback failed on a tensor: %r", exc)
            return False
