"""Moving one file's bytes: a ranged HTTP GET appended to its ``.part``, hashed on the way, then checked.

The manager (:mod:`app.core.models.downloads`) owns the queue, the retries and the
threads; this module does one attempt at a time and says how it ended:

* :func:`fetch_part`: one ranged GET (``Range: bytes=<bytes already hashed>-``)
  on huggingface_hub's own session, URL and headers, appended to the ``.part``.
  Raises :class:`Retryable` for what is worth another try (dropped connection,
  timeout, 429, 5xx, a wrong resume offset), :class:`~app.core.models.download_items.DownloadError`
  for what is not (401/403, 404, a full disk), :class:`Stopped` when asked to stop.
* :func:`hash_part_file`: hash what a ``.part`` already holds (a resume after a restart).
* :func:`verify_part`: the size and sha256 must equal the Hub's listing.

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
5. When every part is verified the manager renames them to their final names with
   ``os.replace`` (atomic), the first part last, so the library sees a split
   model only once all its parts are in place.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from huggingface_hub import hf_hub_url
from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.utils import build_hf_headers, get_session

from app.core.gguf.gguf_info import format_bytes
from app.core.models.download_items import DownloadError, DownloadItem, PartState, RunningHash
from app.core.models.hub_http import (
    CONNECT_TIMEOUT,
    LIBRARY_NAME,
    READ_TIMEOUT,
    HubOfflineError,
    auth_error,
    httpx2,
    offline_error,
    scrub,
)

log = logging.getLogger(__name__)

HASH_BLOCK = 4 << 20  # bytes read at a time when hashing an existing .part


class Stopped(Exception):
    """The worker was asked to stop (pause, cancel or shutdown)."""


class Retryable(Exception):
    """A transient failure worth retrying; ``str(error)`` says what happened (token scrubbed)."""


class ChecksumMismatch(DownloadError):
    """The finished ``.part`` has the wrong sha256; it was deleted."""


def open_for_append(path: Path) -> BinaryIO:
    """Open a ``.part`` file for appending (tests replace this to simulate a full disk)."""
    return open(path, "ab")


def check_stop(stop: threading.Event) -> None:
    """Raises :class:`Stopped` when ``stop`` is set."""
    if stop.is_set():
        raise Stopped()


def fetch_part(
    item: DownloadItem,
    part: PartState,
    h: RunningHash,
    *,
    token: str | None,
    chunk_size: int,
    progress: Callable[[int], None],
) -> None:
    """One ranged GET appended to the ``.part``; ``h`` follows every byte written.

    Args:
        item: the download (its repo, revision, endpoint and ``stop`` event).
        part: the file to fetch.
        h: the running hash of the bytes already in the ``.part``; the request
            starts at ``h.hashed`` bytes.
        token: the Hugging Face token to send, or None.
        chunk_size: bytes per network read.
        progress: called with the bytes of this part now in the ``.part``.

    Raises:
        Retryable: worth another try (connection trouble, 429, 5xx, early close).
        Stopped: ``item.stop`` was set.
        DownloadError: it cannot go on (access refused, gone from the Hub, disk full...).
    """
    url = hf_hub_url(item.repo_id, part.filename, revision=item.revision, endpoint=item.endpoint)
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
                raise Retryable("the server rejected the resume offset")
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
                raise Retryable(f"HTTP {status}")
            if status >= 400:
                raise DownloadError(f"the Hub answered HTTP {status} for {part.filename}")
            if status == 206:
                start = r.headers.get("Content-Range", "bytes -").split()[-1].split("-")[0]
                if not start.isdigit() or int(start) != h.hashed:
                    raise Retryable(f"the server resumed at the wrong offset ({start}, wanted {h.hashed})")
            elif h.hashed:  # 200: the server ignored the Range; start this part over
                log.info("server ignored Range for %s; restarting it", part.filename)
                part.part_path.unlink(missing_ok=True)
                h.hasher, h.hashed = hashlib.sha256(), 0
            try:
                fh = open_for_append(part.part_path)
            except OSError as exc:
                raise write_error(part, h.hashed, exc) from None
            try:
                with fh:
                    for chunk in r.iter_raw(chunk_size):
                        if h.hashed + len(chunk) > part.size:
                            raise DownloadError(
                                f"{part.filename}: the server sent more than the {part.size:,} bytes the Hub lists"
                            )
                        fh.write(chunk)
                        h.hasher.update(chunk)
                        h.hashed += len(chunk)
                        progress(h.hashed)
                        if item.stop.is_set():
                            break
            except OSError as exc:
                raise write_error(part, h.hashed, exc) from None
            check_stop(item.stop)
            if h.hashed < part.size:
                raise Retryable("the connection closed early")
    except (DownloadError, Stopped, Retryable):
        raise
    except HubOfflineError as exc:  # could not connect
        raise Retryable(str(exc)) from None
    except OfflineModeIsEnabled:
        raise DownloadError(str(offline_error())) from None
    except httpx2.TransportError as exc:  # dropped, reset, timed out
        raise Retryable(scrub(f"{type(exc).__name__}: {exc}", token)) from None


def write_error(part: PartState, have: int, exc: OSError) -> DownloadError:
    """The message for a failed write to the ``.part`` (a full disk says how full, and that it can resume).

    Args:
        part: the file being written.
        have: bytes of it already written.
        exc: what the write raised.
    """
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


def hash_part_file(part: PartState, h: RunningHash, stop: threading.Event, progress: Callable[[int], None]) -> None:
    """Feed ``h`` (a fresh hash) the bytes already in the ``.part`` (a resume after a restart).

    A ``.part`` longer than the file is not ours: it is deleted and ``h`` stays empty.

    Args:
        part: the file.
        h: a new :class:`RunningHash`; the caller may keep it to resume from it.
        stop: checked between blocks.
        progress: called with the bytes hashed so far.

    Raises:
        Stopped: ``stop`` was set (``h`` holds what was hashed until then).
        OSError: the ``.part`` cannot be read.
    """
    path = part.part_path
    if not path.exists():
        return
    if path.stat().st_size > part.size:  # longer than the file: not ours
        path.unlink()
        return
    with open(path, "rb") as fh:
        while block := fh.read(HASH_BLOCK):
            h.hasher.update(block)
            h.hashed += len(block)
            check_stop(stop)
            progress(h.hashed)


def verify_part(part: PartState, h: RunningHash) -> None:
    """Check a finished ``.part`` against the Hub's listing, then flush it to disk.

    Raises:
        DownloadError: its size is not the listed one.
        ChecksumMismatch: its sha256 is not the listed one; the ``.part`` was deleted.
    """
    path = part.part_path
    size = path.stat().st_size
    if size != part.size or h.hashed != size:
        raise DownloadError(f"{part.filename}: got {size:,} bytes, the Hub lists {part.size:,}")
    if part.sha256:
        digest = h.hasher.hexdigest()
        if digest != part.sha256.lower():
            path.unlink(missing_ok=True)
            raise ChecksumMismatch(
                f"{part.filename}: the downloaded file's sha256 ({digest[:16]}…) does not match the one the "
                f"Hub lists ({part.sha256[:16]}…): it was damaged on the way. The damaged file was deleted; "
                "resume to download it again."
            )
    try:
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())
    except OSError:
        pass
