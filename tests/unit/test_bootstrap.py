"""packaging/bootstrap.py: the pieces that decide what gets built and reused.

The script is loaded from its file (it is not a package module: it runs before any
virtual environment exists). The full setup is exercised by ``.ci/run`` itself.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bootstrap() -> ModuleType:
    spec = importlib.util.spec_from_file_location("glassbox_bootstrap", ROOT / "packaging" / "bootstrap.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_pin_comes_from_pyproject(bootstrap: ModuleType) -> None:
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert f"llama-cpp-python=={bootstrap.llama_pin()}" in deps


def test_the_pin_is_found_without_tomllib(
    bootstrap: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = [\n  "numpy>=1",\n  "llama_cpp_python == 1.2.3",\n]\n')
    assert bootstrap.llama_pin(pyproject) == "1.2.3"
    monkeypatch.setitem(sys.modules, "tomllib", None)  # as on Python 3.10
    assert bootstrap.llama_pin(pyproject) == "1.2.3"
    pyproject.write_text('[project]\ndependencies = ["llama-cpp-python>=0.3"]\n')
    with pytest.raises(bootstrap.SetupError, match="does not pin"):
        bootstrap.llama_pin(pyproject)


def test_cmake_args_default_override_and_memory(bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    assert bootstrap.effective_cmake_args(None)[0] == "-DGGML_NATIVE=OFF"
    assert bootstrap.effective_cmake_args("-DGGML_NATIVE=OFF -DGGML_CUDA=on")[0] == "-DGGML_NATIVE=OFF -DGGML_CUDA=on"
    monkeypatch.setenv("CMAKE_ARGS", "  -DGGML_CUDA=on ")
    assert bootstrap.effective_cmake_args(None)[0] == "-DGGML_NATIVE=OFF -DGGML_CUDA=on"
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_NATIVE=ON")
    assert bootstrap.effective_cmake_args("-DGGML_CUDA=on")[0] == "-DGGML_NATIVE=ON"


def test_the_wheel_key_follows_what_changes_the_binary(bootstrap: ModuleType) -> None:
    key = bootstrap.wheel_key("0.3.36", "-DGGML_NATIVE=OFF")
    assert key == bootstrap.wheel_key("0.3.36", "-DGGML_NATIVE=OFF")
    assert key != bootstrap.wheel_key("0.3.36", "-DGGML_NATIVE=OFF -DGGML_CUDA=on")
    assert key != bootstrap.wheel_key("0.3.37", "-DGGML_NATIVE=OFF")


def test_cache_folders_honour_the_environment(
    bootstrap: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLASSBOX_BUILD_CACHE", str(tmp_path / "bc"))
    monkeypatch.delenv("GLASSBOX_TEST_MODELS_DIR", raising=False)
    assert bootstrap.build_cache_root() == tmp_path / "bc"
    assert bootstrap.test_models_dir() == tmp_path / "bc" / "test-models"
    monkeypatch.setenv("GLASSBOX_TEST_MODELS_DIR", str(tmp_path / "tm"))
    assert bootstrap.test_models_dir() == tmp_path / "tm"
    if sys.platform.startswith("linux"):
        monkeypatch.delenv("GLASSBOX_BUILD_CACHE")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert bootstrap.build_cache_root() == tmp_path / "xdg" / "glassbox-build"


def test_only_a_finished_cache_entry_is_reused(
    bootstrap: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "key"
    entry.mkdir()
    wheel = entry / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llama_cpp/__init__.py", "")
    assert bootstrap.cached_wheel(entry, "0.3.36") is None  # no build-info.json: not finished
    (entry / "build-info.json").write_text(json.dumps({"version": "0.3.36"}))
    assert bootstrap.cached_wheel(entry, "0.3.36") == wheel
    wheel.write_bytes(b"truncated")
    assert bootstrap.cached_wheel(entry, "0.3.36") is None
    assert not entry.exists()  # the damaged entry is removed, so it is rebuilt
    assert "damaged" in capsys.readouterr().out


def test_ci_runs_exactly_the_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in script
    assert script.strip().splitlines()[-1] == 'exec python3 packaging/bootstrap.py test "$@"'


def test_missing_x11_libraries_become_package_names(bootstrap: ModuleType) -> None:
    assert bootstrap.debian_package("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert bootstrap.debian_package("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert bootstrap.debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
