"""Desktop integration on Linux: the menu entry, the icons, the GGUF MIME type and the AppStream metainfo.

One application id everywhere (``app.APP_ID``, ``io.github.glassbox.Glassbox``): the
``.desktop`` file, the icon names, the metainfo and ``QGuiApplication.setDesktopFileName``.

The source files live in ``resources/`` (``<APP_ID>.desktop``, ``<APP_ID>.metainfo.xml``,
``<APP_ID>.mime.xml``, ``glassbox.svg``); the hicolor PNG icons are rendered from the SVG
here with Qt's QSvgRenderer (so run this with a Python that has PySide6: the venv).

:func:`stage` writes the whole set under a ``share/`` folder (what the ``.deb``, the
tarball and the AppImage carry); :func:`install` puts it into the user's XDG data folder
(``$XDG_DATA_HOME``, default ``~/.local/share``) with ``Exec`` pointing at a given command,
records every file and folder it added in a manifest, and :func:`uninstall` removes exactly
those (the caches it regenerated included) and nothing else.

Command line (``packaging/bootstrap.py install`` / ``uninstall`` run it in the venv)::

    python packaging/desktop.py install --exec "/path/to/python -m app"
    python packaging/desktop.py uninstall
    python packaging/desktop.py stage DEST [--exec glassbox]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESOURCES = ROOT / "resources"
sys.path.insert(0, str(ROOT))

from app import APP_ID  # noqa: E402 - after the path: run by file name, like bootstrap

ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)  # the hicolor sizes desktops look up
SVG = RESOURCES / "glassbox.svg"
MANIFEST_NAME = f"{APP_ID}.install.json"  # in $XDG_DATA_HOME: what install added
TARBALL_MANIFEST_NAME = f"{APP_ID}.tarball-install.txt"  # in $XDG_DATA_HOME: what the tarball's install.sh added


class InstallConflict(Exception):
    """Another Glassbox install (the tarball's install.sh) owns the same menu entry and MIME type."""


def data_home(environ: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """``$XDG_DATA_HOME``, else ``~/.local/share``."""
    env = os.environ if environ is None else environ
    value = env.get("XDG_DATA_HOME")
    return Path(value) if value else Path.home() / ".local" / "share"


def desktop_entry(exec_command: str, try_exec: str | None = None) -> str:
    """The ``.desktop`` file's text with ``Exec=<exec_command> %f`` (and ``TryExec``, when given)."""
    lines = []
    for line in (RESOURCES / f"{APP_ID}.desktop").read_text(encoding="utf-8").splitlines():
        if line.startswith("Exec="):
            line = f"Exec={exec_command} %f"
        elif line.startswith("TryExec="):
            if try_exec is None:
                continue
            line = f"TryExec={try_exec}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def render_icon(size: int, dest: Path) -> None:
    """Render ``resources/glassbox.svg`` into a ``size`` x ``size`` PNG at ``dest`` (QSvgRenderer)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:  # a QApplication, as the app and pytest-qt make, not a bare QGuiApplication
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        render_icon.app = QApplication([])  # type: ignore[attr-defined]  # kept alive for later calls
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise RuntimeError(f"{SVG} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(dest), "PNG"):
        raise RuntimeError(f"could not write {dest}")


def payload(exec_command: str, try_exec: str | None = None) -> dict[str, bytes | Path]:
    """What goes under ``share/``: relative path -> bytes to write, or a Path to render/copy."""
    files: dict[str, bytes | Path] = {
        f"applications/{APP_ID}.desktop": desktop_entry(exec_command, try_exec).encode(),
        f"mime/packages/{APP_ID}.xml": (RESOURCES / f"{APP_ID}.mime.xml").read_bytes(),
        f"metainfo/{APP_ID}.metainfo.xml": (RESOURCES / f"{APP_ID}.metainfo.xml").read_bytes(),
        f"icons/hicolor/scalable/apps/{APP_ID}.svg": SVG.read_bytes(),
    }
    for size in ICON_SIZES:
        files[f"icons/hicolor/{size}x{size}/apps/{APP_ID}.png"] = Path(f"png:{size}")
    return files


def write_payload(share: Path, exec_command: str, try_exec: str | None = None) -> list[Path]:
    """Write :func:`payload` under ``share``; returns the files written."""
    written = []
    for rel, content in payload(exec_command, try_exec).items():
        dest = share / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            render_icon(int(str(content).split(":")[1]), dest)
        else:
            dest.write_bytes(content)
        written.append(dest)
    return written


def stage(dest: Path, exec_command: str = "glassbox", try_exec: str | None = "glassbox") -> list[Path]:
    """The desktop files for a package, under ``dest`` (a ``share/`` folder). Returns the files."""
    return write_payload(dest, exec_command, try_exec)


def refresh_caches(share: Path) -> None:
    """Rebuild the MIME database and the desktop entries' MIME cache under ``share`` (when the tools exist)."""
    if (share / "mime" / "packages").is_dir() and shutil.which("update-mime-database"):
        subprocess.run(["update-mime-database", str(share / "mime")], check=False, capture_output=True)
    if (share / "applications").is_dir() and shutil.which("update-desktop-database"):
        subprocess.run(["update-desktop-database", str(share / "applications")], check=False, capture_output=True)


def _tree(root: Path) -> tuple[set[str], set[str]]:
    """Every file and every folder under ``root`` (relative, as text)."""
    files, dirs = set(), set()
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):
            base = Path(dirpath).relative_to(root)
            dirs.update(str(base / d) for d in dirnames)
            files.update(str(base / f) for f in filenames)
    return files, dirs


TOUCHED = ("applications", "icons", "mime", "metainfo")  # the folders under $XDG_DATA_HOME we write in


def install(exec_command: str, share: Path | None = None, try_exec: str | None = None) -> dict[str, list[str]]:
    """Add Glassbox to this user's menu and register ``application/x-gguf`` (``.gguf`` opens in it).

    Files go under ``share`` (default :func:`data_home`); a manifest there lists every file
    and folder this added (regenerated caches included), for :func:`uninstall`. Installing
    again first removes the previous install. ``try_exec`` (a path) becomes the entry's
    ``TryExec``: desktops hide the entry once that file is gone. Returns the manifest.

    Raises InstallConflict when the tarball's ``install.sh`` has installed Glassbox here (both
    would write the same files, and either uninstall would then remove the other's).
    """
    share = share or data_home()
    if (share / TARBALL_MANIFEST_NAME).exists():
        raise InstallConflict(
            f"Glassbox from the tarball is installed here ({share / TARBALL_MANIFEST_NAME}); it owns the same "
            "menu entry and GGUF type. Remove it first with `install.sh --uninstall` (a copy is in its install "
            "folder, by default ~/.local/opt/glassbox/install.sh), then run this again."
        )
    if (share / MANIFEST_NAME).exists():
        uninstall(share)
    before_files, before_dirs = set(), set()
    for top in TOUCHED:
        f, d = _tree(share / top)
        before_files |= {f"{top}/{x}" for x in f}
        before_dirs |= {f"{top}/{x}" for x in d} | ({top} if (share / top).is_dir() else set())
    share_existed = share.is_dir()
    ours = [str(p.relative_to(share)) for p in write_payload(share, exec_command, try_exec)]
    refresh_caches(share)
    after_files, after_dirs = set(), set()
    for top in TOUCHED:
        f, d = _tree(share / top)
        after_files |= {f"{top}/{x}" for x in f}
        after_dirs |= {f"{top}/{x}" for x in d} | ({top} if (share / top).is_dir() else set())
    manifest = {
        "app_id": APP_ID,
        "exec": exec_command,
        "files": sorted(ours),
        "generated": sorted(after_files - before_files - set(ours)),
        "dirs": sorted(after_dirs - before_dirs),
        "share_created": [] if share_existed else [str(share)],
    }
    (share / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


def uninstall(share: Path | None = None) -> list[str]:
    """Remove exactly what :func:`install` added under ``share``. Returns the paths removed (relative)."""
    share = share or data_home()
    manifest_path = share / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    removed = []
    for rel in manifest.get("files", []):
        if _unlink(share / rel):
            removed.append(rel)
    # Caches that existed before are rebuilt without us; the ones this install created go
    # (the desktop worked without them before, so it does after).
    refresh_caches(share)
    for rel in manifest.get("generated", []):
        if _unlink(share / rel):
            removed.append(rel)
    for rel in sorted(manifest.get("dirs", []), key=lambda r: -r.count("/")):
        _rmdir_empty(share / rel)
    _unlink(manifest_path)
    removed.append(MANIFEST_NAME)
    for created in manifest.get("share_created", []):
        _rmdir_empty(Path(created))
    return removed


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def _rmdir_empty(path: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: someone else's files are in it
        path.rmdir()


def main(argv: Iterable[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="packaging/desktop.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("install", help="add the menu entry, icons and GGUF type for this user")
    i.add_argument("--exec", required=True, help="the command that starts Glassbox (a %%f is appended)")
    i.add_argument("--try-exec", help="the executable's path, for TryExec (the entry hides once it is gone)")
    sub.add_parser("uninstall", help="remove exactly what install added")
    s = sub.add_parser("stage", help="write the desktop files under a share/ folder (for packages)")
    s.add_argument("dest", type=Path)
    s.add_argument("--exec", default="glassbox")
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.command == "install":
        try:
            manifest = install(args.exec, try_exec=args.try_exec)
        except InstallConflict as exc:
            print(f"not installed: {exc}", file=sys.stderr)
            return 1
        print(f"installed {len(manifest['files'])} files under {data_home()} (Exec={args.exec} %f)")
        print(f"menu entry: {data_home() / 'applications' / (APP_ID + '.desktop')}")
    elif args.command == "uninstall":
        removed = uninstall()
        print(f"removed {len(removed)} files from {data_home()}" if removed else "nothing to remove: not installed")
    else:
        files = stage(args.dest, args.exec, shlex.split(args.exec)[0])
        print(f"staged {len(files)} files under {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
