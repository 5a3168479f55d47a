"""The desktop layer: the wheel over panels, the n_threads warning, window size,
the keyboard, the model picker, file dialogs' folders, Details, search, drag and drop."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.core.chat.context import LoadSettings
from app.core.sampling.params import SamplerSettings
from app.ui.panels.model import ModelPanel, available_cpus, threads_warning
from app.ui.panels.sampler import SamplerPanel
from tests.support.chat_view import settled


def _wheel(widget, steps: int = -3) -> None:
    """A synthetic mouse wheel (``steps`` notches; negative scrolls down) over ``widget``'s centre."""
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    ev = QWheelEvent(
        pos,
        QPointF(widget.mapToGlobal(pos.toPoint())),
        QPoint(0, 0),
        QPoint(0, 120 * steps),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, ev)


def _in_scroll_area(qtbot, panel) -> QScrollArea:
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setWidget(panel)
    area.resize(300, 200)  # shorter than the panel: the area can scroll
    qtbot.addWidget(area)
    area.show()
    qtbot.waitExposed(area)
    assert area.verticalScrollBar().maximum() > 0
    return area


# ------------------------------------------------------------------ the wheel scrolls panels
def test_a_wheel_over_the_model_panel_scrolls_it_and_changes_no_setting(qtbot):
    panel = ModelPanel(LoadSettings(n_batch=512))
    area = _in_scroll_area(qtbot, panel)
    area.verticalScrollBar().setValue(0)
    edits = []
    panel.load_settings_edited.connect(edits.append)
    for w in (panel.n_batch, panel.n_ctx, panel.n_threads, panel.policy):
        _wheel(w)
    assert panel.n_batch.value() == 512
    assert panel.load_settings() == LoadSettings(n_batch=512)
    assert edits == []
    assert area.verticalScrollBar().value() > 0  # the wheel went to the panel's scroll area


def test_a_wheel_over_the_sampler_panel_scrolls_it_and_changes_no_setting(qtbot):
    panel = SamplerPanel(SamplerSettings())
    area = _in_scroll_area(qtbot, panel)
    area.verticalScrollBar().setValue(0)
    changes = []
    panel.settings_changed.connect(changes.append)
    row = panel.rows["frequency_penalty"]
    before = panel.settings()
    _wheel(row.slider)
    _wheel(row.field, steps=3)
    _wheel(panel.seed_field)
    assert row.field.value() == 0.0
    assert panel.settings() == before
    assert changes == []
    assert area.verticalScrollBar().value() > 0


def test_a_focused_value_widget_takes_the_wheel(qtbot):
    panel = ModelPanel(LoadSettings(n_batch=512))
    area = _in_scroll_area(qtbot, panel)
    area.activateWindow()
    panel.n_batch.setFocus()
    qtbot.waitUntil(panel.n_batch.hasFocus)
    _wheel(panel.n_batch, steps=1)
    assert panel.n_batch.value() != 512
    assert panel.n_batch.focusPolicy() == Qt.FocusPolicy.StrongFocus


def _wheel_on_plot(plot, steps: int = -3, ctrl: bool = False) -> None:
    """A wheel over a pyqtgraph plot's centre, delivered where Qt delivers it: the view's viewport."""
    vp = plot.viewport()
    pos = QPointF(vp.width() / 2, vp.height() / 2)
    ev = QWheelEvent(
        pos,
        QPointF(vp.mapToGlobal(pos.toPoint())),
        QPoint(0, 0),
        QPoint(0, 120 * steps),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(vp, ev)


def test_a_wheel_over_the_decode_speed_plot_scrolls_the_stats_dock(qtbot, window):
    """The plot (mouse interaction off) used to accept the wheel and do nothing with it."""
    window.stats_dock.show()
    window.stats_dock.raise_()
    window.resizeDocks([window.stats_dock], [160], Qt.Orientation.Vertical)  # shorter than the panel
    area = window.stats_dock.widget()
    assert isinstance(area, QScrollArea) and area.widget() is window.stats_panel
    bar = area.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and window.stats_panel.plot.isVisible())
    plot = window.stats_panel.plot
    bar.setValue(0)
    _wheel_on_plot(plot, steps=-1)  # a notch down
    down = bar.value()
    assert down > 0
    _wheel_on_plot(plot, steps=1)  # and back up
    assert bar.value() < down


def test_a_plot_in_a_scroll_area_passes_the_wheel_and_keeps_ctrl_wheel(qtbot):
    """As the Timeline's plots do (their time axis zooms): the wheel scrolls the area, Ctrl+wheel zooms."""
    import pyqtgraph as pg

    from app.ui.common.wheel_guard import pass_wheel_through

    inner = QWidget()
    lay = QVBoxLayout(inner)
    lay.addWidget(QLabel("above"))
    lay.addSpacing(300)
    plot = pg.PlotWidget()
    plot.setMouseEnabled(x=True, y=False)
    plot.setXRange(0, 10, padding=0)
    plot.setFixedHeight(150)
    pass_wheel_through(plot)
    lay.addWidget(plot)
    lay.addSpacing(300)
    area = _in_scroll_area(qtbot, inner)
    area.ensureWidgetVisible(plot, 0, 0)
    bar = area.verticalScrollBar()
    before = bar.value()
    _wheel_on_plot(plot)
    assert bar.value() > before and plot.getViewBox().viewRange()[0] == [0.0, 10.0]
    after = bar.value()
    _wheel_on_plot(plot, steps=1, ctrl=True)
    assert bar.value() == after
    lo, hi = plot.getViewBox().viewRange()[0]
    assert hi - lo < 10.0  # zoomed in on the time axis


# ------------------------------------------------------------------ n_threads warning
def test_threads_warning_rule():
    assert threads_warning(0, 2) == ""  # auto
    assert threads_warning(1, 2) == ""
    assert "2 threads on 2 CPUs" in threads_warning(2, 2)
    assert threads_warning(8, 4)
    assert threads_warning(3, 8) == ""


def test_the_model_panel_warns_when_n_threads_takes_every_cpu(qtbot):
    cpus = available_cpus()
    panel = ModelPanel(LoadSettings(n_threads=0))
    qtbot.addWidget(panel)
    panel.show()
    assert not panel.threads_note.isVisible()
    panel.n_threads.setValue(cpus)
    assert panel.threads_note.isVisible()
    assert f"{cpus} threads on {cpus} CPU" in panel.threads_note.text()
    panel.n_threads.setValue(max(1, cpus - 1) if cpus > 1 else 0)
    assert not panel.threads_note.isVisible()
    panel.set_load_settings(LoadSettings(n_threads=cpus + 2))
    assert panel.threads_note.isVisible()


# ------------------------------------------------------------------ the model picker lists the library
def test_the_model_picker_lists_the_library_below_the_recent_models(qtbot, tiny_model):
    import shutil

    from PySide6.QtWidgets import QMenu

    from app.core import protocol as P
    from app.ui.engine.client import EngineState
    from app.ui.window.menus import fill_model_menu
    from tests.support.window import WAIT_MS, close_window, make_window

    win = make_window(qtbot)
    try:
        in_library = win.paths.models_dir / "Library-Only-Q4_1.gguf"
        shutil.copyfile(tiny_model, in_library)
        win.settings_ctl.apply(lambda s: s.with_recent(str(tiny_model)))
        win.models.refresh_library()
        tab = win.models.library_tab
        qtbot.waitUntil(lambda: any(e.path.name == in_library.name for e in tab.model.entries), timeout=WAIT_MS)
        menu = QMenu()
        fill_model_menu(menu, win.loader, win.models.library_tab.model.entries, lambda: win.show_page("models"))
        texts = [a.text() for a in menu.actions()]
        assert texts.index(tiny_model.name) < texts.index("In the library") < texts.index(in_library.name)
        lib_action = next(a for a in menu.actions() if a.text() == in_library.name)
        assert lib_action.isEnabled()
        with qtbot.waitSignal(win.engine.model_loaded, timeout=WAIT_MS) as blocker:
            lib_action.trigger()
        assert blocker.args[0].info.path == str(in_library.resolve())
        # The loaded model is marked, and choosing it again reloads nothing.
        menu = QMenu()
        fill_model_menu(menu, win.loader, win.models.library_tab.model.entries, lambda: win.show_page("models"))
        [mark] = [a for a in menu.actions() if a.isChecked()]
        assert mark.text() == f"{in_library.name}  (loaded)"
        loads = len(win.engine.sent(P.LoadModel))
        mark.trigger()  # a menu action loads at once (load_model sends LoadModel before it returns)
        assert len(win.engine.sent(P.LoadModel)) == loads
        assert win.engine.state == EngineState.READY  # not LOADING: nothing was asked
    finally:
        close_window(win)


# ------------------------------------------------------------------ file dialogs remember their folder
def test_settings_keep_one_last_folder_per_dialog_kind(tmp_path):
    from app.core.settings import DialogFolder, Settings, SettingsStore

    s = Settings().with_last_folder(DialogFolder.OPEN_MODEL, tmp_path / "models")
    s = s.with_last_folder(DialogFolder.EXPORT, tmp_path / "out").with_last_folder(DialogFolder.IMPORT, tmp_path / "in")
    store = SettingsStore(tmp_path / "settings.json")
    store.save(s)
    back = store.load()
    assert back.last_folder(DialogFolder.OPEN_MODEL) == str(tmp_path / "models")
    assert back.last_folder(DialogFolder.EXPORT) == str(tmp_path / "out")
    assert back.last_folder(DialogFolder.IMPORT) == str(tmp_path / "in")
    # A version-2 file without the fields reads as "no folder yet".
    assert Settings.from_dict({"version": 2}).last_folder(DialogFolder.EXPORT) == ""


def test_file_dialogs_open_in_the_folder_last_used_for_their_kind(qtbot, window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    from app.core.settings import DialogFolder

    models, exports, imports = (tmp_path / n for n in ("models", "exports", "imports"))
    for d in (models, exports, imports):
        d.mkdir()
    starts: list[str] = []

    def fake_open(_parent, _title, start, _filter):
        starts.append(start)
        return str(models / "none.gguf"), ""

    def fake_open_many(_parent, _title, start, _filter):
        starts.append(start)
        return [str(imports / "none.json")], ""

    def fake_save(_parent, _title, start, _filter):
        starts.append(start)
        return str(exports / "chat.md"), ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", fake_open)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", fake_open_many)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", fake_save)
    window.open_model_dialog()  # not a GGUF: refused, but the folder is remembered
    window.chat.new_chat()
    cid = window.conversations.create_conversation(title="A chat")
    window.export_conversation(cid, "markdown")
    window.import_conversation()
    s = window.settings
    assert (s.last_folder(DialogFolder.OPEN_MODEL), s.last_folder(DialogFolder.EXPORT)) == (str(models), str(exports))
    assert s.last_folder(DialogFolder.IMPORT) == str(imports)
    starts.clear()
    window.open_model_dialog()
    window.export_conversation(cid, "markdown")
    window.import_conversation()
    assert starts[0] == str(models)
    assert starts[1] == str(exports / "A chat.md")
    assert starts[2] == str(imports)


# ------------------------------------------------------------------ Details opens, selectable and copyable
def test_details_opens_how_the_reply_was_made_selectable_with_copy(qtbot, window):
    from PySide6.QtGui import QGuiApplication

    from tests.support.fake_engine import reply
    from tests.support.window import send

    window.engine.script(reply("Good ", "morning", "!"))
    send(qtbot, window, "Say good morning.")
    reply_w = window.chat_view.messages[-1]
    assert reply_w.info_btn.isVisible()
    qtbot.mouseClick(reply_w.info_btn, Qt.MouseButton.LeftButton)
    dlg = reply_w.details_dialog
    assert dlg is not None and dlg.isVisible()
    text = dlg.text_box.toPlainText()
    assert text == reply_w.how_made and "tok/s" in text and "Q4_1" in text
    assert dlg.text_box.isReadOnly()
    assert dlg.text_box.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
    QGuiApplication.clipboard().setText("")
    dlg.copy_button.click()
    assert QGuiApplication.clipboard().text() == text
    dlg.close()


# ------------------------------------------------------------------ drag and drop copies, highlights, reports
def _drag_events(paths, proposed=Qt.DropAction.MoveAction):
    from PySide6.QtCore import QMimeData, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    actions = Qt.DropAction.CopyAction | Qt.DropAction.MoveAction
    enter = QDragEnterEvent(QPoint(10, 10), actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    drop = QDropEvent(QPointF(10, 10), actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    for ev in (enter, drop):
        ev.setDropAction(proposed)  # a file manager proposing a Move (Shift held, or its default)
    return mime, enter, drop


def test_a_drop_is_accepted_as_a_copy_with_a_highlight_and_skipped_files_named(qtbot, tiny_model, tmp_path):
    from tests.support.window import WAIT_MS, close_window, make_window

    win = make_window(qtbot)
    try:
        notes = tmp_path / "notes.txt"
        notes.write_text("not a model")
        _mime, enter, drop = _drag_events([notes, tiny_model])
        assert not win.file_drop.highlight.isVisible()
        win.dragEnterEvent(enter)
        assert enter.isAccepted() and enter.dropAction() == Qt.DropAction.CopyAction
        assert win.file_drop.highlight.isVisible() and win.file_drop.highlight.geometry() == win.rect()
        with qtbot.waitSignal(win.engine.model_loaded, timeout=WAIT_MS):
            win.dropEvent(drop)
        assert drop.isAccepted() and drop.dropAction() == Qt.DropAction.CopyAction
        assert not win.file_drop.highlight.isVisible()
        assert win.engine.model.info.path == str(tiny_model.resolve())
        assert tiny_model.exists()
        assert "notes.txt" in win.banner.text.text() and "Skipped 1 dropped file" in win.banner.text.text()
    finally:
        close_window(win)


def test_dropping_only_other_files_says_they_were_skipped(qtbot, tmp_path):
    from tests.support.window import close_window, make_window

    win = make_window(qtbot)
    try:
        a, b = tmp_path / "a.png", tmp_path / "b.txt"
        for f in (a, b):
            f.write_bytes(b"x")
        _mime, enter, drop = _drag_events([a, b])
        win.dragEnterEvent(enter)
        win.dropEvent(drop)
        assert drop.dropAction() == Qt.DropAction.CopyAction
        text = win.banner.text.text()
        assert "Skipped 2 dropped files" in text and "a.png" in text and "b.txt" in text
        assert win.engine.model is None
    finally:
        close_window(win)


# ------------------------------------------------------------------ the chat at any width
PARAGRAPH = (
    "This is a paragraph of a reply that is long enough to wrap over several lines at most widths, "
    "so that its last line shows whether the label's height fits its text. "
)
REPLY = "\n\n".join(f"Paragraph {j + 1}. " + PARAGRAPH * (1 + j % 3) for j in range(4))


def _body_labels(msg):
    from PySide6.QtWidgets import QLabel

    return [msg.body] if isinstance(msg.body, QLabel) else msg.body.findChildren(QLabel)


def _assert_chat_fits(qtbot, view) -> None:
    """Every message is laid out at its height for its width, every body label shows all its
    lines, and the view shows messages (not blank space) at the top, middle and bottom."""
    QApplication.processEvents()
    col = view.widget()
    for msg in view.messages:
        assert msg.width() <= view.viewport().width()
        assert msg.height() >= msg.heightForWidth(msg.width()), (msg.height(), msg.heightForWidth(msg.width()))
        for lab in _body_labels(msg):
            if lab.isVisible() and lab.wordWrap():
                assert lab.height() >= lab.heightForWidth(lab.width()), (lab.width(), lab.height())
    last = view.messages[-1]
    # The column ends with the last message (its margin only): no blank space to scroll into.
    assert col.height() - (last.y() + last.height()) <= col.layout().contentsMargins().bottom() + 1 or (
        col.height() == view.viewport().height()
    )
    bar = view.verticalScrollBar()
    for value in (0, bar.maximum() // 2, bar.maximum()):
        bar.setValue(value)
        QApplication.processEvents()
        top, bottom = bar.value(), bar.value() + view.viewport().height()
        shown = [m for m in view.messages if m.y() < bottom and m.y() + m.height() > top]
        assert shown, f"blank view at scroll {value} of {bar.maximum()}"


def test_message_bodies_fit_their_text_at_every_width(qtbot):
    from app.ui.chat.view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    for i in range(3):
        view.add_message("user", f"Question {i}: tell me something long, please.", message_id=2 * i + 1)
        m = view.add_message("assistant", REPLY, title="Tiny-Chat-Q4_1-with-a-long-name", message_id=2 * i + 2)
        m.set_how_made("model · Q4_1")
        m.set_footer("252 tokens · 50.0 tok/s · TTFT 50 ms")
    view.resize(900, 500)
    view.show()
    qtbot.waitExposed(view)
    for width in (900, 420, 360, 640, 300, 900):
        view.resize(width, 500)
        _assert_chat_fits(qtbot, view)


def test_the_window_chat_fits_at_real_window_sizes_and_docks_grow_back(qtbot, window):
    from tests.support.fake_engine import reply

    for i in range(3):
        window.engine.script(reply(*[w + " " for w in REPLY.split(" ")]))
        from tests.support.window import send

        send(qtbot, window, f"Question {i}: something long, please.")
    sizes = [(1280, 720), (1024, 640), (1100, 700), (1366, 768), (1920, 1080)]
    for w, h in sizes:
        window.resize(w, h)
        qtbot.waitUntil(lambda w=w, h=h: window.size().toTuple() == (w, h))
        _assert_chat_fits(qtbot, window.chat_view)
    # Grown back: the docks have their share again (not the squeezed width of the small window).
    from app.ui.window.window_layout import dock_widths

    left, right = dock_widths(1920)
    qtbot.waitUntil(lambda: window.model_dock.width() >= left and window.stats_dock.width() >= right)


# ------------------------------------------------------------------ the first window fits the screen
SCREENS = [(1366, 768), (1280, 720), (1920, 1080)]


def test_the_first_window_fits_the_available_screen():
    from PySide6.QtCore import QRect

    from app.ui.window.window_layout import FRAME_ALLOWANCE, PREFERRED_SIZE, initial_layout

    for sw, sh in SCREENS:
        avail = QRect(0, 27, sw, sh - 27 - 40)  # a top bar and a task bar
        lay = initial_layout(avail)
        framed = lay.geometry.adjusted(-FRAME_ALLOWANCE[0] // 2, -(FRAME_ALLOWANCE[1] - FRAME_ALLOWANCE[0] // 2), 0, 0)
        assert avail.contains(framed.topLeft()) and avail.contains(lay.geometry.bottomRight()), (sw, sh, lay)
        assert lay.geometry.width() <= PREFERRED_SIZE[0] and lay.geometry.height() <= PREFERRED_SIZE[1]
        assert lay.left_width + lay.right_width < lay.geometry.width() // 2  # the chat keeps half or more


def test_the_window_and_its_parts_fit_each_screen_size(qtbot, window):
    from app.ui.window.window_layout import FRAME_ALLOWANCE

    hint = window.minimumSizeHint()
    assert hint.width() <= 1280 - FRAME_ALLOWANCE[0] and hint.height() <= 720 - FRAME_ALLOWANCE[1] - 40, hint
    for sw, sh in SCREENS:
        w, h = sw - FRAME_ALLOWANCE[0], sh - FRAME_ALLOWANCE[1] - 40
        window.resize(w, h)
        qtbot.waitUntil(lambda w=w, h=h: window.size().toTuple() == (w, h))
        QApplication.processEvents()
        inside = window.rect()
        for part in (
            window.composer,
            window.composer.button,
            window.top_bar,
            window.chat_view,
            window.chats_dock,
            window.model_dock,
            window.stats_dock,
            window.sampler_dock,
            window.tokens_dock,
        ):
            r = part.rect().translated(part.mapTo(window, QPoint(0, 0)))
            assert part.isVisible() and inside.contains(r), (sw, sh, part.objectName(), r, inside)
            assert r.width() >= part.minimumSizeHint().width() or part is window.chat_view, (sw, part.objectName())
        assert window.chat_view.viewport().height() > 150 and window.chat_view.viewport().width() > 400


# ------------------------------------------------------------------ search marks the match and scrolls to it
def test_highlight_marks_text_not_tags_or_entities():
    from app.ui.common.highlight import HIT_OPEN, highlight_html

    marked, n = highlight_html("<p style='zebra'>A Zebra &amp; a zebra-crossing</p>", ["zebra", "amp"])
    assert n == 2
    assert marked == f"<p style='zebra'>A {HIT_OPEN}Zebra</span> &amp; a {HIT_OPEN}zebra</span>-crossing</p>"
    assert highlight_html("<style>p {}</style><p>p</p>", ["p"])[1] == 1


def test_opening_a_search_hit_marks_the_words_and_scrolls_to_them(qtbot, window):
    from app.ui.common.highlight import HIT_OPEN
    from tests.support.fake_engine import reply
    from tests.support.window import send

    window.resize(1280, 720)
    filler = "\n\n".join(PARAGRAPH * 2 for _ in range(4))
    for i in range(3):
        window.engine.script(reply(filler))  # one piece: max_tokens (48) does not cut it
        send(qtbot, window, f"Question {i}, with filler.")
    window.engine.script(reply("Filler first. ", filler, "\n\nThe ", "okapi ", "lives ", "in ", "forests."))
    send(qtbot, window, "Where does the okapi live?")
    window.engine.script(reply(filler))
    send(qtbot, window, "More filler after it.")
    target = window.chat_view.messages[-3]
    conv = window.chat.conversation_id
    window.new_chat()
    window.chats_panel.search.setText("OKAPI")
    window.chats_panel.refresh()
    hits = [window.chats_panel.list.item(i) for i in range(window.chats_panel.list.count())]
    hit = next(h for h in hits if "assistant" in h.text())
    window.chats_panel.list.itemClicked.emit(hit)
    assert window.chat.conversation_id == conv
    view = window.chat_view
    shown = view.widget_for(target.message_id)
    labels = shown.body.findChildren(QLabel)
    marked = [lab for lab in labels if HIT_OPEN in lab.text()]
    assert len(marked) == 1 and f"{HIT_OPEN}okapi</span>" in marked[0].text()
    label = marked[0]

    def label_on_screen() -> bool:
        top = label.mapTo(view.widget(), QPoint(0, 0)).y()
        bar = view.verticalScrollBar()
        return bar.value() <= top and top + label.height() <= bar.value() + view.viewport().height()

    qtbot.waitUntil(lambda: view.verticalScrollBar().maximum() > view.viewport().height())
    qtbot.waitUntil(label_on_screen)
    qtbot.waitUntil(lambda: settled(view))  # the match stays on screen once the view is done
    assert label_on_screen()
    assert 0 < view.verticalScrollBar().value() < view.verticalScrollBar().maximum()  # neither top nor bottom


# ------------------------------------------------------------------ keyboard-only use
def _press(qtbot, win, key, mods=Qt.KeyboardModifier.ControlModifier) -> None:
    target = QApplication.focusWidget() or win
    qtbot.keyClick(target, key, mods)
    QApplication.processEvents()


def _active(qtbot, win) -> None:
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow)


def test_tab_leaves_the_composer_and_shift_enter_still_adds_a_line(qtbot, window):
    _active(qtbot, window)
    box = window.composer.box
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    qtbot.keyClicks(box, "one")
    qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(box, "two")
    qtbot.keyClick(box, Qt.Key.Key_Tab)
    assert not box.hasFocus()
    assert box.toPlainText() == "one\ntwo"
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    assert box.hasFocus()


def test_shortcuts_reach_search_chats_pages_and_panels(qtbot, window):
    from tests.support.fake_engine import reply
    from tests.support.window import send

    _active(qtbot, window)
    ids = []
    for i in range(3):
        window.new_chat()
        window.engine.script(reply("Reply ", str(i)))
        send(qtbot, window, f"Chat number {i}")
        ids.append(window.chat.conversation_id)
    order = [c.id for c in window.conversations.list_conversations()]  # newest first, as listed
    assert window.chat.conversation_id == order[0]
    window.composer.box.setFocus()
    _press(qtbot, window, Qt.Key.Key_PageDown)
    assert window.chat.conversation_id == order[1]
    _press(qtbot, window, Qt.Key.Key_PageDown)
    assert window.chat.conversation_id == order[2]
    _press(qtbot, window, Qt.Key.Key_PageUp)
    assert window.chat.conversation_id == order[1]

    for key in (Qt.Key.Key_K, Qt.Key.Key_F):
        window.composer.box.setFocus()
        _press(qtbot, window, key)
        assert window.chats_panel.search.hasFocus()

    _press(qtbot, window, Qt.Key.Key_2)
    assert window.pages.currentIndex() == 1
    _press(qtbot, window, Qt.Key.Key_1)
    assert window.pages.currentIndex() == 0
    _press(qtbot, window, Qt.Key.Key_M)
    assert window.pages.currentIndex() == 1
    _press(qtbot, window, Qt.Key.Key_1)

    ctrl_shift = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    docks = (window.chats_dock, window.model_dock, window.stats_dock, window.sampler_dock, window.tokens_dock)
    keys = (Qt.Key.Key_1, Qt.Key.Key_2, Qt.Key.Key_3, Qt.Key.Key_4, Qt.Key.Key_5)
    for dock, key in zip(docks, keys, strict=True):
        assert dock.isVisible()
        _press(qtbot, window, key, ctrl_shift)
        assert not dock.isVisible(), dock.objectName()
        _press(qtbot, window, key, ctrl_shift)
        assert dock.isVisible(), dock.objectName()


def test_the_shortcuts_sheet_lists_every_shortcut_from_the_actions(qtbot, window):
    from PySide6.QtGui import QAction, QKeySequence

    from app.ui.window.menus import COMPOSER_KEYS, shortcut_sheet

    rows = shortcut_sheet(window.menuBar())
    listed = " | ".join(f"{what}: {keys}" for what, keys in rows)
    actions = [a for a in window.findChildren(QAction) if a.shortcuts() and a.isVisible()]
    assert len(actions) >= 14
    for a in actions:
        for k in a.shortcuts():
            assert k.toString(QKeySequence.SequenceFormat.NativeText) in listed, a.text()
    for what in (
        "Search chats",
        "Next chat",
        "Previous chat",
        "Models page",
        "Stats panel",
        "Funnel panel",
        "Timeline panel",
        "Keyboard shortcuts",
    ):
        assert what in listed
    window.timeline_dock.close()  # a closed panel comes back from the View menu (and its key)
    [view] = [a.menu() for a in window.menuBar().actions() if a.text() == "&View"]
    [toggle] = [a for a in view.actions() if a.text() == "Timeline panel"]
    toggle.trigger()
    assert window.timeline_dock.isVisibleTo(window)
    assert all(f"{what}: {keys}" in listed for what, keys in COMPOSER_KEYS)
    from app.ui.common.dialogs import TextDialog

    window.menu_actions.shortcuts.trigger()
    [dlg] = [d for d in window.findChildren(TextDialog) if d.objectName() == "shortcutsDialog" and d.isVisible()]
    text = dlg.text_box.toPlainText()
    assert all(keys in text for _what, keys in rows)
    dlg.close()


def test_every_actionable_widget_has_a_name_a_screen_reader_can_read(qtbot, window):
    from PySide6.QtWidgets import QWidget

    from app.ui.common.accessibility import needs_name
    from tests.support.fake_engine import reply
    from tests.support.window import send

    window.engine.script(reply("A ", "reply."))
    send(qtbot, window, "Hello")
    window.show_page("models")
    window.show_page("chat")
    unnamed = [
        (type(w).__name__, w.objectName(), type(w.parentWidget()).__name__)
        for w in window.findChildren(QWidget)
        if needs_name(w)
    ]
    assert unnamed == []
    box = window.composer.box
    assert box.accessibleName() == "Message to the model"
    assert window.sampler_panel.rows["temperature"].slider.accessibleName().startswith("temperature")
    assert window.model_panel.n_threads.accessibleName() == "n_threads"
    assert window.chat_view.messages[-1].delete_btn.accessibleName().startswith("Delete")


def test_a_wheel_over_the_models_page_changes_no_choice(qtbot, window):
    window.show_page("models")
    window.models.show_tab("hub")
    sort = window.models.hub_tab.sort
    qtbot.waitUntil(sort.isVisible)
    sort.setCurrentIndex(0)
    _wheel(sort, steps=-1)  # a notch down: the next entry, were the combo box to take it
    assert sort.currentIndex() == 0 and sort.count() > 1


def test_n_ctx_shows_the_value_llama_cpp_will_use(qtbot, window) -> None:
    """llama.cpp pads n_ctx to a multiple of 256: a typed 1 or 1000 reads 256 or 1024; 0 stays "trained length"."""
    field = window.model_panel.n_ctx
    for typed, used in ((1, 256), (1000, 1024), (4096, 4096), (0, 0)):
        field.setFocus()
        field.lineEdit().selectAll()
        qtbot.keyClicks(field, str(typed) if typed else "0")
        qtbot.keyClick(field, Qt.Key.Key_Return)
        assert field.value() == used, (typed, field.value())


def test_chat_search_shortcuts_work_while_the_message_box_has_focus(qtbot, window) -> None:
    """Ctrl+K / Ctrl+F from the message box (where focus usually is) go to chat search, not into the text."""
    window.show()
    qtbot.waitExposed(window)
    for key in (Qt.Key.Key_K, Qt.Key.Key_F):
        box = window.composer.box
        box.setFocus()
        qtbot.waitUntil(box.hasFocus)
        qtbot.keyClick(box, key, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(window.chats_panel.search.hasFocus)
        qtbot.keyClicks(window.chats_panel.search, "dragon")
        assert window.chats_panel.search.text() == "dragon" and box.toPlainText() == ""
        window.chats_panel.search.clear()


# ------------------------------------------------------------------ labels are not cut at 1366x768 and 1280x720
def test_the_engine_state_and_the_swa_cache_box_are_not_cut_on_small_screens(qtbot, tmp_path):
    """'● generatin' in the top bar and 'full-size SWA cach' in the Model panel were cut at 1366x768."""
    from PySide6.QtWidgets import QStyle

    from app.ui.engine.client import EngineState
    from app.ui.window.top_bar import _STATE_TEXT
    from app.ui.window.window_layout import FRAME_ALLOWANCE
    from tests.support.models import llama_metadata, llama_tensors, write_gguf
    from tests.support.window import TINY_TEMPLATE, close_window, load, make_window

    swa_model = write_gguf(
        tmp_path / "Tiny-SWA-Q4_1.gguf",
        llama_metadata(
            name="Tiny SWA",
            file_type=3,
            extra={
                "tokenizer.chat_template": TINY_TEMPLATE,
                "llama.attention.sliding_window": 64,
                "llama.attention.sliding_window_pattern": [True, False],
            },
        ),
        llama_tensors(qtype="Q4_1"),
    )
    window = make_window(qtbot)
    try:
        load(qtbot, window, swa_model)
        box = window.model_panel.swa_full
        for sw, sh in ((1366, 768), (1280, 720)):
            w, h = sw - FRAME_ALLOWANCE[0], sh - FRAME_ALLOWANCE[1] - 40
            window.resize(w, h)
            qtbot.waitUntil(lambda w=w, h=h: window.size().toTuple() == (w, h))
            for state in EngineState:
                window.top_bar.show_state(state)
                QApplication.processEvents()
                label = window.top_bar.state_label
                text = f"● {_STATE_TEXT[state]}"
                assert label.text() == text
                assert label.fontMetrics().horizontalAdvance(text) <= label.contentsRect().width(), (sw, text)
            window.model_dock.raise_()
            QApplication.processEvents()
            assert box.isVisible(), "a model with sliding-window layers shows the SWA cache box"
            style = box.style()
            need = (
                style.pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth, None, box)
                + style.pixelMetric(QStyle.PixelMetric.PM_CheckBoxLabelSpacing, None, box)
                + box.fontMetrics().horizontalAdvance(box.text())
            )
            assert need <= box.width(), (sw, box.text(), need, box.width())
            # the row's label says what the box is about
            row_label = window.model_panel._load_form.labelForField(box)
            assert row_label.text() == "SWA cache" and row_label.isVisible()
            assert row_label.fontMetrics().horizontalAdvance(row_label.text()) <= row_label.contentsRect().width()
    finally:
        close_window(window)


def test_a_squeezed_top_bar_elides_a_long_state_with_its_text_as_tooltip(qtbot):
    from app.ui.engine.client import EngineState
    from app.ui.window.top_bar import TopBar

    bar = TopBar()
    qtbot.addWidget(bar)
    bar.show_state(EngineState.STARTING)
    bar.resize(1200, 40)
    bar.show()
    qtbot.waitExposed(bar)
    assert bar.state_label.text() == "● starting engine…" and not bar.state_label.toolTip()
    bar.resize(bar.minimumSizeHint().width(), 40)
    qtbot.waitUntil(lambda: bar.state_label.text() != "● starting engine…")
    label = bar.state_label
    assert label.text().endswith("…") and label.toolTip() == "● starting engine…"
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width()
    # the common states still fit whole in the narrowest bar
    bar.show_state(EngineState.GENERATING)
    QApplication.processEvents()
    assert label.text() == "● generating" and not label.toolTip()


def test_closing_the_shortcuts_sheet_with_esc_gives_the_window_its_keys_back(qtbot, window):
    from PySide6.QtWidgets import QApplication

    from app.ui.common.dialogs import TextDialog

    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)
    window.menu_actions.shortcuts.trigger()
    [dlg] = [d for d in window.findChildren(TextDialog) if d.objectName() == "shortcutsDialog" and d.isVisible()]
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dlg, timeout=5_000)
    qtbot.keyClick(dlg.text_box, Qt.Key.Key_Escape)
    assert not dlg.isVisible()
    # the window is active again: Ctrl+K (chat search) reaches it, typing does not go elsewhere
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)
