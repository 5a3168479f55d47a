"""packaging/bootstrap.py: the pieces that decide what gets built and reused.

The script is loaded from its file (it is not a package module: it runs before any
virtual environment exists). The full setup is exercised by ``.ci/run`` itself.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("glassbox_bootstrap", ROOT / "packaging" / "bootstrap.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as the import system does (dataclasses look their module up there)
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


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
    assert bootstrap.effective_cmake_args(None)[0] == "-DGGML_NATIVE=OFF -DGGML_RPC=ON"
    assert bootstrap.effective_cmake_args("-DGGML_NATIVE=OFF -DGGML_CUDA=on")[0] == "-DGGML_NATIVE=OFF -DGGML_CUDA=on"
    monkeypatch.setenv("CMAKE_ARGS", "  -DGGML_CUDA=on ")
    assert bootstrap.effective_cmake_args(None)[0] == "-DGGML_NATIVE=OFF -DGGML_CUDA=on"
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_NATIVE=ON")
    assert bootstrap.effective_cmake_args("-DGGML_CUDA=on")[0] == "-DGGML_NATIVE=ON"


def test_a_setup_remembered_with_the_earlier_default_gets_the_rpc_backend(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    args, origin = bootstrap.effective_cmake_args("-DGGML_NATIVE=OFF")  # what setups before RPC remembered
    assert args == "-DGGML_NATIVE=OFF -DGGML_RPC=ON"
    assert "RPC" in origin and "-DGGML_NATIVE=OFF" in origin
    assert bootstrap.wheel_key("0.3.36", args) != bootstrap.wheel_key("0.3.36", "-DGGML_NATIVE=OFF")  # rebuilt once
    # A choice of the person's own is kept as it is; one without RPC says how to add it.
    assert bootstrap.effective_cmake_args("-DGGML_NATIVE=OFF -DGGML_RPC=OFF")[0] == "-DGGML_NATIVE=OFF -DGGML_RPC=OFF"
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_CUDA=on")
    args, origin = bootstrap.effective_cmake_args(None)
    assert args == "-DGGML_NATIVE=OFF -DGGML_CUDA=on"
    assert "-DGGML_RPC=ON" in origin
    # The bundle's options are its own: no RPC backend added (its all-variants build is long).
    monkeypatch.setenv("CMAKE_ARGS", bootstrap.BUNDLE_CMAKE_ARGS)
    assert bootstrap.effective_cmake_args(None)[0] == bootstrap.BUNDLE_CMAKE_ARGS


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
    commands = [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    # The README's test command, first, as a plain command: under `set -e` its failure is CI's failure.
    assert commands[:3] == [
        "set -euo pipefail",
        'cd "$(dirname "${BASH_SOURCE[0]}")/.."',
        'python3 packaging/bootstrap.py test "$@"',
    ]


def test_ci_then_builds_the_bundle_and_self_tests_it() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands.index("python3 packaging/bootstrap.py bundle") > commands.index(
        'python3 packaging/bootstrap.py test "$@"'
    )
    assert any(
        '"$bundle" --self-test' in c and "QT_QPA_PLATFORM=offscreen" in c and "env -u PYTHONPATH" in c for c in commands
    )


def test_missing_x11_libraries_become_package_names(bootstrap: ModuleType) -> None:
    assert bootstrap.debian_package("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert bootstrap.debian_package("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert bootstrap.debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"


# --------------------------------------------------------------------------- guardrails before pytest

FAKE_TOOL = """\
import json, os, sys
tool, args = sys.argv[1], sys.argv[2:]
with open(os.environ["FAKE_TOOL_RECORD"], "a", encoding="utf-8") as f:
    f.write(json.dumps([tool, *args, os.getcwd()]) + "\\n")
fail = os.environ.get("FAKE_TOOL_FAIL", "")
if fail and fail == " ".join([tool, *args]):
    print("app/core/example.py:3: error: PySide6 imported by app.core.example")
    sys.exit(2)
print(tool, "all good")
"""


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stand-in for the venv's ruff, mypy and lint-imports: records each call, fails on request."""
    script = tmp_path / "fake_tool.py"
    script.write_text(FAKE_TOOL, encoding="utf-8")
    record = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_TOOL_RECORD", str(record))
    monkeypatch.delenv("FAKE_TOOL_FAIL", raising=False)

    def command(tool: str) -> list[str]:
        return [sys.executable, str(script), tool]

    def calls() -> list[list[str]]:
        if not record.exists():
            return []
        return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]

    return command, calls


def test_the_checks_are_ruff_format_mypy_and_import_contracts(bootstrap: ModuleType) -> None:
    titles = [c.title for c in bootstrap.CHECKS]
    assert titles == ["ruff check .", "ruff format --check .", "mypy", "lint-imports"]
    assert all(c.what for c in bootstrap.CHECKS)


def test_the_test_extra_installs_every_check_tool(bootstrap: ModuleType) -> None:
    tomllib = pytest.importorskip("tomllib")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {re.split(r"[=<>!~ \[;]", dep, maxsplit=1)[0].lower() for dep in extra["test"]}
    distribution = {"ruff": "ruff", "mypy": "mypy", "lint-imports": "import-linter"}
    assert {distribution[c.tool] for c in bootstrap.CHECKS} <= names


def test_checks_run_in_order_from_the_root_one_line_each(
    bootstrap: ModuleType, fake_tools, capsys: pytest.CaptureFixture[str]
) -> None:
    command, calls = fake_tools
    bootstrap.run_checks(command=command)
    assert calls() == [
        ["ruff", "check", ".", str(ROOT)],
        ["ruff", "format", "--check", ".", str(ROOT)],
        ["mypy", str(ROOT)],
        ["lint-imports", str(ROOT)],
    ]
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[glassbox] check:")]
    assert len(lines) == 4
    for line, check in zip(lines, bootstrap.CHECKS, strict=True):
        assert f"check: {check.title}: {check.what}: ok (" in line
        assert re.search(r"\(\d+\.\d s\)$", line), line  # how long it took


def test_a_failing_check_stops_with_its_output_and_how_to_reproduce_it(
    bootstrap: ModuleType, fake_tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    command, calls = fake_tools
    monkeypatch.setenv("FAKE_TOOL_FAIL", "mypy")
    with pytest.raises(bootstrap.SetupError) as info:
        bootstrap.run_checks(command=command)
    err = info.value
    assert "check mypy failed (exit code 2)" in err.what
    assert "PySide6 imported by app.core.example" in err.detail
    assert err.todo.endswith(" ".join(bootstrap.shown(a) for a in command("mypy")))
    assert [c[0] for c in calls()] == ["ruff", "ruff", "mypy"]  # lint-imports never ran


def test_the_command_to_reproduce_is_the_venv_tool_from_the_root(bootstrap: ModuleType, tmp_path: Path) -> None:
    tool = bootstrap.venv_tool("ruff")
    assert tool.parent.parent == bootstrap.VENV
    assert bootstrap.shown(str(tool)) == str(Path(".venv") / tool.parent.name / tool.name)
    assert bootstrap.shown(str(tmp_path / "x")) == str(tmp_path / "x")  # outside the repository: unchanged
    assert bootstrap.shown("--check") == "--check"


def test_a_check_that_cannot_start_says_how_to_reinstall(bootstrap: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(bootstrap.SetupError, match=r"check mypy could not start") as info:
        bootstrap.run_checks(bootstrap.CHECKS[2:3], command=lambda tool: [str(tmp_path / "no-such-tool")])
    assert str(bootstrap.STAMP) in info.value.todo


def _test_command(bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, checks) -> list:
    """Run ``bootstrap.py test`` with setup, the model fetch and the final exec replaced; returns the exec calls."""
    setups: list[list[str]] = []
    execs: list[list[str]] = []

    def fake_setup(extras, verbose):
        setups.append(list(extras))
        return Path(sys.executable)

    def fake_exec(py, argv, env, dry_run):
        execs.append(list(argv))
        return 0

    monkeypatch.setattr(bootstrap, "setup", fake_setup)
    monkeypatch.setattr(bootstrap, "starter_cli", lambda *a: f"GLASSBOX_TEST_SMOLLM2={tmp_path / 'm.gguf'}\n")
    monkeypatch.setattr(bootstrap, "exec_in_venv", fake_exec)
    monkeypatch.setattr(bootstrap, "run_checks", checks)
    monkeypatch.setattr(bootstrap, "llama_tools_env", lambda py, verbose: {})
    return [setups, execs]


def test_test_runs_the_checks_before_pytest_even_with_pytest_arguments(
    bootstrap: ModuleType, fake_tools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    command, calls = fake_tools
    real = bootstrap.run_checks
    setups, execs = _test_command(bootstrap, monkeypatch, tmp_path, lambda: real(command=command))
    assert bootstrap.main(["test", "tests/unit", "-x"]) == 0
    assert setups == [["test"]]  # pip install -e .[test]: the extra with the tools
    assert len(calls()) == 4
    assert execs == [["-m", "pytest", "tests/unit", "-x"]]


def test_a_failing_check_means_no_pytest_and_exit_code_1(
    bootstrap: ModuleType,
    fake_tools,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command, calls = fake_tools
    monkeypatch.setenv("FAKE_TOOL_FAIL", "lint-imports")
    real = bootstrap.run_checks
    _setups, execs = _test_command(bootstrap, monkeypatch, tmp_path, lambda: real(command=command))
    assert bootstrap.main(["test"]) == 1
    assert execs == []
    assert [c[0] for c in calls()] == ["ruff", "ruff", "mypy", "lint-imports"]
    out = capsys.readouterr()
    assert "PySide6 imported by app.core.example" in out.err  # the tool's own output
    assert "FAILED: check lint-imports failed (exit code 2)" in out.out
    assert "reproduce it alone from the repository root with:" in out.out


@pytest.mark.parametrize(
    "argv", [["test", "--no-checks", "tests/unit", "-x"], ["--no-checks", "test", "tests/unit", "-x"]]
)
def test_no_checks_skips_them_and_is_not_passed_to_pytest(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str]
) -> None:
    ran: list[bool] = []
    _setups, execs = _test_command(bootstrap, monkeypatch, tmp_path, lambda: ran.append(True))
    assert bootstrap.main(argv) == 0
    assert ran == []
    assert execs == [["-m", "pytest", "tests/unit", "-x"]]


def test_changing_pyproject_or_asking_for_the_test_extra_reinstalls(bootstrap: ModuleType, tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pyproject.write_text(text, encoding="utf-8")
    want = bootstrap.wanted_stamp("0.3.36", "key", pyproject)
    stamp = {**want, "extras": ["test"], "cmake_args": "-DGGML_NATIVE=OFF"}
    assert bootstrap.stamp_is_current(stamp, want, ["test"])
    assert bootstrap.stamp_is_current(stamp, want, [])
    assert not bootstrap.stamp_is_current({**stamp, "extras": []}, want, ["test"])  # installed without [test]
    assert '"ruff==' in text
    pyproject.write_text(text.replace('"ruff==', '"ruff>=', 1), encoding="utf-8")  # the extra changed
    assert not bootstrap.stamp_is_current(stamp, bootstrap.wanted_stamp("0.3.36", "key", pyproject), ["test"])
    assert not bootstrap.stamp_is_current(stamp, bootstrap.wanted_stamp("0.3.36", "other", pyproject), ["test"])


def test_setup_installs_the_test_extra_with_its_tools_and_reinstalls_when_pyproject_changes(
    bootstrap: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps 1-3 with the venv, the build and pip replaced: what gets installed, and when again."""
    venv = tmp_path / ".venv"
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(bootstrap, "VENV", venv)
    monkeypatch.setattr(bootstrap, "STAMP", venv / "glassbox-setup.json")
    monkeypatch.setattr(bootstrap, "SETUP_LOG", venv / "glassbox-setup.log")
    monkeypatch.setattr(bootstrap, "PYPROJECT", pyproject)
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    installs: list[list[str]] = []
    tools_installed = [False]

    def fake_venv(verbose: bool) -> Path:
        py = bootstrap.venv_python(venv)
        py.parent.mkdir(parents=True, exist_ok=True)
        py.touch()
        return py

    def fake_pip(py, args, log, what, *, verbose, env=None) -> None:
        installs.append(list(args))
        if args[:2] == ["install", "-e"] and "test" in args[2] and tools_installed[0]:
            for tool in ("ruff", "mypy", "lint-imports"):
                bootstrap.venv_tool(tool, venv).touch()

    monkeypatch.setattr(bootstrap, "ensure_venv", fake_venv)
    monkeypatch.setattr(bootstrap, "ensure_llama_wheel", lambda *a: tmp_path / "llama_cpp_python-0.3.36-x.whl")
    monkeypatch.setattr(bootstrap, "pip", fake_pip)
    monkeypatch.setattr(bootstrap, "check_llama", lambda *a: "CPU-only build")

    with pytest.raises(bootstrap.SetupError, match=r"did not install ruff, mypy, lint-imports into"):
        bootstrap.setup(["test"], False)  # an extra without the tools is caught, not stamped
    assert ["install", "-e", ".[test]"] in installs
    assert "extras" not in bootstrap.read_stamp()

    tools_installed[0] = True
    installs.clear()
    bootstrap.setup(["test"], False)
    assert installs[-1] == ["install", "-e", ".[test]"]
    assert bootstrap.read_stamp()["extras"] == ["test"]

    installs.clear()
    bootstrap.setup(["test"], False)
    assert installs == []  # up to date: nothing installed again

    pyproject.write_text(pyproject.read_text(encoding="utf-8").replace('"ruff==', '"ruff>=', 1), encoding="utf-8")
    bootstrap.setup(["test"], False)
    assert installs[-1] == ["install", "-e", ".[test]"]  # the extra changed: installed again


def test_uninstall_without_an_install_removes_nothing(
    bootstrap: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    assert bootstrap.main(["uninstall"]) == 0
    assert "nothing to remove" in capfd.readouterr().out
    assert not (tmp_path / "share").exists()


def test_install_gives_the_menu_entry_a_tryexec_on_the_venvs_python(
    bootstrap: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry hides itself once the checkout's venv is gone (TryExec), instead of failing to start."""
    py = tmp_path / "my checkout" / ".venv" / "bin" / "python"
    calls: list[list[str]] = []
    monkeypatch.setattr(bootstrap, "setup", lambda extras, verbose: py)
    monkeypatch.setattr(bootstrap, "exec_in_venv", lambda python, argv, env, dry_run: calls.append(argv) or 0)
    assert bootstrap.main(["install"]) == 0
    (argv,) = calls
    assert argv[0].endswith("packaging/desktop.py") and argv[1] == "install"
    assert argv[argv.index("--exec") + 1] == f'"{py}" -m app'
    assert argv[argv.index("--try-exec") + 1] == str(py)


def test_the_bundle_installs_the_xcb_libraries_qt_lacks_with_apt_get(
    bootstrap: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A minimal Debian lacks libxcb-icccm4 / libxcb-keysyms1, which Qt's xcb plugin links to: the bundle's
    library check failed on a fresh machine. ``bundle`` installs what ldd says is missing (as root)."""
    plugin = tmp_path / "lib/python3.11/site-packages/PySide6/Qt/plugins/platforms/libqxcb.so"
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(b"")
    ldd_out = "\tlibxcb-icccm.so.4 => not found\n\tlibxcb-keysyms.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6\n"
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(bootstrap.sys, "platform", "linux")
    monkeypatch.setattr(bootstrap.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a[0], 0, ldd_out, ""))
    asked: list[list[str]] = []
    monkeypatch.setattr(bootstrap, "apt_install", lambda packages, what: asked.append(list(packages)) or True)
    bootstrap.ensure_qt_xcb_libraries(tmp_path)
    assert asked == [["libxcb-icccm4", "libxcb-keysyms1"]]


@pytest.mark.parametrize(
    ("extras", "opt_out", "with_tools"),
    [([], "", True), (["test"], "", True), (["bundle"], "", False), (["test"], "1", False)],
)
def test_the_checkouts_wheel_also_builds_llama_cpps_tools_and_the_bundles_does_not(
    bootstrap: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    extras: list[str],
    opt_out: str,
    with_tools: bool,
) -> None:
    """One build of llama.cpp for the checkout: the wheel's own build yields the tools (unless opted out)."""
    venv = tmp_path / ".venv"
    monkeypatch.setattr(bootstrap, "VENV", venv)
    monkeypatch.setattr(bootstrap, "STAMP", venv / "glassbox-setup.json")
    monkeypatch.setattr(bootstrap, "SETUP_LOG", venv / "glassbox-setup.log")
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    monkeypatch.setenv(bootstrap.NO_WHEEL_TOOLS, opt_out)
    builds: list[tuple] = []

    def fake_venv(verbose: bool) -> Path:
        py = bootstrap.venv_python(venv)
        py.parent.mkdir(parents=True, exist_ok=True)
        for tool in ("ruff", "mypy", "lint-imports"):
            bootstrap.venv_tool(tool, venv).touch()
        return py

    def fake_wheel(py, version, cmake_args, key, verbose, tool_args=""):
        builds.append((cmake_args, key, tool_args))
        return tmp_path / f"llama_cpp_python-{version}-x.whl"

    monkeypatch.setattr(bootstrap, "ensure_venv", fake_venv)
    monkeypatch.setattr(bootstrap, "ensure_llama_wheel", fake_wheel)
    monkeypatch.setattr(bootstrap, "pip", lambda *a, **k: None)
    monkeypatch.setattr(bootstrap, "check_llama", lambda *a: "CPU-only build")
    bootstrap.setup(extras, False)
    ((cmake_args, key, tool_args),) = builds
    tools = bootstrap.llama_tools()
    version = bootstrap.llama_pin()
    assert cmake_args == bootstrap.DEFAULT_CMAKE_ARGS  # the person's options, as remembered in the stamp
    assert bootstrap.read_stamp()["cmake_args"] == cmake_args
    if with_tools:
        assert tool_args == tools.wheel_cmake_args()
        assert key == bootstrap.wheel_key(version, cmake_args, tools.wheel_tools_ident())
    else:
        assert tool_args == ""
        assert key == bootstrap.wheel_key(version, cmake_args)


def test_a_failed_tool_build_inside_the_wheel_build_is_named(bootstrap: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(
        "[180/212] Building CXX object vendor/llama.cpp/tools/server/CMakeFiles/server-context.dir/server-context.cpp.o\n"
        "FAILED: vendor/llama.cpp/tools/server/CMakeFiles/server-context.dir/server-context.cpp.o\n"
        "error: 'optional' in namespace 'std' does not name a template type\n"
    )
    hint = bootstrap.build_failure_hint(log, bootstrap.DEFAULT_CMAKE_ARGS)
    assert "llama-server" in hint and "packaging/llama_tools.cmake" in hint
    assert f"{bootstrap.NO_WHEEL_TOOLS}=1 builds the library alone" in hint
    log.write_text("FAILED: vendor/llama.cpp/src/CMakeFiles/llama.dir/llama.cpp.o\nerror: something else\n")
    assert "llama_tools.cmake" not in bootstrap.build_failure_hint(log, bootstrap.DEFAULT_CMAKE_ARGS)


def test_the_whole_suite_runs_on_two_workers_then_the_timing_tests_alone(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _setups, execs = _test_command(bootstrap, monkeypatch, tmp_path, lambda: None)
    runs: list[list[str]] = []

    def fake_run(py, argv, env):
        runs.append(list(argv))
        return 1 if len(runs) == 1 else 0  # the first pass failed: the second still runs, the code is 1

    monkeypatch.setattr(bootstrap, "run_in_venv", fake_run)
    monkeypatch.setattr(bootstrap, "available_cpus", lambda: 2)
    monkeypatch.delenv(bootstrap.TEST_WORKERS_ENV, raising=False)
    assert bootstrap.main(["test"]) == 1
    assert runs == [
        ["-m", "pytest", "-n", "2", "--dist", "loadfile", "-m", "not timing"],
        ["-m", "pytest", "-m", "timing"],
    ]
    assert execs == []


def test_one_cpu_or_one_worker_runs_the_suite_in_one_pass(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(bootstrap.TEST_WORKERS_ENV, raising=False)
    assert bootstrap.suite_passes([], 1) == [[]]
    assert bootstrap.suite_passes(["tests/unit", "-x"], 8) == [["tests/unit", "-x"]]  # arguments: as given
    monkeypatch.setenv(bootstrap.TEST_WORKERS_ENV, "1")
    assert bootstrap.suite_passes([], 16) == [[]]
    monkeypatch.setenv(bootstrap.TEST_WORKERS_ENV, "3")
    assert bootstrap.suite_passes([], 2)[0][:2] == ["-n", "3"]
    monkeypatch.setenv(bootstrap.TEST_WORKERS_ENV, "two")
    with pytest.raises(bootstrap.SetupError, match="GLASSBOX_TEST_WORKERS='two' is not a number"):
        bootstrap.suite_passes([], 2)


def _run_command(bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, starter_cli) -> list[list[str]]:
    """``bootstrap.py run`` with setup, the Qt check and the final exec replaced; the app's argv it would exec."""
    execs: list[list[str]] = []

    def fake_exec(py, argv, env, dry_run):
        execs.append(list(argv))
        return 0

    monkeypatch.setattr(bootstrap, "setup", lambda extras, verbose: Path(sys.executable))
    monkeypatch.setattr(bootstrap, "starter_cli", starter_cli)
    monkeypatch.setattr(bootstrap, "missing_qt_x11_libraries", lambda: [])
    monkeypatch.setattr(bootstrap, "exec_in_venv", fake_exec)
    return execs


@pytest.mark.parametrize(
    "app_args",
    [
        ["--model", "/m/mine.gguf"],
        ["--model=/m/mine.gguf", "--debug"],
        ["--debug", "--no-model"],
        ["/m/mine.gguf"],  # the positional FILE.gguf the app's --help offers (what a file manager passes)
        ["--debug", "/m/mine.gguf"],
    ],
)
def test_run_with_a_model_given_never_asks_for_the_starter_model(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, app_args: list[str]
) -> None:
    def no_network(*args: object) -> str:
        raise AssertionError("a model was given: the starter model (and the network) is not needed")

    execs = _run_command(bootstrap, monkeypatch, no_network)
    assert bootstrap.main(["run", *app_args]) == 0
    assert execs == [["-m", "app", *app_args]]


@pytest.mark.parametrize("app_args", [["--model"], ["--model", "--debug"], ["--model="], ["--dry-run", "--model"]])
def test_run_with_model_and_no_file_says_so_and_starts_nothing(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], app_args: list[str]
) -> None:
    """``run --model`` with no file: said, exit 1; neither the starter model (the network) nor the app is asked."""

    def no_network(*args: object) -> str:
        raise AssertionError("--model without a file must stop before the starter model")

    execs = _run_command(bootstrap, monkeypatch, no_network)
    assert bootstrap.main(["run", *app_args]) == 1
    assert execs == []
    out = capsys.readouterr().out
    assert "FAILED: --model needs a GGUF file after it" in out and "run --model /path/to/model.gguf" in out


def test_own_options_right_after_the_command_are_the_scripts_not_the_apps(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run --dry-run -v --model X``: the two options are bootstrap's; the app gets ``--model X`` only,
    and an option after the app's first argument stays the app's."""
    dry: list[bool] = []

    def fake_exec(py, argv, env, dry_run):  # type: ignore[no-untyped-def]
        dry.append(dry_run)
        execs.append(list(argv))
        return 0

    execs = _run_command(bootstrap, monkeypatch, lambda *a: "")
    monkeypatch.setattr(bootstrap, "exec_in_venv", fake_exec)
    assert bootstrap.main(["run", "--dry-run", "-v", "--model", "/m/x.gguf"]) == 0
    assert execs == [["-m", "app", "--model", "/m/x.gguf"]] and dry == [True]
    assert bootstrap.main(["run", "--model", "/m/x.gguf", "-v"]) == 0
    assert execs[-1] == ["-m", "app", "--model", "/m/x.gguf", "-v"] and dry[-1] is False


def test_run_without_a_model_opens_the_one_the_starter_step_chooses(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[list[str]] = []

    def choose(py: Path, args: list[str], what: str) -> str:
        asked.append(list(args))
        return json.dumps({"model": "/lib/recent.gguf", "fetched": False, "models_dir": "/lib"}) + "\n"

    execs = _run_command(bootstrap, monkeypatch, choose)
    assert bootstrap.main(["run", "--debug"]) == 0
    assert asked == [["--for-run"]]  # the recent model, a library model, or else the starter: app/starter.py decides
    assert execs == [["-m", "app", "--model", "/lib/recent.gguf", "--debug"]]
    assert "opening /lib/recent.gguf (no download needed)" in capsys.readouterr().out


def test_run_starts_without_a_model_when_the_starter_model_cannot_be_fetched(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(py: Path, args: list[str], what: str) -> str:
        raise bootstrap.SetupError(
            f"{what} failed (see the error above)", "the model comes from PyPI: check the network"
        )

    execs = _run_command(bootstrap, monkeypatch, offline)
    assert bootstrap.main(["run"]) == 0
    assert execs == [["-m", "app"]]  # the app opens on its Models page (app/ui/window/first_start.py)
    out = capsys.readouterr().out
    assert "warning: getting the starter model failed" in out and "starting Glassbox without a model" in out
