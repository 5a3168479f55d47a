"""The model library: sources (models folder, added folders, Hugging Face cache), header cache,
split models (H5), bad files, .part files (H1), last used, delete, import, unusual paths (H6)."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import pytest

from app.core.gguf.gguf_info import GGUFError
from app.core.models.library import (
    SOURCE_FOLDER,
    SOURCE_HF_CACHE,
    SOURCE_MODELS,
    ModelLibrary,
    hf_cache_dir,
)
from app.core.models.other_apps import folders_with_models, has_models, other_app, suggested_folders
from app.core.settings import Settings, SettingsStore
from app.paths import Paths, default_paths
from tests.support.model_twins import TwinFile
from tests.support.models import SMOLLM2_SIZE, write_split_model, write_tiny_model

SMOL_PARAMS = 134_515_008


def _link(src: Path, dest: Path) -> Path:
    """Hard-link (or copy) a file: the 98 MB model costs nothing per test."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)
    return dest


def _lib(paths: Paths, **kw) -> ModelLibrary:
    kw.setdefault("hf_cache", False)
    return ModelLibrary(paths, **kw)


def _by_name(entries) -> dict:
    return {e.path.name: e for e in entries}


def test_scan_lists_models_with_their_facts(gb_paths: Paths, smollm2_twin: TwinFile) -> None:
    smol = _link(smollm2_twin.path, gb_paths.models_dir / "SmolLM2-135M-Instruct.Q4_1.gguf")
    tiny = write_tiny_model(gb_paths.models_dir / "owner" / "Tiny-GGUF" / "tiny-Q4_0.gguf", name="Tiny Test")
    entries = _by_name(_lib(gb_paths).scan())
    assert set(entries) == {smol.name, tiny.name}
    e = entries[smol.name]
    assert e.ok and e.path == smol and e.paths == (smol,)
    assert (e.architecture, e.n_params, e.quant, e.size, e.context_length) == (
        "llama",
        SMOL_PARAMS,
        "Q4_1",
        SMOLLM2_SIZE,
        8192,
    )
    assert e.name == "Smollm2 135M 8k Lc100K Mix1 Ep2" and e.file_name == smol.name
    assert e.source == SOURCE_MODELS and e.last_used is None and e.folder == gb_paths.models_dir
    t = entries[tiny.name]
    assert t.ok and t.name == "Tiny Test" and t.repo_id == "owner/Tiny-GGUF" and t.quant == "Q4_0"


def test_bad_files_are_entries_with_errors_and_part_files_are_never_listed(
    gb_paths: Paths, smollm2_twin: TwinFile
) -> None:
    md = gb_paths.models_dir
    (md / "notes.gguf").write_text("these are my notes, not a model\n" * 4)
    (md / "empty.gguf").write_bytes(b"")
    (md / "old-ggml.gguf").write_bytes(b"tjgg" + b"\0" * 200)
    with open(smollm2_twin.path, "rb") as fh:
        (md / "cut-short.gguf").write_bytes(fh.read(3_000_000))
        (md / "download.gguf.part").write_bytes(fh.read(1000))  # an incomplete download (H1)
    write_tiny_model(md / "mmproj-vision-F16.gguf")  # a projector, not a model
    write_tiny_model(md / ".hidden" / "secret.gguf")
    entries = _by_name(_lib(gb_paths).scan())
    assert set(entries) == {"notes.gguf", "empty.gguf", "old-ggml.gguf", "cut-short.gguf"}
    expect = {"notes.gguf": "text file", "empty.gguf": "empty", "old-ggml.gguf": "GGJT", "cut-short.gguf": "cut short"}
    for name, problem in expect.items():
        e = entries[name]
        assert not e.ok and e.error.startswith(name) and problem in e.error, e.error


def test_rescan_of_unchanged_files_reads_no_header(gb_paths: Paths) -> None:
    for i in range(5):
        write_tiny_model(gb_paths.models_dir / f"t{i}-Q4_0.gguf", name=f"T{i}")
    lib = _lib(gb_paths)
    lib.scan()
    assert lib.headers_read == 5 and (gb_paths.cache_dir / "library-headers.json").is_file()
    lib.scan()
    assert lib.headers_read == 0
    again = _lib(gb_paths)  # a new run uses the cache on disk
    again.scan()
    assert again.headers_read == 0
    # A changed file (new mtime or size) is read again, and its new facts are shown.
    write_tiny_model(gb_paths.models_dir / "t0-Q4_0.gguf", name="Renamed", n_ctx_train=4096)
    st = (gb_paths.models_dir / "t0-Q4_0.gguf").stat()
    os.utime(gb_paths.models_dir / "t0-Q4_0.gguf", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    entries = _by_name(again.scan())
    assert again.headers_read == 1 and entries["t0-Q4_0.gguf"].name == "Renamed"
    assert entries["t0-Q4_0.gguf"].context_length == 4096
    # A file that disappears leaves the cache too.
    (gb_paths.models_dir / "t1-Q4_0.gguf").unlink()
    again.scan()
    assert not any("t1-Q4_0" in k for k in again._cache)


def test_h5_split_model_is_one_entry_and_a_missing_part_is_named(gb_paths: Paths) -> None:
    parts = write_split_model(gb_paths.models_dir, "Tiny-Split-Q4_0", 3)
    lib = _lib(gb_paths)
    [e] = lib.scan()
    assert e.ok and e.path == parts[0] and e.paths == tuple(parts) and e.is_split
    assert e.size == sum(p.stat().st_size for p in parts)
    assert e.file_name == "Tiny-Split-Q4_0.gguf (3 parts)" and e.name == "Tiny Split"
    from app.core.gguf.gguf_info import read_gguf_info

    assert e.n_params == sum(read_gguf_info(p).n_params for p in parts) > read_gguf_info(parts[0]).n_params
    parts[2].unlink()
    [e] = lib.scan()
    assert not e.ok and e.missing_parts == (parts[2],)
    assert parts[2].name in e.error and "1 of 3 parts missing" in e.error
    parts[0].unlink()  # even without the first part the model is listed, with both names
    [e] = lib.scan()
    assert parts[0].name in e.error and parts[2].name in e.error and e.path == parts[0]
    assert lib.find(parts[1]) == e


def _hf_cache_repo(cache: Path, repo_id: str, files: dict[str, Path], commit: str = "c0ffee" * 6 + "1234") -> Path:
    """Lay out a repo like huggingface_hub's cache: blobs/, snapshots/<commit>/ symlinks, refs/main."""
    import hashlib

    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    for name, src in files.items():
        blob_name = hashlib.sha256(name.encode()).hexdigest()
        blob = _link(src, repo / "blobs" / blob_name)
        link = snap / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snap


def test_models_in_the_hugging_face_cache_are_found(
    gb_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "shared hf cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    src = tmp_path / "src"
    tiny = write_tiny_model(src / "tiny.gguf", name="Cached Tiny")
    cfg = src / "config.json"
    cfg.write_text("{}")
    snap = _hf_cache_repo(cache, "someone/Tiny-GGUF", {"tiny-Q4_0.gguf": tiny, "config.json": cfg})
    split = write_split_model(src / "split", "S-Q8_0", 2)
    _hf_cache_repo(cache, "someone/Split-GGUF", {p.name: p for p in split})
    (cache / "models--someone--Tiny-GGUF" / "blobs" / "abc.incomplete").write_bytes(b"GGUF" + b"\0" * 64)
    assert hf_cache_dir() == cache
    entries = _by_name(ModelLibrary(gb_paths).scan())
    assert set(entries) == {"tiny-Q4_0.gguf", "S-Q8_0-00001-of-00002.gguf"}
    e = entries["tiny-Q4_0.gguf"]
    assert e.ok and e.source == SOURCE_HF_CACHE and e.repo_id == "someone/Tiny-GGUF"
    assert e.path == snap / "tiny-Q4_0.gguf" and e.name == "Cached Tiny" and "someone/Tiny-GGUF" in e.source_label
    s = entries["S-Q8_0-00001-of-00002.gguf"]
    assert s.ok and len(s.paths) == 2
    # HF_HOME alone points at HF_HOME/hub.
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert hf_cache_dir() == tmp_path / "hfhome" / "hub"
    assert ModelLibrary(gb_paths).scan() == []  # no cache there: nothing, no error
    assert _lib(gb_paths, hf_cache=cache).scan()[0].source == SOURCE_HF_CACHE


def test_added_folders_are_searched_recursively_without_duplicates(gb_paths: Paths, tmp_path: Path) -> None:
    home = tmp_path / "fake home"
    lms = home / ".lmstudio" / "models"
    write_tiny_model(lms / "lmstudio-community" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf", name="LM Tiny")
    assert suggested_folders(home) == [lms]
    gpt4all = home / ".local" / "share" / "nomic.ai" / "GPT4All"
    llama_cache = home / ".cache" / "llama.cpp"
    for f in (gpt4all, llama_cache, home / "Documents"):
        f.mkdir(parents=True)
    assert suggested_folders(home) == [lms, gpt4all, llama_cache]
    assert [other_app(f, home) for f in suggested_folders(home)] == ["LM Studio", "GPT4All", "llama.cpp"]
    # Only LM Studio's holds a model (a projector, a hidden file or a file of another kind is none).
    (gpt4all / "mmproj-x.gguf").write_bytes(b"GGUF")
    (llama_cache / ".hidden.gguf").write_bytes(b"GGUF")
    (llama_cache / "notes.txt").write_text("no model here")
    assert [has_models(f) for f in suggested_folders(home)] == [True, False, False]
    assert folders_with_models(home=home) == [lms]
    assert folders_with_models([lms], home=home) == []  # already in the library: not offered again
    assert not has_models(lms, max_folders=2)  # the model is 3 folders down: past a limit of 2
    own = write_tiny_model(gb_paths.models_dir / "mine-Q4_0.gguf")
    lib = _lib(gb_paths, folders=[lms, gb_paths.models_dir, tmp_path / "gone"])
    entries = _by_name(lib.scan())
    assert set(entries) == {"Tiny-Q4_K_M.gguf", own.name}
    e = entries["Tiny-Q4_K_M.gguf"]
    assert e.source == SOURCE_FOLDER and e.source_label == str(lms) and e.name == "LM Tiny"
    assert entries[own.name].source == SOURCE_MODELS  # listed once, under the first source


def test_folders_and_settings_round_trip(gb_paths: Paths, tmp_path: Path) -> None:
    store = SettingsStore(gb_paths.settings_file)
    s = Settings().with_library_folders([tmp_path / "a", tmp_path / "a", "~/models"])
    store.save(s)
    assert store.load().library_folders == (str(tmp_path / "a"), str(Path("~/models").expanduser()))


def test_last_used_is_remembered_and_sorts_first(gb_paths: Paths) -> None:
    a = write_tiny_model(gb_paths.models_dir / "a-Q4_0.gguf", name="Alpha")
    b = write_tiny_model(gb_paths.models_dir / "b-Q4_0.gguf", name="Beta")
    lib = _lib(gb_paths)
    assert [e.name for e in lib.scan()] == ["Alpha", "Beta"]
    lib.mark_used(b, when=1_700_000_000.0)
    assert lib.find(b).last_used == 1_700_000_000.0
    fresh = _lib(gb_paths).scan()
    assert [e.name for e in fresh] == ["Beta", "Alpha"] and fresh[0].last_used == 1_700_000_000.0
    assert fresh[1].last_used is None
    lib.mark_used(a)
    assert abs(_lib(gb_paths).scan()[0].last_used - time.time()) < 5


def test_delete_removes_every_part_and_empty_folders(gb_paths: Paths) -> None:
    folder = gb_paths.models_dir / "owner" / "Split-GGUF"
    parts = write_split_model(folder, "X-Q4_0", 3)
    single = write_tiny_model(gb_paths.models_dir / "keep-Q4_0.gguf")
    lib = _lib(gb_paths)
    entries = _by_name(lib.scan())
    split_entry = entries[parts[0].name]
    lib.mark_used(split_entry.path)
    assert sorted(lib.delete(split_entry)) == sorted(parts)
    assert not any(p.exists() for p in parts) and not (gb_paths.models_dir / "owner").exists()
    assert single.exists() and [e.path for e in lib.scan()] == [single]
    assert gb_paths.models_dir.is_dir()


def test_delete_from_the_hf_cache_removes_link_and_blob(gb_paths: Paths, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tiny = write_tiny_model(tmp_path / "t.gguf")
    snap = _hf_cache_repo(cache, "o/T-GGUF", {"t-Q4_0.gguf": tiny})
    blob = (snap / "t-Q4_0.gguf").resolve()
    lib = _lib(gb_paths, hf_cache=cache)
    [e] = lib.scan()
    deleted = lib.delete(e)
    assert snap / "t-Q4_0.gguf" in deleted and blob in deleted and not blob.exists()
    assert lib.scan() == []


def test_import_copies_atomically_and_validates(gb_paths: Paths, tmp_path: Path, smollm2_twin: TwinFile) -> None:
    src = _link(smollm2_twin.path, tmp_path / "Downloads" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    dest = gb_paths.models_dir / src.name
    seen_mid_copy: list[list] = []

    def progress(done: int, total: int) -> None:
        if done < total and not seen_mid_copy:  # while the copy is half done, nothing is listed
            seen_mid_copy.append(_lib(gb_paths).scan())

    lib = _lib(gb_paths)
    e = lib.import_file(src, progress=progress)
    assert seen_mid_copy == [[]]
    assert e.ok and e.path == dest and dest.stat().st_size == SMOLLM2_SIZE and src.exists()
    assert [p.name for p in gb_paths.models_dir.iterdir()] == [src.name]  # no temp file left
    with pytest.raises(FileExistsError):
        lib.import_file(src)
    bad = tmp_path / "Downloads" / "page.gguf"
    bad.write_text("<!DOCTYPE html><html>not a model</html>" * 5)
    with pytest.raises(GGUFError, match="web page"):
        lib.import_file(bad)


def test_import_that_fails_half_way_leaves_nothing(gb_paths: Paths, tmp_path: Path, smollm2_twin: TwinFile) -> None:
    src = _link(smollm2_twin.path, tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")

    def boom(done: int, total: int) -> None:
        if done > 16 << 20:
            raise KeyboardInterrupt  # the app quits mid-copy

    with pytest.raises(KeyboardInterrupt):
        _lib(gb_paths).import_file(src, progress=boom)
    assert list(gb_paths.models_dir.iterdir()) == [] and _lib(gb_paths).scan() == []


def test_import_moves_split_models_whole(gb_paths: Paths, tmp_path: Path) -> None:
    parts = write_split_model(tmp_path / "dl", "M-Q4_0", 3)
    e = _lib(gb_paths).import_file(parts[1], move=True)  # any part brings all of them
    assert e.ok and [p.name for p in e.paths] == [p.name for p in parts]
    assert not any(p.exists() for p in parts)
    parts2 = write_split_model(tmp_path / "dl2", "N-Q4_0", 3)
    parts2[2].unlink()
    with pytest.raises(FileNotFoundError, match=parts2[2].name):
        _lib(gb_paths).import_file(parts2[0])


def test_h6_unicode_paths_and_no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hf_isolated: Path) -> None:
    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "Тест Ünï 田中"))
    paths = default_paths().ensure()
    m = write_tiny_model(paths.models_dir / "Модель 田中" / "tiny model Q4_0.gguf", name="Ünï Tiny")

    def no_network(*a, **k):
        raise AssertionError("the library opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    lib = ModelLibrary(paths)
    [e] = lib.scan()
    assert e.ok and e.path == m and e.name == "Ünï Tiny"
    lib.mark_used(m)
    assert ModelLibrary(paths).scan()[0].last_used is not None


def test_one_file_reached_twice_is_one_entry_and_same_named_copies_are_two(gb_paths: Paths, tmp_path: Path) -> None:
    """Issue 20, defect 8: a hard link in a second library folder was a second entry (the total counted
    the file twice); a symlinked file or folder, and an overlapping folder, are the same file too."""
    first = tmp_path / "first"
    model = write_tiny_model(first / "m-Q4_0.gguf", name="Twin")
    hard, sym_file, sym_folder = tmp_path / "hard", tmp_path / "sym-file", tmp_path / "sym-folder"
    hard.mkdir()
    os.link(model, hard / model.name)
    sym_file.mkdir()
    (sym_file / model.name).symlink_to(model)
    sym_folder.symlink_to(first, target_is_directory=True)
    for second in (hard, sym_file, sym_folder, first, tmp_path):
        entries = _lib(gb_paths, folders=[first, second]).scan()
        assert [e.path for e in entries] == [model], second  # listed once, under the first folder
    # A copy is another file: two entries, each with its own folder.
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copyfile(model, copy / model.name)
    entries = _lib(gb_paths, folders=[first, copy]).scan()
    assert sorted(e.folder for e in entries) == sorted([first, copy])
