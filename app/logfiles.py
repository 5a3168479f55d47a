"""Glassbox's log files: one format, one logger tree, rotation, readable by the user only.

Loggers are named after their module (``logging.getLogger(__name__)``:
``app.core.models.hub``, ``app.ui.window.main_window``, ``app.engine.session``), so one logger,
``app``, sets the level for all of Glassbox; the handlers sit on the root logger,
where third-party libraries (huggingface_hub, httpx...) reach them at WARNING and
above only (their INFO lines carry request URLs, search words included).

- The window process writes ``<data>/logs/app.log`` (:func:`configure` from app.main).
- The engine child writes ``<data>/logs/engine.log`` (app.engine.process).

Each file rotates at :data:`MAX_BYTES` (2 MiB) and keeps :data:`BACKUPS` old copies
(``app.log.1`` ... ``app.log.3``); on POSIX every file is created with mode 0o600.
At the default level (INFO) nothing the person typed belongs in the log: no chat
titles, no message text, no search words.

Plain Python (no Qt): the engine child imports it.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from dataclasses import dataclass, field
from logging.handlers import RotatingFileHandler
from pathlib import Path

APP_LOGGER = "app"
MAX_BYTES = 2 * 1024 * 1024  # bytes per file before it rotates
BACKUPS = 3  # rotated copies kept (app.log.1 ... app.log.3)
FILE_MODE = 0o600  # user read/write only (POSIX)
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def make_private(path: Path) -> None:
    """Give ``path`` mode 0o600 on POSIX (a no-op elsewhere, and for a file that does not exist).

    Raises:
        OSError: the file exists but its mode cannot be changed (another owner).
    """
    if os.name == "posix" and path.exists():
        path.chmod(FILE_MODE)


class PrivateRotatingFileHandler(RotatingFileHandler):
    """A :class:`RotatingFileHandler` whose files (the current one and each new one after a
    rotation) are created, or reopened, with mode 0o600 on POSIX."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        for n in range(1, backups + 1):  # copies rotated by a Glassbox that did not restrict them
            make_private(Path(f"{self.baseFilename}.{n}"))

    def _open(self) -> io.TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        if os.name == "posix":
            os.fchmod(fd, FILE_MODE)  # a file made before this version kept its old mode
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


DEBUG_ENV = "GLASSBOX_DEBUG"  # "1": child processes (the engine) log at DEBUG too


def debug_inherited() -> bool:
    """True when the process that started this one logs at DEBUG (``--debug``)."""
    return os.environ.get(DEBUG_ENV) == "1"


@dataclass
class LogSetup:
    """What :func:`configure` changed; :meth:`close` undoes it (tests, a second configure)."""

    handlers: list[logging.Handler] = field(default_factory=list)
    levels: dict[str, int] = field(default_factory=dict)
    debug_env: str | None = None  # DEBUG_ENV's value before configure

    def close(self) -> None:
        root = logging.getLogger()
        for handler in self.handlers:
            root.removeHandler(handler)
            handler.close()
        for name, level in self.levels.items():
            logging.getLogger(name or None).setLevel(level)
        self.handlers.clear()
        self.levels.clear()
        if self.debug_env is None:
            os.environ.pop(DEBUG_ENV, None)
        else:
            os.environ[DEBUG_ENV] = self.debug_env


def configure(log_file: Path | None, *, debug: bool = False, stderr: bool = False) -> LogSetup:
    """Send the ``app`` loggers (INFO, or DEBUG when ``debug``) and everyone's warnings to
    ``log_file`` (rotating, private) and, when ``stderr`` or without a file, to stderr.

    With ``debug``, :data:`DEBUG_ENV` is set in the environment, so the engine process
    (spawned later, inheriting it) logs at DEBUG as well (:func:`debug_inherited`).

    Raises:
        OSError: ``log_file`` cannot be opened (its folder must exist).
    """
    setup = LogSetup(debug_env=os.environ.get(DEBUG_ENV))
    root = logging.getLogger()
    formatter = logging.Formatter(FORMAT)
    handlers: list[logging.Handler] = []
    if log_file is not None:
        handlers.append(PrivateRotatingFileHandler(log_file))
    if stderr or log_file is None:
        handlers.append(logging.StreamHandler(sys.stderr))
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
        setup.handlers.append(handler)
    level = logging.DEBUG if debug else logging.INFO
    if debug:
        os.environ[DEBUG_ENV] = "1"
    for name, want in [("", logging.WARNING), (APP_LOGGER, level)]:
        logger = logging.getLogger(name or None)
        setup.levels[name] = logger.level
        logger.setLevel(want)
    return setup
