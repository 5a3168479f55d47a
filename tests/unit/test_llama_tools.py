"""packaging/llama_tools.py: llama-server / ggml-rpc-server from the wheel's build, or built on their own.

The builds themselves run in ``packaging/bootstrap.py test`` (and so in .ci/run); these check what the
wheel's build is given and keyed by, where the tools are found, the standalone cache entry, and that
the tests get the binaries' paths.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
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


def _fake_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *tools: str) -> Path:
    """A llama_cpp package that ``python`` finds first (PYTHONPATH), with ``tools`` in its lib folder."""
    lib = tmp_path / "site" / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    (lib.parent / "__init__.py").write_text("raise ImportError('located, never imported')\n")
    (lib / "libllama.so").write_bytes(b"\x7fELF")
    for name in tools:
        (lib / name).write_bytes(b"\x7fELF")
        (lib / name).chmod(0o755)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    return lib


def test_the_wheel_build_gets_the_hook_and_the_tool_names(tools: ModuleType, tmp_path: Path) -> None:
    assert tools.HOOK == ROOT / "packaging" / "llama_tools.cmake" and tools.HOOK.is_file()
    hook = tmp_path / "a checkout" / "llama_tools.cmake"
    # As scikit-build-core reads CMAKE_ARGS (shlex.split): two arguments, whatever the path holds.
    assert shlex.split(tools.wheel_cmake_args(hook)) == [
        f"-DCMAKE_PROJECT_INCLUDE={hook.as_posix()}",
        "-DGLASSBOX_LLAMA_TOOLS=llama-server;ggml-rpc-server;llama-quantize;llama-perplexity;llama-bench",
    ]
    assert set(tools.TARGETS) <= set(tools.WHEEL_TOOLS)  # the tests' two come from the wheel


def test_the_wheel_key_follows_the_hooks_content_not_its_path(
    tools: ModuleType, bootstrap: ModuleType, tmp_path: Path
) -> None:
    text = tools.HOOK.read_text(encoding="utf-8")
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        (tmp_path / where / "llama_tools.cmake").write_text(text, encoding="utf-8")
    ident = tools.wheel_tools_ident(tmp_path / "a" / "llama_tools.cmake")
    assert ident == tools.wheel_tools_ident(tmp_path / "b" / "llama_tools.cmake") == tools.wheel_tools_ident()
    assert all(name in ident for name in tools.WHEEL_TOOLS)
    (tmp_path / "b" / "llama_tools.cmake").write_text(text + "# edited\n", encoding="utf-8")
    assert tools.wheel_tools_ident(tmp_path / "b" / "llama_tools.cmake") != ident
    args = "-DGGML_NATIVE=OFF -DGGML_RPC=ON"
    # A wheel with the tools is a new entry; one without (the bundle's) keeps the key it had before.
    assert bootstrap.wheel_key("0.3.36", args, ident) != bootstrap.wheel_key("0.3.36", args)
    assert bootstrap.wheel_key("0.3.36", args, "") == bootstrap.wheel_key("0.3.36", args)


def test_the_wheels_tools_are_found_beside_libllama(
    tools: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = _fake_wheel(tmp_path, monkeypatch, "llama-server", "ggml-rpc-server")
    found, missing, where = tools.wheel_tools(Path(sys.executable))
    assert where == lib
    assert found == {"llama-server": lib / "llama-server", "ggml-rpc-server": lib / "ggml-rpc-server"}
    assert missing == []
    if os.name != "nt":
        (lib / "ggml-rpc-server").chmod(0o644)
        found, missing, _ = tools.wheel_tools(Path(sys.executable))
        assert list(found) == ["llama-server"] and missing == ["ggml-rpc-server"]


def test_no_python_or_no_llama_cpp_means_no_tools(tools: ModuleType, tmp_path: Path) -> None:
    assert tools.wheel_tools(tmp_path / "no-python") == ({}, ["llama-server", "ggml-rpc-server"], None)
    script = tmp_path / "python-without-llama-cpp"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -I -c 'print(\"\")'\n")
    script.chmod(0o755)
    if os.name != "nt":
        assert tools.wheel_tools(script) == ({}, ["llama-server", "ggml-rpc-server"], None)


def _test_command(bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, str]]:
    """``bootstrap.py test`` with setup, the checks, the model fetch and the final exec replaced."""
    envs: list[dict[str, str]] = []
    monkeypatch.setattr(bootstrap, "setup", lambda extras, verbose: Path(sys.executable))
    monkeypatch.setattr(bootstrap, "starter_cli", lambda *a: f"GLASSBOX_TEST_SMOLLM2={tmp_path / 'm.gguf'}\n")
    monkeypatch.setattr(bootstrap, "exec_in_venv", lambda py, argv, env, dry_run: envs.append(env) or 0)
    monkeypatch.setattr(bootstrap, "run_checks", lambda: None)
    monkeypatch.setenv("GLASSBOX_BUILD_CACHE", str(tmp_path / "cache"))
    return envs


def test_bootstrap_test_passes_the_wheels_binaries_to_pytest_without_building(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = _test_command(bootstrap, monkeypatch, tmp_path)
    lib = _fake_wheel(tmp_path, monkeypatch, "llama-server", "ggml-rpc-server")

    def no_build(*a: object, **k: object) -> dict[str, Path]:
        raise AssertionError("the wheel has both tools: nothing is built")

    monkeypatch.setattr(bootstrap.llama_tools(), "ensure_llama_tools", no_build)
    assert bootstrap.main(["test", "tests/unit"]) == 0
    (env,) = envs
    assert env["GLASSBOX_TEST_LLAMA_SERVER"] == str(lib / "llama-server")
    assert env["GLASSBOX_TEST_RPC_SERVER"] == str(lib / "ggml-rpc-server")
    assert "llama.cpp tools: llama-server, ggml-rpc-server from the wheel" in capsys.readouterr().out


def test_bootstrap_test_builds_the_tools_on_their_own_when_the_wheel_lacks_one(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wheel built with -DGGML_RPC=OFF has no rpc-server: both come from the standalone build's cache entry."""
    envs = _test_command(bootstrap, monkeypatch, tmp_path)
    _fake_wheel(tmp_path, monkeypatch, "llama-server")
    mod = bootstrap.llama_tools()
    entry = tmp_path / "cache" / "llama-tools" / mod.tools_key(bootstrap.llama_pin())
    _entry(mod, entry)
    assert bootstrap.main(["test", "tests/unit"]) == 0
    (env,) = envs
    assert env["GLASSBOX_TEST_LLAMA_SERVER"] == str(entry / "llama-server")
    assert env["GLASSBOX_TEST_RPC_SERVER"] == str(entry / "ggml-rpc-server")
    out = capsys.readouterr().out
    assert "has no ggml-rpc-server (CMAKE_ARGS without -DGGML_RPC=ON leave it out)" in out
    assert "cached llama-server and ggml-rpc-server" in out
