"""A first start without a model to open, offline-first: other apps' models found on this computer
(LM Studio's folder) open the Models page's Library tab with them offered, not the Hub search; a
model in the Hugging Face cache leaves the chat, which offers it; the first start's hint goes once
the library has a model. The home folder and the Hugging Face cache are temporary folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ui.models.window import ModelsTab
from app.ui.window.first_start import ADD_FOUND, HINT
from app.ui.window.notices import NoticeTopic
from tests.support.models import write_tiny_model
from tests.support.window import banner_button, close_window, make_window


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder (other apps' folders are looked for there) and a Hugging Face cache, both empty."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    for var in ("LLAMA_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    return home


def _first_page_shown(win) -> bool:
    return win.models.library_tab.scanned and win.pages.currentIndex() == 1


def test_a_first_start_that_finds_lm_studios_models_opens_the_library_with_them_offered(qtbot, home: Path) -> None:
    lms = home / ".lmstudio" / "models"
    model = write_tiny_model(lms / "lmstudio-community" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf", name="LM Tiny")
    win = make_window(qtbot)
    try:
        qtbot.waitUntil(lambda: _first_page_shown(win))
        tab = win.models.library_tab
        assert win.models.tabs.currentIndex() == ModelsTab.LIBRARY.position  # not the Hub: it needs the network
        assert win.notices.showing(NoticeTopic.FIRST_START) and win.banner.text.text() != HINT
        assert f"LM Studio's models ({lms})" in win.banner.text.text()
        # The Library's empty page offers the folder too.
        assert tab.stack.currentWidget() is tab.empty_page and tab.empty_page.suggest_label.isVisible()
        assert str(lms) in tab.empty_page.suggest_label.text()
        # One click adds it: the model is listed, and the hint goes.
        banner_button(win, ADD_FOUND).click()
        qtbot.waitUntil(lambda: [e.path for e in tab.model.entries] == [model])
        assert tab.model.entries[0].ok and tab.stack.currentWidget() is tab.view
        assert not win.banner.isVisible()
        assert win.settings.library_folders == (str(lms),)
    finally:
        close_window(win)


def test_an_empty_lm_studio_folder_is_no_reason_to_skip_the_hub(qtbot, home: Path) -> None:
    (home / ".lmstudio" / "models" / "lmstudio-community").mkdir(parents=True)  # installed, nothing downloaded
    win = make_window(qtbot)
    try:
        qtbot.waitUntil(lambda: _first_page_shown(win))
        assert win.models.tabs.currentIndex() == ModelsTab.HUB.position
        assert win.banner.isVisible() and win.banner.text.text() == HINT
    finally:
        close_window(win)


def test_the_no_model_hint_goes_once_a_model_is_added_to_the_library(qtbot, home: Path, tmp_path: Path) -> None:
    win = make_window(qtbot)
    try:
        qtbot.waitUntil(lambda: _first_page_shown(win))
        assert win.banner.isVisible() and win.banner.text.text() == HINT
        tab = win.models.library_tab
        tab.add_folder(write_tiny_model(tmp_path / "my models" / "tiny.gguf").parent)  # as Add a folder… does
        qtbot.waitUntil(lambda: len(tab.model.entries) == 1)
        assert tab.model.entries[0].ok
        assert not win.banner.isVisible()
        assert win.pages.currentIndex() == 1  # still where the person is, now with the model listed
    finally:
        close_window(win)


def test_a_first_start_with_a_model_in_the_hugging_face_cache_stays_on_the_chat_which_offers_it(
    qtbot, home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "hf-cache" / "models--someone--Tiny-GGUF"
    commit = "c0ffee" * 6 + "1234"
    blob = write_tiny_model(repo / "blobs" / "0123abcd", name="Cached Tiny")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "tiny-Q4_0.gguf").symlink_to(blob)
    win = make_window(qtbot)
    try:
        qtbot.waitUntil(lambda: win.models.library_tab.scanned)
        # The first page is decided in the slot that marks the scan done, so it is decided now.
        assert [e.name for e in win.models.library_tab.model.entries] == ["Cached Tiny"]
        assert win.pages.currentIndex() == 0 and not win.notices.showing(NoticeTopic.FIRST_START)
        assert "Load tiny-Q4_0" in win.chat_view.placeholder.text()  # the empty chat offers it
    finally:
        close_window(win)


def test_a_first_start_with_a_model_that_does_not_exist_keeps_saying_so(qtbot, home: Path, tmp_path: Path) -> None:
    """``--model`` naming a missing file on a first start: the Models page opens (where to pick another),
    and the error stays on screen instead of the first start's hint taking its place."""
    from app.ui.window.compose import open_model
    from app.ui.window.pages import Page

    missing = tmp_path / "nope.gguf"
    win = make_window(qtbot)
    try:
        qtbot.waitUntil(lambda: _first_page_shown(win))
        win.show_page(Page.CHAT)
        # As at a real first start: the load of --model is refused before the first start decides
        # (the library's scan and the look into other apps' folders take longer).
        open_model(win, missing, explicit=True)
        win.first_start._open([])
        assert win.pages.currentIndex() == 1 and win.models.tabs.currentIndex() == ModelsTab.HUB.position
        assert win.banner.isVisible() and f"The model file {missing} does not exist" in win.banner.text.text()
        assert not win.notices.showing(NoticeTopic.FIRST_START)
    finally:
        close_window(win)
