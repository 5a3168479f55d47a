"""The GGUF tensors the logit lens and the embedding view read, dequantized once per model.

Read from the model file with the ``gguf`` package (``GGUFReader``, memory-mapped) and
dequantized with ``gguf.quants.dequantize``; llama.cpp's own copies are not reachable from Python.

- ``token_embd.weight`` [n_vocab, n_embd]: the embedding table (kept as float16, plus each row's
  L2 norm in float32, so a cosine is ``(E @ v) / (norms * |v|)``: the normalised table without a
  second copy).
- ``output.weight`` [n_vocab, n_embd]: the LM head; absent when tied, and then the embedding
  table serves (one copy for both).
- ``output_norm.weight`` (and ``.bias`` for LayerNorm models) [n_embd], float32. Gemma's GGUF
  already holds its norm weights with the +1 added (convert_hf_to_gguf.py), so they multiply as they are.

Products with a whole table run in float32 chunks of :data:`CHUNK_ROWS` rows (numpy has no fast
float16 matrix product), so the float32 copy never exists whole: memory stays at the float16
tables (Gemma 3 270M: 262,144 x 640 x 2 bytes = 320 MiB; SmolLM2 135M: 49,152 x 576 x 2 = 54 MiB).
"""

from __future__ import annotations

import enum
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt

from app.core.gguf.gguf_info import GGUFInfo

log = logging.getLogger(__name__)

CHUNK_ROWS = 16384  # rows of a table converted to float32 at a time

F32 = npt.NDArray[np.float32]


class ActivationQuant(str, enum.Enum):
    """How llama.cpp's CPU backend rounds the activations before a product with a weight type
    (``vec_dot_type`` in ggml/src/ggml-cpu/ggml-cpu.c): the lens does the same, so that its last
    layer reproduces llama.cpp's logits to float rounding rather than to 8-bit rounding."""

    NONE = "none"  #: F32 (and BF16, left unrounded here)
    F16 = "f16"  #: F16 weights: activations converted to float16
    Q8_0 = "q8_0"  #: Q4_0, Q5_0, Q8_0, ... (and Q8_1 for Q4_1/Q5_1: the same values): blocks of 32, float16 scale
    Q8_K = "q8_k"  #: the k-quants and i-quants: blocks of 256, float32 scale

    @staticmethod
    def for_weight(type_name: str) -> ActivationQuant:
        t = type_name.upper()
        if t in ("F32", "BF16", "F64"):
            return ActivationQuant.NONE
        if t == "F16":
            return ActivationQuant.F16
        if t.endswith("_K") or t.startswith("IQ"):
            return ActivationQuant.Q8_K
        return ActivationQuant.Q8_0

    def apply(self, x: F32) -> F32:
        """``x`` [m, n] rounded the way llama.cpp's CPU backend rounds it (n a multiple of the block)."""
        if self is ActivationQuant.NONE:
            return x
        if self is ActivationQuant.F16:
            out16: F32 = x.astype(np.float16).astype(np.float32)
            return out16
        block = 32 if self is ActivationQuant.Q8_0 else 256
        m, n = x.shape
        if n % block:
            return x
        b = x.reshape(m, n // block, block).astype(np.float32)
        if self is ActivationQuant.Q8_0:  # quantize_row_q8_0: d = amax / 127 stored as f16, q = round(x * 127 / amax)
            amax = np.abs(b).max(axis=2, keepdims=True)
            iscale = np.where(amax > 0, np.float32(127.0) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
            q = np.rint(b * iscale)
            d = (amax / np.float32(127.0)).astype(np.float16).astype(np.float32)
        else:  # quantize_row_q8_K_ref: iscale = -127 / (the value of largest magnitude), d = 1 / iscale (f32)
            idx = np.abs(b).argmax(axis=2)[..., None]
            mx = np.take_along_axis(b, idx, axis=2)
            iscale = np.where(mx != 0, np.float32(-127.0) / np.where(mx != 0, mx, 1), 0).astype(np.float32)
            q = np.minimum(np.rint(b * iscale), 127)
            d = np.where(iscale != 0, 1 / np.where(iscale != 0, iscale, 1), 0).astype(np.float32)
        out: F32 = (q * d).reshape(m, n).astype(np.float32)
        return out


class NormKind(str, enum.Enum):
    """The output norm's formula (src/llama-graph.cpp ``build_norm``)."""

    RMS = "rms"  #: x / sqrt(mean(x^2) + eps) * w
    LAYER = "layer"  #: (x - mean) / sqrt(var + eps) * w + b


@dataclass
class ModelTables:
    """The dequantized tables of one model (see the module docstring).

    Attributes:
        embd: float16 [n_vocab, n_embd], ``token_embd``.
        embd_norms: float32 [n_vocab], each row's L2 norm.
        output: float16 [n_vocab, n_embd], the LM head (the same array as ``embd`` when tied).
        tied: no ``output.weight`` in the file.
        norm_w, norm_b: the output norm's weight and bias (bias None for RMS norm).
        norm_kind: :class:`NormKind` value.
        eps: the norm's epsilon (from the GGUF's ``attention.layer_norm_rms_epsilon`` or ``layer_norm_epsilon``).
        softcap: final logit softcapping (``final_logit_softcapping``; 0: none).
        act_quant: how llama.cpp rounds activations before the output matrix (:class:`ActivationQuant`).
        embd_scale: what the model multiplies the looked-up embedding by (Gemma: sqrt(n_embd)).
        build_s: seconds the dequantization took.
        workers: threads for the products with a whole table.
    """

    embd: npt.NDArray[np.float16]
    embd_norms: F32
    output: npt.NDArray[np.float16]
    tied: bool
    norm_w: F32
    norm_b: F32 | None
    norm_kind: NormKind
    eps: float
    softcap: float
    act_quant: ActivationQuant
    embd_scale: float
    build_s: float
    workers: int = 1

    @property
    def n_bytes(self) -> int:
        """Memory the tables hold, bytes."""
        n = self.embd.nbytes + self.embd_norms.nbytes + self.norm_w.nbytes
        if not self.tied:
            n += self.output.nbytes
        return n

    def norm(self, h: F32) -> F32:
        """The output norm of each row of ``h`` [m, n_embd] (float32)."""
        h = h.astype(np.float32, copy=False)
        if self.norm_kind == NormKind.LAYER:
            c = h - h.mean(axis=1, keepdims=True)
            out: F32 = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + self.eps) * self.norm_w
            if self.norm_b is not None:
                out = out + self.norm_b
            return out
        rms: F32 = h / np.sqrt((h * h).mean(axis=1, keepdims=True) + self.eps) * self.norm_w
        return rms

    def logits(self, normed: F32) -> F32:
        """LM-head logits [m, n_vocab] of normed states [m, n_embd], softcapped like the model."""
        out = chunked_matmul(self.output, self.act_quant.apply(normed), self.workers)
        if self.softcap:
            out = np.tanh(out / self.softcap) * self.softcap
        return out

    def cosines(self, vectors: F32) -> F32:
        """Cosine [m, n_vocab] between each row of ``vectors`` and each embedding row."""
        dots = chunked_matmul(self.embd, vectors, self.workers)
        lens = np.linalg.norm(vectors, axis=1, keepdims=True)
        denom = self.embd_norms[None, :] * np.maximum(lens, 1e-12)
        cos: F32 = dots / np.maximum(denom, 1e-12)
        return cos


def chunked_matmul(table: npt.NDArray[np.float16], vectors: F32, workers: int = 1) -> F32:
    """``table @ vectors.T`` as float32 [m, n_rows], converting ``CHUNK_ROWS`` rows at a time.

    With ``workers`` > 1 the chunks run on that many threads (numpy's conversion and BLAS release
    the GIL): the float16 → float32 conversion is half the time on a 262k-row table.
    """
    m = vectors.shape[0]
    out = np.empty((m, table.shape[0]), dtype=np.float32)
    vt = np.ascontiguousarray(vectors.T, dtype=np.float32)

    def chunk(r0: int) -> None:
        r1 = min(table.shape[0], r0 + CHUNK_ROWS)
        out[:, r0:r1] = (table[r0:r1].astype(np.float32) @ vt).T

    starts = range(0, table.shape[0], CHUNK_ROWS)
    if workers <= 1:
        for r0 in starts:
            chunk(r0)
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="glassbox-lens") as pool:
            list(pool.map(chunk, starts))
    return out


def _raw(info: GGUFInfo, data: npt.NDArray[np.uint8], name: str) -> tuple[npt.NDArray[np.uint8], int, int, Any] | None:
    """A tensor's bytes as [n_rows, row bytes], with n_rows, n_cols and its ggml type, or None when absent."""
    t = next((t for t in info.tensors if t.name == name), None)
    if t is None:
        return None
    n_cols = int(t.shape[0])
    n_rows = t.n_elements // n_cols
    start = info.data_offset + t.offset
    raw = data[start : start + t.n_bytes].reshape(n_rows, -1)
    return raw, n_rows, n_cols, gguf.GGMLQuantizationType[t.type_name]


def _dequantized(info: GGUFInfo, data: npt.NDArray[np.uint8], name: str) -> F32 | None:
    """A small tensor as float32, flat, or None when absent."""
    got = _raw(info, data, name)
    if got is None:
        return None
    raw, _rows, _cols, qtype = got
    return np.asarray(gguf.quants.dequantize(np.array(raw), qtype), dtype=np.float32).reshape(-1)


def _dequantize_chunk(raw: npt.NDArray[np.uint8], qtype: Any) -> F32:
    """Rows of quantized bytes [n_rows, row bytes] as float32, all blocks in one call of the
    ``gguf`` package's dequantizer for that type (``gguf.quants.<TYPE>.dequantize_rows``).

    ``gguf.quants.dequantize`` runs the same code over groups of 16 rows: on Gemma 3's
    262,144-row Q8_0 embedding that is 16,384 calls per 16k-row chunk and 1.3 of the 1.9 s
    the tables took; whole chunks take 0.2 s.
    """
    kind = getattr(gguf.quants, qtype.name, None)
    if isinstance(kind, type) and hasattr(kind, "dequantize_rows"):
        return np.asarray(kind.dequantize_rows(raw), dtype=np.float32)
    return np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32)


def _table(info: GGUFInfo, data: npt.NDArray[np.uint8], name: str) -> tuple[npt.NDArray[np.float16], F32] | None:
    """A [n_rows, n_cols] table as float16 and each row's L2 norm (float32), dequantized
    ``CHUNK_ROWS`` rows at a time (a whole float32 copy of Gemma 3's table would be 671 MB), or None."""
    got = _raw(info, data, name)
    if got is None:
        return None
    raw, n_rows, n_cols, qtype = got
    out = np.empty((n_rows, n_cols), dtype=np.float16)
    norms = np.empty(n_rows, dtype=np.float32)
    for r0 in range(0, n_rows, CHUNK_ROWS):
        r1 = min(n_rows, r0 + CHUNK_ROWS)
        rows = _dequantize_chunk(np.array(raw[r0:r1]), qtype).reshape(r1 - r0, n_cols)
        out[r0:r1] = rows
        norms[r0:r1] = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return out, norms


def load_tables(info: GGUFInfo, workers: int = 1) -> ModelTables:
    """Dequantize the lens and embedding tables of ``info``'s model (seconds on a 262k vocabulary).

    Raises:
        ValueError: the file has no ``token_embd.weight`` or ``output_norm.weight``, or a split model
            (its tensors are spread over files).
    """
    t0 = time.perf_counter()
    if len(info.split_paths()) > 1:
        raise ValueError("the logit lens reads single-file models only (this one is split)")
    # The file's bytes, memory-mapped (gguf.GGUFReader would parse every metadata array too:
    # 700 MB of Python objects for a 262k-token vocabulary); offsets from the GGUF header.
    data = np.memmap(info.path, dtype=np.uint8, mode="r")
    embd = _table(info, data, "token_embd.weight")
    norm_w = _dequantized(info, data, "output_norm.weight")
    if embd is None or norm_w is None:
        raise ValueError("the model has no token_embd.weight or output_norm.weight tensor")
    norm_b = _dequantized(info, data, "output_norm.bias")
    head = _table(info, data, "output.weight")
    del data
    out = head[0] if head is not None else None
    head_type = next(
        t.type_name for t in info.tensors if t.name == ("output.weight" if out is not None else "token_embd.weight")
    )
    rms_eps = info.arch_key("attention.layer_norm_rms_epsilon")
    ln_eps = info.arch_key("attention.layer_norm_epsilon")
    kind = NormKind.RMS if rms_eps is not None or ln_eps is None else NormKind.LAYER
    eps = float(rms_eps if kind == NormKind.RMS and rms_eps is not None else (ln_eps or 1e-5))
    embd16, norms = embd
    tables = ModelTables(
        embd=embd16,
        embd_norms=norms,
        output=out if out is not None else embd16,
        tied=out is None,
        norm_w=norm_w.reshape(-1),
        norm_b=norm_b.reshape(-1) if norm_b is not None else None,
        norm_kind=kind,
        eps=eps,
        softcap=float(info.arch_key("final_logit_softcapping", 0.0) or 0.0),
        act_quant=ActivationQuant.for_weight(head_type),
        embd_scale=math.sqrt(info.n_embd) if info.architecture.startswith("gemma") else 1.0,
        build_s=time.perf_counter() - t0,
        workers=max(1, workers),
    )
    log.info(
        "inspect tables of %s: %.1f MiB, %.2f s (tied=%s, norm=%s, eps=%g, softcap=%g, activations %s)",
        info.name,
        tables.n_bytes / 2**20,
        tables.build_s,
        tables.tied,
        kind,
        eps,
        tables.softcap,
        tables.act_quant.value,
    )
    return tables
