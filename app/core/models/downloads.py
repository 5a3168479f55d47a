"""Model downloads that survive quitting, crashes, dropped connections and full disks.

:class:`DownloadManager` keeps a queue of downloads (:class:`HubFile` items:
one GGUF file, or every part of a split model) and runs ``concurrency`` of them
at a time on plain worker threads.

Each file goes to ``<final name>.part``, is resumed with a ranged GET, hashed
while written and checked against the Hub's size and sha256 before it is
renamed into place, the first part of a split model last
(:mod:`app.core.models.download_transfer` has the steps). The records and the saved
queue are :mod:`app.core.models.download_items`.

Size: about 630 lines for one job, the queue's state machine (queued, running, paused, done,
failed, cancelled) with its locks, listeners, worker threads and retries; every method reads or
changes a download's state under the one lock and then tells the listeners in order, so a
further split would hand that lock and that order to a second module.

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

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from huggingface_hub import constants
from huggingface_hub.utils import get_token

from app.core.gguf.gguf_info import format_bytes
from app.core.models.download_items import (
    DISK_RESERVE,
    PART_SUFFIX,
    TERMINAL,
    DownloadError,
    DownloadItem,
    DownloadState,
    DownloadStatus,
    InsufficientSpaceError,
    PartState,
    RunningHash,
    StopRequest,
    dest_dir_for,
    disk_free,
    load_queue,
    save_queue,
)
from app.core.models.download_transfer import (
    ChecksumMismatch,
    Retryable,
    Stopped,
    check_stop,
    fetch_part,
    hash_part_file,
    verify_part,
)
from app.core.models.hub_files import HubFile
from app.core.models.hub_http import install_http_client, is_offline_mode, offline_error, scrub
from app.paths import Paths

log = logging.getLogger(__name__)

SPEED_WINDOW = 3.0  # seconds of samples averaged for the speed


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
        self._items: dict[str, DownloadItem] = {}
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
                    item.stop_request = StopRequest.SHUTDOWN
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
                item = DownloadItem(
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
                queued = item.snapshot()
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
                    item.stop_request = StopRequest.PAUSE
                    item.stop.set()
                    return
                if item.state is not DownloadState.QUEUED:
                    return
                item.state = DownloadState.PAUSED
                self._save()
                snap = item.snapshot()
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
                queued = item.snapshot()
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
                    item.stop_request = StopRequest.CANCEL
                    item.stop.set()
                    return
                if item.state in (DownloadState.DONE, DownloadState.CANCELLED):
                    return
                self._delete_partials(item)
                item.state = DownloadState.CANCELLED
                self._save()
                snap = item.snapshot()
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
            return self._items[download_id].snapshot()

    def items(self) -> list[DownloadStatus]:
        """Snapshots of every download, oldest first (the queue order)."""
        with self._lock:
            return [i.snapshot() for i in self._items.values()]

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
            return self._items[download_id].snapshot()

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
        items, self.notice = load_queue(self.state_file)
        for it in items:
            it.done_bytes = it.bytes_on_disk()
            self._items[it.id] = it

    def _save(self) -> None:
        try:
            save_queue(self.state_file, self._items.values())
        except OSError as exc:
            log.warning("could not save the download list: %s", exc)

    def _check_space(self, item: DownloadItem) -> None:
        remaining = item.total_bytes - item.bytes_on_disk()
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

    def _emit(self, item: DownloadItem, status: DownloadStatus | None = None) -> None:
        """Wake waiters and call the listeners with ``status`` (default: a snapshot taken now).

        Never called with ``_lock`` held (lock order: ``_emit_lock`` then ``_lock``).
        """
        with self._emit_lock:
            with self._lock:
                if status is None:
                    status = item.snapshot()
                listeners = list(self._listeners)
                self._cond.notify_all()
            for cb in listeners:
                try:
                    cb(status)
                except Exception:
                    log.exception("download listener failed")

    def _progress(self, item: DownloadItem, done: int, *, force: bool = False) -> None:
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

    def _delete_partials(self, item: DownloadItem) -> None:
        for p in item.parts:
            if not p.installed:
                try:
                    p.part_path.unlink()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    log.warning("could not delete %s: %s", p.part_path, exc)
                p.verified = False
        item.done_bytes = item.bytes_on_disk()
        item.hash_cache = None

    # --- internals: the worker ----------------------------------------------------------------------
    def _next(self) -> DownloadItem | None:
        with self._cond:
            while not self._stopping:
                for item in self._items.values():
                    if item.state is DownloadState.QUEUED:
                        item.state = DownloadState.RUNNING
                        item.error = None
                        item.stop.clear()
                        item.stop_request = None
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
            except Stopped:
                with self._lock:
                    reason = item.stop_request
                    if reason is StopRequest.CANCEL:
                        self._delete_partials(item)
                        item.state = DownloadState.CANCELLED
                    elif reason is StopRequest.PAUSE:
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

    def _run(self, item: DownloadItem) -> None:
        if is_offline_mode():
            raise DownloadError(str(offline_error()))
        self._check_space(item)
        item.done_bytes = item.bytes_on_disk()
        for i, part in enumerate(item.parts):
            if part.installed or part.verified:
                continue
            item.part_index = i
            self._download_part(item, i, part)
            with self._lock:
                part.verified = True
                self._save()
        self._install(item)

    def _install(self, item: DownloadItem) -> None:
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

    def _download_part(self, item: DownloadItem, index: int, part: PartState) -> None:
        """Fetch one part until it is whole (retrying with backoff), then verify it."""
        part_path = part.part_path
        try:
            part_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DownloadError(f"cannot create the folder {part_path.parent}: {exc.strerror or exc}") from exc
        base = sum(p.size for p in item.parts[:index])
        failures = 0
        h = self._resume_hash(item, index, part)
        while True:
            check_stop(item.stop)
            have = part_path.stat().st_size if part_path.exists() else 0
            if have != h.hashed:  # the file is not what we hashed: hash it again
                h = self._hash_existing(item, index, part)
                have = h.hashed
            if have >= part.size:
                break
            try:
                fetch_part(
                    item,
                    part,
                    h,
                    token=self._token_now(),
                    chunk_size=self.chunk_size,
                    progress=lambda n: self._progress(item, base + n),
                )
            except Retryable as exc:
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
                    raise Stopped() from None
                with self._lock:
                    item.error = None
        self._verify(item, index, part, h)

    def _resume_hash(self, item: DownloadItem, index: int, part: PartState) -> RunningHash:
        """The hash kept from earlier in this run when it still matches the ``.part``, else a new one."""
        have = part.part_path.stat().st_size if part.part_path.exists() else 0
        if item.hash_cache and item.hash_cache[0] == index and item.hash_cache[1].hashed == have:
            return item.hash_cache[1]
        return self._hash_existing(item, index, part)

    def _hash_existing(self, item: DownloadItem, index: int, part: PartState) -> RunningHash:
        """Hash the bytes already in the ``.part`` (a resume after a restart); kept in ``hash_cache``."""
        h = RunningHash()
        item.hash_cache = (index, h)
        base = sum(p.size for p in item.parts[:index])
        hash_part_file(part, h, item.stop, lambda n: self._progress(item, base + n))
        return h

    def _verify(self, item: DownloadItem, index: int, part: PartState, h: RunningHash) -> None:
        try:
            verify_part(part, h)
        except ChecksumMismatch:
            item.hash_cache = None
            with self._lock:
                item.done_bytes = item.bytes_on_disk()
            raise
        item.hash_cache = None
        self._progress(item, sum(p.size for p in item.parts[: index + 1]), force=True)


__all__ = [
    "DISK_RESERVE",
    "PART_SUFFIX",
    "TERMINAL",
    "DownloadError",
    "DownloadManager",
    "DownloadState",
    "DownloadStatus",
    "InsufficientSpaceError",
    "PartState",
    "dest_dir_for",
    "disk_free",
]
