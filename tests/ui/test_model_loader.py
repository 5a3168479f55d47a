"""The model loader (app/ui/window/model_loader.py) in the window, on the fake engine: one
``model_changed`` per step of a model's life, followed by the top bar, the Model panel and the
Models page; what it remembers for Reload and Restart."""

from __future__ import annotations

from dataclasses import replace

from app.core import protocol as P
from app.ui.engine.client import EngineState
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.top_bar import NO_MODEL_TEXT
from tests.support.fake_engine import FakeEngine
from tests.support.window import close_window, open_window

WAIT_MS = 5_000  # the fake engine answers in milliseconds; this is only a guard


def _record(win) -> list[ModelChange]:
    changes: list[ModelChange] = []
    win.loader.model_changed.connect(changes.append)
    return changes


def test_a_load_is_announced_loading_then_loaded_and_the_followers_show_it(qtbot, tiny_model):
    win = open_window(qtbot, FakeEngine(), ready_timeout_ms=WAIT_MS)
    try:
        changes = _record(win)
        with qtbot.waitSignal(win.engine.model_loaded, timeout=WAIT_MS):
            assert win.loader.load_model(str(tiny_model))
        assert [c.phase for c in changes] == [ModelPhase.LOADING, ModelPhase.LOADED]
        loading, loaded = changes
        assert loading.request is not None and loading.request.path == str(tiny_model.resolve())
        assert loaded.request == loading.request and loaded.loaded is win.engine.model
        # The settings as asked: threads stay "auto" where the engine reports the number it used.
        asked = win.settings.load_for(str(tiny_model.resolve()))
        assert loaded.applied == asked and loaded.applied.n_threads == 0 and loaded.loaded.n_threads >= 1
        assert win.loader.loading is None and win.loader.asked == loading.request
        assert win.top_bar.model_text.startswith(tiny_model.stem)
        assert win.model_panel.loaded is win.engine.model
        assert win.settings.recent_models[0] == str(tiny_model.resolve())
        assert win.windowTitle().startswith(tiny_model.stem)
        # Unloading: the followers show no model.
        changes.clear()
        win.loader.unload_model()
        assert [c.phase for c in changes] == [ModelPhase.UNLOADED]
        assert win.top_bar.model_text == NO_MODEL_TEXT and win.model_panel.loaded is None
    finally:
        close_window(win)


def test_a_failed_load_is_not_loaded_again_by_a_restart_but_a_reload_retries_it(qtbot, tiny_model):
    engine = FakeEngine()
    win = open_window(qtbot, engine, ready_timeout_ms=WAIT_MS)
    try:
        changes = _record(win)
        engine.fail_next_load("llama.cpp could not load this model.")
        with qtbot.waitSignal(engine.model_load_failed, timeout=WAIT_MS):
            win.loader.load_model(str(tiny_model))
        assert [c.phase for c in changes] == [ModelPhase.LOADING, ModelPhase.FAILED]
        assert win.top_bar.model_text == NO_MODEL_TEXT and "could not load" in win.banner.text.text()
        loads = len(engine.sent(P.LoadModel))
        with qtbot.waitSignal(engine.engine_ready, timeout=WAIT_MS):
            win.loader.restart_engine()
        qtbot.waitUntil(lambda: engine.state == EngineState.NO_MODEL, timeout=WAIT_MS)
        assert len(engine.sent(P.LoadModel)) == loads
        # The Model panel's Reload with other settings asks for the same file again.
        smaller = replace(win.loader.current_load, n_ctx=512)
        with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
            win.loader.reload_with(smaller)
        sent = engine.sent(P.LoadModel)[-1]
        assert sent.path == str(tiny_model.resolve()) and sent.settings.n_ctx == 512
        assert changes[-1].phase is ModelPhase.LOADED and win.settings.load_for(sent.path).n_ctx == 512
    finally:
        close_window(win)
