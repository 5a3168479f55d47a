"""Model downloads that survive quitting, crashes, dropped connections and full disks.

:class:`DownloadManager` keeps a queue of downloads (:class:`HubFile` items:
one GGUF file, or every part of a split model) and runs ``concurrency`` of them
at a time on plain worker threads.

How one file is downloaded (why not ``hf_hub_download``: huggingface_hub 2.x
deletes its partial file when a download fails, so nothing could resume):

1. The bytes go to ``<final name>.part`` next to the final file. The library
   never lists ``.part`` files, so a half model is never shown.
2. A restart resumes with ``Range: bytes=<size of .part>-`` on huggingface_hub's
   own session (``get_session()``), URL (``hf_hub_url``, pinned to the commit the
   listing came from) and headers (``build_hf_headers``: user agent, token).
3. The sha256 is computed while writing; on resume the existing ``.part`` is
   hashed first (in memory the hash state is kept across pause/resume in one
   run). At the end, size and sha256 must equal the Hub's LFS listing.
4. A mismatch deletes the ``.part`` (its bytes are wrong; resuming would keep
   them) and fails with a message; resuming then starts from zero. A damaged
   model is never installed.
5. When every part is verified they are renamed to their final names with
   ``os.replace`` (atomic), the first part last, so the library sees a split
   model only once all its parts are in place.

Dropped connections, read timeouts, 429 and 5xx are retried with exponential
backoff (``retry_base`` doubling up to ``retry_max`` seconds, at most
``max_retries`` times in a row without progress). 401/403 fail at once with
the token-and-licence message (the token is never in a message or a log).

The queue is saved (JSON, atomic writes) in the data folder whenever a
download changes state; a download that was running when the app quit or
crashed is queued again on the next :meth:`DownloadManager.start`.

Free disk space is checked before a download is queued and again before it
starts (:class:`InsufficientSpaceError`, naming both sizes). If the disk fills
anyway (ENOSPC), the download fails with a clear message; the ``.part`` is kept
so it can resume once space is freed (cancel deletes it).

Threads and callbacks: listeners (``on_event`` / :meth:`add_listener`) get a
:class:`DownloadStatus` (an immutable snapshot) on every state change and at
most every ``progress_interval`` seconds of progress. They are called from the
worker threads (progress, finished, failed) and from the thread that called
:meth:`add`/:meth:`pause`/:meth:`resume`/:meth:`cancel` (for downloads not
running). Keep them cheap and thread-safe: a Qt layer should only emit a
signal (queued to the UI thread). An exception in a listener is logged and
ignored.
"""

from __future__ import annotations

import enum
import errno
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from huggingface_hub import constants, hf_hub_url
from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.utils import build_hf_headers, get_session, get_token

from app.core.gguf_info import format_bytes
from app.core.hub import (
    CONNECT_TIMEOUT,
    LIBRARY_NAME,
    READ_TIMEOUT,
    HubFile,
    HubOfflineError,
    auth_error,
    httpx2,
    install_http_client,
    is_offline_mode,
    offline_error,
    scrub,
)
from app.core.settings import atomic_write_text
from app.paths import Paths

log = logging.getLogger(__name__)

PART_SUFFIX = ".part"
DISK_RESERVE = 100 << 20  # bytes kept free on the disk beyond the download itself
SPEED_WINDOW = 3.0  # seconds of samples averaged for the speed
STATE_VERSION = 1


class DownloadState(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({DownloadState.DONE, DownloadState.FAILED, DownloadState.CANCELLED})


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


class _Stopped(Exception):
    """Internal: the worker was asked to stop (pause, cancel or shutdown)."""


class _Retryable(Exception):
    """Internal: a transient failure worth retrying."""


@dataclass
class _Hash:
    """The running sha256 of a ``.part``: ``hashed`` bytes fed, equal to the bytes in the file."""

    hasher: Any = field(default_factory=hashlib.sha256)
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
class _Item:
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
    stop_reason: str | None = None
    samples: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=256))  # (monotonic s, bytes done)
    last_emit: float = 0.0
    hash_cache: tuple[int, _Hash] | None = None  # (part index, running hash) kept across pause/resume

    @property
    def total_bytes(self) -> int:
        return sum(p.size for p in self.parts)

    def to_json(self) -> dict[str, Any]:
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
    def from_json(cls, d: dict[str, Any]) -> _Item:
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


def _open_for_append(path: Path) -> BinaryIO:
    """Open a ``.part`` file for appending (tests replace this to simulate a full disk)."""
    return open(path, "ab")


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


class DownloadManager:
    """A queue of model downloads with pause, resume, cancel and crash-safe resume.

    Args:
        paths: Glassbox's folders; files go under ``paths.models_dir`` and the
            queue is saved in ``paths.data_dir / "downloads.json"``.
        concurrency: downloads running at once (default 1).
        token: a Hugging Face token from the settings; None uses
            huggingface_hub's login (``get_token()``) unless
            ``use_login_token`` is False. Never written to disk or logs.
        endpoint: the Hub URL for new downloads; default huggingface_hub's
            (``HF_ENDPOINT``). Each download keeps the endpoint it was added with.
        on_event: a listener (see the module docstring for its thread).
        max_retries: consecutive failed attempts (without progress) before a
            download fails.
        retry_base, retry_max: backoff in seconds (doubling from base, capped).
        disk_reserve: bytes to keep free beyond the download.
        free_space: ``f(folder) -> free bytes`` (tests replace it).
        chunk_size: bytes read per network read.
        progress_interval: seconds between progress events per download.
        state_file: where the queue is saved; default ``paths.data_dir / "downloads.json"``.

    Raises:
        ValueError: ``concurrency`` below 1.
    """

    def __init__(
        self,
        paths: Paths,
        *,
        concurrency: int = 1,
        token: str | None = None,
        use_login_token: bool = True,
        endpoint: str | None = None,
        on_event: Callable[[DownloadStatus], None] | None = None,
        max_retries: int = 5,
        retry_base: float = 1.0,
        retry_max: float = 8.0,
        disk_reserve: int = DISK_RESERVE,
        free_space: Callable[[Path], int] = disk_free,
        chunk_size: int = 1 << 20,
        progress_interval: float = 0.1,
        state_file: Path | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.paths = paths
        self.concurrency = concurrency
        self._token = token
        self._use_login_token = use_login_token
        self._endpoint = endpoint
        self.max_retries = max_retries
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.disk_reserve = disk_reserve
        self.free_space = free_space
        self.chunk_size = chunk_size
        self.progress_interval = progress_interval
        self.state_file = Path(state_file) if state_file else paths.data_dir / "downloads.json"
        self.notice: str | None = None
        self._listeners: list[Callable[[DownloadStatus], None]] = [on_event] if on_event else []
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        # Held while listeners are called, so events arrive in the order the states changed.
        # Lock order: _emit_lock, then _lock (never the other way round).
        self._emit_lock = threading.RLock()
        self._items: dict[str, _Item] = {}
        self._workers: list[threading.Thread] = []
        self._stopping = False
        self._load()

    # --- public API ----------------------------------------------------------------------------
    def add_listener(self, callback: Callable[[DownloadStatus], None]) -> None:
        """Call ``callback(status)`` on every event (from worker threads too)."""
        with self._lock:
            self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[DownloadStatus], None]) -> None:
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    def start(self) -> None:
        """Start the worker threads; queued downloads (including those interrupted
        by a quit or crash) begin. Idempotent."""
        install_http_client()
        with self._lock:
            if self._workers:
                return
            self._stopping = False
            for i in range(self.concurrency):
                t = threading.Thread(target=self._worker, name=f"glassbox-download-{i}", daemon=True)
                self._workers.append(t)
                t.start()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the workers. Running downloads keep their ``.part`` files and are
        saved as queued, so the next :meth:`start` resumes them.

        Args:
            timeout: seconds to wait for each worker thread.
        """
        with self._lock:
            self._stopping = True
            for item in self._items.values():
                if item.state is DownloadState.RUNNING:
                    item.stop_reason = "shutdown"
                    item.stop.set()
            self._cond.notify_all()
            workers, self._workers = self._workers, []
        for t in workers:
            t.join(timeout)

    def __enter__(self) -> DownloadManager:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def add(self, file: HubFile, *, dest_dir: Path | None = None) -> str:
        """Queue a download of ``file`` (all parts of a split model).

        Args:
            file: from :meth:`HubClient.repo_files`.
            dest_dir: folder for the files; default ``models/<owner>/<name>/``.

        Returns:
            The download's id (the existing one when the same file is already queued).

        Raises:
            InsufficientSpaceError: not enough free space (message has both sizes).
            DownloadError: the file is already downloaded, its listing lacks
                parts, or its path is unsafe.
        """
        if file.missing_parts:
            raise DownloadError(
                f"{file.name}: the Hub listing lacks part(s) {', '.join(file.missing_parts)}; "
                "the model cannot be downloaded whole"
            )
        folder = Path(dest_dir) if dest_dir else dest_dir_for(self.paths.models_dir, file.repo_id)
        parts = []
        for p in file.parts:
            rel = PurePosixPath(p.filename)
            if rel.is_absolute() or any(s in ("..", "") or "\\" in s or ":" in s for s in rel.parts):
                raise DownloadError(f"unsafe file name in the listing: {p.filename}")
            parts.append(PartState(p.filename, p.size, p.sha256, str(folder.joinpath(*rel.parts))))
        with self._emit_lock:
            with self._lock:
                for it in self._items.values():
                    if it.parts[0].dest == parts[0].dest and it.state not in TERMINAL:
                        return it.id
                if all(Path(p.dest).exists() for p in parts):
                    raise DownloadError(f"{file.name} is already downloaded: {parts[0].dest}")
                item = _Item(
                    uuid.uuid4().hex[:12],
                    file.repo_id,
                    file.revision,
                    self._endpoint_now(),
                    file.name,
                    file.quant,
                    parts,
                )
                self._check_space(item)
                self._items[item.id] = item
                self._save()
                queued = self._snapshot(item)
            self._emit(item, queued)
        return item.id

    def pause(self, download_id: str) -> None:
        """Pause a queued or running download; its ``.part`` is kept.

        A running download stops at its next read (at once while data flows;
        on a stalled connection within the read timeout).

        Raises:
            KeyError: unknown id.
        """
        with self._emit_lock:
            with self._lock:
                item = self._items[download_id]
                if item.state is DownloadState.RUNNING:
                    item.stop_reason = "pause"
                    item.stop.set()
                    return
                if item.state is not DownloadState.QUEUED:
                    return
                item.state = DownloadState.PAUSED
                self._save()
                snap = self._snapshot(item)
            self._emit(item, snap)

    def resume(self, download_id: str) -> None:
        """Queue a paused or failed download again (it continues from its ``.part``).

        Raises:
            KeyError: unknown id.
            InsufficientSpaceError: the disk has too little space left.
        """
        with self._emit_lock:
            with self._lock:
                item = self._items[download_id]
                if item.state not in (DownloadState.PAUSED, DownloadState.FAILED):
                    return
                self._check_space(item)
                item.state = DownloadState.QUEUED
                item.error = None
                self._save()
                queued = self._snapshot(item)
            self._emit(item, queued)

    def cancel(self, download_id: str) -> None:
        """Cancel a download and delete its partial files (installed files stay).

        Raises:
            KeyError: unknown id.
        """
        with self._emit_lock:
            with self._lock:
                item = self._items[download_id]
                if item.state is DownloadState.RUNNING:
                    item.stop_reason = "cancel"
                    item.stop.set()
                    return
                if item.state in (DownloadState.DONE, DownloadState.CANCELLED):
                    return
                self._delete_partials(item)
                item.state = DownloadState.CANCELLED
                self._save()
                snap = self._snapshot(item)
            self._emit(item, snap)

    def remove(self, download_id: str) -> None:
        """Forget a finished, failed or cancelled download (files are not touched).

        Raises:
            KeyError: unknown id.
            ValueError: the download is still queued, running or paused.
        """
        with self._lock:
            item = self._items[download_id]
            if item.state not in TERMINAL:
                raise ValueError(f"download {download_id} is {item.state.value}; cancel it first")
            del self._items[download_id]
            self._save()

    def status(self, download_id: str) -> DownloadStatus:
        """A snapshot of one download. Raises KeyError for an unknown id."""
        with self._lock:
            return self._snapshot(self._items[download_id])

    def items(self) -> list[DownloadStatus]:
        """Snapshots of every download, oldest first (the queue order)."""
        with self._lock:
            return [self._snapshot(i) for i in self._items.values()]

    def wait(
        self,
        download_id: str,
        timeout: float | None = None,
        states: Iterable[DownloadState] = (*TERMINAL, DownloadState.PAUSED),
    ) -> DownloadStatus:
        """Block until the download reaches one of ``states``; returns its status.

        Raises:
            TimeoutError: not reached within ``timeout`` seconds.
        """
        wanted = set(states)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._items[download_id].state not in wanted:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"download {download_id} is still {self._items[download_id].state.value}")
                self._cond.wait(left if left is not None else 1.0)
            return self._snapshot(self._items[download_id])

    # --- internals: state -------------------------------------------------------------------------
    def _endpoint_now(self) -> str:
        return (self._endpoint or constants.ENDPOINT).rstrip("/")

    def set_token(self, token: str | None) -> None:
        """Use ``token`` (or the login token again, with None) for requests from now on."""
        self._token = token

    def _token_now(self) -> str | None:
        if self._token:
            return self._token
        if not self._use_login_token or constants.HF_HUB_DISABLE_IMPLICIT_TOKEN:
            return None
        try:
            return get_token()
        except Exception:
            return None

    def _load(self) -> None:
        try:
            raw = self.state_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError as exc:
            self.notice = f"Could not read the download list {self.state_file} ({exc.strerror or exc})."
            return
        try:
            data = json.loads(raw)
            items = [_Item.from_json(d) for d in data.get("items", [])]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            aside = self.state_file.with_name(f"{self.state_file.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            try:
                os.replace(self.state_file, aside)
            except OSError:
                pass
            self.notice = f"The download list {self.state_file} was damaged ({exc}); it was set aside."
            return
        for it in items:
            it.done_bytes = self._bytes_on_disk(it)
            self._items[it.id] = it

    def _save(self) -> None:
        data = {"version": STATE_VERSION, "items": [i.to_json() for i in self._items.values()]}
        try:
            atomic_write_text(self.state_file, json.dumps(data, indent=1, ensure_ascii=False))
        except OSError as exc:
            log.warning("could not save the download list: %s", exc)

    @staticmethod
    def _bytes_on_disk(item: _Item) -> int:
        n = 0
        for p in item.parts:
            if p.installed or p.verified:
                n += p.size
                continue
            try:
                n += min(p.part_path.stat().st_size, p.size)
            except OSError:
                pass
        return n

    def _check_space(self, item: _Item) -> None:
        remaining = item.total_bytes - self._bytes_on_disk(item)
        folder = item.parts[0].dest_path.parent
        free = self.free_space(folder)
        if remaining + self.disk_reserve > free:
            raise InsufficientSpaceError(
                f"Not enough disk space for {item.name}: it needs {format_bytes(remaining)} "
                f"(plus {format_bytes(self.disk_reserve)} kept free) but only {format_bytes(free)} is free "
                f"on the disk holding {folder}. Free some space or choose another models folder.",
                needed=remaining + self.disk_reserve,
                free=free,
                folder=folder,
            )

    def _snapshot(self, item: _Item) -> DownloadStatus:
        remaining = item.total_bytes - item.done_bytes
        eta = remaining / item.speed if item.speed > 0 and item.state is DownloadState.RUNNING else None
        return DownloadStatus(
            item.id,
            item.repo_id,
            item.revision,
            item.name,
            item.quant,
            item.state,
            item.done_bytes,
            item.total_bytes,
            item.speed if item.state is DownloadState.RUNNING else 0.0,
            eta,
            item.error,
            tuple(p.dest_path for p in item.parts),
            item.part_index,
            len(item.parts),
        )

    def _emit(self, item: _Item, status: DownloadStatus | None = None) -> None:
        """Wake waiters and call the listeners with ``status`` (default: a snapshot taken now).

        Never called with ``_lock`` held (lock order: ``_emit_lock`` then ``_lock``).
        """
        with self._emit_lock:
            with self._lock:
                if status is None:
                    status = self._snapshot(item)
                listeners = list(self._listeners)
                self._cond.notify_all()
            for cb in listeners:
                try:
                    cb(status)
                except Exception:
                    log.exception("download listener failed")

    def _progress(self, item: _Item, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            item.done_bytes = done
            item.samples.append((now, done))
            while len(item.samples) > 2 and now - item.samples[0][0] > SPEED_WINDOW:
                item.samples.popleft()
            t0, b0 = item.samples[0]
            item.speed = (done - b0) / (now - t0) if now - t0 > 0.2 else item.speed
            due = force or now - item.last_emit >= self.progress_interval
            if due:
                item.last_emit = now
        if due:
            self._emit(item)

    def _delete_partials(self, item: _Item) -> None:
        for p in item.parts:
            if not p.installed:
                try:
                    p.part_path.unlink()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    log.warning("could not delete %s: %s", p.part_path, exc)
                p.verified = False
        item.done_bytes = self._bytes_on_disk(item)
        item.hash_cache = None

    # --- internals: the worker ----------------------------------------------------------------------
    def _next(self) -> _Item | None:
        with self._cond:
            while not self._stopping:
                for item in self._items.values():
                    if item.state is DownloadState.QUEUED:
                        item.state = DownloadState.RUNNING
                        item.error = None
                        item.stop.clear()
                        item.stop_reason = None
                        item.samples.clear()
                        item.speed = 0.0
                        self._save()
                        return item
                self._cond.wait(0.5)
        return None

    def _worker(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            self._emit(item)
            try:
                self._run(item)
            except _Stopped:
                with self._lock:
                    reason = item.stop_reason
                    if reason == "cancel":
                        self._delete_partials(item)
                        item.state = DownloadState.CANCELLED
                    elif reason == "pause":
                        item.state = DownloadState.PAUSED
                    else:  # shutdown: resume on the next start
                        item.state = DownloadState.QUEUED
                    item.stop.clear()
            except DownloadError as exc:
                msg = scrub(str(exc), self._token_now())
                log.warning("download of %s failed: %s", item.name, msg)
                with self._lock:
                    item.state = DownloadState.FAILED
                    item.error = msg
            except Exception as exc:
                log.exception("download of %s failed unexpectedly", item.name)
                with self._lock:
                    item.state = DownloadState.FAILED
                    item.error = scrub(f"unexpected error: {type(exc).__name__}: {exc}", self._token_now())
            else:
                with self._lock:
                    item.state = DownloadState.DONE
                    item.done_bytes = item.total_bytes
            with self._lock:
                self._save()
            self._emit(item)

    def _check_stop(self, item: _Item) -> None:
        if item.stop.is_set():
            raise _Stopped()

    def _run(self, item: _Item) -> None:
        if is_offline_mode():
            raise DownloadError(str(offline_error()))
        self._check_space(item)
        item.done_bytes = self._bytes_on_disk(item)
        for i, part in enumerate(item.parts):
            if part.installed or part.verified:
                continue
            item.part_index = i
            self._download_part(item, i, part)
            with self._lock:
                part.verified = True
                self._save()
        self._install(item)

    def _install(self, item: _Item) -> None:
        order = item.parts[1:] + item.parts[:1]  # the first part last: the library groups by it
        for part in order:
            if part.installed:
                continue
            try:
                if part.part_path.exists():
                    os.replace(part.part_path, part.dest_path)
                elif not part.dest_path.exists():
                    part.verified = False
                    raise DownloadError(
                        f"{part.part_path} disappeared before it could be installed; resume to download it again"
                    )
            except OSError as exc:
                raise DownloadError(
                    f"could not rename {part.part_path} to {part.dest_path.name}: {exc.strerror or exc}"
                ) from exc
            with self._lock:
                part.installed = True
                self._save()

    def _download_part(self, item: _Item, index: int, part: PartState) -> None:
        part_path = part.part_path
        try:
            part_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DownloadError(f"cannot create the folder {part_path.parent}: {exc.strerror or exc}") from exc
        base = sum(p.size for p in item.parts[:index])
        failures = 0
        h = self._resume_hash(item, index, part)
        while True:
            self._check_stop(item)
            have = part_path.stat().st_size if part_path.exists() else 0
            if have != h.hashed:  # the file is not what we hashed: hash it again
                h = self._hash_existing(item, index, part)
                have = h.hashed
            if have >= part.size:
                break
            try:
                self._fetch(item, part, h, base)
            except _Retryable as exc:
                failures = 1 if h.hashed > have else failures + 1
                if failures > self.max_retries:
                    raise DownloadError(
                        f"{part.filename}: the download kept failing ({exc}); "
                        f"gave up after {self.max_retries} retries. Resume to try again."
                    ) from None
                delay = min(self.retry_max, self.retry_base * (2 ** (failures - 1)))
                log.info("download of %s interrupted (%s); retry %d in %.1f s", part.filename, exc, failures, delay)
                with self._lock:
                    item.error = f"connection trouble ({exc}); retrying in {delay:.1f} s"
                self._emit(item)
                if item.stop.wait(delay):
                    raise _Stopped() from None
                with self._lock:
                    item.error = None
        self._verify(item, index, part, h)

    def _resume_hash(self, item: _Item, index: int, part: PartState) -> _Hash:
        have = part.part_path.stat().st_size if part.part_path.exists() else 0
        if item.hash_cache and item.hash_cache[0] == index and item.hash_cache[1].hashed == have:
            return item.hash_cache[1]
        return self._hash_existing(item, index, part)

    def _hash_existing(self, item: _Item, index: int, part: PartState) -> _Hash:
        """Hash the bytes already in the ``.part`` (a resume after a restart)."""
        h = _Hash()
        item.hash_cache = (index, h)
        path = part.part_path
        if not path.exists():
            return h
        if path.stat().st_size > part.size:  # longer than the file: not ours
            path.unlink()
            return h
        base = sum(p.size for p in item.parts[:index])
        with open(path, "rb") as fh:
            while block := fh.read(4 << 20):
                h.hasher.update(block)
                h.hashed += len(block)
                self._check_stop(item)
                self._progress(item, base + h.hashed)
        return h

    def _fetch(self, item: _Item, part: PartState, h: _Hash, base: int) -> None:
        """One ranged GET appended to the ``.part``; ``h`` follows every byte written."""
        url = hf_hub_url(item.repo_id, part.filename, revision=item.revision, endpoint=item.endpoint)
        token = self._token_now()
        headers = build_hf_headers(token=token if token else False, library_name=LIBRARY_NAME)
        headers["Accept-Encoding"] = "identity"
        if h.hashed:
            headers["Range"] = f"bytes={h.hashed}-"
        timeout = httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
        try:
            with get_session().stream("GET", url, headers=headers, timeout=timeout, follow_redirects=True) as r:
                status = r.status_code
                if status == 416:
                    total = r.headers.get("Content-Range", "").rpartition("/")[2]
                    if total.isdigit() and int(total) == h.hashed:
                        return
                    raise _Retryable("the server rejected the resume offset")
                if status in (401, 403):
                    r.read()
                    rejected = r.headers.get("X-Error-Message") == "Invalid credentials in Authorization header"
                    raise DownloadError(
                        str(auth_error(item.repo_id, status, token_sent=token is not None, rejected=rejected))
                    )
                if status == 404:
                    raise DownloadError(
                        f"{part.filename} is no longer on the Hub at revision {item.revision[:12]} (HTTP 404)"
                    )
                if status == 429 or status >= 500:
                    raise _Retryable(f"HTTP {status}")
                if status >= 400:
                    raise DownloadError(f"the Hub answered HTTP {status} for {part.filename}")
                if status == 206:
                    start = r.headers.get("Content-Range", "bytes -").split()[-1].split("-")[0]
                    if not start.isdigit() or int(start) != h.hashed:
                        raise _Retryable(f"the server resumed at the wrong offset ({start}, wanted {h.hashed})")
                elif h.hashed:  # 200: the server ignored the Range; start this part over
                    log.info("server ignored Range for %s; restarting it", part.filename)
                    part.part_path.unlink(missing_ok=True)
                    h.hasher, h.hashed = hashlib.sha256(), 0
                try:
                    fh = _open_for_append(part.part_path)
                except OSError as exc:
                    raise self._write_error(part, h.hashed, exc) from None
                try:
                    with fh:
                        for chunk in r.iter_raw(self.chunk_size):
                            if h.hashed + len(chunk) > part.size:
                                raise DownloadError(
                                    f"{part.filename}: the server sent more than the {part.size:,} bytes the Hub lists"
                                )
                            fh.write(chunk)
                            h.hasher.update(chunk)
                            h.hashed += len(chunk)
                            self._progress(item, base + h.hashed)
                            if item.stop.is_set():
                                break
                except OSError as exc:
                    raise self._write_error(part, h.hashed, exc) from None
                self._check_stop(item)
                if h.hashed < part.size:
                    raise _Retryable("the connection closed early")
        except (DownloadError, _Stopped, _Retryable):
            raise
        except HubOfflineError as exc:  # could not connect
            raise _Retryable(str(exc)) from None
        except OfflineModeIsEnabled:
            raise DownloadError(str(offline_error())) from None
        except httpx2.TransportError as exc:  # dropped, reset, timed out
            raise _Retryable(scrub(f"{type(exc).__name__}: {exc}", token)) from None

    def _write_error(self, part: PartState, have: int, exc: OSError) -> DownloadError:
        folder = part.part_path.parent
        if exc.errno == errno.ENOSPC:
            try:
                free = format_bytes(shutil.disk_usage(folder).free)
            except OSError:
                free = "unknown"
            return DownloadError(
                f"The disk is full: writing {part.part_path.name} stopped at {format_bytes(have)} of "
                f"{format_bytes(part.size)} (free on {folder}: {free}). The partial file was kept so the "
                "download can resume once space is freed; cancel the download to delete it."
            )
        return DownloadError(f"cannot write {part.part_path}: {exc.strerror or exc}")

    def _verify(self, item: _Item, index: int, part: PartState, h: _Hash) -> None:
        path = part.part_path
        size = path.stat().st_size
        if size != part.size or h.hashed != size:
            raise DownloadError(f"{part.filename}: got {size:,} bytes, the Hub lists {part.size:,}")
        if part.sha256:
            digest = h.hasher.hexdigest()
            if digest != part.sha256.lower():
                path.unlink(missing_ok=True)
                item.hash_cache = None
                with self._lock:
                    item.done_bytes = self._bytes_on_disk(item)
                raise DownloadError(
                    f"{part.filename}: the downloaded file's sha256 ({digest[:16]}…) does not match the one the "
                    f"Hub lists ({part.sha256[:16]}…): it was damaged on the way. The damaged file was deleted; "
                    "resume to download it again."
                )
        try:
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())
        except OSError:
            pass
        item.hash_cache = None
        self._progress(item, sum(p.size for p in item.parts[: index + 1]), force=True)


__all__ = [
    "DISK_RESERVE",
    "PART_SUFFIX",
    "DownloadError",
    "DownloadManager",
    "DownloadState",
    "DownloadStatus",
    "InsufficientSpaceError",
    "PartState",
    "dest_dir_for",
    "disk_free",
]
