"""The chat enums end to end: typed in memory, parsed from stored text, written as the same strings."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from app.core.chat.context import ChatMessage, ContextPolicy, GenerationStats, LoadSettings, Role, StopReason
from app.core.conversations import ConversationStore, MessageMeta
from app.paths import default_paths


@pytest.mark.parametrize("member", [*Role, *StopReason, *ContextPolicy])
def test_enum_members_print_and_serialise_as_their_values(member: Role | StopReason | ContextPolicy) -> None:
    assert str(member) == member.value
    assert f"<{member}>" == f"<{member.value}>"
    assert f"{member:>14}" == f"{member.value:>14}"
    assert json.dumps(member) == json.dumps(member.value)
    assert member == member.value


def test_parse_turns_unknown_text_into_the_documented_default() -> None:
    assert Role.parse("assistant") is Role.ASSISTANT
    assert Role.parse("tool") is Role.USER
    assert StopReason.parse("max_tokens") is StopReason.MAX_TOKENS
    assert StopReason.parse("exploded") is StopReason.EOS
    assert StopReason.parse(None) is StopReason.EOS
    assert ContextPolicy.parse("rolling") is ContextPolicy.ROLLING
    assert ContextPolicy.parse(["rolling"]) is ContextPolicy.STOP  # unhashable: still no crash


def test_values_given_as_text_become_members() -> None:
    assert ChatMessage("user", "hi").role is Role.USER
    with pytest.raises(ValueError, match="tool"):
        ChatMessage("tool", "hi")
    assert GenerationStats(stop_reason="context_full").stop_reason is StopReason.CONTEXT_FULL
    assert GenerationStats(stop_reason="nonsense").stop_reason is StopReason.EOS
    assert LoadSettings(context_policy="rolling").context_policy is ContextPolicy.ROLLING


def test_to_dict_writes_plain_strings_and_from_dict_reads_them_back() -> None:
    load = LoadSettings(n_ctx=2048, context_policy=ContextPolicy.ROLLING)
    d = load.to_dict()
    assert type(d["context_policy"]) is str and d["context_policy"] == "rolling"
    assert LoadSettings.from_dict(d) == load
    assert LoadSettings.from_dict({**d, "context_policy": "sideways"}).context_policy is ContextPolicy.STOP
    stats = GenerationStats(generated_tokens=3, stop_reason=StopReason.CANCELLED)
    sd = stats.to_dict()
    assert type(sd["stop_reason"]) is str and sd["stop_reason"] == "cancelled"
    meta = MessageMeta.from_dict({"stats": {**sd, "stop_reason": "unheard-of"}})
    assert meta.stats is not None and meta.stats.stop_reason is StopReason.EOS and meta.stats.generated_tokens == 3


def test_a_stored_role_glassbox_does_not_know_reads_as_user(tmp_path: Path) -> None:
    db = default_paths({"GLASSBOX_HOME": str(tmp_path)}).conversations_db
    with ConversationStore(db) as s:
        cid = s.create_conversation()
        mid = s.add_message(cid, None, Role.USER, "from a newer Glassbox")
    with closing(sqlite3.connect(str(db))) as c, c:
        c.execute("UPDATE messages SET role = 'tool' WHERE id = ?", (mid,))
    with ConversationStore(db) as s:
        assert s.get_message(mid).role is Role.USER
        assert [h.role for h in s.search("newer", titles=False)] == [Role.USER]
    with closing(sqlite3.connect(str(db))) as c:
        assert (
            c.execute("SELECT role FROM messages WHERE id = ?", (mid,)).fetchone()[0] == "tool"
        )  # read, not rewritten


def test_the_database_stores_the_same_strings(tmp_path: Path) -> None:
    db = default_paths({"GLASSBOX_HOME": str(tmp_path)}).conversations_db
    with ConversationStore(db) as s:
        cid = s.create_conversation()
        u = s.add_message(cid, None, Role.USER, "hi")
        a = s.add_message(cid, u, Role.ASSISTANT, "", complete=False)
        s.finish_message(a, "hello", stats=GenerationStats(stop_reason=StopReason.MAX_TOKENS))
        assert s.get_message(a).meta.stats is not None
        assert s.get_message(a).meta.stats.stop_reason is StopReason.MAX_TOKENS
        assert s.get_message(a).complete is False
    with closing(sqlite3.connect(str(db))) as c:
        rows = c.execute("SELECT role, meta_json FROM messages ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["user", "assistant"]
    assert json.loads(rows[1][1])["stats"]["stop_reason"] == "max_tokens"
