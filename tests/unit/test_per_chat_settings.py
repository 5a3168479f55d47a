"""What applies to a chat (app/core/chat/chat_settings.py): the rule for new chats, and the stop
strings kept with the settings, each chat, each reply's provenance and the exports."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

from app.core.chat.chat_settings import ChatSettings, after_edit, carried, clean_stop_strings
from app.core.chat.context import Role
from app.core.conversations import ConversationStore, MessageMeta
from app.core.conversations import schema as conv_schema
from app.core.sampling.params import SamplerSettings
from app.core.settings import Settings, SettingsStore

OLD = SamplerSettings(temperature=0.2, top_k=11)
DEFAULTS = SamplerSettings(temperature=0.9, top_k=33)


def test_only_the_values_changed_are_carried_to_the_defaults():
    edited = replace(OLD, temperature=0.5)
    assert carried(DEFAULTS, OLD, edited) == replace(DEFAULTS, temperature=0.5)
    assert carried(DEFAULTS, OLD, OLD) is DEFAULTS  # nothing changed: nothing carried


def test_an_edit_carries_sampler_and_stop_strings_but_not_the_system_prompt():
    defaults = ChatSettings(DEFAULTS, "Be brief.", ("END",))
    before = ChatSettings(OLD, "Old chat's prompt.", ("STOP",))
    assert after_edit(defaults, before, replace(before, system_prompt="Edited.")) == defaults
    assert after_edit(defaults, before, replace(before, stop_strings=("FIN",))) == replace(
        defaults, stop_strings=("FIN",)
    )
    got = after_edit(defaults, before, replace(before, sampler=replace(OLD, top_k=5)))
    assert got.sampler == replace(DEFAULTS, top_k=5) and got.stop_strings == ("END",)


def test_stored_stop_strings_are_cleaned():
    assert clean_stop_strings(["END", "", 3, "END", "\n"]) == ("END", "\n")
    assert clean_stop_strings("END") == () and clean_stop_strings(None) == ()


def test_the_defaults_stop_strings_survive_a_restart_and_older_files_have_none(tmp_path: Path):
    store = SettingsStore(tmp_path / "settings.json")
    store.save(replace(Settings(), stop_strings=("END", "\n")))
    assert store.load().stop_strings == ("END", "\n")
    assert store.load().new_chat.stop_strings == ("END", "\n")
    data = json.loads((tmp_path / "settings.json").read_text())
    del data["stop_strings"]
    (tmp_path / "settings.json").write_text(json.dumps(data))
    assert store.load().stop_strings == ()


def test_a_chat_keeps_its_stop_strings_and_each_reply_records_its_own(tmp_path: Path):
    path = tmp_path / "history.sqlite3"
    with ConversationStore(path) as s:
        cid = s.create_conversation(sampler=OLD, stop_strings=("END",))
        assert s.get_conversation(cid).chat_settings == ChatSettings(OLD, "", ("END",))
        s.update_conversation(cid, stop_strings=("A", "B"))
        u = s.add_message(cid, None, Role.USER, "hi")
        r = s.add_message(cid, u, Role.ASSISTANT, "yo", MessageMeta(sampler=OLD, stop_strings=("A", "B")))
    with ConversationStore(path) as s:  # reopened: as stored
        assert s.get_conversation(cid).stop_strings == ("A", "B")
        assert s.get_message(r).meta.stop_strings == ("A", "B")
        out = tmp_path / "chat.json"
        s.export_json(cid, out)
        data = json.loads(out.read_text())
        assert data["conversation"]["stop_strings"] == ["A", "B"]
        md = tmp_path / "chat.md"
        s.export_markdown(cid, md)
        assert "stop strings `A`, `B`" in md.read_text()
        again = s.import_json(out)
        assert s.get_conversation(again).stop_strings == ("A", "B")


def test_a_version_2_history_gets_the_stop_strings_column(tmp_path: Path):
    path = tmp_path / "history.sqlite3"
    with closing(conv_schema.connect(path)) as c:  # a history as the previous Glassbox wrote it
        conv_schema.MIGRATIONS[0](c)
        conv_schema.MIGRATIONS[1](c)
        c.execute("PRAGMA user_version = 2")
        c.execute("INSERT INTO conversations (created_at, updated_at, title) VALUES (1, 1, 'old')")
    with ConversationStore(path) as s:
        assert s.get_conversation(1).stop_strings == ()
    with closing(sqlite3.connect(str(path))) as c:
        assert (
            c.execute("PRAGMA user_version").fetchone()[0] == len(conv_schema.MIGRATIONS) >= 3
        )  # 4: the output format column (issue 23 §1)
