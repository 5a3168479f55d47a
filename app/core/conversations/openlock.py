"""An inter-process lock held while a history file is opened, checked, migrated or salvaged.

Two Glassbox processes starting at once on a new data folder both see an empty
(or not yet initialised) file. Without this lock one of them read "0 bytes" or
"tables but no schema version" half-way through the other's schema creation,
and took a healthy file for a damaged one (a spurious notice, or the file set
aside), or failed on ``CREATE TABLE`` ("table conversations already exists").
With it the opening steps run one process at a time; SQLite's own locking and
busy timeout cover every write after that.

The lock is an OS advisory lock on a small sidecar file
(``conversations.sqlite3.lock``, 0o600 on POSIX): ``fcntl.flock`` on POSIX,
``msvcrt.locking`` on Windows. The OS drops it when its process ends, so a
crashed Glassbox never leaves the file locked. The sidecar file stays (empty).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_POLL_S = 0.02


def lock_path(db: Path) -> Path:
    """The sidecar lock file of the history file ``db``."""
    return db.with_name(db.name + ".lock")


@contextmanager
def open_lock(db: Path, timeout: float) -> Iterator[None]:
    """Hold the exclusive open lock of ``db`` for the ``with`` block.

    Args:
        db: the history file (its folder must exist).
        timeout: seconds to wait for another process to finish opening.

    Raises:
        OSError: the lock file cannot be created, or another process held the
            lock for longer than ``timeout`` seconds; the message names the file.
    """
    path = lock_path(db)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise OSError(exc.errno, f"Glassbox cannot create the lock file {path}: {exc.strerror or exc}") from exc
    try:
        _acquire(fd, path, timeout)
        try:
            yield
        finally:
            _release(fd)
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _try_lock(fd)
            return
        except BlockingIOError:
            pass
        except PermissionError:  # Windows: the byte range is locked by another process
            pass
        if time.monotonic() >= deadline:
            raise OSError(f"Another Glassbox process kept the conversation history locked for {timeout:g} s ({path}).")
        time.sleep(_POLL_S)


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as exc:
            raise BlockingIOError(str(exc)) from exc

    def _release(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _release(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
