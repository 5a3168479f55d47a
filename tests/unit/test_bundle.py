"""packaging/bundle.py: the .deb's glibc floor and the licences the bundle ships.

The module is loaded from its file (it is a script, run by ``bootstrap.py bundle``).
"""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundle() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("glassbox_bundle", ROOT / "packaging" / "bundle.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def _elf(body: bytes) -> bytes:
    return b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + body


def test_required_glibc_is_the_highest_version_any_elf_file_names(bundle, tmp_path):
    (tmp_path / "_internal").mkdir()
    (tmp_path / "glassbox").write_bytes(_elf(b"libc.so.6\x00GLIBC_2.2.5\x00GLIBC_2.17\x00GLIBC_PRIVATE\x00"))
    (tmp_path / "_internal" / "libstdc++.so.6").write_bytes(_elf(b"GLIBC_2.36\x00GLIBC_2.9\x00GLIBC_2.34\x00"))
    # Not ELF (a Python file, a licence text): a version named there is not a requirement.
    (tmp_path / "_internal" / "notes.py").write_bytes(b"# needs GLIBC_2.99\x00")
    # A version string not ending the .dynstr entry is not a symbol version.
    (tmp_path / "_internal" / "libx.so").write_bytes(_elf(b"GLIBC_2.40_extra\x00"))
    (tmp_path / "_internal" / "link.so").symlink_to("libstdc++.so.6")
    assert bundle.required_glibc(tmp_path) == (2, 36)
    assert bundle.versioned_depends(["libc6", "libx11-6"], (2, 36)) == ["libc6 (>= 2.36)", "libx11-6"]
    assert bundle.versioned_depends(["libx11-6"], (2, 28)) == ["libc6 (>= 2.28)", "libx11-6"]
    (tmp_path / "glassbox").unlink()
    (tmp_path / "_internal" / "libstdc++.so.6").unlink()
    assert bundle.required_glibc(tmp_path) is None
    assert bundle.versioned_depends(["libx11-6"], None) == ["libx11-6"]


def test_every_listed_component_ships_a_non_empty_licence(bundle, tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "shipped_distributions", lambda: [])  # the listed components alone
    dest = bundle.collect_licences(tmp_path / "licenses")
    assert set(bundle.COMPONENT_LICENCES) == {
        "Glassbox",
        "Qt, PySide6, shiboken6",
        "llama.cpp and ggml",
        "latex2mathml",
    }
    readme = (dest / "README.txt").read_text()
    for name, (lic, texts) in bundle.COMPONENT_LICENCES.items():
        folder = dest / bundle.component_folder(name)
        assert texts and all((folder / t.name).stat().st_size > 0 for t in texts), name
        assert f"- {name}: {lic}" in readme
    assert "Apache License" in (dest / "Glassbox" / "LICENSE").read_text()
    qt = dest / bundle.component_folder("Qt, PySide6, shiboken6")
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in (qt / "LGPL-3.0.txt").read_text()
    assert "Version 3" in (qt / "GPL-3.0.txt").read_text()
    assert "MIT License" in (dest / "llama.cpp-and-ggml" / "llama.cpp-MIT.txt").read_text()


def test_a_missing_licence_text_stops_the_build(bundle, tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "shipped_distributions", lambda: [])
    empty = tmp_path / "EMPTY"
    empty.write_text("")
    monkeypatch.setitem(bundle.COMPONENT_LICENCES, "latex2mathml", ("MIT", (empty,)))
    with pytest.raises(bundle.BuildError, match="latex2mathml"):
        bundle.collect_licences(tmp_path / "licenses")


def test_the_deb_pins_libc6_ships_the_copyright_and_has_no_maintainer_scripts(bundle, tmp_path, monkeypatch):
    """dpkg -r of a package without postinst/postrm or conffiles leaves no "rc" state behind."""
    root = tmp_path / "checkout"
    root.mkdir()
    for name in ("README.md", "LICENSE"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "docs", root / "docs")
    app = tmp_path / "dist" / "glassbox"
    (app / "_internal").mkdir(parents=True)
    (app / "glassbox").write_bytes(_elf(b"GLIBC_2.2.5\x00GLIBC_2.34\x00"))
    (app / "_internal" / "libexpat.so.1").write_bytes(_elf(b"GLIBC_2.25\x00GLIBC_2.36\x00"))
    share = tmp_path / "share"
    (share / "applications").mkdir(parents=True)
    (share / "applications" / "x.desktop").write_text("[Desktop Entry]\n")
    monkeypatch.setattr(bundle, "ROOT", root)
    monkeypatch.setattr(bundle, "BUNDLE", app)
    monkeypatch.setattr(bundle, "DIST", tmp_path / "dist")
    deb = bundle.build_deb(share)

    control = subprocess.run(["dpkg-deb", "--field", str(deb), "Depends"], capture_output=True, text=True, check=True)
    assert "libc6 (>= 2.36)" in [d.strip() for d in control.stdout.split(",")]
    members = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb)], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(members)) as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert "control" in names and not names & {"postinst", "postrm", "preinst", "prerm", "conffiles"}
    contents = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True)
    assert "./usr/share/doc/glassbox/copyright" in contents.stdout and "./opt/glassbox/glassbox" in contents.stdout
    extracted = tmp_path / "x"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(extracted)], check=True)
    assert (extracted / "usr/share/doc/glassbox/copyright").read_text() == (ROOT / "LICENSE").read_text()
    # The README's links into docs/ resolve inside the package too.
    assert (extracted / "usr/share/doc/glassbox/docs/guide/README.md").is_file()


def test_the_amx_cpu_variant_is_left_out_and_the_others_kept(bundle, tmp_path):
    for name in ["libggml-cpu-sapphirerapids.so", "libggml-cpu-zen4.so", "libggml-cpu-haswell.so", "libggml-base.so.0"]:
        (tmp_path / name).write_bytes(b"x")
    assert bundle.drop_cpu_variants(tmp_path) == ["libggml-cpu-sapphirerapids.so"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "libggml-base.so.0",
        "libggml-cpu-haswell.so",
        "libggml-cpu-zen4.so",
    ]
