"""Import chats from other apps in the window (issue 23 §5), on the scripted engine: File → Import
chats… with the file dialog and the preview's exec replaced (app/ui/common/dialogs.py): the
preview shows what comes in, Cancel writes nothing, Import writes and opens the newest chat, a
damaged file writes nothing and the banner names it."""

from __future__ import annotations

import json

import pytest
from PySide6.QtWidgets import QTreeWidget

from app.ui.chat.import_preview import ImportPreviewDialog
from app.ui.common import dialogs
from tests.support.chat_exports import ARABIC, CJK, EMOJI, chatgpt_export, lmstudio_conversation, write_json, write_zip


def _rows(tree: QTreeWidget) -> list[list[str]]:
    return [[tree.topLevelItem(i).text(c) for c in range(tree.columnCount())] for i in range(tree.topLevelItemCount())]


def _menu_action(window, text: str):
    file_menu = window.menuBar().actions()[0].menu()
    return next(a for a in file_menu.actions() if a.text().startswith(text))


def test_import_shows_the_preview_then_writes_and_opens_the_newest_chat(qtbot, window, tmp_path, monkeypatch):
    zipped = write_zip(tmp_path / "chatgpt-export.zip", chatgpt_export())
    studio = write_json(tmp_path / "1730000000000.conversation.json", lmstudio_conversation())
    monkeypatch.setattr(dialogs, "choose_open_paths", lambda *a: [str(zipped), str(studio)])
    seen: list[ImportPreviewDialog] = []

    def look_then(answer: bool):
        def ask(dialog) -> bool:
            seen.append(dialog)
            return answer

        return ask

    before = len(window.conversations.list_conversations())
    # Cancel: the preview was shown, nothing is written.
    monkeypatch.setattr(dialogs, "ask", look_then(False))
    _menu_action(window, "&Import chats").trigger()
    (dlg,) = seen
    assert dlg.headline.text() == "<b>3 chats · 12 messages · 3 branches</b> will be added to your chats."
    assert _rows(dlg.files) == [
        ["chatgpt-export.zip", "ChatGPT", "2", "7", "2"],
        ["1730000000000.conversation.json", "LM Studio", "1", "5", "1"],
    ]
    skipped = dlg.skipped.text()
    assert "2 × images and files" in skipped and "2 × tool calls" in skipped and "2 × reasoning" in skipped
    assert "1 × chats with no text" in skipped
    assert [r[0] for r in _rows(dlg.chats)] == ["Edited question", "Tools and pictures", "Studio chat"]
    assert dlg.import_button.text() == "Import 3 chats"
    assert len(window.conversations.list_conversations()) == before

    # Import: written, the list shows them, the newest (by the source's times) is opened.
    monkeypatch.setattr(dialogs, "ask", look_then(True))
    window.import_conversation()
    assert len(window.conversations.list_conversations()) == before + 3
    shown = window.conversations.get_conversation(window.chat.conversation_id)
    assert shown.title == "Studio chat"  # 2024-10-27; the ChatGPT chats are from 2023-11-14
    banner = window.banner.text.text()
    assert banner.startswith("Imported 3 chats · 12 messages · 3 branches from chatgpt-export.zip and 1 more.")
    assert "Left out:" in banner
    titles = [window.chats_panel.list.item(i).text() for i in range(window.chats_panel.list.count())]
    assert any("Edited question" in t for t in titles)


def test_the_imported_branches_show_in_the_chat(qtbot, window, tmp_path, monkeypatch):
    path = write_json(tmp_path / "conversations.json", chatgpt_export()[:1])
    monkeypatch.setattr(dialogs, "choose_open_paths", lambda *a: [str(path)])
    monkeypatch.setattr(dialogs, "ask", lambda dialog: True)
    window.import_conversation()
    msgs = window.chat_view.messages
    assert [m.text for m in msgs] == [f"What is 2+3? {EMOJI} {ARABIC} {CJK}", f"Five. {ARABIC}"]
    assert msgs[0].branch_label.text() == "2/2" and msgs[1].branch_label.text() == "2/2"
    # The same file again: nothing new, no preview, nothing written.
    n = len(window.conversations.list_conversations())
    monkeypatch.setattr(dialogs, "ask", lambda dialog: pytest.fail("no preview when nothing is new"))
    window.import_conversation()
    assert window.banner.text.text() == (
        "Nothing to import from conversations.json: left out: "
        "1 × chats already in Glassbox (same title, start time and messages)."
    )
    assert len(window.conversations.list_conversations()) == n


def test_a_damaged_file_writes_nothing_and_the_banner_names_it(qtbot, window, tmp_path, monkeypatch):
    good = write_json(tmp_path / "good.conversation.json", lmstudio_conversation())
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps(chatgpt_export())[:-50], encoding="utf-8")
    monkeypatch.setattr(dialogs, "choose_open_paths", lambda *a: [str(good), str(bad)])
    asked: list[object] = []
    monkeypatch.setattr(dialogs, "ask", lambda dialog: asked.append(dialog) or True)
    before = len(window.conversations.list_conversations())
    window.import_conversation()
    assert asked == []  # no preview of a file that cannot be read
    text = window.banner.text.text()
    assert str(bad) in text and "not valid JSON" in text
    assert len(window.conversations.list_conversations()) == before
