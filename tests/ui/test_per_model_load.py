"""Load settings remembered per model file (app/ui/window/per_model.py, ``Settings.model_load``), in
the window on the scripted engine: A keeps its n_ctx and flash attention, B gets Glassbox's defaults,
Reset goes back to them, and the Library says what the selected file will load with."""

from __future__ import annotations

import shutil
from dataclasses import replace

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, FlashAttention, LoadSettings
from app.paths import default_paths
from tests.support.window import close_window, load, make_window


def _two_models(tiny_model):
    """Two files in Glassbox's models folder (the Library lists them): A and B."""
    models = default_paths().ensure().models_dir
    a, b = models / "Model-A-Q4_1.gguf", models / "Model-B-Q4_1.gguf"
    shutil.copyfile(tiny_model, a)
    shutil.copyfile(tiny_model, b)
    return a.resolve(), b.resolve()


def _sent(win) -> LoadSettings:
    return win.engine.sent(P.LoadModel)[-1].settings


def test_each_file_loads_with_its_own_remembered_settings_and_reset_goes_back_to_the_defaults(qtbot, tiny_model):
    a, b = _two_models(tiny_model)
    win = make_window(qtbot)
    try:
        panel, memory = win.model_panel, win.model_panel.memory
        load(qtbot, win, a)
        assert _sent(win) == LoadSettings()  # never opened before: Glassbox's defaults
        assert memory.text.text().startswith("Glassbox's defaults") and not memory.reset_btn.isVisibleTo(panel)
        # The person sets n_ctx 8192 and flash attention on for A, and applies them.
        panel.n_ctx.setValue(8192)
        panel.flash_attn.setCurrentIndex(panel.flash_attn.findData(FlashAttention.ON.value))
        with qtbot.waitSignal(win.engine.model_loaded, timeout=5000):
            qtbot.mouseClick(panel.apply_btn, Qt.MouseButton.LeftButton)
        assert (_sent(win).n_ctx, _sent(win).flash_attn) == (8192, FlashAttention.ON)
        assert memory.text.text().startswith("Remembered for this file: n_ctx 8192, flash attention on")
        assert memory.reset_btn.isVisibleTo(panel)
        # B was never set: it loads with the defaults, and the panel shows them.
        load(qtbot, win, b)
        assert _sent(win) == LoadSettings() and panel.load_settings() == LoadSettings()
        assert memory.text.text().startswith("Glassbox's defaults")
        # Back to A: its own settings again.
        load(qtbot, win, a)
        assert (_sent(win).n_ctx, _sent(win).flash_attn) == (8192, FlashAttention.ON)
        assert panel.load_settings().n_ctx == 8192
        # Reset: the fields show the defaults, still remembered until Apply reloads with them and forgets.
        qtbot.mouseClick(memory.reset_btn, Qt.MouseButton.LeftButton)
        assert win.settings.remembered_load(str(a)) is not None and panel.load_settings() == LoadSettings()
        assert panel.apply_btn.property("pending")
        with qtbot.waitSignal(win.engine.model_loaded, timeout=5000):
            qtbot.mouseClick(panel.apply_btn, Qt.MouseButton.LeftButton)
        assert _sent(win) == LoadSettings() and win.settings.remembered_load(str(a)) is None
        assert memory.text.text().startswith("Glassbox's defaults") and "Not applied yet" not in memory.text.text()
    finally:
        close_window(win)


def test_an_edit_not_applied_is_not_remembered_and_goes_when_another_model_loads(qtbot, tiny_model):
    a, b = _two_models(tiny_model)
    win = make_window(qtbot)
    try:
        panel, memory = win.model_panel, win.model_panel.memory
        load(qtbot, win, a)
        panel.n_ctx.setValue(512)  # typed, not applied
        assert win.settings.remembered_load(str(a)) is None  # before: n_ctx 512 remembered at once
        assert panel.apply_btn.property("pending") and "Not applied yet: n_ctx 512 (Apply reloads" in memory.text.text()
        assert "dropped if another model loads first" in memory.text.text()
        load(qtbot, win, b)
        assert "Not applied yet" not in memory.text.text()
        load(qtbot, win, a)  # back to A: the edit went, A loads as before
        assert _sent(win) == LoadSettings() and panel.load_settings().n_ctx == LoadSettings().n_ctx
        assert memory.text.text().startswith("Glassbox's defaults") and win.settings.remembered_load(str(a)) is None
        # The context policy applies to the next reply without a reload: it is remembered at once.
        panel.policy.setCurrentIndex(panel.policy.findData(ContextPolicy.ROLLING.value))
        assert win.settings.load_for(str(a)).context_policy is ContextPolicy.ROLLING
        assert "Not applied yet" not in memory.text.text()
        # Applied: remembered.
        panel.n_ctx.setValue(512)
        with qtbot.waitSignal(win.engine.model_loaded, timeout=5000):
            qtbot.mouseClick(panel.apply_btn, Qt.MouseButton.LeftButton)
        assert win.settings.load_for(str(a)).n_ctx == 512
        assert memory.text.text().startswith("Remembered for this file: n_ctx 512")
        assert "Not applied yet" not in memory.text.text()
    finally:
        close_window(win)


def test_reset_keeps_the_template_override_which_has_its_own_button(qtbot, tiny_model):
    a, _b = _two_models(tiny_model)
    win = make_window(qtbot)
    try:
        memory = win.model_panel.memory
        load(qtbot, win, a)
        win.loader.remember(replace(LoadSettings(), n_ctx=2048))
        win.settings_ctl.apply(lambda s: s.with_chat_template(str(a), "{{ messages[0].content }}"))
        assert memory.template_btn.isVisibleTo(win.model_panel)
        memory.reset_btn.click()
        with qtbot.waitSignal(win.engine.model_loaded, timeout=5000):
            win.model_panel.apply_btn.click()
        assert win.settings.remembered_load(str(a)) is None
        assert win.settings.chat_template_for(str(a)) is not None  # Reset leaves the template alone
        memory.template_btn.click()
        assert win.settings.chat_template_for(str(a)) is None and not memory.template_btn.isVisibleTo(win.model_panel)
        win.per_model.refresh()  # nothing else changed: the same line
        assert memory.text.text().startswith("Glassbox's defaults")
    finally:
        close_window(win)


def test_reset_is_an_edit_not_applied_forgotten_only_by_apply_and_dropped_when_another_model_loads(qtbot, tiny_model):
    """Review 27 §1: Reset forgot the file's settings at once (settings.json's model_load {}, the Library
    "Glassbox's defaults") while the panel said "Not applied yet ... dropped if another model loads first"."""
    a, b = _two_models(tiny_model)
    win = make_window(qtbot)
    try:
        panel, memory, lib = win.model_panel, win.model_panel.memory, win.models.library_tab
        remembered = LoadSettings(n_ctx=512, flash_attn=FlashAttention.ON)
        win.settings_ctl.apply(lambda s: s.with_load_for(str(a), remembered))
        load(qtbot, win, a)
        qtbot.waitUntil(lambda: lib.scanned and lib.model.row_of(a) >= 0, timeout=5000)
        assert lib.select_path(a)
        memory.reset_btn.click()
        # Shown, not applied: the file's settings are still remembered, and every place says so.
        assert panel.load_settings() == LoadSettings() and panel.apply_btn.property("pending")
        assert win.settings.remembered_load(str(a)) == remembered
        assert "(remembered for this file)" in lib.detail_load.text() and "n_ctx 512" in lib.detail_load.text()
        text = memory.text.text()
        assert text.startswith("Remembered for this file: n_ctx 512, flash attention on"), text
        assert "Not applied yet: Glassbox's defaults (n_ctx 4096" in text and "forgets this file's settings" in text
        # Another model loads first: the reset is dropped; A comes back with its settings.
        load(qtbot, win, b)
        load(qtbot, win, a)
        assert _sent(win) == remembered and panel.load_settings().n_ctx == 512
        # Reset, then Apply: reloaded with the defaults, and only now forgotten.
        memory.reset_btn.click()
        with qtbot.waitSignal(win.engine.model_loaded, timeout=5000):
            qtbot.mouseClick(panel.apply_btn, Qt.MouseButton.LeftButton)
        assert _sent(win) == LoadSettings() and win.settings.remembered_load(str(a)) is None
        assert (
            memory.text.text().startswith("Glassbox's defaults") and "(Glassbox's defaults)" in lib.detail_load.text()
        )
    finally:
        close_window(win)


def test_the_library_shows_what_the_selected_file_will_load_with(qtbot, tiny_model):
    a, b = _two_models(tiny_model)
    win = make_window(qtbot)
    try:
        win.settings_ctl.apply(lambda s: s.with_load_for(str(a), LoadSettings(n_ctx=8192, flash_attn="on")))
        lib = win.models.library_tab
        qtbot.waitUntil(lambda: lib.scanned and lib.model.row_of(a) >= 0, timeout=5000)
        assert lib.select_path(a)
        line = lib.detail_load.text()
        assert "n_ctx 8192" in line and "flash attention on" in line and "(remembered for this file)" in line
        assert lib.select_path(b)
        assert "n_ctx 4096" in lib.detail_load.text() and "(Glassbox's defaults)" in lib.detail_load.text()
        # A change in the settings shows at once on the selected row.
        win.settings_ctl.apply(lambda s: s.with_load_for(str(b), LoadSettings(n_ctx=1024)))
        assert "n_ctx 1024" in lib.detail_load.text() and "remembered" in lib.detail_load.text()
    finally:
        close_window(win)


def _wheel_down(widget) -> None:
    """Three notches of a mouse wheel down over ``widget``'s centre."""
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    ev = QWheelEvent(
        pos,
        QPointF(widget.mapToGlobal(pos.toPoint())),
        QPoint(0, 0),
        QPoint(0, -360),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, ev)


def test_a_button_that_hides_itself_leaves_no_focus_in_n_ctx_for_the_wheel(qtbot, tiny_model):
    """Review 27 §10: a button of the memory box hid itself once pressed, Qt gave its focus to the next widget in
    the chain, the n_ctx field, and the wheel scrolling the Model panel then changed n_ctx (4096 -> 4352)."""
    a, _b = _two_models(tiny_model)
    win = make_window(qtbot)
    try:
        panel, memory = win.model_panel, win.model_panel.memory
        load(qtbot, win, a)
        win.show()
        win.activateWindow()
        win.settings_ctl.apply(lambda s: s.with_chat_template(str(a), "{{ messages[0].content }}"))
        assert memory.template_btn.isVisibleTo(panel)
        memory.template_btn.setFocus(Qt.FocusReason.MouseFocusReason)  # as a click gives it
        memory.template_btn.click()  # the override goes: the button hides itself
        assert not memory.template_btn.isVisibleTo(panel) and not panel.n_ctx.hasFocus()
        before = panel.n_ctx.value()
        _wheel_down(panel.n_ctx)
        assert panel.n_ctx.value() == before and not panel.unapplied()
    finally:
        close_window(win)
