#!/usr/bin/env python3
"""llama.cpp's ``llama-server`` and ``ggml-rpc-server``, from the very llama.cpp of the llama-cpp-python wheel.

The remote-engine tests run a real llama-server, and the RPC split needs an rpc-server of the very
same llama.cpp as the wheel (the RPC protocol is versioned: a mismatch is refused). Two ways:

- **In the wheel** (what ``packaging/bootstrap.py`` does for the checkout's venv): the wheel's own
  build also builds the two tools. :func:`wheel_cmake_args` gives the options bootstrap appends to the
  wheel's ``CMAKE_ARGS`` (``packaging/llama_tools.cmake``, a CMake project include: llama.cpp's
  ``LLAMA_BUILD_TOOLS``/``LLAMA_BUILD_SERVER`` on, every other tool out of the default build, the two
  installed beside ``libllama.so`` in ``llama_cpp/lib`` with an RPATH of ``$ORIGIN``), and
  :func:`wheel_tools_ident` what the wheel's cache key adds for them. llama.cpp is compiled once:
  the two add 15 compile units to the wheel's 180 (:data:`WHEEL_TOOLS` adds three more tools, for
  measuring quantized models). :func:`wheel_tools` finds them in a venv.
- **On their own**, ``python3 packaging/llama_tools.py [--verbose]`` (and bootstrap's fallback when
  the wheel has no such tool, e.g. built with ``-DGGML_RPC=OFF``): the pinned llama-cpp-python sdist
  (``pip download --no-binary :all:``, its ``vendor/llama.cpp``) configured with
  :data:`TOOL_CMAKE_ARGS` (portable CPU code, the RPC backend, no web UI, no OpenSSL, static
  libraries so the binaries stand alone and can be copied to another machine) and built for those two
  targets only; cached in ``<build cache>/llama-tools/<key>/`` with ``key`` = sha256(version, CMake
  options, platform), the entry made whole in a temporary folder and renamed into place, so a killed
  build never leaves a half entry behind. It prints the two paths.

Standard library only (``packaging/bootstrap.py`` loads this file before any venv package is usable).
Raises ``SetupError`` (given by the caller) with what failed and what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

LLAMA = "llama-cpp-python"
# CMake target -> file name in the cache (llama.cpp names the RPC server's target ggml-rpc-server).
TARGETS = {"llama-server": "llama-server", "ggml-rpc-server": "ggml-rpc-server"}
TOOL_CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",  # portable, as the wheel: a native build dies with SIGILL on some VMs
    "-DGGML_RPC=ON",
    "-DBUILD_SHARED_LIBS=OFF",  # the binaries need no libllama.so / libggml.so next to them
    "-DLLAMA_BUILD_UI=OFF",  # no web UI: no npm build...
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # ...and no download of a prebuilt one (the server serves its API only)
    "-DLLAMA_OPENSSL=OFF",  # plain HTTP: the tests talk to 127.0.0.1; no libssl-dev needed
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
ENV_SERVER = "GLASSBOX_TEST_LLAMA_SERVER"
ENV_RPC = "GLASSBOX_TEST_RPC_SERVER"
# The CMake project include that makes the wheel's build yield the tools too (see its header).
HOOK = Path(__file__).resolve().with_name("llama_tools.cmake")
# What the wheel's build adds to llama_cpp/lib: the tests' two, and three for measuring quantized models
# (quantization, perplexity and KL divergence, speed): 6 more compile units, 18 s of CPU against 148 s
# for the two and 487 s for the wheel without tools (measured on this 2-core VM).
WHEEL_TOOLS = (*TARGETS, "llama-quantize", "llama-perplexity", "llama-bench")


# --------------------------------------------------------------------------- in the wheel


def wheel_cmake_args(hook: Path = HOOK) -> str:
    """What bootstrap appends to the wheel's ``CMAKE_ARGS`` so that its build also yields :data:`WHEEL_TOOLS`.

    A string of shell words, as scikit-build-core reads ``CMAKE_ARGS`` (``shlex.split``): the hook's path
    with forward slashes (CMake takes them everywhere; a backslash would be an escape), quoted.
    """
    args = (f"-DCMAKE_PROJECT_INCLUDE={hook.as_posix()}", "-DGLASSBOX_LLAMA_TOOLS=" + ";".join(WHEEL_TOOLS))
    return " ".join(shlex.quote(a) for a in args)


def wheel_tools_ident(hook: Path = HOOK) -> str:
    """What the wheel's cache key adds for the tools: their names and the hook's content (not its path,
    so every checkout shares the entry, and an edited hook is a new entry)."""
    return f"tools={','.join(WHEEL_TOOLS)};hook={hashlib.sha256(hook.read_bytes()).hexdigest()[:16]}"


def wheel_tools(py: Path, names: tuple[str, ...] = tuple(TARGETS)) -> tuple[dict[str, Path], list[str], Path | None]:
    """The tools ``names`` (of :data:`WHEEL_TOOLS`) installed with the wheel in ``py``'s environment (``llama_cpp/lib``).

    Returns ``({name: binary}, [missing names], llama_cpp/lib or None)``; the folder is None when
    ``py`` cannot tell where llama_cpp is (not installed, or ``py`` does not run). llama_cpp is located,
    not imported, so this loads no library.
    """
    code = "import importlib.util as u, os; s = u.find_spec('llama_cpp'); print(os.path.dirname(s.origin) if s else '')"
    try:
        r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}, list(names), None
    where = r.stdout.strip().splitlines()[-1:] if r.returncode == 0 else []
    if not where or not where[0]:
        return {}, list(names), None
    lib = Path(where[0]) / "lib"
    found = {name: lib / exe(name) for name in names}
    ok = {name: p for name, p in found.items() if p.is_file() and os.access(p, os.X_OK)}
    return ok, [name for name in names if name not in ok], lib


# --------------------------------------------------------------------------- on their own


def tools_key(version: str, cmake_args: tuple[str, ...] = TOOL_CMAKE_ARGS) -> str:
    """The cache key: what changes the binaries (llama-cpp-python version, CMake options, platform)."""
    ident = "\n".join(
        [
            f"{LLAMA}=={version}",
            "targets=" + ",".join(TARGETS),
            "cmake=" + " ".join(cmake_args),
            f"platform={sysconfig.get_platform()}/{platform.machine()}",
        ]
    )
    return hashlib.sha256(ident.encode()).hexdigest()[:20]


def exe(name: str) -> str:
    return name + (".exe" if os.name == "nt" else "")


def cached_tools(key_dir: Path) -> dict[str, Path] | None:
    """``{target: binary}`` of a finished cache entry, or None (a damaged entry is removed)."""
    if not (key_dir / "build-info.json").exists():
        return None
    found = {t: key_dir / exe(name) for t, name in TARGETS.items()}
    if all(p.is_file() and os.access(p, os.X_OK) for p in found.values()):
        return found
    shutil.rmtree(key_dir, ignore_errors=True)
    return None


def _run(cmd: list[str], log: Path, cwd: Path | None, verbose: bool, heartbeat: Callable[[float], None] | None) -> int:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=None if verbose else out, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        try:
            while True:
                try:
                    return proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    if heartbeat is not None:
                        heartbeat(time.monotonic() - t0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise


def _extract_sdist(archive: Path, dest: Path) -> Path:
    """Unpack the sdist into ``dest``; returns its ``vendor/llama.cpp`` folder."""
    with tarfile.open(archive) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
        else:  # Python < 3.10.12: no filters; the archive is PyPI's sdist of the pinned version
            tf.extractall(dest)
    found = sorted(dest.glob("*/vendor/llama.cpp/CMakeLists.txt"))
    if len(found) != 1:
        raise FileNotFoundError(f"{archive.name} has no vendor/llama.cpp")
    return found[0].parent


def ensure_llama_tools(
    py: Path,
    version: str,
    cache_root: Path,
    error: Callable[..., Exception],
    say: Callable[[str], None],
    *,
    verbose: bool = False,
    heartbeat: Callable[[float], None] | None = None,
) -> dict[str, Path]:
    """llama-server and ggml-rpc-server of llama-cpp-python ``version``: from the cache, else built into it.

    Args:
        py: a Python with pip (downloads the sdist); version: llama-cpp-python's pinned version;
        cache_root: the build cache (entries go to ``cache_root/llama-tools/<key>/``);
        error: builds the exception to raise, ``error(what, todo, detail)`` (bootstrap's SetupError);
        say: one line of progress.

    Returns:
        ``{"llama-server": path, "ggml-rpc-server": path}``.

    Raises:
        ``error(...)``: cmake missing, the download or the build failed (the log's tail in ``detail``).
    """
    t0 = time.monotonic()
    cache = cache_root / "llama-tools"
    key = tools_key(version)
    key_dir = cache / key
    found = cached_tools(key_dir)
    if found is not None:
        say(f"llama.cpp tools {version}: cached llama-server and ggml-rpc-server ({key_dir}) {_took(t0)}")
        return found
    cmake = shutil.which("cmake")
    if cmake is None:
        raise error(
            "cmake is not on PATH: it builds llama-server and ggml-rpc-server for the tests",
            "install it: sudo apt install cmake (Debian/Ubuntu), brew install cmake, or pip install cmake",
        )
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob(".tmp-*"):  # a build killed half-way: tidy its folder after 6 h
        try:
            if time.time() - old.stat().st_mtime > 6 * 3600:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    log = cache / f"build-{key}.log"
    log.unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=cache))
    say(
        f"llama.cpp tools {version}: building llama-server and ggml-rpc-server from llama-cpp-python's sources "
        f"(15-35 minutes on 2 cores, once); log: {log}"
    )
    try:
        rc = _run(
            [str(py), "-m", "pip", "--disable-pip-version-check", "download", "--no-deps", "--no-binary", ":all:",
             f"{LLAMA}=={version}", "-d", str(tmp / "sdist")],
            log, None, verbose, heartbeat,
        )  # fmt: skip
        archives = sorted((tmp / "sdist").glob("*.tar.gz"))
        if rc != 0 or len(archives) != 1:
            raise error(
                f"downloading the {LLAMA} {version} sources failed (pip exit code {rc}); log: {log}",
                "check the network (or your pip index settings) and run this again",
                _tail(log),
            )
        src = _extract_sdist(archives[0], tmp / "src")
        build = tmp / "build"
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        jobs = str(os.cpu_count() or 2)
        steps = (
            [cmake, "-S", str(src), "-B", str(build), *gen, *TOOL_CMAKE_ARGS],
            [cmake, "--build", str(build), "--config", "Release", "--target", *TARGETS, "-j", jobs],
        )
        for cmd in steps:
            rc = _run(cmd, log, None, verbose, heartbeat)
            if rc != 0:
                raise error(
                    f"building llama-server / ggml-rpc-server failed (exit code {rc}); log: {log}",
                    "read the log's end above; a compiler error usually means a missing C++17 compiler",
                    _tail(log),
                )
        entry = tmp / "entry"
        entry.mkdir()
        for target, name in TARGETS.items():
            hits = [p for p in build.rglob(exe(target)) if p.is_file()]
            if not hits:
                raise error(f"the build did not produce {exe(target)}; log: {log}", "see the log", _tail(log))
            shutil.copy2(hits[0], entry / exe(name))
        info = {
            "version": version,
            "cmake_args": list(TOOL_CMAKE_ARGS),
            "platform": sysconfig.get_platform(),
            "machine": platform.machine(),
            "built": time.strftime("%Y-%m-%d %H:%M:%S"),
            "seconds": round(time.monotonic() - t0),
        }
        (entry / "build-info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
        try:
            os.rename(entry, key_dir)  # atomic: the entry appears whole or not at all
        except OSError:
            if cached_tools(key_dir) is None:  # not another build finishing first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    done = cached_tools(key_dir)
    if done is None:
        raise error(f"the built tools did not land in {key_dir}", f"see {log}")
    say(f"llama.cpp tools {version}: built llama-server and ggml-rpc-server into {key_dir} {_took(t0)}")
    return done


def tool_env(tools: dict[str, Path]) -> dict[str, str]:
    """The variables the tests read: the llama-server and ggml-rpc-server paths."""
    return {ENV_SERVER: str(tools["llama-server"]), ENV_RPC: str(tools["ggml-rpc-server"])}


def _took(t0: float) -> str:
    dt = time.monotonic() - t0
    return f"({dt:.1f} s)" if dt < 120 else f"({dt / 60:.1f} min)"


def _tail(log: Path, n: int = 40) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-n:])


class ToolsError(Exception):
    """The error this file raises when it runs on its own."""

    def __init__(self, what: str, todo: str = "", detail: str = "") -> None:
        super().__init__(what)
        self.what, self.todo, self.detail = what, todo, detail


def main(argv: list[str] | None = None) -> int:
    import argparse
    import re

    parser = argparse.ArgumentParser(description="Build (once) llama-server and ggml-rpc-server; print their paths.")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--cache", type=Path, help="the build cache (default: bootstrap's)")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    m = re.search(r"llama-cpp-python==([0-9][^\"'\s]*)", text)
    if m is None:
        print("pyproject.toml does not pin llama-cpp-python", file=sys.stderr)
        return 1
    cache = args.cache
    if cache is None:
        override = os.environ.get("GLASSBOX_BUILD_CACHE")
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        cache = Path(override).expanduser() if override else base / "glassbox-build"
    try:
        tools = ensure_llama_tools(
            Path(sys.executable), m.group(1), cache, ToolsError, lambda s: print(s, file=sys.stderr),
            verbose=args.verbose,
        )  # fmt: skip
    except ToolsError as exc:
        print(exc.detail, exc.what, exc.todo, sep="\n", file=sys.stderr)
        return 1
    for k, v in tool_env(tools).items():
        print(f"{k}={v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
