"""`CompareController`: one comparison at a time, run in its own engine process by a
:class:`~app.ui.jobs.runner.JobRunner`; the engine's events folded into a
:class:`~app.core.quant.compare_run.ComparisonRun`, which it owns.

The request is :class:`~app.core.quant.comparison.CompareModels`; the engine answers
``ComparisonStarted`` (the text's tokens, the scored ranges), ``ComparisonProgressed`` per chunk,
then ``ComparisonFinished`` or ``Failed`` (:mod:`app.core.quant.comparison` has the contract). Cancel
sets the job's cancel flag (the engine checks it between chunks and inside a chunk's evaluation), and
kills the process if it has not ended within the runner's grace time.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.hardware.bandwidth import usable_cpus
from app.core.hardware.machine_load import LoadWatch, load_note
from app.core.quant.compare_run import ComparisonRun
from app.core.quant.comparison import ComparisonFinished, ComparisonProgressed, ComparisonStarted, ComparisonSummary
from app.ui.jobs.runner import JobRunner
from app.ui.quant.compare_setup import CompareChoice


def failure_text(ev: P.Failed) -> str:
    """What the window says for a failed comparison, by its kind."""
    if ev.kind is P.FailureKind.INCOMPATIBLE:
        return ev.message  # the engine's sentence says it all: "These two models cannot be compared token by token: …"
    if ev.kind is P.FailureKind.ENGINE:
        return f"The comparison stopped: {ev.message} The chat's engine is not affected; try again."
    return f"The comparison failed: {ev.message}"


class CompareController(QObject):
    """Starts, follows and cancels comparisons; the one owner of the comparison shown (:attr:`run`).

    Args:
        make_runner: makes the job runner (the composition root's starts a real engine process; tests
            pass one on a scripted host).
        others: what else Glassbox runs now ("a chat reply", "a quantization"...): the comparison's tok/s
            taken meanwhile are marked measured under load (:attr:`load_text`), as is a high load average.

    Signals:
        started(): a comparison was started (its engine process is starting).
        changed(): the run has new figures (tokens, progress); read :attr:`run` (the window repaints on
            its own clock, not on this).
        finished(object): the comparison ended with its ComparisonSummary.
        failed(str): it failed; the message says why and what to do.
        cancelled(): the person cancelled it (the tokens scored so far are kept).
        ended(): after any of the three.
    """

    started = Signal()
    changed = Signal()
    finished = Signal(ComparisonSummary)
    failed = Signal(str)
    cancelled = Signal()
    ended = Signal()

    def __init__(
        self,
        make_runner: Callable[[], JobRunner],
        parent: QObject | None = None,
        *,
        others: Callable[[], tuple[str, ...]] = tuple,
    ) -> None:
        super().__init__(parent)
        self._others = others
        self._watch: LoadWatch | None = None
        self._runner = make_runner()
        self._runner.setParent(self)
        self._runner.setObjectName("a comparison")  # what a speed measured meanwhile says ran (running_jobs)
        self._runner.progressed.connect(self._on_progress)
        self._runner.finished.connect(self._on_finished)
        self._runner.failed.connect(self._on_failed)
        self._runner.cancelled.connect(self.cancelled.emit)
        self._runner.ended.connect(self.ended.emit)
        self.run = ComparisonRun()
        self.choice: CompareChoice | None = None
        self.version = 0  # bumped at each change of :attr:`run`: the window repaints when it moved

    @property
    def running(self) -> bool:
        return self._runner.running

    @property
    def pid(self) -> int | None:
        """The comparison's engine process while it runs (None: none, or a scripted host)."""
        return self._runner.pid

    def start(self, choice: CompareChoice) -> bool:
        """Compare as ``choice`` says; False when a comparison is already running."""
        if self._runner.running:
            return False
        self.choice = choice
        self.run = ComparisonRun(n_ctx=choice.n_ctx)
        self._watch = LoadWatch(max(1, usable_cpus() - 1))  # the job's engine: one CPU fewer than available
        self._sample()
        self.version += 1
        self._runner.start(
            lambda rid: P.CompareModels(
                rid,
                choice.path_a,
                choice.path_b,
                choice.text,
                choice.messages,
                choice.chat_template,
                n_ctx=choice.n_ctx,
            )
        )
        self.started.emit()
        return True

    def cancel(self) -> None:
        """Stop the comparison (its cancel flag, then a kill after the runner's grace time)."""
        self._runner.cancel()

    def shutdown(self) -> None:
        """End a running comparison's process at once, saying nothing (the window closes)."""
        self._runner.shutdown()

    @property
    def load_text(self) -> str:
        """Why the comparison's tok/s were measured under load ("" when quiet, or none ran yet)."""
        w = self._watch
        return load_note(w.per_cpu, tuple(w.others)) if w is not None else ""

    def _sample(self) -> None:
        if self._watch is not None:
            self._watch.sample(tuple(n for n in self._others() if n != self._runner.objectName()))

    def _on_progress(self, ev: object) -> None:
        if isinstance(ev, ComparisonStarted):
            self.run.n_ctx = ev.n_ctx
            self.run.begin(ev.token_texts, ev.scored)
            self.run.total = ev.total
        elif isinstance(ev, ComparisonProgressed):
            self.run.add(ev.done, ev.total, ev.elapsed_s, ev.tokens)
        else:
            return
        self._sample()
        self.version += 1
        self.changed.emit()

    def _on_finished(self, ev: object) -> None:
        if isinstance(ev, ComparisonFinished):
            self._sample()
            self.run.finish(ev.summary)
            self.version += 1
            self.changed.emit()
            self.finished.emit(ev.summary)

    def _on_failed(self, ev: object) -> None:
        if isinstance(ev, P.Failed):
            if ev.kind is P.FailureKind.CANCELLED:
                self.cancelled.emit()
            else:
                self.failed.emit(failure_text(ev))
