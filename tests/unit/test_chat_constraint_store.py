"""A chat's output constraint (issue 23 §1) kept with it in the conversation store: written, updated, read
back after reopening; a history from before the column (schema version 3) reads as none; a damaged cell too."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from app.core.constraint.model import ConstraintKind, OutputConstraint
from app.core.conversations import ConversationStore
from app.core.conversations import schema as conv_schema
from app.core.conversations.base import constraint_from_cell

GRAMMAR = OutputConstraint(ConstraintKind.GBNF, 'root ::= "yes" | "no"')


def test_kept_with_the_chat_and_updated(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    with ConversationStore(db) as s:
        a = s.create_conversation(constraint=GRAMMAR)
        b = s.create_conversation()
        assert s.get_conversation(b).constraint == OutputConstraint()
        s.update_conversation(b, constraint=OutputConstraint(ConstraintKind.JSON))
        s.update_conversation(a, system_prompt="hi")  # other edits leave it alone
    with ConversationStore(db) as s:
        assert s.get_conversation(a).constraint == GRAMMAR
        assert s.get_conversation(a).chat_settings.constraint == GRAMMAR
        assert s.get_conversation(b).constraint.kind == ConstraintKind.JSON


def test_a_history_from_before_the_column_reads_as_none(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    with ConversationStore(db) as s:
        cid = s.create_conversation(system_prompt="old chat")
    with closing(sqlite3.connect(db)) as c:  # as version 3 left it
        c.execute("ALTER TABLE conversations DROP COLUMN constraint_json")
        c.execute("PRAGMA user_version = 3")
        c.commit()
    with ConversationStore(db) as s:
        conv = s.get_conversation(cid)
        assert conv.system_prompt == "old chat" and conv.constraint == OutputConstraint()
    with closing(sqlite3.connect(db)) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == len(conv_schema.MIGRATIONS) == 4


def test_an_unreadable_cell_is_none() -> None:
    assert constraint_from_cell("not json") == OutputConstraint()
    assert constraint_from_cell('{"kind": "xml", "text": "x"}') == OutputConstraint()
    assert constraint_from_cell('{"kind": "gbnf", "text": 3}') == OutputConstraint(ConstraintKind.GBNF, "")
    assert constraint_from_cell(None) == OutputConstraint()


def test_a_reply_records_its_format_and_its_stored_funnel_step_carries_it(tmp_path: Path) -> None:
    from app.core.conversations.model import MessageMeta
    from app.core.sampling.alternatives import ReplyAlternatives
    from app.core.sampling.params import SamplerSettings

    meta = MessageMeta(constraint=GRAMMAR)
    assert MessageMeta.from_dict(meta.to_dict()).constraint == GRAMMAR
    assert "constraint" not in MessageMeta().to_dict()  # only when there was one
    assert MessageMeta.from_dict({"constraint": "bad"}).constraint == OutputConstraint()
    alts = ReplyAlternatives(2, (5, 6), (0.0, 0.0), (1.0, 1.0), (5, 7, 6, 8), (1.0, 0.5, 1.0, 0.5), (1, 2, 3), {})
    st = alts.stored_step(1, 9, SamplerSettings(), 0, GRAMMAR)
    assert st.constraint == GRAMMAR and st.history == (1, 2, 3, 5)


def test_a_json_export_carries_the_chats_format_and_an_import_restores_it(tmp_path: Path) -> None:
    import json

    import pytest

    with ConversationStore(tmp_path / "a.sqlite3") as s:
        cid = s.create_conversation(constraint=GRAMMAR)
        s.add_message(cid, None, "user", "yes or no?")
        plain = s.create_conversation()
        s.add_message(plain, None, "user", "anything")
        s.export_json(cid, tmp_path / "c.json")
        s.export_json(plain, tmp_path / "p.json")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["conversation"]["constraint"] == {"kind": "gbnf", "text": GRAMMAR.text}
    assert "constraint" not in json.loads((tmp_path / "p.json").read_text())["conversation"]
    with ConversationStore(tmp_path / "b.sqlite3") as s:
        assert s.get_conversation(s.import_json(tmp_path / "c.json")).constraint == GRAMMAR
        assert s.get_conversation(s.import_json(tmp_path / "p.json")).constraint == OutputConstraint()
        data["conversation"]["constraint"] = "gbnf"
        (tmp_path / "bad.json").write_text(json.dumps(data))
        with pytest.raises(ValueError, match=r"conversation\.constraint"):
            s.import_json(tmp_path / "bad.json")
