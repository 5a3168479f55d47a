"""app.engine.backends: a GGML_BACKEND_DL build's CPU variants are found and loaded; other builds are left alone."""

from __future__ import annotations

import pytest

from app.engine import backends


def test_a_build_with_the_cpu_backend_linked_in_has_nothing_to_load(tmp_path):
    for name in ("libggml.so", "libggml-base.so", "libggml-cpu.so", "libggml-cpu.so.0", "libllama.so"):
        (tmp_path / name).write_bytes(b"")
    assert backends.cpu_variants(tmp_path) == []
    assert backends.load_backends(tmp_path) is None  # returns before opening any library


def test_the_variants_of_an_all_variants_build_are_listed(tmp_path):
    names = ["libggml-cpu-haswell.so", "libggml-cpu-x64.so", "libggml-cpu-zen4.so", "libggml-cpu.so.0"]
    for name in [*names, "libggml.so"]:
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in backends.cpu_variants(tmp_path)] == names[:3]


def test_variants_without_a_loadable_libggml_raise_oserror(tmp_path):
    (tmp_path / "libggml-cpu-x64.so").write_bytes(b"")
    with pytest.raises(OSError, match="no libggml"):
        backends.load_backends(tmp_path)


def test_the_library_folder_is_llama_cpps_and_todays_build_loads_no_variant():
    lib = backends.library_dir()
    assert lib.name == "lib" and lib.parent.name == "llama_cpp" and any(lib.glob("libllama*"))
    # In this (test) process no dynamic CPU backend is mapped.
    assert backends.loaded_cpu_variant() is None
