"""The chat's output format in the window, on the scripted engine (issue 23 §1): the chip under the
composer opens the dialog; Check names a bad grammar's line; OK keeps only a format that passes; the
format is the chat's own (stored with it, restored after a restart, not carried to new chats, kept for a
new chat until it is stored) and every reply of the chat carries it."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.core import protocol as P
from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.ui.common.stats_format import reply_details
from app.ui.constraint.chip import OFF_TEXT
from app.ui.constraint.dialog import KINDS
from tests.support.window import close_window, load, make_window, send

GRAMMAR = 'root ::= answer\nanswer ::= "yes" | "no"\n'


def _choose(qtbot, win, kind: ConstraintKind, text: str = ""):
    """Open the dialog from the chip, choose ``kind`` and type ``text``; returns the dialog."""
    qtbot.mouseClick(win.output_format.chip, Qt.MouseButton.LeftButton)
    dlg = win.output_format.dialog
    assert dlg is not None and dlg.isVisible()
    dlg.kind.setCurrentIndex([k for k, _ in KINDS].index(kind))
    if text:
        dlg.editor.setPlainText(text)
    return dlg


def test_check_names_the_line_ok_keeps_it_and_replies_carry_it(qtbot, tiny_model):
    win = make_window(qtbot)
    try:
        load(qtbot, win, tiny_model)
        assert win.output_format.chip.text() == OFF_TEXT
        send(qtbot, win, "first")
        conv = win.chat.conversation_id
        assert win.engine.sent(P.Generate)[-1].constraint is None
        dlg = _choose(qtbot, win, ConstraintKind.GBNF, 'root ::= answer\nanswer = "yes"\n')
        dlg.check_button.click()
        qtbot.waitUntil(lambda: "line 2" in dlg.verdict.text())
        assert dlg.editor.extraSelections()  # the line is marked
        assert dlg.editor.textCursor().blockNumber() == 1
        dlg.ok_button.click()  # a failing format is not kept
        qtbot.waitUntil(lambda: "line 2" in dlg.verdict.text())
        assert dlg.isVisible() and win.output_format.dialog is dlg
        dlg.editor.setPlainText(GRAMMAR)
        dlg.ok_button.click()
        qtbot.waitUntil(lambda: win.output_format.dialog is None)
        assert win.output_format.chip.text() == "{ } GBNF grammar"
        assert win.output_format.chip.objectName() == "formatChip"
        assert win.conversations.get_conversation(conv).constraint == OutputConstraint(ConstraintKind.GBNF, GRAMMAR)
        send(qtbot, win, "second")
        assert win.engine.sent(P.Generate)[-1].constraint == OutputConstraint(ConstraintKind.GBNF, GRAMMAR)
        # the reply records it (its stored funnel steps get the grammar column); the earlier reply had none
        path = win.conversations.active_path(conv)
        assert path[-1].meta.constraint.text == GRAMMAR and path[1].meta.constraint.kind == ConstraintKind.NONE
        assert "output format: a GBNF grammar" in reply_details(path[-1].meta)
        assert "output format" not in reply_details(path[1].meta)
        sent = [r for r in win.engine.requests if isinstance(r, P.CheckConstraint)]
        assert len(sent) == 3 and sent[-1].constraint.text == GRAMMAR  # Check, OK (failed), OK
        win.new_chat()  # the chat's own: a new chat has none
        assert win.output_format.chip.text() == OFF_TEXT
        send(qtbot, win, "in a new chat")
        assert win.engine.sent(P.Generate)[-1].constraint is None
        win.open_conversation(conv)
        assert win.output_format.chip.text() == "{ } GBNF grammar"
    finally:
        close_window(win)
    win2 = make_window(qtbot)  # after a restart: start-up opens the newest chat (the new one): none
    try:
        win2.open_conversation(conv)
        assert win2.output_format.chip.text() == "{ } GBNF grammar"
        assert win2.chat_settings.current.constraint.text == GRAMMAR
    finally:
        close_window(win2)


def test_a_new_chats_format_is_kept_until_it_is_stored_and_a_schema_is_checked_here(qtbot, tiny_model):
    win = make_window(qtbot)
    try:
        load(qtbot, win, tiny_model)
        win.new_chat()
        dlg = _choose(qtbot, win, ConstraintKind.JSON_SCHEMA, '{"type": "object", "properties": {"n": {"minimum": 1}}}')
        before = len(win.engine.requests)
        dlg.check_button.click()
        assert "'minimum' at $.properties.n" in dlg.verdict.text()  # refused here, no engine round trip
        assert len(win.engine.requests) == before
        dlg.kind.setCurrentIndex([k for k, _ in KINDS].index(ConstraintKind.JSON))
        assert not dlg.editor.isEnabled()
        dlg.ok_button.click()
        qtbot.waitUntil(lambda: win.output_format.dialog is None)
        assert win.output_format.chip.text() == "{ } JSON"
        send(qtbot, win, "make me an object")  # the chat is stored now, with its format
        conv = win.chat.conversation_id
        assert win.conversations.get_conversation(conv).constraint.kind == ConstraintKind.JSON
        assert win.engine.sent(P.Generate)[-1].constraint == OutputConstraint(ConstraintKind.JSON)
        # back to free text: Cancel changes nothing, OK on "Free text" clears it
        dlg = _choose(qtbot, win, ConstraintKind.NONE)
        dlg.reject()
        qtbot.waitUntil(lambda: win.output_format.dialog is None)
        assert win.output_format.chip.text() == "{ } JSON"
        dlg = _choose(qtbot, win, ConstraintKind.NONE)
        dlg.ok_button.click()
        qtbot.waitUntil(lambda: win.output_format.dialog is None)
        assert win.output_format.chip.text() == OFF_TEXT
        assert win.conversations.get_conversation(conv).constraint.kind == ConstraintKind.NONE
    finally:
        close_window(win)


def test_the_funnel_names_the_grammar_first_in_the_chain_it_shows(qtbot):
    from app.core.sampling.funnel import Funnel, FunnelStage, FunnelStageKind
    from app.core.sampling.params import SamplerSettings
    from app.ui.funnel.legend import SHORT, STAGE_HELP

    win = make_window(qtbot)
    try:
        s = SamplerSettings(temperature=0.0)
        stages = (
            FunnelStage(FunnelStageKind.MODEL, (0.6, 0.4), 64, 1.0, 0.0),
            FunnelStage(FunnelStageKind.GRAMMAR, (0.0, 1.0), 2, 0.0, 0.0),
            FunnelStage(FunnelStageKind.GREEDY, (0.0, 1.0), 2, 0.0, 0.0, picked=7),
        )
        f = Funnel(1, 0, ((5, "Sure"), (7, "{")), stages, 7, s, 0, 64, False, 0.001)
        win.funnel_panel.show_funnel(f, True)
        assert win.funnel_panel.order_label.text().replace("\u200b", "").startswith("grammar→")
        assert win.funnel_panel.note.text() == "the output format allowed 2 of 64"  # before: no note
        assert not win.funnel_panel.note.isHidden()
        assert SHORT[FunnelStageKind.GRAMMAR] == "gram" and "grammar sampler" in STAGE_HELP[FunnelStageKind.GRAMMAR]
        without = Funnel(1, 0, f.rows, (stages[0], stages[2]), 7, s, 0, 64, False, 0.001)
        win.funnel_panel.show_funnel(without, True)
        assert "grammar" not in win.funnel_panel.order_label.text()
        assert "output format" not in win.funnel_panel.note.text()
    finally:
        close_window(win)


def test_a_refused_branch_leaves_the_reply_it_branched_from_shown(qtbot, window):
    from app.core.chat.context import Role
    from tests.support.fake_engine import Refuse, reply

    window.engine.script(reply("Answer", ":", " no", "."))
    send(qtbot, window, "Is the sky green?")
    old = next(w for w in reversed(window.chat_view.messages) if w.role is Role.ASSISTANT)
    old_id, old_text = old.message_id, old.text
    refusal = "The output format does not allow ' maybe' as token 3 of this reply: no branch was made."
    window.engine.script(Refuse(P.FailureKind.CONSTRAINT, refusal))
    assert window.chat.branch_from_alternative(old_id, 2, 7)
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=5000)
    shown = [(w.message_id, w.text) for w in window.chat_view.messages if w.role is Role.ASSISTANT]
    assert shown == [(old_id, old_text)]  # before: the reply was gone from the view (still stored)
    assert [m.id for m in window.conversations.active_path(window.chat.conversation_id)][-1] == old_id
    assert window.conversations.siblings(old_id).next_id is None  # the refused branch is not kept


def test_the_dialog_grows_with_its_text_and_nothing_overlaps(qtbot, window):
    from app.ui.constraint.dialog import OutputFormatDialog

    dlg = OutputFormatDialog(window.engine, OutputConstraint(ConstraintKind.NONE, ""), window)
    qtbot.addWidget(dlg)
    dlg.kind.setCurrentIndex([k for k, _ in KINDS].index(ConstraintKind.JSON_SCHEMA))
    dlg.show()
    qtbot.waitExposed(dlg)
    for words in (5, 60, 150):
        dlg._say(" ".join(["The schema cannot be used here"] * words) + ".", ok=False)
        qtbot.wait(0)  # the layout runs
        dlg.layout().activate()
        verdict, editor, ok = dlg.verdict.geometry(), dlg.editor.geometry(), dlg.ok_button.geometry()
        assert verdict.top() >= editor.bottom() and ok.top() >= verdict.bottom(), (words, verdict, editor, ok)
        assert ok.bottom() <= dlg.height() and dlg.help.geometry().bottom() <= editor.top()
        assert verdict.height() >= dlg.verdict.heightForWidth(verdict.width())  # every wrapped line shown


def test_a_schema_s_generated_grammar_error_marks_no_line_in_the_schema(qtbot, window):
    from app.ui.constraint.dialog import OutputFormatDialog

    dlg = OutputFormatDialog(window.engine, OutputConstraint(ConstraintKind.JSON_SCHEMA, '{\n"type": "object"\n}'))
    qtbot.addWidget(dlg)
    dlg._rid = 99
    dlg._checked(P.Failed(99, P.FailureKind.CONSTRAINT, "The grammar does not parse: line 2, column 9: expecting name"))
    assert dlg.verdict.text().startswith("The grammar made from this schema cannot be used")
    assert not dlg.editor.extraSelections()  # the generated grammar's line 2 is not the schema's
    dlg.editor.setPlainText('{"enum": []}')
    dlg.check()
    assert dlg.verdict.text() == "'enum' at $ is empty: no value can match"
    dlg.editor.setPlainText('{"type": "object",\n "x": }')
    dlg.check()
    assert "line 2" in dlg.verdict.text() and dlg.editor.extraSelections()  # the schema's own JSON error
    dlg.editor.setPlainText('{"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}')
    dlg.check()
    assert "'$ref' \"#/$defs/nope\" at $.properties.a (it points at nothing" in dlg.verdict.text()
    dlg.editor.setPlainText('{"type": "string", "pattern": "[a-z]+"}')
    dlg.check()
    assert 'the pattern "[a-z]+" at $ (the converter needs it anchored' in dlg.verdict.text()


def test_continue_uses_the_format_the_reply_was_written_with(qtbot, window):
    from app.core.chat.context import Role
    from tests.support.fake_engine import reply

    gbnf = OutputConstraint(ConstraintKind.GBNF, GRAMMAR)
    window.chat_settings.edit_constraint(gbnf)
    window.engine.script(reply("y"), reply("es"))
    send(qtbot, window, "Is the sky blue?")
    rid = next(w for w in reversed(window.chat_view.messages) if w.role is Role.ASSISTANT).message_id
    assert window.conversations.get_message(rid).meta.constraint == gbnf
    window.chat_settings.edit_constraint(OutputConstraint(ConstraintKind.JSON, ""))  # the chat's format changes
    assert window.chat.continue_reply(rid)
    qtbot.waitUntil(lambda: not window.chat.busy, timeout=5000)
    sent = window.engine.sent(P.Generate)[-1]
    assert sent.continue_last and sent.constraint == gbnf  # before: the chat's current JSON
    send(qtbot, window, "And the grass?")  # a new reply: the chat's current format
    assert window.engine.sent(P.Generate)[-1].constraint == OutputConstraint(ConstraintKind.JSON, "")
