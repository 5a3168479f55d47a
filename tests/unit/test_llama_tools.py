"""packaging/llama_tools.py: the cache key and entry of llama-server / ggml-rpc-server, and bootstrap's hook.

The build itself runs in ``packaging/bootstrap.py test`` (and so in .ci/run); these check what decides
whether it runs, and that the tests get the binaries' paths.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, file: str) -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location(name, ROOT / "packaging" / file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def tools() -> Iterator[ModuleType]:
    yield from _load("glassbox_llama_tools_test", "llama_tools.py")


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[ModuleType]:
    yield from _load("glassbox_bootstrap_tools_test", "bootstrap.py")


def test_the_key_changes_with_the_version_and_the_options(tools: ModuleType) -> None:
    key = tools.tools_key("0.3.36")
    assert key == tools.tools_key("0.3.36")
    assert key != tools.tools_key("0.3.37")
    assert key != tools.tools_key("0.3.36", (*tools.TOOL_CMAKE_ARGS, "-DGGML_CUDA=ON"))


def test_the_build_is_portable_with_rpc_and_without_the_web_ui(tools: ModuleType) -> None:
    args = set(tools.TOOL_CMAKE_ARGS)
    assert {"-DGGML_NATIVE=OFF", "-DGGML_RPC=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF"} <= args
    assert set(tools.TARGETS) == {"llama-server", "ggml-rpc-server"}


def _entry(tools: ModuleType, key_dir: Path, *, info: bool = True, executable: bool = True) -> None:
    key_dir.mkdir(parents=True)
    for name in tools.TARGETS.values():
        p = key_dir / name
        p.write_bytes(b"\x7fELF")
        p.chmod(0o755 if executable else 0o644)
    if info:
        (key_dir / "build-info.json").write_text(json.dumps({"version": "0.3.36"}))


def test_a_finished_entry_is_reused_without_building(tools: ModuleType, tmp_path: Path) -> None:
    key_dir = tmp_path / "llama-tools" / tools.tools_key("0.3.36")
    _entry(tools, key_dir)
    said: list[str] = []

    def no_error(*a: object) -> Exception:
        raise AssertionError(f"no error expected: {a}")

    found = tools.ensure_llama_tools(Path("/nonexistent/python"), "0.3.36", tmp_path, no_error, said.append)
    assert found == {t: key_dir / n for t, n in tools.TARGETS.items()}
    assert "cached" in said[0]
    env = tools.tool_env(found)
    assert env == {
        "GLASSBOX_TEST_LLAMA_SERVER": str(key_dir / "llama-server"),
        "GLASSBOX_TEST_RPC_SERVER": str(key_dir / "ggml-rpc-server"),
    }


@pytest.mark.parametrize("damage", ["no build-info", "not executable"])
def test_a_damaged_entry_is_removed(tools: ModuleType, tmp_path: Path, damage: str) -> None:
    key_dir = tmp_path / "k"
    _entry(tools, key_dir, info=damage != "no build-info", executable=damage != "not executable")
    assert tools.cached_tools(key_dir) is None
    if damage == "not executable" and os.name != "nt":
        assert not key_dir.exists()


def test_bootstrap_test_passes_the_binaries_to_pytest(bootstrap: ModuleType, monkeypatch, tmp_path: Path) -> None:
    envs: list[dict[str, str]] = []
    monkeypatch.setattr(bootstrap, "setup", lambda extras, verbose: Path(sys.executable))
    monkeypatch.setattr(bootstrap, "starter_cli", lambda *a: f"GLASSBOX_TEST_SMOLLM2={tmp_path / 'm.gguf'}\n")
    monkeypatch.setattr(bootstrap, "exec_in_venv", lambda py, argv, env, dry_run: envs.append(env) or 0)
    monkeypatch.setattr(bootstrap, "run_checks", lambda: None)
    monkeypatch.setenv("GLASSBOX_BUILD_CACHE", str(tmp_path))
    key_dir = tmp_path / "llama-tools"
    spec = importlib.util.spec_from_file_location("glassbox_llama_tools_key", ROOT / "packaging" / "llama_tools.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    entry = key_dir / mod.tools_key(bootstrap.llama_pin())
    _entry(mod, entry)
    assert bootstrap.main(["test", "tests/unit"]) == 0
    (env,) = envs
    assert env["GLASSBOX_TEST_LLAMA_SERVER"] == str(entry / "llama-server")
    assert env["GLASSBOX_TEST_RPC_SERVER"] == str(entry / "ggml-rpc-server")
