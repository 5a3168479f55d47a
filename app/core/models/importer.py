"""Importing GGUF files into the models folder: the loop over the files the person chose or dropped.

:func:`import_files` copies each file with
:meth:`~app.core.models.library.ModelLibrary.import_file` (a temporary name in the models
folder, renamed when complete, so an interrupted import never leaves a
half-written model; a split model brings all its parts; a name already in the
models folder is refused, not overwritten). It skips files whose name does not
end in ``.gguf``, collects one readable error per file that could not be
imported, reports progress at most every :data:`PROGRESS_INTERVAL` seconds, and
stops at the next copied block once ``cancelled()`` says so. Plain Python: it
runs on whatever thread calls it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.core.gguf.gguf_info import GGUFError
from app.core.models.library import ModelEntry, ModelLibrary

PROGRESS_INTERVAL = 0.1  # seconds between two progress reports of one file (its last is always reported)

#: ``progress(file_name, bytes_done, bytes_total)``; bytes count every part of a split model.
ImportProgress = Callable[[str, int, int], None]


class ImportCancelledError(InterruptedError):
    """Raised inside a copy to stop it when the import was cancelled (the partial copy is removed)."""


@dataclass
class ImportResult:
    """What an import did.

    Attributes:
        imported: the new library entries, in the order imported.
        errors: one sentence per file not imported, naming the file.
        skipped: paths not imported because their name does not end in ``.gguf``.
        cancelled: the import was cancelled (files after the cancelled one were not tried).
    """

    imported: list[ModelEntry] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cancelled: bool = False


def is_gguf_name(path: str | os.PathLike[str]) -> bool:
    """Whether ``path``'s name ends in ``.gguf`` (any case)."""
    return os.fspath(path).lower().endswith(".gguf")


def import_files(
    library: ModelLibrary,
    paths: Sequence[str | os.PathLike[str]],
    *,
    progress: ImportProgress | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
) -> ImportResult:
    """Copy GGUF files into ``library``'s models folder, one after the other.

    Args:
        library: the library to import into (used from this thread only).
        paths: the files; names not ending in ``.gguf`` are skipped.
        progress: called with ``(file_name, bytes_done, bytes_total)`` at most every
            :data:`PROGRESS_INTERVAL` seconds per file, and when a file is complete.
        cancelled: polled before each file and at every copied block; True stops the
            import (the file being copied is removed, later files are not tried).
        clock: seconds, monotonic (tests pass their own).

    Returns:
        The :class:`ImportResult`. Errors are collected, never raised: a file that is
        not a usable GGUF, a name already in the models folder, a missing part of a
        split model, not enough disk space or a failed copy.
    """
    result = ImportResult()
    for p in paths:
        name = Path(p).name
        if not is_gguf_name(p):
            result.skipped.append(os.fspath(p))
            continue
        if cancelled():
            result.errors.append(f"{name}: import cancelled")
            result.cancelled = True
            break
        last = [float("-inf")]

        def on_copy(done: int, total: int, name: str = name, last: list[float] = last) -> None:
            if cancelled():
                raise ImportCancelledError("import cancelled")
            now = clock()
            if progress is not None and (now - last[0] >= PROGRESS_INTERVAL or done >= total):
                last[0] = now
                progress(name, done, total)

        try:
            result.imported.append(library.import_file(p, progress=on_copy))
        except GGUFError as exc:
            result.errors.append(exc.message)
        except InterruptedError:
            result.errors.append(f"{name}: import cancelled")
            result.cancelled = True
            break
        except OSError as exc:
            text = str(exc)
            result.errors.append(text if text.startswith("Not enough") else f"{name}: {exc.strerror or exc}")
    return result
