"""What a new user still found in the window: squeezed message actions, Stats at
first start, a Continue stopped during prefill, titles with two "…", display math inside a
sentence, the docks at 800x500, a search jump in a long chat, and a first start with no model."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint, QRect, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QDockWidget,
    QLabel,
    QScrollArea,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.context import Role
from app.ui.chat.header import MORE_NAME
from app.ui.chat.markdown import render_text
from app.ui.chat.message import BadgeKind, MessageWidget
from app.ui.models.window import ModelsTab
from app.ui.theme import apply_theme
from app.ui.window.first_start import HINT
from tests.support.fake_engine import Endless, FakeEngine
from tests.support.window import close_window, load, make_window, reply_over, send
from tests.ui.test_long_chat import N_MESSAGES, OLD_WORD, _long_chat, _on_screen


# ------------------------------------------------------------------ 1. message actions at a narrow width
def _every_action(w: MessageWidget) -> list[QAbstractButton]:
    return [w.prev_btn, w.next_btn, w.continue_btn, w.info_btn, w.tokens_btn, w.copy_btn, w.edit_btn, w.regen_btn]


def _assert_reachable_and_unelided(w: MessageWidget, trigger: bool = False) -> int:
    """Every offered action is a visible button wide enough for its text, or a "⋯" menu entry for
    it (``trigger``: each entry is triggered and must click its button). Returns how many are in the menu."""
    header = w.header
    for _ in range(3):
        QApplication.processEvents()  # the row's layout runs on its posted request
    actions = [*_every_action(w), w.delete_btn]
    on_row = [b for b in actions if b.isVisible()]
    for b in on_row:
        assert b.width() >= b.sizeHint().width(), f"{b.text()!r} is squeezed to {b.width()} < {b.sizeHint().width()}"
    entries, in_menu = header.menu_entries(), header.menu_buttons()
    assert len(entries) == len(in_menu)
    if entries:
        assert header.more.isVisible() and header.more.accessibleName() == MORE_NAME
        assert header.more.focusPolicy() & Qt.FocusPolicy.TabFocus  # keyboard reachable
        assert header.more.width() >= header.more.sizeHint().width()
    else:
        assert not header.more.isVisible()
    assert set(map(id, on_row)).isdisjoint(map(id, in_menu))  # the menu holds only what the row does not
    offered = [b for b in actions if header.is_offered(b)]
    assert {id(b) for b in offered} == {id(b) for b in on_row} | {id(b) for b in in_menu}
    if trigger:
        clicked: list[QAbstractButton] = []
        for b in actions:
            b.clicked.connect(lambda _c=False, b=b: clicked.append(b))
        for act in entries:
            act.trigger()
        assert [id(b) for b in clicked] == [id(b) for b in in_menu]
        if w.details_dialog is not None:
            w.details_dialog.close()
    return len(entries)


_HOSTS: list[QWidget] = []  # the test's host widget lives as long as the test (qtbot keeps a weak reference)


def _reply_with_every_action(qtbot, width: int) -> MessageWidget:
    apply_theme(QApplication.instance())
    host = QWidget()
    lay = QVBoxLayout(host)
    w = MessageWidget(Role.ASSISTANT, "A reply that was cut off.", "SmolLM2-135M-Instruct-Q4_1", message_id=7)
    w.set_branch(2, 3)
    w.set_how_made("SmolLM2 135M Q4_1 · temperature 0.7 · seed 42")
    w.set_can_show_tokens(True)
    w.set_can_continue(True)
    w.set_badge("max_tokens reached", BadgeKind.WARN)
    lay.addWidget(w)
    qtbot.addWidget(host)
    _HOSTS[:] = [host]
    host.resize(width, 300)
    host.show()
    qtbot.waitExposed(host)
    qtbot.waitUntil(lambda: w.header.width() > 0)
    return w


@pytest.mark.parametrize("width", [300, 420, 560, 1000])
def test_a_narrow_reply_header_shows_what_fits_and_puts_the_rest_in_a_more_menu(qtbot, width):
    w = _reply_with_every_action(qtbot, width)
    in_menu = _assert_reachable_and_unelided(w, trigger=True)
    if width <= 420:
        assert in_menu > 0
    if width >= 1000:
        assert in_menu == 0  # room for every action: no menu
    if width >= 420:
        assert w.continue_btn.isVisible()  # what a cut-off reply is for stays on the row first


@pytest.mark.qt_log_ignore("This plugin does not support")  # raise(), grabbing the keyboard: offscreen
def test_the_more_menu_opens_from_the_keyboard_and_its_entries_work(qtbot):
    w = _reply_with_every_action(qtbot, 300)
    seen: list = []
    w.action_requested.connect(lambda action, mid, payload: seen.append((action, mid)))
    names = [a.text() for a in w.header.menu_entries()]
    assert names and all(n and "…" not in n.removesuffix("…") for n in names)
    delete = next(a for a in w.header.menu_entries() if a.text() == "Delete")
    delete.trigger()
    assert seen == [("delete", 7)]
    w.header.more.setFocus()
    qtbot.waitUntil(w.header.more.hasFocus)
    opened: list[bool] = []

    def close_menu_once_shown() -> None:  # the menu runs its own event loop until closed
        if w.header.menu.isVisible():
            poll.stop()
            opened.append(True)
            w.header.menu.close()

    poll = QTimer()
    poll.setInterval(20)
    poll.timeout.connect(close_menu_once_shown)
    poll.start()
    qtbot.keyClick(w.header.more, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: bool(opened))  # Space opened the menu
    poll.stop()
    assert opened == [True]


def test_at_1280x720_a_cut_off_reply_keeps_every_action_reachable_and_unelided(qtbot, window):
    window.resize(1280, 720)
    window.engine.script(Endless("word "))
    send(qtbot, window, "Say many words.")
    reply_w = window.chat_view.messages[-1]
    reply_w.set_branch(1, 2)  # as a regenerated reply shows it
    qtbot.waitUntil(lambda: reply_w.badge.text() == "max_tokens reached" and reply_w.continue_btn.isVisible())
    _assert_reachable_and_unelided(reply_w)
    window.resize(900, 720)
    qtbot.waitUntil(lambda: reply_w.header.width() < 600)
    _assert_reachable_and_unelided(reply_w)


# ------------------------------------------------------------------ 2. Stats at first start
def test_stats_show_the_last_stored_reply_at_first_start(qtbot, tiny_model):
    win = make_window(qtbot)
    load(qtbot, win, tiny_model)
    fin = send(qtbot, win, "Remember this one.")
    close_window(win)
    again = make_window(qtbot, FakeEngine())  # the next start: the newest chat opens
    try:
        assert again.chat.conversation_id is not None
        again.stats_panel.refresh()
        assert again.stats_panel.phase.text().startswith("✓ Last reply in this chat (stored)")
        assert again.stats_panel.turn.generated == fin.stats.generated_tokens
        # The library's first scan has run, and then the repaint clock's panel tick (its slot runs first).
        qtbot.waitUntil(lambda: again.models.library_tab.scanned)
        with qtbot.waitSignal(again.clock.panels_due):
            pass
        assert again.stats_panel.phase.text().startswith("✓ Last reply in this chat (stored)")
        load(qtbot, again, tiny_model)  # the model of the last session loads at start
        qtbot.waitUntil(lambda: again.stats_panel.phase.text().startswith("✓ Last reply in this chat (stored)"))
    finally:
        close_window(again)


# ------------------------------------------------------------------ 3. Continue stopped during prefill
def test_a_continue_stopped_before_its_first_token_keeps_the_reply_stats_and_provenance(qtbot, window):
    window.engine.script(Endless("word "))
    send(qtbot, window, "Say many words.")
    reply_w = window.chat_view.messages[-1]
    mid = reply_w.message_id
    before = window.conversations.get_message(mid)
    assert before.meta.stats is not None and before.meta.stats.generated_tokens > 0
    footer, how, badge = reply_w.footer.text(), reply_w.how_made, reply_w.badge.text()
    assert badge == "max_tokens reached"
    window.engine.script(Endless("more "))
    with qtbot.waitSignal(window.engine.generation_finished, timeout=5_000) as blocker:
        reply_w.continue_btn.click()
        window.chat.stop()  # Esc before the first new token: during the prefill
    assert blocker.args[0].stats.generated_tokens == 0
    qtbot.waitUntil(lambda: reply_over(window))
    after = window.conversations.get_message(mid)
    assert after.content == before.content
    assert after.meta.stats == before.meta.stats and after.meta == before.meta
    assert not after.complete
    shown = window.chat_view.widget_for(mid)  # the chat's view may have been built again
    assert shown is not None
    assert (shown.footer.text(), shown.how_made, shown.badge.text()) == (footer, how, badge)
    assert shown.continue_btn.isVisible() and shown.continue_btn.isEnabled()


# ------------------------------------------------------------------ 4. one "…" in chat titles
@pytest.mark.qt_log_ignore("This plugin does not support raise")  # the floated dock, offscreen
def test_a_cut_title_gets_one_ellipsis_in_a_narrow_chats_list(qtbot, window):
    long = "Please explain in detail how the key value cache of a transformer grows with every token " * 2
    send(qtbot, window, long)
    panel = window.chats_panel
    title = window.conversations.get_conversation(window.chat.conversation_id).title
    assert title.endswith("…")
    window.chats_dock.setFloating(True)
    window.chats_dock.resize(240, 400)
    qtbot.waitUntil(lambda: panel.list.viewport().width() < 240)
    item = panel.list.item(0)
    option = QStyleOptionViewItem()
    option.initFrom(panel.list)
    option.rect = panel.list.visualItemRect(item)
    assert 0 < option.rect.width() <= panel.list.viewport().width()
    shown = panel.list.itemDelegate().shown_text(option, panel.list.indexFromItem(item))
    first_line = shown.split("\n")[0]
    assert first_line.count("…") == 1 and first_line != title  # cut by the list, once
    assert option.fontMetrics.horizontalAdvance(first_line) <= option.rect.width()
    assert item.toolTip() == title


def test_an_elided_label_cuts_a_title_that_ends_in_an_ellipsis_once(qtbot):
    from app.ui.common.elided_label import ElidedLabel

    label = ElidedLabel("A title that was already cut by the store at sixty characters…")
    qtbot.addWidget(label)
    label.resize(120, 20)
    assert label.elided_text().count("…") == 1


# ------------------------------------------------------------------ 5. display math inside a sentence
@pytest.mark.parametrize("source", ["the formula \\[x^2+1\\] is shown", "the formula $$x^2+1$$ is shown"])
def test_display_math_inside_a_sentence_gets_its_own_centred_line(qapp, source):
    html = render_text(source)
    before, formula, after = html.index("the formula"), html.index('<p align="center"><img'), html.index("is shown")
    assert before < formula < after
    assert "<p>the formula</p>" in html and "<p>is shown</p>" in html
    assert html.count("<img") == 1 and "\ue000" not in html and "$$" not in html and "\\[" not in html


def test_inline_math_stays_in_its_sentence_next_to_display_math(qapp):
    html = render_text("with $a$ and \\[b^2\\] then \\(c\\) done")
    assert html.count("<img") == 3 and html.count('<p align="center">') == 1
    assert html.index("with ") < html.index('<p align="center">') < html.index(" done")


# ------------------------------------------------------------------ 6. the docks at 800x500
def _cut_off(dock: QDockWidget) -> str:
    """What of the dock's content is cut off and cannot be scrolled to ('' when nothing is)."""
    content = dock.widget()
    if isinstance(content, QScrollArea) and content.widget() is not None:
        inner, vp = content.widget(), content.viewport()
        need = inner.minimumSizeHint()
        if inner.width() < need.width():
            return f"{inner.width()} px wide for a {need.width()} px minimum"
        if inner.height() < need.height():
            return f"{inner.height()} px high for a {need.height()} px minimum"
        if content.horizontalScrollBar().maximum() < inner.width() - vp.width():
            return "wider than the view with no way to scroll to its right part"
        if content.verticalScrollBar().maximum() < inner.height() - vp.height():
            return "taller than the view with no way to scroll to its lower part"
        return ""
    need = content.minimumSizeHint()
    if content.width() < need.width() or content.height() < need.height():
        return f"{content.size().toTuple()} for a {need.toTuple()} minimum"
    return ""


@pytest.mark.parametrize("size", [(800, 500), (1024, 600), (1280, 720), (1366, 768)])
def test_every_dock_content_is_reachable_at_small_window_sizes(qtbot, window, size):
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size().toTuple() == size)
    QApplication.processEvents()
    frame = window.rect()
    for dock in window.findChildren(QDockWidget):
        if not dock.isVisible() or dock.isFloating() or dock.visibleRegion().isEmpty():
            continue  # a tab behind another, or closed
        where = QRect(dock.mapTo(window, QPoint(0, 0)), dock.size())
        assert frame.contains(where), f"{dock.objectName()} at {where} leaves the {size} window"
        assert not _cut_off(dock), f"{dock.objectName()} at {size}: {_cut_off(dock)}"


# ------------------------------------------------------------------ 7. search jump in a long chat
def test_a_search_jump_to_the_first_message_builds_only_what_shows_it(qtbot, window):
    _conv, ids = _long_chat(window)
    window.new_chat()
    panel = window.chats_panel
    panel.search.setText(OLD_WORD)
    panel.refresh()
    hit = next(
        panel.list.item(i)
        for i in range(panel.list.count())
        if panel.list.item(i).data(Qt.ItemDataRole.UserRole + 1) is not None
    )
    view = window.chat_view
    t0 = time.perf_counter()
    panel.list.itemClicked.emit(hit)  # as a click on the hit does
    jump_ms = (time.perf_counter() - t0) * 1000
    built = len(view.messages)
    print(f"search jump to message 1 of {N_MESSAGES}: {jump_ms:.0f} ms, {built} message widgets built")
    assert view.messages[0].message_id == ids[0] and view.unbuilt_count == 0
    assert built <= 30 and view.unbuilt_below_count == N_MESSAGES - built
    marked = [lab for lab in view.messages[0].findChildren(QLabel) if OLD_WORD in lab.text()]
    assert marked
    qtbot.waitUntil(lambda: _on_screen(view, marked[0]))
    # Reading on downwards builds the newer messages as the view needs them, in order.
    view.setFocus()
    for _ in range(5):
        qtbot.keyClick(view, Qt.Key.Key_PageDown)
    qtbot.waitUntil(lambda: len(view.messages) > built)
    assert [w.message_id for w in view.messages] == ids[: len(view.messages)]
    # A new message goes at the chat's end: every newer message is built first.
    send(qtbot, window, "And the last one?")
    assert view.unbuilt_below_count == 0
    assert [w.message_id for w in view.messages][: len(ids)] == ids
    assert view.messages[-1].role is Role.ASSISTANT and view.messages[-2].text == "And the last one?"


# ------------------------------------------------------------------ 8. first start with no model
def test_a_first_start_with_no_model_anywhere_opens_the_models_page_with_its_search_focused(qtbot):
    win = make_window(qtbot)
    try:
        qtbot.waitUntil(lambda: win.models.library_tab.scanned)
        qtbot.waitUntil(lambda: win.pages.currentIndex() == 1)
        assert win.models.tabs.currentIndex() == ModelsTab.HUB.position
        qtbot.waitUntil(win.models.hub_tab.query.hasFocus)
        assert win.banner.isVisible() and win.banner.text.text() == HINT
    finally:
        close_window(win)


def test_a_first_start_with_a_recent_model_stays_on_the_chat(qtbot, tiny_model):
    first = make_window(qtbot)
    load(qtbot, first, tiny_model)  # a model used once: it is in the recent models
    close_window(first)
    win = make_window(qtbot)
    try:
        # The first page is decided in the slot that marks the scan done (FirstStart, on entries_changed),
        # so once the scan shows as done the decision is made.
        qtbot.waitUntil(lambda: win.models.library_tab.scanned)
        assert win.pages.currentIndex() == 0 and win.banner.text.text() != HINT
    finally:
        close_window(win)


def test_loading_a_model_after_a_first_start_brings_the_chat_back(qtbot, tiny_model):
    win = make_window(qtbot)
    try:
        qtbot.waitUntil(lambda: win.pages.currentIndex() == 1)
        load(qtbot, win, tiny_model)
        assert win.pages.currentIndex() == 0 and not (win.banner.isVisible() and win.banner.text.text() == HINT)
    finally:
        close_window(win)


def test_choosing_a_chat_while_the_models_page_is_shown_shows_that_chat(qtbot, window):
    send(qtbot, window, "A chat to come back to.")
    conv = window.chat.conversation_id
    window.new_chat()
    window.show_page("models")
    window.chats_panel.open_requested.emit(conv, None)  # as a click in the Chats list does
    assert window.chat.conversation_id == conv and window.pages.currentIndex() == 0
