"""The import loop (app.core.models.importer): GGUF files copied into the models folder, non-GGUF names
skipped, bad files and name conflicts reported per file, split models whole, progress throttled,
cancel mid-copy leaving nothing behind."""

from __future__ import annotations

from pathlib import Path

from app.core.models.importer import PROGRESS_INTERVAL, import_files, is_gguf_name
from app.core.models.library import COPY_CHUNK, ModelLibrary
from app.paths import Paths
from tests.support.fixtures import *  # noqa: F403 - gb_paths, hf_isolated, no_leaks
from tests.support.models import llama_metadata, llama_tensors, write_gguf, write_split_model, write_tiny_model


def _lib(paths: Paths) -> ModelLibrary:
    return ModelLibrary(paths, hf_cache=False)


def _big(path: Path) -> Path:
    """A ~80 MB model of zeros (sparse on disk), several copy blocks long."""
    shape = dict(n_layer=6, n_embd=1024)
    return write_gguf(path, llama_metadata(**shape, file_type=7), llama_tensors(**shape, qtype="Q8_0"))


def test_gguf_files_are_imported_bad_ones_reported_and_other_names_skipped(gb_paths: Paths, tmp_path: Path) -> None:
    good = write_tiny_model(tmp_path / "in" / "good-Q4_0.gguf", name="Good")
    bad = tmp_path / "in" / "not-a-model.gguf"
    bad.write_bytes(b"hello")
    notes = tmp_path / "in" / "notes.txt"
    notes.write_text("not a model")
    lib = _lib(gb_paths)
    result = import_files(lib, [str(good), str(bad), str(notes)])
    assert [e.name for e in result.imported] == ["Good"]
    assert (gb_paths.models_dir / good.name).read_bytes() == good.read_bytes() and good.exists()
    assert len(result.errors) == 1 and result.errors[0].startswith("not-a-model.gguf")
    assert result.skipped == [str(notes)] and not result.cancelled
    assert sorted(p.name for p in gb_paths.models_dir.iterdir()) == [good.name]  # no temporary file left
    assert [e.path.name for e in lib.entries] == [good.name]


def test_a_name_already_in_the_models_folder_is_reported_not_overwritten(gb_paths: Paths, tmp_path: Path) -> None:
    first = write_tiny_model(tmp_path / "a" / "same-Q4_0.gguf", name="First")
    second = write_tiny_model(tmp_path / "b" / "same-Q4_0.gguf", name="Second", n_layer=3)
    lib = _lib(gb_paths)
    assert [e.name for e in import_files(lib, [first]).imported] == ["First"]
    result = import_files(lib, [second])
    assert result.imported == []
    assert result.errors == ["same-Q4_0.gguf: same-Q4_0.gguf is already in the models folder"]
    assert (gb_paths.models_dir / "same-Q4_0.gguf").read_bytes() == first.read_bytes()


def test_split_models_come_whole_and_a_missing_part_is_named(gb_paths: Paths, tmp_path: Path) -> None:
    parts = write_split_model(tmp_path / "dl", "M-Q4_0", 3)
    other = write_split_model(tmp_path / "dl2", "N-Q4_0", 3)
    other[1].unlink()
    result = import_files(_lib(gb_paths), [parts[2], other[0]])
    [entry] = result.imported
    assert entry.is_split and [p.name for p in entry.paths] == [p.name for p in parts]
    assert all((gb_paths.models_dir / p.name).is_file() for p in parts) and all(p.exists() for p in parts)
    assert result.errors == [f"{other[0].name}: missing: {other[1]}"]


def test_progress_is_throttled_per_file_and_always_reports_the_end(gb_paths: Paths, tmp_path: Path) -> None:
    big = _big(tmp_path / "in" / "big-Q8_0.gguf")
    tiny = write_tiny_model(tmp_path / "in" / "tiny-Q4_0.gguf")
    size = big.stat().st_size
    assert size > 4 * COPY_CHUNK
    now = [0.0]

    def clock() -> float:  # each call a third of the interval later: one report per three blocks
        now[0] += PROGRESS_INTERVAL / 3
        return now[0]

    seen: list[tuple[str, int, int]] = []
    result = import_files(_lib(gb_paths), [big, tiny], progress=lambda *a: seen.append(a), clock=clock)
    assert len(result.imported) == 2 and result.errors == []
    big_reports = [s for s in seen if s[0] == big.name]
    blocks = -(-size // COPY_CHUNK)
    assert 1 < len(big_reports) < blocks  # some blocks were not reported
    assert big_reports[0] == (big.name, COPY_CHUNK, size)  # the first block is reported
    assert big_reports[-1] == (big.name, size, size)  # and the last
    assert [d for _, d, _ in big_reports] == sorted(d for _, d, _ in big_reports)
    assert seen[-1] == (tiny.name, tiny.stat().st_size, tiny.stat().st_size)


def test_cancel_mid_copy_removes_the_partial_file_and_stops(gb_paths: Paths, tmp_path: Path) -> None:
    big = _big(tmp_path / "in" / "big-Q8_0.gguf")
    later = write_tiny_model(tmp_path / "in" / "later-Q4_0.gguf")
    stop = [False]

    def progress(name: str, done: int, total: int) -> None:
        stop[0] = True  # cancelled after the first block

    result = import_files(_lib(gb_paths), [big, later], progress=progress, cancelled=lambda: stop[0])
    assert result.cancelled and result.imported == []
    assert result.errors == [f"{big.name}: import cancelled"]
    assert list(gb_paths.models_dir.iterdir()) == []  # neither the partial copy nor the later file


def test_cancel_before_the_first_file_imports_nothing(gb_paths: Paths, tmp_path: Path) -> None:
    tiny = write_tiny_model(tmp_path / "tiny-Q4_0.gguf")
    result = import_files(_lib(gb_paths), [tiny], cancelled=lambda: True)
    assert result.cancelled and result.imported == [] and result.errors == ["tiny-Q4_0.gguf: import cancelled"]
    assert not (gb_paths.models_dir / tiny.name).exists()


def test_is_gguf_name() -> None:
    assert is_gguf_name("a/B.GGUF") and is_gguf_name(Path("x.gguf"))
    assert not is_gguf_name("x.gguf.part") and not is_gguf_name("notes.txt")
