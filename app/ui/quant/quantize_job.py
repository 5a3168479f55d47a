"""`QuantizeJob`: one quantization in a job's engine process (:class:`~app.ui.jobs.runner.JobRunner`), its
progress as figures for people, and its ``.part`` file removed when it is cancelled or fails; and the sizing
of each type before it (:meth:`QuantizeJob.plan`: llama.cpp's dry runs, in a job process of their own).

llama.cpp's quantizer cannot be interrupted, so a cancel kills the job's process at once
(``JobRunner.cancel(kill_after_ms=0)``, which waits for the process to end) and then removes
``<dest>.part``; the engine removes it itself on a failure it reports.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.quant.types import QuantType
from app.ui.engine.host_link import Host
from app.ui.jobs.runner import JobRunner


def part_file(dest: Path) -> Path:
    """``<dest>.part``: where the engine writes until the result is whole (as :mod:`app.engine.quant.quantize`)."""
    return dest.with_name(dest.name + ".part")


@dataclass(frozen=True)
class QuantizeStatus:
    """Where a quantization stands, for the dialog.

    Attributes:
        tensors_done, tensors_total: tensors written, of all.
        bytes_written: bytes in the ``.part`` so far.
        expected_bytes: the result's expected size (llama.cpp's dry run), bytes; 0 unknown.
        elapsed_s: seconds since the engine got the request.
    """

    tensors_done: int
    tensors_total: int
    bytes_written: int
    expected_bytes: int
    elapsed_s: float

    @property
    def fraction(self) -> float:
        """Done, 0..1: bytes written over the expected size (tensors when the size is unknown)."""
        if self.expected_bytes > 0:
            return min(1.0, self.bytes_written / self.expected_bytes)
        return self.tensors_done / self.tensors_total if self.tensors_total else 0.0

    @property
    def seconds_left(self) -> float | None:
        """Time left at the pace so far: elapsed × (1 − done) / done, seconds; None before 2 % is done."""
        f = self.fraction
        return self.elapsed_s * (1.0 - f) / f if f >= 0.02 else None


class QuantizeJob(QObject):
    """One quantization at a time, in its own engine process.

    Args:
        hosts: makes the job's host (None: the JobRunner's default, a real engine process).

    Signals:
        planned(QuantizePlanned): llama.cpp's dry run sized each type offered (:meth:`plan`).
        plan_failed(str): the sizing failed (why, in words).
        progressed(QuantizeStatus): the latest figures.
        finished(Quantized): the result is whole at its destination.
        failed(str): why it failed, naming the file and what to do.
        cancelled(): the process was killed and the ``.part`` removed.
    """

    planned = Signal(P.QuantizePlanned)
    plan_failed = Signal(str)
    progressed = Signal(QuantizeStatus)
    finished = Signal(P.Quantized)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, hosts: Callable[[], Host] | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = JobRunner(hosts, self)
        self.runner.setObjectName("a quantization")  # what a speed measured meanwhile says ran (running_jobs)
        self.runner.progressed.connect(self._on_progress)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(self._on_failed)
        self.runner.cancelled.connect(self._on_cancelled)
        self.planner = JobRunner(hosts, self)
        self.planner.setObjectName("a quantization's dry run")
        self.planner.finished.connect(self._on_planned)
        self.planner.failed.connect(lambda ev: self.plan_failed.emit(ev.message))
        self.dest: Path | None = None

    @property
    def running(self) -> bool:
        return self.runner.running

    def plan(self, source: Path) -> None:
        """Size each type offered from ``source`` with llama.cpp's dry run (a few tenths of a second on
        SmolLM2, after the process starts); :attr:`planned` or :attr:`plan_failed` follows. Nothing when a
        sizing is under way."""
        if not self.planner.running:
            self.planner.start(lambda rid: P.PlanQuantize(rid, str(source)))

    def start(self, source: Path, dest: Path, qtype: QuantType) -> None:
        """Quantize ``source`` to ``qtype`` into ``dest``.

        Raises:
            RuntimeError: a quantization is running.
        """
        self.dest = dest
        self.runner.start(lambda rid: P.Quantize(rid, str(source), str(dest), qtype))

    def cancel(self) -> None:
        """Kill the job's process now (the quantizer has no abort); :attr:`cancelled` follows."""
        self.runner.cancel(kill_after_ms=0)

    def shutdown(self) -> None:
        """The window closes: kill a running job and sizing (returning once their processes are gone and their
        readers have heard of it, so this job may be deleted next) and remove the job's ``.part``; emits
        nothing."""
        if self.planner.running:
            self.planner.shutdown()
        if self.runner.running:
            self.runner.shutdown()
            self._remove_part()

    def _on_progress(self, ev: object) -> None:
        if isinstance(ev, P.QuantizeProgress):
            self.progressed.emit(
                QuantizeStatus(ev.tensors_done, ev.tensors_total, ev.bytes_written, ev.expected_bytes, ev.elapsed_s)
            )

    def _on_planned(self, ev: object) -> None:
        if isinstance(ev, P.QuantizePlanned):
            self.planned.emit(ev)
        else:  # not a sizing's answer: a bug
            self.plan_failed.emit(f"The sizing ended with an unexpected answer ({type(ev).__name__}).")

    def _on_finished(self, ev: object) -> None:
        if isinstance(ev, P.Quantized):
            self.finished.emit(ev)
        else:  # not a quantization's answer: a bug
            self.failed.emit(f"The quantization ended with an unexpected answer ({type(ev).__name__}).")

    def _on_failed(self, ev: P.Failed) -> None:
        self._remove_part()
        if ev.kind is P.FailureKind.ENGINE and self.dest is not None:
            self.failed.emit(
                f"The quantization to {self.dest.name} stopped: {ev.message} The partial file was removed; "
                "check the free memory and disk space, then start again."
            )
            return
        self.failed.emit(ev.message)

    def _on_cancelled(self) -> None:
        self._remove_part()
        self.cancelled.emit()

    def _remove_part(self) -> None:
        if self.dest is not None:
            with contextlib.suppress(OSError):
                part_file(self.dest).unlink()
