"""llama.cpp's dry run of a quantization: the :class:`~app.core.protocol.requests.PlanQuantize` request, and the
expected size :func:`~app.engine.quant.quantize.quantize` checks the free space with and shows progress against.

``llama_model_quantize`` with ``llama_model_quantize_params.dry_run`` (src/llama-quant.cpp) chooses each tensor's
type exactly as the real quantization does (the mix, the output tensor, the fallbacks) and writes nothing (about
0.06 s a type on SmolLM2). It says what it chose only in its log, which :class:`~app.engine.llama_log.LlamaLog`
keeps: one line per tensor,

    ``[  12/ 272] blk.1.attn_q.weight - [  576,   576,     1,     1], type =   q4_1, size =     0.176 MiB ->
    0.344 MiB (q8_0)`` (a tensor it converts; ``size = 0.002 MiB`` alone for one it keeps),

one warning per tensor whose rows the chosen type's block does not divide (``tensor_type_fallback``),

    ``warning: blk.0.attn_k.weight - ncols 576 not divisible by 256 (required for type q2_K) -> falling back to
    q4_0``,

and its total, ``quant size = 82.41 MiB (5.14 BPW)``. The sizes it prints are rounded to 0.01 MiB; the bytes
here are exact: a converted tensor's ``ggml_row_size(type, ne[0])`` × rows (gguf's ``GGML_QUANT_SIZES``, the same
table), a kept one's bytes from the source's header, each padded to the alignment as llama.cpp writes it, plus
the header (the source's: llama.cpp copies its metadata, setting ``general.file_type``, which is there already in
a file llama.cpp made).
"""

from __future__ import annotations

import ctypes
import re
import time
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFError, GGUFInfo, check_loadable, read_gguf_info
from app.core.quant.plan import QuantPlan, plan_quantization
from app.core.quant.types import QuantType, type_bytes
from app.engine.errors import EngineError
from app.engine.llama_log import LlamaLog
from app.engine.threads import auto_threads

#: A tensor's line: its name, its shape, and the type llama.cpp converts it to (absent when it keeps its type).
_TENSOR_RE = re.compile(
    r"^\[\s*\d+/\s*(\d+)\]\s+(\S+)\s+-\s+\[([\d,\s]+)\],\s+type\s*=\s*\S+,\s+size\s*=.*?(?:\((\w+)\))?\s*$"
)
#: ``tensor_type_fallback``'s warning: the tensor, its row length, the block, the chosen and the given type.
_FALLBACK_RE = re.compile(
    r"warning: (\S+)\s+- ncols\s+(\d+) not divisible by\s+(\d+) \(required for type\s+(\w+)\).*"
    r"falling back to\s+(\w+)"
)
#: The dry run's warning for a quantization that needs an importance matrix (Glassbox passes none).
_NEEDS_IMATRIX = "will require an imatrix"
#: GGUF's default data alignment (GGUF_DEFAULT_ALIGNMENT): each tensor's data is padded to it, bytes.
DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class Source:
    """A source to size: its plan (the types offered) and its headers.

    Attributes:
        path: the first part.
        plan: :func:`~app.core.quant.plan.plan_quantization` of it.
        parts: each part's header, first first.
    """

    path: Path
    plan: QuantPlan
    parts: tuple[GGUFInfo, ...]

    @property
    def alignment(self) -> int:
        a = self.parts[0].metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        return int(a) if isinstance(a, int) and a > 0 else DEFAULT_ALIGNMENT


def read_source(source: Path) -> Source:
    """Read ``source``'s header(s) and plan.

    Raises:
        EngineError: ``bad_model``: not a whole GGUF, a part missing, or it cannot be read.
    """
    try:
        info = check_loadable(source)
        parts = (info, *(read_gguf_info(p) for p in info.split_paths()[1:]))
    except GGUFError as exc:
        raise EngineError(P.FailureKind.BAD_MODEL, str(exc)) from None
    except OSError as exc:
        raise EngineError(
            P.FailureKind.BAD_MODEL, f"{source} cannot be read ({exc.strerror or exc}). Check that the file is there."
        ) from None
    return Source(source, plan_quantization(parts), parts)


def quantize_params(qtype: QuantType, plan: QuantPlan, n_threads: int = 0) -> llama_cpp.llama_model_quantize_params:
    """llama.cpp's quantize parameters for ``qtype`` from ``plan``'s source (``allow_requantize`` for a
    quantized source; ``n_threads`` 0: :func:`~app.engine.threads.auto_threads`)."""
    params: llama_cpp.llama_model_quantize_params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = qtype.ftype
    params.nthread = n_threads if n_threads > 0 else auto_threads()
    params.allow_requantize = plan.requantization
    return params


def dry_run(
    src: Source, qtype: QuantType, params: llama_cpp.llama_model_quantize_params, llama_log: LlamaLog
) -> P.PlannedType:
    """llama.cpp's dry run of quantizing ``src`` to ``qtype`` with ``params`` (its ``dry_run`` set for the call):
    the exact size, the bits per weight and the fallback tensors; a refusal (its error lines, or that it needs
    an importance matrix) with zero figures when llama.cpp would not make it. Nothing is written.

    Raises:
        EngineError: ``internal``: its log did not list every tensor in the form read here (another llama.cpp).
    """
    lines: list[str] = []  # every line (its kept lines are fewer than a large model's tensors)
    params.dry_run = True
    llama_log.mark()
    try:
        with llama_log.listening(lambda _level, line: lines.append(line)):
            # a dry run opens no output file (llama-quant.cpp: "no output file for --dry-run")
            rc = llama_cpp.llama_model_quantize(str(src.path).encode(), b"/dev/null", ctypes.byref(params))
    finally:
        params.dry_run = False
    n_tensors = src.plan.n_tensors
    if rc != 0:
        said = " ".join(llama_log.errors_since_mark()) or "it gave no reason"
        return P.PlannedType(qtype, 0, 0.0, n_tensors, refusal=f"{qtype.value}: llama.cpp refuses it: {said}.")
    if any(_NEEDS_IMATRIX in line for line in lines):
        return P.PlannedType(
            qtype, 0, 0.0, n_tensors, refusal=f"{qtype.value}: llama.cpp needs an importance matrix for it."
        )
    kept = {t.name: t for p in src.parts for t in p.tensors}
    align = src.alignment
    weights = padded = seen = 0
    for line in lines:
        if (m := _TENSOR_RE.match(line)) is None or m.group(2) not in kept:
            continue
        seen += 1
        name, new_type = m.group(2), m.group(4)
        if new_type is None:
            n = kept[name].n_bytes
        else:
            n_elements = 1
            for d in m.group(3).split(","):
                n_elements *= int(d)
            n = type_bytes(new_type.upper(), n_elements)
        weights += n
        padded += (n + align - 1) // align * align
    if seen != n_tensors:  # another llama.cpp's log format: no figure rather than a wrong one
        raise EngineError(
            P.FailureKind.INTERNAL,
            f"llama.cpp's dry run of {qtype.value} listed {seen} of {src.path.name}'s {n_tensors} tensors in a form "
            "Glassbox did not recognise, so its size is unknown.",
        )
    fallbacks = tuple(
        P.FallbackTensor(m.group(1), int(m.group(2)), int(m.group(3)), m.group(4).upper(), m.group(5).upper())
        for line in lines
        if (m := _FALLBACK_RE.search(line))
    )
    n_weights = sum(t.n_elements for t in kept.values())
    bpw = 8.0 * weights / n_weights if n_weights else 0.0
    return P.PlannedType(qtype, src.parts[0].data_offset + padded, bpw, n_tensors, fallbacks)


def plan_quantize(req: P.PlanQuantize, *, llama_log: LlamaLog) -> P.QuantizePlanned:
    """Run ``req``: a dry run of each type offered from its source.

    Raises:
        EngineError: ``bad_model`` (the source is not a whole GGUF).
    """
    t0 = time.perf_counter()
    src = read_source(Path(req.source))
    options = tuple(
        dry_run(src, o.qtype, quantize_params(o.qtype, src.plan), llama_log) for o in src.plan.options if o.allowed
    )
    return P.QuantizePlanned(req.request_id, req.source, options, time.perf_counter() - t0)
