"""What a model download is: its states, its files, the snapshot listeners get, and the saved form.

:class:`DownloadItem` is the manager's record of one download (persisted parts
plus runtime progress); :class:`DownloadStatus` is the immutable snapshot handed
to listeners; :class:`PartState` is one file of it. ``DownloadItem.to_json`` /
``from_json`` are the saved queue's format (``downloads.json``, version
:data:`STATE_VERSION`). The manager that runs them is :mod:`app.core.models.downloads`;
the HTTP transfer and checks are :mod:`app.core.models.download_transfer`.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.settings import atomic_write_text

PART_SUFFIX = ".part"
DISK_RESERVE = 100 << 20  # bytes kept free on the disk beyond the download itself
STATE_VERSION = 1


class DownloadState(str, enum.Enum):
    """Where a download is in its life; the saved queue stores the value."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({DownloadState.DONE, DownloadState.FAILED, DownloadState.CANCELLED})


class StopRequest(str, enum.Enum):
    """Why a running download was asked to stop (decides its state once the worker lets go)."""

    PAUSE = "pause"  # → PAUSED, the .part kept
    CANCEL = "cancel"  # → CANCELLED, the .part deleted
    SHUTDOWN = "shutdown"  # → QUEUED, resumed by the next start


class DownloadError(Exception):
    """A download cannot go on; ``str(error)`` is the message for a person."""


class InsufficientSpaceError(DownloadError):
    """Not enough free disk space.

    Attributes:
        needed: bytes the download still needs (plus the reserve).
        free: bytes free on the disk.
        folder: the folder the files go to.
    """

    def __init__(self, message: str, *, needed: int, free: int, folder: Path) -> None:
        super().__init__(message)
        self.needed = needed
        self.free = free
        self.folder = folder


@dataclass
class RunningHash:
    """The running sha256 of a ``.part``: ``hashed`` bytes fed, equal to the bytes in the file."""

    hasher: hashlib._Hash = field(default_factory=hashlib.sha256)
    hashed: int = 0


@dataclass
class PartState:
    """One file of a download (persisted).

    Attributes:
        filename: path in the repository.
        size: bytes, from the Hub listing.
        sha256: expected sha256 (hex), None when the Hub lists none (non-LFS).
        dest: the final path on disk.
        verified: the ``.part`` is complete and its sha256 matched.
        installed: renamed to ``dest``.
    """

    filename: str
    size: int
    sha256: str | None
    dest: str
    verified: bool = False
    installed: bool = False

    @property
    def dest_path(self) -> Path:
        return Path(self.dest)

    @property
    def part_path(self) -> Path:
        return Path(self.dest + PART_SUFFIX)


@dataclass(frozen=True)
class DownloadStatus:
    """A snapshot of one download, safe to pass between threads.

    Attributes:
        id: the download's id.
        repo_id, revision, name, quant: what is downloaded.
        state: queued / running / paused / done / failed / cancelled.
        done_bytes, total_bytes: progress over all parts, bytes.
        speed: bytes/s averaged over the last few seconds (0 when unknown).
        eta: seconds left at that speed (None when unknown).
        error: the message when failed (or a note, e.g. retrying), else None.
        paths: the final paths of all parts (the first is what llama.cpp loads).
        part_index, n_parts: which part is being downloaded (0-based), of how many.
    """

    id: str
    repo_id: str
    revision: str
    name: str
    quant: str
    state: DownloadState
    done_bytes: int
    total_bytes: int
    speed: float
    eta: float | None
    error: str | None
    paths: tuple[Path, ...]
    part_index: int
    n_parts: int

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def path(self) -> Path:
        """The model's path (first part)."""
        return self.paths[0]


@dataclass
class DownloadItem:
    """The manager's record of one download (guarded by the manager's lock).

    Attributes:
        id, repo_id, revision, endpoint, name, quant: what is downloaded and from where.
        parts: its files, the first one is what llama.cpp loads.
        state, error: as in :class:`DownloadStatus`.
        created: seconds since the epoch.
        done_bytes, part_index, speed: progress (runtime only, not saved).
        stop: set to ask the worker to stop; ``stop_request`` says why.
        samples: (monotonic seconds, bytes done) of the last few seconds, for the speed.
        last_emit: monotonic seconds of the last progress event.
        hash_cache: (part index, running hash) kept across pause/resume in one run.
    """

    id: str
    repo_id: str
    revision: str
    endpoint: str
    name: str
    quant: str
    parts: list[PartState]
    state: DownloadState = DownloadState.QUEUED
    error: str | None = None
    created: float = field(default_factory=time.time)
    # runtime only
    done_bytes: int = 0
    part_index: int = 0
    speed: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    stop_request: StopRequest | None = None
    samples: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=256))
    last_emit: float = 0.0
    hash_cache: tuple[int, RunningHash] | None = None

    @property
    def total_bytes(self) -> int:
        return sum(p.size for p in self.parts)

    def bytes_on_disk(self) -> int:
        """Bytes of this download already on disk: verified or installed parts whole, plus ``.part`` files."""
        n = 0
        for p in self.parts:
            if p.installed or p.verified:
                n += p.size
                continue
            with contextlib.suppress(OSError):
                n += min(p.part_path.stat().st_size, p.size)
        return n

    def snapshot(self) -> DownloadStatus:
        """An immutable :class:`DownloadStatus` of this download now (speed and ETA only while running)."""
        remaining = self.total_bytes - self.done_bytes
        eta = remaining / self.speed if self.speed > 0 and self.state is DownloadState.RUNNING else None
        return DownloadStatus(
            self.id,
            self.repo_id,
            self.revision,
            self.name,
            self.quant,
            self.state,
            self.done_bytes,
            self.total_bytes,
            self.speed if self.state is DownloadState.RUNNING else 0.0,
            eta,
            self.error,
            tuple(p.dest_path for p in self.parts),
            self.part_index,
            len(self.parts),
        )

    def to_json(self) -> dict[str, Any]:
        """The saved form (the runtime fields are left out)."""
        return {
            "id": self.id,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "endpoint": self.endpoint,
            "name": self.name,
            "quant": self.quant,
            "state": self.state.value,
            "error": self.error,
            "created": self.created,
            "parts": [
                {
                    "filename": p.filename,
                    "size": p.size,
                    "sha256": p.sha256,
                    "dest": p.dest,
                    "verified": p.verified,
                    "installed": p.installed,
                }
                for p in self.parts
            ],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DownloadItem:
        """Read the saved form; a download saved as running comes back queued.

        Raises:
            KeyError, TypeError, ValueError, AttributeError: the saved data is damaged.
        """
        parts = [
            PartState(
                str(p["filename"]),
                int(p["size"]),
                p.get("sha256"),
                str(p["dest"]),
                bool(p.get("verified")),
                bool(p.get("installed")),
            )
            for p in d["parts"]
        ]
        state = DownloadState(d.get("state", "queued"))
        if state is DownloadState.RUNNING:  # it was running when the app quit or crashed
            state = DownloadState.QUEUED
        return cls(
            str(d["id"]),
            str(d["repo_id"]),
            str(d["revision"]),
            str(d["endpoint"]),
            str(d["name"]),
            str(d.get("quant", "")),
            parts,
            state,
            d.get("error"),
            float(d.get("created", time.time())),
        )


def load_queue(state_file: Path) -> tuple[list[DownloadItem], str | None]:
    """Read the saved queue.

    Returns:
        The downloads (none when the file is missing) and a notice for the person
        when the file could not be read or was damaged (it is then set aside as
        ``downloads.json.damaged-<time>``), else None.
    """
    try:
        raw = state_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], None
    except OSError as exc:
        return [], f"Could not read the download list {state_file} ({exc.strerror or exc})."
    try:
        data = json.loads(raw)
        return [DownloadItem.from_json(d) for d in data.get("items", [])], None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        aside = state_file.with_name(f"{state_file.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        with contextlib.suppress(OSError):
            os.replace(state_file, aside)
        return [], f"The download list {state_file} was damaged ({exc}); it was set aside."


def save_queue(state_file: Path, items: Iterable[DownloadItem]) -> None:
    """Write the queue atomically (JSON, version :data:`STATE_VERSION`).

    Raises:
        OSError: the file cannot be written.
    """
    data = {"version": STATE_VERSION, "items": [i.to_json() for i in items]}
    atomic_write_text(state_file, json.dumps(data, indent=1, ensure_ascii=False))


def disk_free(path: Path) -> int:
    """Free bytes on the disk holding ``path`` (or its nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p.parent != p:
        p = p.parent
    return shutil.disk_usage(p).free


def dest_dir_for(models_dir: Path, repo_id: str) -> Path:
    """Where a repository's files go: ``models/<owner>/<name>/`` (like LM Studio)."""
    parts = [s for s in repo_id.split("/") if s]
    if not parts or any(s in (".", "..") for s in parts):
        raise DownloadError(f"invalid repository id '{repo_id}'")
    return models_dir.joinpath(*parts)
