"""Help → How it works on the fake engine: opened from the Help menu, its figures are the loaded
model's GGUF values (and change with the model), every "Live:" link brings its place forward,
and without a model it says so."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QDockWidget, QTabBar, QWidget

from app.core.gguf.gguf_info import format_bytes, read_gguf_info
from app.core.inspection.pipeline_guide import NO_MODEL, LiveView
from app.core.sampling.params import SamplerStage
from app.ui.common.accessibility import needs_name
from app.ui.window.how_it_works import INSPECT_HINT, LIVE_SCHEME, HowItWorksWindow
from app.ui.window.main_window import MainWindow
from app.ui.window.menus import shortcut_sheet
from tests.support.moe_model import write_moe_gguf
from tests.support.window import close_window, load, make_window

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support raise")  # the guide window raised, offscreen


def _help_action(win: MainWindow, text: str):
    help_menu = next(a.menu() for a in win.menuBar().actions() if a.text().replace("&", "") == "Help")
    return next(a for a in help_menu.actions() if a.text().replace("&", "") == text)


def _open(win: MainWindow) -> HowItWorksWindow:
    _help_action(win, "How it works").trigger()
    guide = win.findChild(HowItWorksWindow)
    assert guide is not None and guide.isVisible() and not guide.isModal()
    return guide


def _text(guide: HowItWorksWindow) -> str:
    return guide.browser.toPlainText()


def _figures(guide: HowItWorksWindow, key: str) -> dict[str, str]:
    return dict(next(s for s in guide.sections if s.key == key).figures)


def test_the_guide_opens_from_the_help_menu_and_says_load_a_model_without_one(qtbot):
    win = make_window(qtbot)
    try:
        act = _help_action(win, "How it works")
        assert act.shortcuts() and act.shortcuts()[0].toString() == "Shift+F1"
        assert ("Help → How it works", act.shortcuts()[0].toString()) in [
            (what, keys.split(" or ")[0]) for what, keys in shortcut_sheet(win.menuBar())
        ]
        guide = _open(win)
        assert guide.browser.accessibleName()
        text = _text(guide)
        # Every section of the pipeline, in order, each saying there is no model (the serving
        # section describes the app, not a model).
        titles = [s.title for s in guide.sections]
        assert titles[0].endswith("Text → tokens") and titles[-1].endswith("Where the weights came from")
        assert [text.index(t) for t in titles] == sorted(text.index(t) for t in titles)
        no_model = [s.key for s in guide.sections if ("figures", NO_MODEL) in s.figures]
        assert no_model == [s.key for s in guide.sections if s.key != "serving"]
        assert text.count(NO_MODEL) == len(no_model)
        # Opening it again shows the same window, not a second one.
        _help_action(win, "How it works").trigger()
        assert win.findChildren(HowItWorksWindow) == [guide]
    finally:
        close_window(win)


def test_the_guides_figures_are_the_loaded_models_and_change_with_it(qtbot, smollm2, gemma):
    win = make_window(qtbot)
    try:
        guide = _open(win)
        for path in (smollm2, gemma):
            load(qtbot, win, path)
            info = read_gguf_info(path)
            md, arch = info.metadata, info.architecture
            loaded = win.engine.model
            assert loaded is not None and loaded.info.path == info.path
            n_vocab = info.array_lengths["tokenizer.ggml.tokens"]
            n_embd = md[f"{arch}.embedding_length"]
            n_head, n_head_kv = md[f"{arch}.attention.head_count"], md[f"{arch}.attention.head_count_kv"]
            embd = next(t for t in info.tensors if t.name == "token_embd.weight")
            text = _text(guide)
            assert info.name in text
            assert f"[n_vocab {n_vocab:,}, n_embd {n_embd:,}]" in _figures(guide, "embeddings")["table"]
            assert _figures(guide, "embeddings")["stored as"].startswith(f"{embd.type_name} · ")
            assert _figures(guide, "tokens")["vocabulary"] == f"{n_vocab:,} tokens"
            assert _figures(guide, "blocks")["blocks"] == f"{md[f'{arch}.block_count']} (n_layer)"
            heads = _figures(guide, "attention")["heads"]
            kind = (
                "multi-head"
                if n_head_kv == n_head
                else "multi-query"
                if n_head_kv == 1
                else f"GQA {n_head // n_head_kv}:1"
            )
            assert heads.startswith(f"{n_head} query heads") and f" {n_head_kv} K/V head" in heads
            assert heads.split(": ")[1].startswith(kind)
            head_dim = md.get(f"{arch}.attention.key_length", n_embd // n_head)
            assert _figures(guide, "attention")["head_dim"].startswith(f"{head_dim} (K)")
            base = md[f"{arch}.rope.freq_base"]
            want = f"{int(base):,}" if base == int(base) else str(base)
            assert want in [part.split(" (")[0] for part in _figures(guide, "rope")["base"].split(" · ")]
            assert f"tokenizer.ggml.model = {md['tokenizer.ggml.model']}" in _figures(guide, "tokens")["tokenizer"]
            assert _figures(guide, "rope")["trained context"] == f"{md[f'{arch}.context_length']:,} tokens"
            ffn = _figures(guide, "ffn")["n_ff"]
            assert ffn.startswith(f"{md[f'{arch}.feed_forward_length']:,} ")
            tied = not any(t.name == "output.weight" for t in info.tensors)
            assert _figures(guide, "head")["LM head"].startswith("tied" if tied else "its own")
            window = md.get(f"{arch}.attention.sliding_window")
            swa = _figures(guide, "attention")["sliding window"]
            n_swa = sum(info.swa_layers())
            n_layer = md[f"{arch}.block_count"]
            if window:
                assert swa == (
                    f"{n_swa} of {n_layer} layers see the last {window:,} tokens; "
                    f"the other {n_layer - n_swa} see the whole context"
                )
            else:
                assert swa.startswith(f"none: all {n_layer} layers")
            kv = _figures(guide, "kv")
            assert kv["size at n_ctx"] == f"{format_bytes(loaded.kv_allocated_bytes)} for {loaded.n_ctx:,} tokens"
            assert kv["types"] == f"K {loaded.kv_layout.type_k} · V {loaded.kv_layout.type_v}"
            types = _figures(guide, "quant")["tensor types"]
            assert {t.type_name for t in info.tensors} == {part.split(" ×")[0] for part in types.split(", ")}
            general = _figures(guide, "training")
            assert general["name"] == md["general.name"]
            assert all(general.get(k.removeprefix("general.")) for k in md if k.startswith("general.license"))
            assert NO_MODEL not in text
        # Gemma 3's figures replaced SmolLM2's.
        smol = read_gguf_info(smollm2)
        assert f"[n_vocab {smol.n_vocab:,}," not in _text(guide)
        win.unload_model()
        assert NO_MODEL in _text(guide)
    finally:
        close_window(win)


def test_a_mixture_of_experts_model_shows_its_experts_and_untied_head(qtbot, smollm2, tmp_path):
    path = write_moe_gguf(tmp_path / "tiny-moe.gguf", smollm2)
    md = read_gguf_info(path).metadata
    win = make_window(qtbot)
    try:
        guide = _open(win)
        load(qtbot, win, path)
        ffn = _figures(guide, "ffn")
        want = f"{md['llama.expert_count']} per layer, {md['llama.expert_used_count']} used per token"
        assert ffn["experts"] == want and "n_ff" not in ffn
        assert _figures(guide, "head")["LM head"].startswith("its own matrix")
        # A failed load leaves no model (the old one is gone): the guide says so.
        assert NO_MODEL not in _text(guide)
        win.engine.fail_next_load("the file is damaged")
        with qtbot.waitSignal(win.engine.model_load_failed):
            win.load_model(str(path))
        assert win.engine.model is None and NO_MODEL in _text(guide)
    finally:
        close_window(win)


def test_the_sampling_section_shows_the_chain_in_effect(qtbot, window):
    guide = _open(window)
    assert "top_k" in _figures(guide, "sampling")["chain now"]
    s = window.settings.sampler
    window.settings_ctl.update(sampler=replace(s, top_k=0, order=(SamplerStage.TEMPERATURE, *s.order[:-1])))
    chain = _figures(guide, "sampling")["chain now"]
    assert "top_k" not in chain and chain.startswith("logit bias → temperature → ")


def _raised(win: MainWindow, dock: QDockWidget) -> bool:
    """Shown, and the front tab where it shares its place with other docks."""
    if not dock.isVisible():
        return False
    tabbed = win.tabifiedDockWidgets(dock)
    if not tabbed:
        return True
    bars = [b for b in win.findChildren(QTabBar) if dock.windowTitle() in [b.tabText(i) for i in range(b.count())]]
    return len(bars) == 1 and bars[0].tabText(bars[0].currentIndex()) == dock.windowTitle()


def test_every_live_link_brings_its_place_forward(qtbot, window):
    guide = _open(window)
    docks = {
        LiveView.TOKENS: window.tokens_dock,
        LiveView.INSPECT: window.tokens_dock,
        LiveView.STATS: window.stats_dock,
        LiveView.TIMELINE: window.timeline_dock,
        LiveView.FUNNEL: window.funnel_dock,
        LiveView.SAMPLER: window.sampler_dock,
        LiveView.MODEL: window.model_dock,
        LiveView.SERVER: window.server_dock,
    }
    linked = [v for s in guide.sections for v in s.live]
    assert set(linked) == set(LiveView)  # every place is linked from some section
    assert all(s.live for s in guide.sections)
    html = guide.browser.toHtml()
    for view in set(linked):
        assert f'href="{LIVE_SCHEME}:{view.value}"' in html
        # Start from the place hidden or behind another: the other page shown, the dock closed,
        # its tab-mate in front.
        window.show_page("models") if view is not LiveView.MODELS_PAGE else window.show_page("chat")
        window.banner.hide()
        dock = docks.get(view)
        if dock is not None:
            dock.hide()
            for other in window.tabifiedDockWidgets(dock):
                other.show()
                other.raise_()
            assert not _raised(window, dock)
        with qtbot.waitSignal(guide.live_view_chosen):
            guide.browser.anchorClicked.emit(QUrl(f"{LIVE_SCHEME}:{view.value}"))
        if dock is not None:
            qtbot.waitUntil(lambda d=dock: _raised(window, d), timeout=2_000)
        if view is LiveView.MODELS_PAGE:
            assert window.pages.currentIndex() == 1
        if view is LiveView.INSPECT:
            assert window.pages.currentIndex() == 0
            assert window.banner.isVisible() and window.banner.text.text() == INSPECT_HINT


def test_the_guides_links_are_reachable_by_keyboard_and_its_parts_named(qtbot, window):
    guide = _open(window)
    assert [w for w in guide.findChildren(QWidget) if needs_name(w)] == []
    assert guide.browser.accessibleName().startswith("How it works")
    guide.browser.setFocus()
    followed: list[QUrl] = []
    guide.browser.anchorClicked.disconnect()
    guide.browser.anchorClicked.connect(followed.append)
    qtbot.keyClick(guide.browser, Qt.Key.Key_Tab)
    qtbot.keyClick(guide.browser, Qt.Key.Key_Return)
    assert followed and followed[0].fragment() == guide.sections[0].key  # the contents line's first link
