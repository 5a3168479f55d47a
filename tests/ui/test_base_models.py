"""Base models in the window: a model without a chat template says so once per chat, and the
Template… dialog's presets fill the override and are checked like a typed template."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.chat.template_presets import PRESETS, TemplateFamily, preset
from app.ui.panels.template import TemplateDialog
from app.ui.window.base_model import NO_TEMPLATE_TEXT
from app.ui.window.notices import NoticeTopic
from tests.support.fake_engine import reply
from tests.support.models import llama_metadata, llama_tensors, write_gguf
from tests.support.window import banner_button, capture_requests, close_window, load, make_window, send


@pytest.fixture(scope="module")
def base_model(tmp_path_factory) -> Path:
    """A tiny llama GGUF without ``tokenizer.chat_template`` (a base model)."""
    path = tmp_path_factory.mktemp("base") / "Tiny-Base-Q4_1.gguf"
    return write_gguf(path, llama_metadata(name="Tiny Base", file_type=3), llama_tensors(qtype="Q4_1")).resolve()


def _told(win) -> bool:
    return win.notices.showing(NoticeTopic.BASE_MODEL) and "no chat template" in win.banner.text.text()


def test_a_model_without_a_chat_template_says_so_once_per_chat(qtbot, base_model, tiny_model):
    win = make_window(qtbot)
    try:
        load(qtbot, win, base_model)
        # The new, empty chat is told, with what Glassbox does instead and Template… offered.
        qtbot.waitUntil(lambda: _told(win), timeout=5000)
        assert "plain transcript" in win.banner.text.text() and "User:" in win.banner.text.text()
        win.notices.hide()
        win.engine.script(reply("Once", " upon"))
        send(qtbot, win, "Tell me a story")
        first = win.chat.conversation_id
        assert first is not None and not win.banner.isVisible()  # stored by its first message: told already
        win.new_chat()
        assert _told(win)  # another chat: told once
        win.notices.hide()
        win.engine.script(reply("Hi"))
        send(qtbot, win, "Hello")
        second = win.chat.conversation_id
        win.open_conversation(first)
        win.open_conversation(second)
        assert not win.banner.isVisible()  # both told already
        third = win.conversations.create_conversation(title="Older chat")
        win.conversations.add_message(third, None, Role.USER, "Hi")
        win.open_conversation(third)
        assert _told(win)  # a stored chat shown for the first time
        win.notices.hide()
        win.open_conversation(first)
        win.open_conversation(third)
        assert not win.banner.isVisible()
        # Template… opens the dialog, which says what the model lacks and offers the presets.
        win.new_chat()
        banner_button(win, "Template…").click()
        (dialog,) = win.findChildren(TemplateDialog)
        try:
            assert "no chat template" in dialog.source_label.text()
            assert set(dialog.preset_buttons) == {f.value for f in TemplateFamily}
        finally:
            dialog.close()
        # A model with a template says nothing and takes the notice away.
        win.new_chat()
        assert _told(win)
        load(qtbot, win, tiny_model)
        assert not win.notices.showing(NoticeTopic.BASE_MODEL)
        win.new_chat()
        assert not win.notices.showing(NoticeTopic.BASE_MODEL)
    finally:
        close_window(win)


def test_a_base_model_with_an_override_is_not_told(qtbot, base_model):
    win = make_window(qtbot)
    try:
        win.settings_ctl.apply(lambda s: s.with_chat_template(str(base_model), preset(TemplateFamily.CHATML).source))
        load(qtbot, win, base_model)
        win.new_chat()
        assert not win.notices.showing(NoticeTopic.BASE_MODEL)
        assert NO_TEMPLATE_TEXT not in win.banner.text.text()
    finally:
        close_window(win)


def test_a_template_set_while_told_takes_the_notice_away_and_the_model_panel_says_so(qtbot, base_model):
    win = make_window(qtbot)
    try:
        load(qtbot, win, base_model)
        qtbot.waitUntil(lambda: _told(win), timeout=5000)
        fact = win.model_panel._template_fact
        assert fact is not None and fact.text().startswith("none: plain")
        win.settings_ctl.apply(lambda s: s.with_chat_template(str(base_model), preset(TemplateFamily.GEMMA).source))
        assert not win.notices.showing(NoticeTopic.BASE_MODEL)
        assert fact.text().startswith("yours")
        win.settings_ctl.apply(lambda s: s.with_chat_template(str(base_model), None))  # back to the GGUF's
        assert fact.text().startswith("none: plain")
        assert not win.notices.showing(NoticeTopic.BASE_MODEL)  # this chat was told already
    finally:
        close_window(win)


@pytest.mark.parametrize("family", list(TemplateFamily), ids=[f.name for f in TemplateFamily])
def test_a_preset_fills_the_override_and_is_checked_like_a_typed_one(qtbot, base_model, family):
    chosen = preset(family)
    win = make_window(qtbot)
    try:
        load(qtbot, win, base_model)
        sent = capture_requests(win)
        dialog = win.show_template()
        assert dialog is not None
        try:
            qtbot.waitUntil(lambda: dialog.rendered is not None, timeout=5000)
            assert dialog.rendered.source is P.TemplateSource.PLAIN
            dialog.preset_buttons[family.value].click()
            assert dialog.editor.toPlainText() == chosen.source
            # Previewed at once in the family's format ...
            qtbot.waitUntil(lambda: dialog.rendered.source is P.TemplateSource.OVERRIDE, timeout=5000)
            assert chosen.turn_marker in dialog.rendered.text
            # ... and kept only after the check on the sample conversation, as a typed template is.
            dialog.use_button.click()
            path = str(base_model)
            qtbot.waitUntil(lambda: win.settings_ctl.settings.chat_template_for(path) == chosen.source, timeout=5000)
            checks = [r for r in sent if isinstance(r, P.RenderPrompt) and r.chat_template == chosen.source]
            assert any(not r.messages for r in checks)
            assert "your chat template" in dialog.source_label.text()
        finally:
            dialog.close()
    finally:
        close_window(win)


def test_every_family_has_one_preset():
    assert [p.family for p in PRESETS] == list(TemplateFamily)
