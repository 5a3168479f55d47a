"""check_loadable: the one file check the window and the engine both run before a load."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.gguf.gguf_info import GGUFError, MissingSplitParts, check_loadable
from tests.support.models import write_split_model, write_tiny_model


def test_a_whole_model_passes_and_its_info_comes_back(tmp_path: Path) -> None:
    path = write_tiny_model(tmp_path / "tiny.gguf")
    info = check_loadable(path)
    assert info.name == "Tiny Test" and info.n_layer > 0


def test_a_split_model_with_every_part_passes(tmp_path: Path) -> None:
    parts = write_split_model(tmp_path, "Split-Q4_0", 3)
    assert check_loadable(parts[0]).split_paths() == parts


@pytest.mark.parametrize("gone", [[1], [1, 2]])
def test_missing_parts_are_named_with_what_to_do(tmp_path: Path, gone: list[int]) -> None:
    parts = write_split_model(tmp_path, "Split-Q4_0", 3)
    for i in gone:
        parts[i].unlink()
    with pytest.raises(MissingSplitParts) as exc:
        check_loadable(parts[0])
    names = ", ".join(parts[i].name for i in gone)
    verb = "is" if len(gone) == 1 else "are"
    assert exc.value.missing == tuple(parts[i] for i in gone)
    assert exc.value.message == (
        f"{parts[0].name}: this model is split into 3 files and {names} {verb} missing. "
        "Download the missing part(s) into the same folder."
    )


def test_an_unreadable_file_raises_the_readers_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.gguf"
    bad.write_text("hello")
    with pytest.raises(GGUFError) as exc:
        check_loadable(bad)
    assert not isinstance(exc.value, MissingSplitParts)
    assert exc.value.message.startswith("notes.gguf: ")
