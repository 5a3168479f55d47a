"""packaging/desktop.py: one application id in every desktop file, icons rendered from the SVG,
and a per-user install that uninstall undoes exactly (bootstrap.py install / uninstall)."""

from __future__ import annotations

import importlib.util
import os
import xml.etree.ElementTree as ET
from pathlib import Path

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


def test_the_icons_are_rendered_from_the_svg_in_every_hicolor_size(tmp_path):
    files = desktop.stage(tmp_path / "share")
    pngs = sorted(p for p in files if p.suffix == ".png")
    assert len(pngs) == len(desktop.ICON_SIZES)
    for size in desktop.ICON_SIZES:
        image = QImage(str(tmp_path / f"share/icons/hicolor/{size}x{size}/apps/{APP_ID}.png"))
        assert (image.width(), image.height()) == (size, size)
        # Drawn, not blank: the centre is the icon's dark face, a corner is transparent.
        assert image.pixelColor(size // 2, size // 2).alpha() == 255 and image.pixelColor(0, 0).alpha() == 0


def test_install_registers_the_entry_and_uninstall_removes_exactly_what_it_added(tmp_path):
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


def test_uninstall_of_a_fresh_data_folder_leaves_no_trace(tmp_path):
    share = tmp_path / "fresh" / "share"
    desktop.install("glassbox", share)
    assert (share / desktop.MANIFEST_NAME).exists()
    desktop.uninstall(share)
    assert not share.exists() and list(tmp_path.iterdir()) == [tmp_path / "fresh"]
