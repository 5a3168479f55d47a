"""app/diagnostics.py: uncaught exceptions and Qt messages end in app.log; the person gets a short notice.

pytest-qt and pytest keep their own ``sys.excepthook``, ``threading.excepthook``
and Qt message handler during a test; each test installs Diagnostics over them
and the fixture uninstalls it, so pytest-qt's ``qt_log_level_fail = WARNING``
keeps working for every other test (checked below).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, QTimer, Signal, qWarning

from app import logfiles
from app.diagnostics import MAX_MESSAGE_CHARS, Diagnostics, notice_text


@pytest.fixture
def app_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "logs" / "app.log"
    path.parent.mkdir()
    setup = logfiles.configure(path)
    try:
        yield path
    finally:
        setup.close()


@pytest.fixture
def diagnostics(app_log: Path, qapp) -> Iterator[tuple[Diagnostics, list[str]]]:
    notices: list[str] = []
    diag = Diagnostics(app_log)
    diag.install()
    diag.set_notice(notices.append)
    try:
        yield diag, notices
    finally:
        diag.uninstall()


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()


class _Emitter(QObject):
    fired = Signal()


def _raise_in_a_slot() -> None:
    raise ValueError("boom in a slot")


def test_an_exception_in_a_qt_slot_is_logged_with_its_traceback_and_noticed(
    diagnostics: tuple[Diagnostics, list[str]], app_log: Path, qtbot
) -> None:
    _diag, notices = diagnostics
    emitter = _Emitter()
    emitter.fired.connect(_raise_in_a_slot)
    QTimer.singleShot(0, emitter.fired.emit)  # raised inside Qt's event loop, not in this frame
    qtbot.waitUntil(lambda: len(notices) == 1, timeout=5000)
    assert notices == [f"Something went wrong inside Glassbox (ValueError: boom in a slot). Details are in {app_log}."]
    _flush()
    text = app_log.read_text(encoding="utf-8")
    assert "ERROR app.diagnostics: uncaught exception in thread MainThread" in text
    assert "Traceback (most recent call last):" in text
    assert "in _raise_in_a_slot" in text and "ValueError: boom in a slot" in text


def test_a_thread_exception_is_logged_and_noticed_on_the_gui_thread(
    diagnostics: tuple[Diagnostics, list[str]], app_log: Path, qtbot
) -> None:
    diag, _notices = diagnostics
    seen: list[tuple[str, bool]] = []
    diag.set_notice(lambda text: seen.append((text, threading.current_thread() is threading.main_thread())))

    def work() -> None:
        raise KeyError("lost key")

    worker = threading.Thread(target=work, name="glassbox-test-worker")
    worker.start()
    worker.join(5)
    qtbot.waitUntil(lambda: len(seen) == 1, timeout=5000)
    assert seen == [(notice_text(KeyError("lost key"), app_log), True)]
    assert "(KeyError: 'lost key')" in seen[0][0]
    _flush()
    text = app_log.read_text(encoding="utf-8")
    assert "uncaught exception in thread glassbox-test-worker" in text
    assert "in work" in text and "KeyError: 'lost key'" in text


def test_a_failing_notice_is_logged_once_and_does_not_loop(
    diagnostics: tuple[Diagnostics, list[str]], app_log: Path, qtbot
) -> None:
    diag, _notices = diagnostics
    calls: list[str] = []

    def broken(text: str) -> None:
        calls.append(text)
        raise RuntimeError("the banner is gone")

    diag.set_notice(broken)
    emitter = _Emitter()
    emitter.fired.connect(_raise_in_a_slot)
    QTimer.singleShot(0, emitter.fired.emit)
    qtbot.waitUntil(lambda: len(calls) == 1, timeout=5000)

    def logged() -> str:
        _flush()
        return app_log.read_text(encoding="utf-8") if app_log.exists() else ""

    # The failure is logged once the notice has failed; a notice that loops would have called again by then.
    qtbot.waitUntil(lambda: "the error notice could not be shown" in logged(), timeout=5000)
    assert len(calls) == 1
    text = logged()
    assert "the error notice could not be shown" in text and "RuntimeError: the banner is gone" in text


def test_without_a_notice_the_error_is_still_logged(diagnostics: tuple[Diagnostics, list[str]], app_log: Path) -> None:
    diag, notices = diagnostics
    diag.set_notice(None)
    try:
        raise OSError("disk said no")
    except OSError:
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
    _flush()
    assert "OSError: disk said no" in app_log.read_text(encoding="utf-8")
    assert notices == []


@pytest.mark.qt_log_ignore("glassbox test: after uninstall")
def test_qt_warnings_go_to_the_log_and_pytest_qt_gets_its_handler_back(app_log: Path, qapp, qtlog) -> None:
    before = (sys.excepthook, threading.excepthook)
    diag = Diagnostics(app_log)
    diag.install()
    try:
        with pytest.raises(RuntimeError, match="twice"):
            diag.install()
        qWarning("glassbox test: a Qt warning")
    finally:
        diag.uninstall()
    assert (sys.excepthook, threading.excepthook) == before
    assert not diag.installed
    _flush()
    assert "WARNING app.qt: glassbox test: a Qt warning" in app_log.read_text(encoding="utf-8")
    assert not any("a Qt warning" in r.message for r in qtlog.records)  # it went to our handler only
    qWarning("glassbox test: after uninstall")
    assert [r.message for r in qtlog.records if "after uninstall" in r.message] == ["glassbox test: after uninstall"]
    assert "after uninstall" not in app_log.read_text(encoding="utf-8")


def test_the_notice_is_one_short_line() -> None:
    log = Path("/x/app.log")
    assert notice_text(ValueError("a\n  b"), log) == (
        "Something went wrong inside Glassbox (ValueError: a b). Details are in /x/app.log."
    )
    assert (
        notice_text(RuntimeError(), log)
        == "Something went wrong inside Glassbox (RuntimeError). Details are in /x/app.log."
    )
    long = notice_text(ValueError("x" * 1000), log)
    assert "x" * (MAX_MESSAGE_CHARS - 1) + "…)" in long and "x" * MAX_MESSAGE_CHARS not in long
