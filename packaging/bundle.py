"""Build the double-clickable Glassbox: a PyInstaller onedir bundle, then a .deb and a tarball (Linux).

Run by ``python3 packaging/bootstrap.py bundle`` in the venv it set up (PyInstaller comes
from the ``bundle`` extra). Steps, each one line of output with its time:

1. PyInstaller on ``packaging/glassbox.spec`` -> ``dist/glassbox/`` (the executable
   ``glassbox`` and ``_internal/``).
2. ``ldd`` on every shared library in ``_internal/llama_cpp/lib`` and on the executable:
   a library that is "not found" stops the build (the bundle would not start).
3. The licences of what it ships into ``dist/glassbox/licenses/``: Glassbox's (``LICENSE``),
   Qt's (LGPL-3.0, GPL-3.0), llama.cpp's and latex2mathml's (``packaging/licenses/``), every
   distribution shipped (the project's requirements, recursively) and Python's.
4. The desktop files (``share/``: .desktop, hicolor icons, MIME type, metainfo;
   packaging/desktop.py), checked with ``desktop-file-validate`` and
   ``appstreamcli validate --no-net`` when they are installed; when they are not, a loud
   WARNING says the files were not validated (never a silent pass).
5. ``dist/glassbox_<version>_<arch>.deb`` (dpkg-deb): ``/opt/glassbox``, ``/usr/bin/glassbox``,
   the menu entry, icons, MIME type and metainfo under ``/usr/share``; its Depends are the
   Debian packages of the system libraries the bundle links against (dpkg -S), with ``libc6``
   pinned to the highest ``GLIBC_x.y`` any ELF file in the bundle needs; no maintainer scripts.
6. ``dist/glassbox-<version>-linux-<arch>.tar.gz`` with ``install.sh`` (per user, and
   ``install.sh --uninstall``).
7. An AppImage only when ``appimagetool`` is on PATH (untested here: see the README).

``--skip-pyinstaller`` reuses ``dist/glassbox`` (for working on steps 2-7).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packaging"))
sys.path.insert(0, str(ROOT))

import desktop  # noqa: E402 - packaging/desktop.py, run by file name like this one

from app import APP_ID, __version__  # noqa: E402

DIST = ROOT / "dist"
WORK = ROOT / "build" / "pyinstaller"
BUNDLE = DIST / "glassbox"
SPEC = ROOT / "packaging" / "glassbox.spec"
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


class BuildError(Exception):
    """A step failed; the message says which and why."""


def say(msg: str) -> None:
    print(f"[bundle] {msg}", flush=True)


def warn_loudly(msg: str) -> None:
    bar = "!" * 78
    print(f"\n{bar}\n[bundle] WARNING: {msg}\n{bar}\n", flush=True)


def took(t0: float) -> str:
    return f"({time.monotonic() - t0:.1f} s)"


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=False, text=True, capture_output=True, **kw)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


# --------------------------------------------------------------------------- 1. PyInstaller


def render_platform_icons() -> None:
    """build/icons/glassbox.ico (and .icns where Qt can write it) for the Windows/macOS spec sections."""
    from PySide6.QtGui import QImage, QImageWriter

    out = ROOT / "build" / "icons"
    png = out / "glassbox-256.png"
    desktop.render_icon(256, png)
    formats = {bytes(f.data()).decode() for f in QImageWriter.supportedImageFormats()}
    for ext in ("ico", "icns"):
        if ext in formats:
            QImage(str(png)).save(str(out / f"glassbox.{ext}"), ext.upper())


def pyinstaller() -> None:
    t0 = time.monotonic()
    render_platform_icons()
    cmd = [sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
           "--distpath", str(DIST), "--workpath", str(WORK), str(SPEC)]  # fmt: skip
    log = ROOT / "build" / "pyinstaller.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if rc != 0 or not (BUNDLE / "glassbox").exists():
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
        raise BuildError(f"PyInstaller failed (exit code {rc}); log: {log}\n{tail}")
    say(f"pyinstaller: {BUNDLE} ({dir_size(BUNDLE) / 2**20:.0f} MiB) {took(t0)}")


# --------------------------------------------------------------------------- 2. ldd


def link_versioned_copies(lib: Path) -> int:
    """The wheel holds ``libllama.so``, ``.so.0`` and ``.so.0.5.0`` as three copies (zip has no links):
    keep the fully versioned file and make the shorter names symlinks to it. Returns bytes saved."""
    saved = 0
    files = sorted((p for p in lib.iterdir() if p.is_file() and not p.is_symlink()), key=lambda p: -len(p.name))
    for full in files:
        if not full.exists() or full.is_symlink():
            continue
        for short in lib.iterdir():
            same = short != full and full.name.startswith(short.name + ".") and not short.is_symlink()
            if same and short.read_bytes() == full.read_bytes():
                saved += short.stat().st_size
                short.unlink()
                short.symlink_to(full.name)
    return saved


#: CPU variants of a ``GGML_CPU_ALL_VARIANTS`` build the bundle leaves out. ``sapphirerapids`` is the only one
#: built with AMX (ggml/src/CMakeLists.txt): where a CPU advertises AMX, ggml scores it highest, and on a VM
#: that advertises AMX its ``ggml_backend_amx_mul_mat`` died with SIGILL at ``tilezero`` on the first prefill
#: (this CI machine; llama.cpp issue #28756 is the same). Without it such a CPU loads ``zen4`` (AVX-512, VNNI, BF16),
#: which Ollama measured 10 % faster than AMX on Sapphire Rapids when it dropped the same variant (ollama#9203).
LEFT_OUT_CPU_VARIANTS = ("sapphirerapids",)


def drop_cpu_variants(lib: Path, names: tuple[str, ...] = LEFT_OUT_CPU_VARIANTS) -> list[str]:
    """Delete ``libggml-cpu-<name>.so`` (any version suffix) from ``lib`` for each name; returns the files deleted."""
    dropped = []
    for path in sorted(lib.iterdir()):
        variant = path.name.removeprefix("libggml-cpu-").split(".so")[0]
        if path.name.startswith("libggml-cpu-") and variant in names:
            path.unlink()
            dropped.append(path.name)
    return dropped


# Qt plugins loaded only when present (GTK theme, Wayland, image formats...) and the libraries only the Wayland
# plugin loads: not a reason to depend on GTK or Wayland (on Wayland, Qt falls back to X11 through XWayland).
OPTIONAL_PLUGIN = re.compile(r"/plugins/(?!platforms/libqxcb\.so|xcbglintegrations/)|/libQt6(Wayland|Wl)")


def check_libraries() -> None:
    """Every llama.cpp library and the executable resolve all their dependencies (ldd)."""
    t0 = time.monotonic()
    for link in BUNDLE.rglob("*"):
        if link.is_symlink() and not link.exists():  # points at a library the spec left out
            link.unlink()
    lib = BUNDLE / "_internal" / "llama_cpp" / "lib"
    dropped = drop_cpu_variants(lib)
    if dropped:
        say(f"llama_cpp/lib: left out {', '.join(dropped)} (AMX: SIGILL on VMs that advertise it)")
    saved = link_versioned_copies(lib)
    if saved:
        say(f"llama_cpp/lib: the unversioned names are links to the versioned files ({saved / 2**20:.0f} MiB saved)")
    libs = sorted(p for p in lib.iterdir() if ".so" in p.name)
    if not any(p.name.startswith("libllama.so") for p in libs):
        raise BuildError(f"{lib} has no libllama.so: llama-cpp-python's libraries were not collected")
    missing = []
    # The CPU variants of a GGML_BACKEND_DL build carry no RUNPATH: they are dlopen()ed after
    # libggml-base.so.0 is loaded from this folder, which LD_LIBRARY_PATH stands for here.
    for path in [BUNDLE / "glassbox", *libs]:
        r = run(["ldd", str(path)], cwd=lib, env={**os.environ, "LD_LIBRARY_PATH": str(lib)})
        missing += [f"{path.name}: {m}" for m in re.findall(r"^\s*(\S+) => not found", r.stdout, re.M)]
    # Everything else, as the bundle's bootloader runs it (LD_LIBRARY_PATH=_internal): nothing may
    # point at a library the spec left out (Qt Quick, QML, PDF).
    internal = BUNDLE / "_internal"
    env = {**os.environ, "LD_LIBRARY_PATH": str(internal)}
    others = [p for p in internal.rglob("*.so*") if p.is_file() and p.parent != lib]
    optional: set[str] = set()
    for path in others:
        r = run(["ldd", str(path)], env=env)
        lost = [f"{path.relative_to(internal)}: {m}" for m in re.findall(r"^\s*(\S+) => not found", r.stdout, re.M)]
        if OPTIONAL_PLUGIN.search(str(path)):
            optional.update(m.split(": ")[1] for m in lost)  # a plugin Qt skips when it cannot load
        else:
            missing += lost
    if optional:
        say(f"ldd: optional Qt plugins need system libraries this machine lacks: {', '.join(sorted(optional))}")
    if missing:
        raise BuildError("libraries the bundle needs are missing:\n  " + "\n  ".join(missing))
    names = ", ".join(p.name for p in libs)
    say(f"ldd: {len(libs)} llama.cpp libraries ({names}) and {len(others)} others resolve every dependency {took(t0)}")


# --------------------------------------------------------------------------- 3. licences


def shipped_distributions() -> list[md.Distribution]:
    """glassbox's requirements, recursively (what the bundle carries), without the extras."""
    seen: dict[str, md.Distribution] = {}
    todo = ["glassbox"]
    while todo:
        name = re.split(r"[\s;<>=!~\[(]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if not name or name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        todo += [r for r in (dist.requires or []) if "extra ==" not in r]
    return [d for n, d in sorted(seen.items()) if n != "glassbox"]


LICENCES = ROOT / "packaging" / "licenses"
# Components whose licence text the wheels do not carry (or carry elsewhere): name -> (licence, files).
# The texts are committed under packaging/licenses/ so that a fresh machine has them: the LGPL-3.0
# and the GPL-3.0 it builds on from Debian's /usr/share/common-licenses, llama.cpp's from its
# repository (the LICENSE of the llama.cpp vendored in llama-cpp-python), latex2mathml's from its
# repository (its wheel has only "License: MIT" in the metadata).
COMPONENT_LICENCES: dict[str, tuple[str, tuple[Path, ...]]] = {
    "Glassbox": ("Apache-2.0", (ROOT / "LICENSE",)),
    "Qt, PySide6, shiboken6": ("LGPL-3.0-only", (LICENCES / "LGPL-3.0.txt", LICENCES / "GPL-3.0.txt")),
    "llama.cpp and ggml": ("MIT", (LICENCES / "llama.cpp-MIT.txt",)),
    "latex2mathml": ("MIT", (LICENCES / "latex2mathml-MIT.txt",)),
}


def component_folder(name: str) -> str:
    """The folder name under ``licenses/`` of a :data:`COMPONENT_LICENCES` entry."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def collect_licences(dest: Path | None = None) -> Path:
    """The licences of what the bundle ships into ``dest`` (default ``dist/glassbox/licenses``):
    :data:`COMPONENT_LICENCES`, every shipped distribution's LICENSE/COPYING/NOTICE files,
    Python's, and a README.txt listing each component with its licence. Returns ``dest``.
    Raises BuildError when a committed licence text is missing or empty."""
    t0 = time.monotonic()
    dest = dest or BUNDLE / "licenses"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copy(ROOT / "README.md", dest / "Glassbox-README.md")
    lines = [f"Glassbox {__version__} (Apache-2.0, see Glassbox/LICENSE) ships these components:\n"]
    for name, (lic, texts) in COMPONENT_LICENCES.items():
        folder = dest / component_folder(name)
        folder.mkdir()
        for text in texts:
            if not text.is_file() or text.stat().st_size == 0:
                raise BuildError(f"the licence text {text} of {name} is missing or empty")
            shutil.copy(text, folder / text.name)
        lines.append(f"- {name}: {lic} ({', '.join(f'{folder.name}/{t.name}' for t in texts)})")
    for dist in shipped_distributions():
        name, version = dist.metadata["Name"], dist.version
        lic = dist.metadata.get("License-Expression") or dist.metadata.get("License") or ""
        lic = lic.splitlines()[0][:80] if lic else "see the files"
        files = [f for f in (dist.files or []) if re.search(r"(LICEN[CS]E|COPYING|NOTICE)", f.name, re.I)]
        for f in files:
            src = Path(str(dist.locate_file(f)))
            if src.is_file():
                target = dest / name / f.name
                target.parent.mkdir(exist_ok=True)
                shutil.copy(src, target)
        lines.append(f"- {name} {version}: {lic}")
    python_licence = (
        Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "LICENSE.txt"
    )
    if python_licence.exists():
        (dest / "Python").mkdir(exist_ok=True)
        shutil.copy(python_licence, dest / "Python" / "LICENSE.txt")
        lines.append(f"- Python {platform.python_version()}: PSF License")
    (dest / "README.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    say(f"licences: {len(lines) - 1} components into {dest} {took(t0)}")
    return dest


# --------------------------------------------------------------------------- 4. desktop files


def validate(share: Path) -> list[str]:
    """Run the validators present on the staged files; returns the names of those missing."""
    checks = [
        ("desktop-file-validate", [str(share / "applications" / f"{APP_ID}.desktop")], "desktop-file-utils"),
        ("appstreamcli", ["validate", "--no-net", str(share / "metainfo" / f"{APP_ID}.metainfo.xml")], "appstream"),
    ]
    missing = []
    for tool, args, package in checks:
        if not shutil.which(tool):
            missing.append(f"{tool} (apt package {package})")
            continue
        r = run([tool, *args])
        if r.returncode != 0:
            raise BuildError(f"{tool} rejected the desktop files:\n{r.stdout}{r.stderr}")
        say(f"validate: {tool} {' '.join(args[:-1])} {Path(args[-1]).name}: ok")
    if missing:
        warn_loudly(
            "NOT VALIDATED: " + ", ".join(missing) + " not installed, so the .desktop file / metainfo were not "
            "checked. Install them (sudo apt-get install desktop-file-utils appstream) and build again."
        )
    return missing


def stage_desktop_files() -> Path:
    t0 = time.monotonic()
    share = BUNDLE / "share"
    shutil.rmtree(share, ignore_errors=True)
    files = desktop.stage(share, "glassbox", "glassbox")
    validate(share)
    say(f"desktop files: {len(files)} under {share} {took(t0)}")
    return share


# --------------------------------------------------------------------------- 5. .deb


def debian_depends() -> list[str]:
    """The Debian packages owning the system libraries the bundle's ELF files need at run time
    (libraries the bundle carries itself, and optional Qt plugins, do not count)."""
    if not shutil.which("dpkg"):
        return []
    internal = BUNDLE / "_internal"
    carried = {p.name for p in internal.rglob("*.so*")}
    env = {**os.environ, "LD_LIBRARY_PATH": str(internal)}
    system_libs: set[str] = set()
    for path in internal.rglob("*.so*"):
        if path.is_file() and not OPTIONAL_PLUGIN.search(str(path)):
            r = run(["ldd", str(path)], env=env)
            for m in re.finditer(r"^\s*(\S+) => (/\S+) \(", r.stdout, re.M):
                if m.group(1) not in carried and not m.group(2).startswith(str(BUNDLE)):
                    system_libs.add(os.path.realpath(m.group(2)))
    packages: set[str] = set()
    for lib in sorted(system_libs):
        for candidate in (lib, lib.replace("/usr/lib/", "/lib/", 1), lib.replace("/lib/", "/usr/lib/", 1)):
            r = run(["dpkg", "-S", candidate])
            if r.returncode == 0:
                packages.add(r.stdout.split(":")[0].strip())
                break
    return sorted(packages)


# A symbol version an ELF file needs is a NUL-terminated string in its .dynstr, named by its
# .gnu.version_r entry: "GLIBC_2.36\0". Matching those bytes finds the same set as
# `readelf -V` (checked on the bundle: libstdc++.so.6 and libexpat.so.1 need GLIBC_2.36) without
# needing binutils; "GLIBC_PRIVATE" has no number and does not match.
GLIBC_VERSION = re.compile(rb"GLIBC_(\d+)\.(\d+)(?:\.\d+)?\x00")


def required_glibc(root: Path) -> tuple[int, int] | None:
    """The highest ``GLIBC_x.y`` symbol version any ELF file under ``root`` needs, as ``(x, y)``;
    None when no ELF file names one. Files not starting with the ELF magic are skipped."""
    best: tuple[int, int] | None = None
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
            data = f.read()
        for major, minor in GLIBC_VERSION.findall(data):
            version = (int(major), int(minor))
            best = version if best is None or version > best else best
    return best


def versioned_depends(packages: list[str], glibc: tuple[int, int] | None) -> list[str]:
    """``packages`` with ``libc6`` pinned to the glibc the bundle needs: ``libc6 (>= 2.36)``."""
    if glibc is None:
        return packages
    pinned = f"libc6 (>= {glibc[0]}.{glibc[1]})"
    return sorted({p for p in packages if p != "libc6"} | {pinned})


# No postinst/postrm: dpkg's file triggers in shared-mime-info, hicolor-icon-theme and
# desktop-file-utils rebuild the MIME, icon and menu caches when files land in or leave their
# folders; a maintainer script would only leave the package in "rc" state after `dpkg -r`.


def build_deb(share: Path) -> Path:
    t0 = time.monotonic()
    root = ROOT / "build" / "deb"
    shutil.rmtree(root, ignore_errors=True)
    opt = root / "opt" / "glassbox"
    shutil.copytree(BUNDLE, opt, symlinks=True, ignore=shutil.ignore_patterns("share"))
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "glassbox").symlink_to("/opt/glassbox/glassbox")
    shutil.copytree(share, root / "usr" / "share")
    doc = root / "usr" / "share" / "doc" / "glassbox"
    doc.mkdir(parents=True)
    shutil.copy(ROOT / "README.md", doc / "README.md")
    shutil.copytree(ROOT / "docs", doc / "docs")  # the README's links point into docs/
    shutil.copy(ROOT / "LICENSE", doc / "copyright")  # Glassbox's; the others are in /opt/glassbox/licenses
    glibc = required_glibc(BUNDLE)
    depends = versioned_depends(debian_depends(), glibc)
    size_kib = dir_size(root) // 1024
    control = root / "DEBIAN"
    control.mkdir()
    (control / "control").write_text(
        f"Package: glassbox\nVersion: {__version__}\nArchitecture: {DEB_ARCH}\n"
        "Maintainer: Glassbox developers <glassbox@users.noreply.github.com>\n"
        f"Installed-Size: {size_kib}\nSection: science\nPriority: optional\n"
        + (f"Depends: {', '.join(depends)}\n" if depends else "")
        + "Homepage: https://github.com/glassbox/glassbox\n"
        "Description: chat with local GGUF models and watch what happens inside\n"
        " Glassbox is a desktop app for chatting with local GGUF language models through\n"
        " llama.cpp, with panels for tokens, prefill, the KV cache, TTFT and decode speed.\n",
        encoding="utf-8",
    )
    deb = DIST / f"glassbox_{__version__}_{DEB_ARCH}.deb"
    r = run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)])
    if r.returncode != 0:
        raise BuildError(f"dpkg-deb failed:\n{r.stdout}{r.stderr}")
    shutil.rmtree(root, ignore_errors=True)
    say(f"deb: {deb} ({deb.stat().st_size / 2**20:.0f} MiB; Depends: {', '.join(depends) or 'none'}) {took(t0)}")
    return deb


# --------------------------------------------------------------------------- 6. tarball


def build_tarball() -> Path:
    t0 = time.monotonic()
    name = f"glassbox-{__version__}-linux-{platform.machine()}"
    tarball = DIST / f"{name}.tar.gz"
    install_sh = ROOT / "packaging" / "install.sh"
    with tarfile.open(tarball, "w:gz", compresslevel=6) as tar:
        tar.add(BUNDLE, arcname=f"{name}/glassbox")
        tar.add(install_sh, arcname=f"{name}/install.sh")
    say(f"tarball: {tarball} ({tarball.stat().st_size / 2**20:.0f} MiB) {took(t0)}")
    return tarball


# --------------------------------------------------------------------------- 7. AppImage


def build_appimage(share: Path) -> Path | None:
    tool = shutil.which("appimagetool")
    if not tool:
        say("appimage: skipped (appimagetool is not on PATH)")
        return None
    t0 = time.monotonic()
    appdir = ROOT / "build" / "Glassbox.AppDir"
    shutil.rmtree(appdir, ignore_errors=True)
    shutil.copytree(BUNDLE, appdir / "usr" / "lib" / "glassbox", symlinks=True, ignore=shutil.ignore_patterns("share"))
    shutil.copytree(share, appdir / "usr" / "share")
    (appdir / "AppRun").write_text(
        '#!/bin/sh\nexec "$(dirname "$(readlink -f "$0")")/usr/lib/glassbox/glassbox" "$@"\n'
    )
    (appdir / "AppRun").chmod(0o755)
    shutil.copy(share / "applications" / f"{APP_ID}.desktop", appdir / f"{APP_ID}.desktop")
    shutil.copy(share / "icons" / "hicolor" / "256x256" / "apps" / f"{APP_ID}.png", appdir / f"{APP_ID}.png")
    out = DIST / f"Glassbox-{__version__}-{platform.machine()}.AppImage"
    r = run([tool, str(appdir), str(out)], env={**os.environ, "ARCH": platform.machine()})
    if r.returncode != 0:
        raise BuildError(f"appimagetool failed:\n{r.stdout}{r.stderr}")
    say(f"appimage: {out} (untested here) {took(t0)}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="packaging/bundle.py", description=__doc__.split("\n")[0])
    p.add_argument("--skip-pyinstaller", action="store_true", help="reuse dist/glassbox")
    p.add_argument("--no-packages", action="store_true", help="only the onedir bundle and its checks")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    try:
        if not args.skip_pyinstaller:
            pyinstaller()
        check_libraries()
        collect_licences()
        share = stage_desktop_files()
        if not args.no_packages and sys.platform.startswith("linux"):
            if shutil.which("dpkg-deb"):
                build_deb(share)
            else:
                warn_loudly("no .deb: dpkg-deb is not installed")
            build_tarball()
            build_appimage(share)
    except BuildError as exc:
        say(f"FAILED: {exc}")
        return 1
    say(f"done: {BUNDLE}/glassbox {took(t0)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
