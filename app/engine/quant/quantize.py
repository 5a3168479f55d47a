"""Make a quantization with llama.cpp's quantizer: the :class:`~app.core.protocol.requests.Quantize` request.

``llama_model_quantize`` (src/llama-quant.cpp) does the work; Glassbox checks first what it can say in words
(the source, the type, the destination, the free space), runs llama.cpp's dry run of the same quantization
for the expected size (nothing written, about 0.06 s on SmolLM2), then the real one into ``<dest>.part``,
following its per-tensor log lines (``[  12/ 272] blk.1.attn_q.weight - [...], type = q4_1, converting to
q8_0 .. size = 0.20 MiB -> 0.34 MiB``) through :meth:`~app.engine.llama_log.LlamaLog.listening` for the
progress, and renames the ``.part`` to the destination only when llama.cpp returned 0. Any failure removes
the ``.part``. The quantizer has no abort: a cancel is the process killed (the window removes the ``.part``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import llama_cpp

from app.core import protocol as P
from app.core.gguf.gguf_info import GGUFError, check_loadable, format_bytes, read_gguf_info
from app.core.quant.plan import QuantOption, QuantPlan, plan_quantization
from app.engine.errors import CancelFlag, EngineError
from app.engine.llama_log import MIB, LlamaLog
from app.engine.threads import auto_threads

#: A tensor written: llama.cpp's ``[%4d/%4d] name - [shape], type = ..., ... size = ...`` line.
_TENSOR_RE = re.compile(r"^\[\s*(\d+)/\s*(\d+)\]\s.*\bsize =")
#: The dry run's (and the real run's) total: ``llama_model_quantize_impl: quant size  =   136.40 MiB (8.51 BPW)``.
_QUANT_SIZE_RE = re.compile(r"quant size\s*=\s*([0-9.]+) MiB")
#: llama.cpp's count of tensors whose rows the type's block does not divide, given another type.
_FALLBACK_RE = re.compile(r"(\d+) of \d+ tensor\(s\) required fallback")
#: The dry run's "quant size" is printed to 0.01 MiB: within half of that (and a byte) it is the plan's figure.
DRY_RUN_ROUNDING = 0.005 * MIB + 1
#: Progress events at most this often (the last tensor's always goes), seconds.
PROGRESS_EVERY_S = 0.1


def part_path(dest: os.PathLike[str] | str) -> Path:
    """Where a quantization to ``dest`` is written until it is whole: ``<dest>.part``."""
    d = Path(dest)
    return d.with_name(d.name + ".part")


def quantize(
    req: P.Quantize, *, emit: Callable[[object], None], llama_log: LlamaLog, cancel: CancelFlag
) -> P.Quantized:
    """Run ``req``: checks, dry run, the quantization into ``<dest>.part``, the rename.

    Args:
        req: the request.
        emit: sends a :class:`~app.core.protocol.progress.QuantizeProgress` (from llama.cpp's thread, inside
            its call, as it logs each tensor).
        llama_log: the process's llama.cpp log capture.
        cancel: the job's cancel flag: set before the start, nothing is written; set when llama.cpp
            returns, the result is removed.

    Returns:
        :class:`~app.core.protocol.answers.Quantized`.

    Raises:
        EngineError: ``bad_model`` (the source is not a whole GGUF), ``bad_settings`` (a refused type, a
            destination that exists or cannot be written), ``quantize`` (not enough free space, or
            llama.cpp's quantizer failed: its error lines quoted), ``cancelled``.
    """
    t0 = time.perf_counter()
    source, dest = Path(req.source), Path(req.dest)
    part = part_path(dest)
    plan, header = _plan(source)
    option = plan.option(req.qtype)
    _check(req, option, dest, part)
    if cancel.is_set():
        raise EngineError(P.FailureKind.CANCELLED, "The quantization was cancelled before it started.")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = req.qtype.ftype
    params.nthread = req.n_threads if req.n_threads > 0 else auto_threads()
    params.allow_requantize = plan.requantization
    expected = _dry_run(source, part, params, llama_log, option, header)
    _check_space(dest, expected)

    state = _Progress(req.request_id, part, plan.n_tensors, expected, t0, emit)
    emit(P.QuantizeProgress(req.request_id, 0, plan.n_tensors, 0, expected, time.perf_counter() - t0))
    llama_log.mark()
    try:
        with llama_log.listening(state.on_line):
            rc = llama_cpp.llama_model_quantize(str(source).encode(), str(part).encode(), ctypes.byref(params))
        if state.failure is not None:
            raise state.failure  # the window went away while llama.cpp worked
        if rc != 0:
            raise EngineError(P.FailureKind.QUANTIZE, _failure_message(source, dest, llama_log))
        if cancel.is_set():
            raise EngineError(P.FailureKind.CANCELLED, f"The quantization to {dest.name} was cancelled.")
        if dest.exists():
            raise EngineError(
                P.FailureKind.BAD_SETTINGS,
                f"{dest} appeared while the quantization ran; the result was not put in its place. "
                "Choose another name.",
            )
        os.replace(part, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            part.unlink()
        raise
    return P.Quantized(
        req.request_id,
        str(dest),
        req.qtype,
        dest.stat().st_size,
        plan.source_bytes,
        state.total,
        plan.requantization,
        time.perf_counter() - t0,
        fallback_tensors=_fallbacks(llama_log),
    )


def _fallbacks(llama_log: LlamaLog) -> int:
    """Tensors llama.cpp gave a fallback type (its "N of M tensor(s) required fallback" warning), 0 if none."""
    found = [int(m.group(1)) for _, line in llama_log.since_mark() if (m := _FALLBACK_RE.search(line))]
    return found[-1] if found else 0


class _Progress:
    """Turns llama.cpp's per-tensor lines into :class:`~app.core.protocol.progress.QuantizeProgress` events."""

    def __init__(
        self, rid: int, part: Path, total: int, expected: int, t0: float, emit: Callable[[object], None]
    ) -> None:
        self.rid, self.part, self.expected, self.t0, self.emit = rid, part, expected, t0, emit
        self.total = total
        self.failure: BaseException | None = None
        self._last = 0.0

    def on_line(self, _level: str, line: str) -> None:
        m = _TENSOR_RE.match(line)
        if m is None or self.failure is not None:
            return
        done, self.total = int(m.group(1)), int(m.group(2))
        now = time.perf_counter()
        if done < self.total and now - self._last < PROGRESS_EVERY_S:
            return
        self._last = now
        try:
            written = self.part.stat().st_size
        except OSError:
            written = 0
        try:
            self.emit(P.QuantizeProgress(self.rid, done, self.total, written, self.expected, now - self.t0))
        except Exception as exc:  # the pipe closed: raised once llama.cpp returns
            self.failure = exc


def _plan(source: Path) -> tuple[QuantPlan, int]:
    """The plan for ``source`` and its header's bytes (metadata and tensor infos: about what the result's
    header takes)."""
    try:
        info = check_loadable(source)
        parts = [info] + [read_gguf_info(p) for p in info.split_paths()[1:]]
    except GGUFError as exc:
        raise EngineError(P.FailureKind.BAD_MODEL, str(exc)) from None
    except OSError as exc:
        raise EngineError(
            P.FailureKind.BAD_MODEL, f"{source} cannot be read ({exc.strerror or exc}). Check that the file is there."
        ) from None
    return plan_quantization(parts), info.data_offset


def _check(req: P.Quantize, option: QuantOption, dest: Path, part: Path) -> None:
    if not option.allowed:
        raise EngineError(P.FailureKind.BAD_SETTINGS, f"{option.refusal} Choose another type.")
    if dest.suffix.lower() != ".gguf":
        raise EngineError(P.FailureKind.BAD_SETTINGS, f"{dest.name}: the result's name must end in .gguf.")
    if dest.exists():
        raise EngineError(
            P.FailureKind.BAD_SETTINGS, f"{dest} already exists. Choose another name, or delete that file first."
        )
    if Path(req.source).resolve() == dest.resolve():
        raise EngineError(P.FailureKind.BAD_SETTINGS, f"{dest.name} is the source itself. Choose another name.")
    folder = dest.parent
    if not folder.is_dir():
        raise EngineError(
            P.FailureKind.BAD_SETTINGS,
            f"The folder {folder} does not exist. Choose an existing folder for {dest.name}.",
        )
    try:  # the real test of "can this folder be written" is writing in it
        part.touch()
        part.unlink()
    except OSError as exc:  # /proc answers "No such file or directory": the folder is there, not writable
        raise EngineError(
            P.FailureKind.BAD_SETTINGS,
            f"The folder {folder} is not writable: {part.name} could not be created there "
            f"({exc.strerror or exc}). Choose a folder you can write to.",
        ) from None


def _dry_run(
    source: Path,
    part: Path,
    params: llama_cpp.llama_model_quantize_params,
    llama_log: LlamaLog,
    option: QuantOption,
    header: int,
) -> int:
    """llama.cpp's dry run of the same quantization (nothing written), for the expected size: the plan's
    figure (``option.expected_bytes``, the one the dialog lists) when the dry run's "quant size" (printed to
    0.01 MiB) is the plan's tensor bytes to that rounding, so the list, a disk-space refusal and the progress
    say one figure; else (a rule of llama.cpp's mix the plan does not follow) the dry run's figure plus the
    metadata's bytes (``header``); the plan's figure when the dry run does not say. A dry run that fails means
    the real one would (an architecture this llama.cpp does not know, a type that needs an importance
    matrix): its error lines are quoted.

    Raises:
        EngineError: ``quantize``.
    """
    params.dry_run = True
    llama_log.mark()
    try:
        rc = llama_cpp.llama_model_quantize(str(source).encode(), str(part).encode(), ctypes.byref(params))
    finally:
        params.dry_run = False
    if rc != 0:
        raise EngineError(P.FailureKind.QUANTIZE, _failure_message(source, None, llama_log))
    sizes = [float(m.group(1)) for _, line in llama_log.since_mark() if (m := _QUANT_SIZE_RE.search(line))]
    if not sizes or abs(sizes[-1] * MIB - option.weight_bytes) <= DRY_RUN_ROUNDING:
        return option.expected_bytes
    return round(sizes[-1] * MIB) + header


def _check_space(dest: Path, expected: int) -> None:
    try:
        free = shutil.disk_usage(dest.parent).free
    except OSError:
        return
    if expected > free:
        raise EngineError(
            P.FailureKind.QUANTIZE,
            f"{dest.name} needs about {format_bytes(expected)} and {dest.parent} has {format_bytes(free)} free. "
            "Free some space or choose another folder.",
        )


def _failure_message(source: Path, dest: Path | None, llama_log: LlamaLog) -> str:
    lines = llama_log.errors_since_mark()
    said = " ".join(lines) if lines else "it gave no reason"
    if dest is not None:
        with contextlib.suppress(OSError):
            if shutil.disk_usage(dest.parent).free < 64 * MIB:
                return (
                    f"The disk holding {dest.parent} is full: {dest.name} could not be written. "
                    "Free some space or choose another folder, then start again."
                )
    return f"llama.cpp could not quantize {source.name}: {said}. The partial file was removed."
