"""JobRunner (app/ui/jobs/runner.py): a job in its own engine process, its events, its end, cancel and kill.

Scripted hosts for the runner's logic; one real engine process for the path a job really takes."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from app.core import protocol as P
from app.ui.jobs.runner import JobRunner
from tests.support.job_host import ScriptedJobHost


@dataclass(frozen=True)
class _Step:
    request_id: int
    n: int


@dataclass(frozen=True)
class _Ask:
    request_id: int


def _counting(steps: int, *, hang: bool = False, honour_cancel: bool = True):  # type: ignore[no-untyped-def]
    release = threading.Event()

    def script(req, emit, cancelled):  # type: ignore[no-untyped-def]
        for i in range(steps):
            emit(_Step(req.request_id, i))
            emit(_Step(req.request_id + 1000, i))  # another request's event: not this job's
        if hang:
            release.wait(30)  # like llama_model_quantize: the flag is never looked at
            return
        while honour_cancel and not cancelled() and not release.is_set():
            release.wait(0.005)
        if honour_cancel and cancelled():
            emit(P.Failed(req.request_id, P.FailureKind.CANCELLED, "cancelled"))
            return
        emit(P.ContextReset(req.request_id))

    return script, release


def test_a_job_streams_its_events_then_ends_and_its_process_goes(qtbot) -> None:  # type: ignore[no-untyped-def]
    script, release = _counting(3)
    hosts: list[ScriptedJobHost] = []

    def make() -> ScriptedJobHost:
        hosts.append(ScriptedJobHost(script))
        return hosts[-1]

    runner = JobRunner(make)
    seen: list[object] = []
    done: list[object] = []
    runner.progressed.connect(seen.append)
    runner.finished.connect(done.append)
    with qtbot.waitSignal(runner.progressed, timeout=5000):
        runner.start(_Ask)
    assert runner.running
    with pytest.raises(RuntimeError, match="already running"):
        runner.start(_Ask)
    qtbot.waitUntil(lambda: len(seen) == 3, timeout=5000)
    with qtbot.waitSignal(runner.ended, timeout=5000):
        release.set()
    assert [s.n for s in seen] == [0, 1, 2]  # type: ignore[attr-defined]
    assert isinstance(done[0], P.ContextReset)
    assert not runner.running and not hosts[0].alive and not hosts[0].killed
    assert hosts[0].requests == [_Ask(seen[0].request_id)]  # type: ignore[attr-defined]


def test_cancel_ends_a_job_on_its_flag_and_kills_one_that_ignores_it(qtbot) -> None:  # type: ignore[no-untyped-def]
    polite, _ = _counting(1)
    host = ScriptedJobHost(polite)
    runner = JobRunner(lambda: host)
    outcomes: list[str] = []
    runner.cancelled.connect(lambda: outcomes.append("cancelled"))
    runner.failed.connect(lambda f: outcomes.append("failed"))
    with qtbot.waitSignal(runner.progressed, timeout=5000):
        runner.start(_Ask)
    with qtbot.waitSignal(runner.ended, timeout=5000):
        runner.cancel(kill_after_ms=10_000)
    assert outcomes == ["cancelled"] and not host.killed  # ended on its flag, not killed

    stubborn, release = _counting(1, hang=True)
    hung = ScriptedJobHost(stubborn)
    runner2 = JobRunner(lambda: hung)
    with qtbot.waitSignal(runner2.progressed, timeout=5000):
        runner2.start(_Ask)
    with qtbot.waitSignal(runner2.cancelled, timeout=5000):
        runner2.cancel(kill_after_ms=0)
    assert hung.killed and not runner2.running
    release.set()


def test_a_job_whose_process_dies_fails_with_the_reason(qtbot) -> None:  # type: ignore[no-untyped-def]
    script, release = _counting(1)
    host = ScriptedJobHost(script)
    runner = JobRunner(lambda: host)
    failures: list[P.Failed] = []
    runner.failed.connect(failures.append)
    with qtbot.waitSignal(runner.progressed, timeout=5000):
        runner.start(_Ask)
    with qtbot.waitSignal(runner.ended, timeout=5000):
        host.die()
    release.set()
    assert failures[0].kind is P.FailureKind.ENGINE
    assert "SIGSEGV" in failures[0].message or "signal 11" in failures[0].message
    assert not runner.running


def test_a_real_job_process_answers_and_ends(qtbot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The real engine process: a request answered, then the process ends (Shutdown, not a kill)."""
    from app.ui.jobs.runner import job_hosts

    runner = JobRunner(job_hosts(str(tmp_path / "jobs.log")))
    answers: list[object] = []
    runner.finished.connect(answers.append)
    with qtbot.waitSignal(runner.ended, timeout=60_000):
        runner.start(P.ResetContext)
    assert isinstance(answers[0], P.ContextReset)
    assert runner.pid is None and "engine started" in (tmp_path / "jobs.log").read_text()


def test_a_runner_deleted_with_its_dialog_kills_its_job_and_its_reader_ends_quietly(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A dialog closed mid-job deletes its runner: the job's process is killed, and the host's reader
    thread, which still had events to hand over, ends without 'Signal source has been deleted'."""
    import gc
    import threading as th

    import shiboken6

    script, release = _counting(1, hang=True)
    host = ScriptedJobHost(script)
    runner = JobRunner(lambda: host)
    with qtbot.waitSignal(runner.progressed, timeout=5000):
        runner.start(_Ask)
    errors: list[BaseException] = []
    old_hook = th.excepthook
    th.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment]
    try:
        shiboken6.delete(runner)
        gc.collect()
        assert host.killed
        qtbot.waitUntil(
            lambda: not any(t.name == "glassbox-engine-reader" and t.is_alive() for t in th.enumerate()), timeout=5000
        )
    finally:
        th.excepthook = old_hook
        release.set()
    assert errors == []


def test_a_host_link_deleted_while_its_host_still_speaks_ends_its_reader_quietly(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Events and the end of a host whose link was deleted reach nobody, and crash nothing."""
    import threading as th

    import shiboken6

    from app.ui.engine.host_link import HostLink

    script, release = _counting(0)
    host = ScriptedJobHost(script)
    link = HostLink(lambda _remote: host)
    link.start(None)
    qtbot.waitUntil(lambda: host._events.empty(), timeout=5000)  # EngineReady read: the reader waits again
    errors: list[BaseException] = []
    old_hook = th.excepthook
    th.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment]
    try:
        shiboken6.delete(link)
        host.send(_Ask(1))  # the host answers after its link is gone ...
        release.set()
        qtbot.waitUntil(lambda: host._events.empty(), timeout=5000)  # ... and the reader handed it on
        host.kill()  # then it ends: the reader reports that too, to nobody, and stops
        qtbot.waitUntil(
            lambda: not any(t.name == "glassbox-engine-reader" and t.is_alive() for t in th.enumerate()), timeout=5000
        )
    finally:
        th.excepthook = old_hook
    assert errors == []
