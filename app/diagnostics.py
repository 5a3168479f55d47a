"""Uncaught errors are seen, not lost.

The ``glassbox`` gui-script has no console, so whatever reaches stderr is thrown
away. :class:`Diagnostics` owns, for the window process:

- ``sys.excepthook`` and ``threading.excepthook``: every uncaught exception (one
  that escapes a Qt slot or event handler, a thread, or ``main``) is logged with
  its traceback to the logger ``app.diagnostics`` (so to app.log), and the person
  gets one short, non-modal line through the notice callback the window
  registers (:meth:`Diagnostics.set_notice`; the banner): "Something went wrong
  inside Glassbox (<ExceptionType>: message). Details are in <log path>." Never a
  traceback dialog, never the end of the window; the notice is delivered on the
  GUI thread, whichever thread raised.
- the Qt message handler (``qInstallMessageHandler``): Qt's own debug, info,
  warning, critical and fatal messages go to the logger ``app.qt`` at the
  matching level.

:meth:`Diagnostics.uninstall` puts back what was there before (pytest-qt's own
hooks in tests).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from PySide6.QtCore import (
    QMessageLogContext,
    QObject,
    Qt,
    QtMsgType,
    Signal,
    Slot,
    qInstallMessageHandler,
)

log = logging.getLogger(__name__)
qt_log = logging.getLogger("app.qt")

MAX_MESSAGE_CHARS = 200  # the exception's message is cut to this in the notice (the log has it whole)

_QT_LEVELS = {
    QtMsgType.QtDebugMsg: logging.DEBUG,
    QtMsgType.QtInfoMsg: logging.INFO,
    QtMsgType.QtWarningMsg: logging.WARNING,
    QtMsgType.QtCriticalMsg: logging.ERROR,
    QtMsgType.QtFatalMsg: logging.CRITICAL,
}

Notice = Callable[[str], None]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def notice_text(exc: BaseException, log_file: Path) -> str:
    """The one line the person sees for ``exc``."""
    message = " ".join(str(exc).split())
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"Something went wrong inside Glassbox ({what}). Details are in {log_file}."


class _Relay(QObject):
    """Carries a notice to the GUI thread (queued), whichever thread raised."""

    raised = Signal(str)

    def __init__(self, diagnostics: Diagnostics) -> None:
        super().__init__()
        self._diagnostics = diagnostics
        self.raised.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    @Slot(str)
    def _deliver(self, text: str) -> None:
        notice = self._diagnostics.notice
        if notice is None:
            return
        try:
            notice(text)
        except Exception:  # a failing notice must not raise again (it would loop through the hook)
            log.exception("the error notice could not be shown")


class Diagnostics:
    """The process's error reporting: uncaught exceptions and Qt messages into the log.

    Args:
        log_file: the log the notice points the person to (app.log); the records
            themselves go through :mod:`logging` (see :mod:`app.logfiles`).
    """

    def __init__(self, log_file: Path) -> None:
        self.log_file = log_file
        self.notice: Notice | None = None
        self._relay: _Relay | None = None
        self._previous: tuple[object, object, object] | None = None

    @property
    def installed(self) -> bool:
        return self._previous is not None

    def set_notice(self, notice: Notice | None) -> None:
        """Register (or, with None, drop) the callback that shows the person a notice; it is
        called on the GUI thread with :func:`notice_text`'s line."""
        self.notice = notice

    def install(self) -> None:
        """Take over ``sys.excepthook``, ``threading.excepthook`` and Qt's message handler.

        Call on the GUI thread (the relay lives there). Raises RuntimeError when installed already.
        """
        if self._previous is not None:
            raise RuntimeError("Diagnostics.install() called twice")
        self._relay = _Relay(self)
        previous_qt = qInstallMessageHandler(self._on_qt_message)
        self._previous = (sys.excepthook, threading.excepthook, previous_qt)
        sys.excepthook = self._on_uncaught
        threading.excepthook = self._on_thread_uncaught

    def uninstall(self) -> None:
        """Put back the hooks and the message handler found by :meth:`install` (no-op when not installed)."""
        if self._previous is None:
            return
        excepthook, thread_hook, qt_handler = self._previous
        sys.excepthook = excepthook  # type: ignore[assignment]
        threading.excepthook = thread_hook  # type: ignore[assignment]
        qInstallMessageHandler(qt_handler)  # type: ignore[arg-type]  # None: Qt's default handler
        self._previous = None
        if self._relay is not None:
            self._relay.deleteLater()
            self._relay = None

    # ------------------------------------------------------------------------------ hooks

    def _report(self, exc_info: ExcInfo, where: str) -> None:
        try:
            log.error("uncaught exception %s", where, exc_info=exc_info)
            if self._relay is not None and self.notice is not None:
                self._relay.raised.emit(notice_text(exc_info[1], self.log_file))
        except Exception:  # the last line of defence must not raise
            sys.__excepthook__(*exc_info)

    def _on_uncaught(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        self._report((exc_type, exc, tb), f"in thread {threading.current_thread().name}")

    def _on_thread_uncaught(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or issubclass(args.exc_type, SystemExit):
            return
        name = args.thread.name if args.thread is not None else "?"
        self._report((args.exc_type, args.exc_value, args.exc_traceback), f"in thread {name}")

    def _on_qt_message(self, mode: QtMsgType, context: QMessageLogContext, message: str) -> None:
        where = f" ({context.file}:{context.line})" if context is not None and context.file else ""
        qt_log.log(_QT_LEVELS.get(mode, logging.WARNING), "%s%s", message, where)
