"""packaging/desktop.py: one application id in every desktop file, icons rendered from the SVG,
and a per-user install that uninstall undoes exactly (bootstrap.py install / uninstall)."""

from __future__ import annotations

import importlib.util
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from app import APP_ID

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("glassbox_desktop", ROOT / "packaging" / "desktop.py")
desktop = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(desktop)

MIME_NS = "{http://www.freedesktop.org/standards/shared-mime-info}"


def _entry(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[str(Path(dirpath, d).relative_to(root)) + "/"] = None
        for f in filenames:
            p = Path(dirpath, f)
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def test_every_desktop_file_names_the_one_application_id_and_the_gguf_type():
    entry = _entry(desktop.desktop_entry("/opt/glassbox/glassbox", "/opt/glassbox/glassbox"))
    assert entry["Exec"] == "/opt/glassbox/glassbox %f" and entry["TryExec"] == "/opt/glassbox/glassbox"
    assert entry["Icon"] == APP_ID and entry["StartupWMClass"] == APP_ID
    mime = ET.parse(ROOT / "resources" / f"{APP_ID}.mime.xml").getroot().find(f"{MIME_NS}mime-type")
    assert entry["MimeType"] == mime.get("type") + ";" == "application/x-gguf;"
    magic = mime.find(f"{MIME_NS}magic/{MIME_NS}match")
    assert (magic.get("value"), magic.get("offset")) == ("GGUF", "0")
    assert mime.find(f"{MIME_NS}glob").get("pattern") == "*.gguf"
    meta = ET.parse(ROOT / "resources" / f"{APP_ID}.metainfo.xml").getroot()
    assert meta.findtext("id") == APP_ID and meta.findtext("launchable") == f"{APP_ID}.desktop"
    assert meta.findtext("icon") == APP_ID and meta.find("provides/mediatype").text == "application/x-gguf"
    assert meta.find("releases/release") is not None and meta.find("screenshots/screenshot/image") is not None
    assert "TryExec" not in _entry(desktop.desktop_entry("glassbox"))


def test_the_icons_are_rendered_from_the_svg_in_every_hicolor_size(qapp, tmp_path):
    files = desktop.stage(tmp_path / "share")
    pngs = sorted(p for p in files if p.suffix == ".png")
    assert len(pngs) == len(desktop.ICON_SIZES)
    for size in desktop.ICON_SIZES:
        image = QImage(str(tmp_path / f"share/icons/hicolor/{size}x{size}/apps/{APP_ID}.png"))
        assert (image.width(), image.height()) == (size, size)
        # Drawn, not blank: the centre is the icon's dark face, a corner is transparent.
        assert image.pixelColor(size // 2, size // 2).alpha() == 255 and image.pixelColor(0, 0).alpha() == 0


def test_install_registers_the_entry_and_uninstall_removes_exactly_what_it_added(qapp, tmp_path):
    share = tmp_path / "share"
    (share / "applications").mkdir(parents=True)
    (share / "applications" / "other.desktop").write_text("[Desktop Entry]\nType=Application\nName=Other\nExec=o\n")
    (share / "icons" / "keep.txt").parent.mkdir(parents=True)
    (share / "icons" / "keep.txt").write_text("someone else's")
    before = _snapshot(tmp_path)

    manifest = desktop.install("/x/venv/bin/python -m app", share)
    entry = _entry((share / "applications" / f"{APP_ID}.desktop").read_text())
    assert entry["Exec"] == "/x/venv/bin/python -m app %f" and "TryExec" not in entry
    assert (share / "mime" / "packages" / f"{APP_ID}.xml").exists()
    assert len(manifest["files"]) == len(desktop.ICON_SIZES) + 4
    assert "applications/other.desktop" not in manifest["files"] + manifest["generated"]
    # Installing again replaces the first install (one manifest, same files).
    assert desktop.install("/x/venv/bin/python -m app", share)["files"] == manifest["files"]

    desktop.uninstall(share)
    assert _snapshot(tmp_path) == before
    assert desktop.uninstall(share) == []  # nothing left to remove


def test_uninstall_of_a_fresh_data_folder_leaves_no_trace(qapp, tmp_path):
    share = tmp_path / "fresh" / "share"
    desktop.install("glassbox", share)
    assert (share / desktop.MANIFEST_NAME).exists()
    desktop.uninstall(share)
    assert not share.exists() and list(tmp_path.iterdir()) == [tmp_path / "fresh"]


def _unpacked_tarball(root: Path) -> Path:
    """packaging/install.sh next to a tarball's layout (glassbox/ with the executable and share/)."""
    import shutil

    unpacked = root / "glassbox-0.1.0-linux-x86_64"
    app = unpacked / "glassbox"
    app.mkdir(parents=True)
    (app / "glassbox").write_text("#!/bin/sh\necho Glassbox 0.1.0\n")
    (app / "glassbox").chmod(0o755)
    (app / "_internal").mkdir()
    (app / "_internal" / "libx.so").write_bytes(b"\x7fELF")
    desktop.stage(app / "share")
    shutil.copy(ROOT / "packaging" / "install.sh", unpacked / "install.sh")
    return unpacked


def test_the_tarballs_install_sh_installs_per_user_and_uninstall_leaves_the_home_as_it_was(qapp, tmp_path):
    """packaging/install.sh on a tarball's layout (glassbox/ with the executable and share/)."""
    import subprocess

    unpacked = _unpacked_tarball(tmp_path)
    home = tmp_path / "home"
    (home / ".local" / "share" / "applications").mkdir(parents=True)
    (home / ".local" / "share" / "applications" / "other.desktop").write_text("[Desktop Entry]\n")
    before = _snapshot(home)
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}

    subprocess.run(["sh", str(unpacked / "install.sh")], env=env, check=True, capture_output=True)
    entry = _entry((home / ".local/share/applications" / f"{APP_ID}.desktop").read_text())
    prefix = home / ".local/opt/glassbox"
    assert entry["Exec"] == f'"{prefix}/glassbox" %f' and entry["TryExec"] == f"{prefix}/glassbox"
    assert (prefix / "_internal" / "libx.so").exists() and not (prefix / "share").exists()
    assert (home / ".local/bin/glassbox").resolve() == prefix / "glassbox"
    assert (home / f".local/share/mime/packages/{APP_ID}.xml").exists()
    assert (home / f".local/share/icons/hicolor/256x256/apps/{APP_ID}.png").exists()

    subprocess.run(["sh", str(unpacked / "install.sh"), "--uninstall"], env=env, check=True, capture_output=True)
    assert _snapshot(home) == before


def test_install_sh_keeps_someone_elses_glassbox_command_and_handles_spaces_in_paths(qapp, tmp_path):
    """A `glassbox` already in ~/.local/bin stays (install warns, uninstall leaves it); the app goes to a
    prefix with a space, the menu entry quotes it, and the copy of install.sh there uninstalls."""
    import shlex
    import shutil
    import subprocess

    unpacked = _unpacked_tarball(tmp_path / "downloads")
    home = tmp_path / "my home"
    theirs = home / ".local" / "bin" / "glassbox"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("#!/bin/sh\necho someone else's glassbox\n")
    before = _snapshot(home)
    prefix = home / "Bob's apps & $tuff \\new" / "Glass box"
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "GLASSBOX_PREFIX": str(prefix)}

    done = subprocess.run(["sh", str(unpacked / "install.sh")], env=env, check=True, capture_output=True, text=True)
    assert f"{theirs} already exists and is not ours" in done.stderr
    assert theirs.read_text() == "#!/bin/sh\necho someone else's glassbox\n" and not theirs.is_symlink()
    entry = _entry((home / ".local/share/applications" / f"{APP_ID}.desktop").read_text())
    # Exec is a command line (quoted; `$` escaped, `\\` doubled by the file's string escaping);
    # TryExec is a plain string (unquoted, `\\` doubled).
    quoted = "".join("\\" + c if c in '"`$\\' else c for c in f"{prefix}/glassbox")  # the Exec argument
    assert entry["Exec"] == '"' + quoted.replace("\\", "\\\\") + '" %f'  # and the string's escaping
    assert entry["TryExec"] == f"{prefix}/glassbox".replace("\\", "\\\\")
    command = done.stdout.strip().splitlines()[-1].removeprefix("Remove it with: ")
    assert shlex.split(command) == [f"{prefix}/install.sh", "--uninstall"]
    assert (prefix / "install.sh").read_bytes() == (ROOT / "packaging" / "install.sh").read_bytes()

    shutil.rmtree(unpacked)  # the tarball is gone: the copy in the prefix uninstalls
    gone = subprocess.run(shlex.split(command), env=env, check=True, capture_output=True, text=True)
    assert "Your chats, settings and models stay" in gone.stdout and f"{home}/.config/Glassbox" in gone.stdout
    assert _snapshot(home) == before


def test_install_sh_uninstall_leaves_a_link_someone_replaced(qapp, tmp_path):
    import subprocess

    unpacked = _unpacked_tarball(tmp_path)
    home = tmp_path / "home"
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    subprocess.run(["sh", str(unpacked / "install.sh")], env=env, check=True, capture_output=True)
    link = home / ".local/bin/glassbox"
    assert link.is_symlink() and link.resolve() == home / ".local/opt/glassbox/glassbox"
    link.unlink()
    link.symlink_to("/usr/bin/true")  # someone pointed the command elsewhere since
    gone = subprocess.run(["sh", str(unpacked / "install.sh"), "--uninstall"], env=env, capture_output=True, text=True)
    assert gone.returncode == 0 and "left" in gone.stderr and "no longer the link" in gone.stderr
    assert link.is_symlink() and os.readlink(link) == "/usr/bin/true"
    assert not (home / ".local/opt/glassbox").exists()


def test_install_sh_refuses_to_step_on_a_source_checkout_install(qapp, tmp_path):
    import subprocess

    unpacked = _unpacked_tarball(tmp_path)
    home = tmp_path / "home"
    share = home / ".local" / "share"
    desktop.install("/x/venv/bin/python -m app", share)
    entry_before = (share / "applications" / f"{APP_ID}.desktop").read_text()
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    done = subprocess.run(["sh", str(unpacked / "install.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "bootstrap.py uninstall" in done.stderr
    assert (share / "applications" / f"{APP_ID}.desktop").read_text() == entry_before
    assert not (home / ".local/opt").exists() and not (home / ".local/bin").exists()


def test_bootstrap_install_writes_tryexec_and_refuses_to_step_on_a_tarball_install(qapp, tmp_path, monkeypatch, capsys):
    share = tmp_path / "share"
    monkeypatch.setenv("XDG_DATA_HOME", str(share))
    assert desktop.main(["install", "--exec", "/x/venv/bin/python -m app", "--try-exec", "/x/venv/bin/python"]) == 0
    entry = _entry((share / "applications" / f"{APP_ID}.desktop").read_text())
    assert entry["TryExec"] == "/x/venv/bin/python" and entry["Exec"] == "/x/venv/bin/python -m app %f"
    assert desktop.main(["uninstall"]) == 0

    # The tarball's install.sh owns the entry now: install says so and writes nothing.
    (share / "applications").mkdir(parents=True, exist_ok=True)
    (share / "applications" / f"{APP_ID}.desktop").write_text("[Desktop Entry]\nExec=tarball\n")
    (share / desktop.TARBALL_MANIFEST_NAME).write_text(f"f {share}/applications/{APP_ID}.desktop\n")
    before = _snapshot(share)
    capsys.readouterr()
    assert desktop.main(["install", "--exec", "glassbox"]) == 1
    assert "install.sh --uninstall" in capsys.readouterr().err
    assert _snapshot(share) == before
    with pytest.raises(desktop.InstallConflict):
        desktop.install("glassbox", share)
