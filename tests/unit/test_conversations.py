"""ConversationStore on real SQLite files: CRUD, branches (case C1), search,
streaming throttle, export/import, schema versions."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from app.core import conversations as conv_mod
from app.core.chat.context import GenerationStats, LoadSettings, Role, StopReason
from app.core.conversations import (
    DEFAULT_TITLE,
    EXPORT_FORMAT,
    ConversationStore,
    MessageMeta,
    SchemaTooNewError,
    make_title,
)
from app.core.conversations import schema as conv_schema
from app.core.sampling.params import SamplerSettings
from app.paths import default_paths


class FakeClock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return default_paths({"GLASSBOX_HOME": str(tmp_path)}).conversations_db


@pytest.fixture
def store(db_path: Path):
    s = ConversationStore(db_path)
    yield s
    s.close()


def raw(path: Path) -> closing[sqlite3.Connection]:
    """A separate connection, as another process would see the file."""
    return closing(sqlite3.connect(str(path)))


def persisted_content(path: Path, message_id: int) -> str:
    with raw(path) as c:
        return c.execute("SELECT content FROM messages WHERE id = ?", (message_id,)).fetchone()[0]


def reply_meta(**stats_kw) -> MessageMeta:
    stats = GenerationStats(
        prompt_tokens=30,
        evaluated_tokens=30,
        prefill_s=0.05,
        ttft_s=0.12,
        generated_tokens=42,
        decode_s=41 / 98.3,
        stop_reason="eos",
        seed=1234,
        **stats_kw,
    )
    return MessageMeta(
        model_path="/models/SmolLM2-135M-Instruct-Q4_1.gguf",
        model_name="SmolLM2",
        quant="Q4_1",
        sampler=SamplerSettings(temperature=0.3, top_k=20),
        load=LoadSettings(n_ctx=2048),
        system_prompt="Be brief.",
        stats=stats,
        engine="llama-cpp-python 0.3.36",
    )


def two_exchanges(store: ConversationStore) -> tuple[int, list[int]]:
    cid = store.create_conversation(system_prompt="Be brief.", model_path="/models/smol.gguf")
    u1 = store.add_message(cid, None, Role.USER, "What is the capital of France?")
    a1 = store.add_message(cid, u1, Role.ASSISTANT, "Paris.", reply_meta())
    u2 = store.add_message(cid, a1, Role.USER, "And of Germany?")
    a2 = store.add_message(cid, u2, Role.ASSISTANT, "Berlin.", reply_meta())
    return cid, [u1, a1, u2, a2]


def contents(msgs) -> list[str]:
    return [m.content for m in msgs]


# --------------------------------------------------------------------------- schema and files


def test_new_store_is_wal_with_schema_version(store: ConversationStore, db_path: Path) -> None:
    assert store.path == db_path and db_path.is_file()
    assert store.notice is None
    with raw(db_path) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert c.execute("PRAGMA user_version").fetchone()[0] == len(conv_mod.MIGRATIONS) >= 1
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"conversations", "messages"} <= tables


def test_everything_survives_reopening(db_path: Path) -> None:
    sampler = SamplerSettings(temperature=0.2, top_k=7, seed=99)
    with ConversationStore(db_path) as s:
        cid = s.create_conversation(system_prompt="You are terse.", model_path="/m/a.gguf", sampler=sampler)
        u = s.add_message(cid, None, "user", "Hello there")
        a = s.add_message(cid, u, "assistant", "Hi!", reply_meta())
        before_conv = s.get_conversation(cid)
        before_msgs = s.messages(cid)
    with ConversationStore(db_path) as s:
        conv = s.get_conversation(cid)
        assert conv == before_conv
        assert (conv.system_prompt, conv.model_path, conv.sampler) == ("You are terse.", "/m/a.gguf", sampler)
        assert conv.current_leaf_id == a
        assert s.messages(cid) == before_msgs
        reply = s.get_message(a)
        assert reply.meta == reply_meta()
        assert reply.role is Role.ASSISTANT and reply.parent_id == u and reply.complete


def test_zero_version_database_gets_the_schema(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with closing(sqlite3.connect(str(db_path))) as c:  # a valid, empty SQLite file at version 0
        c.execute("PRAGMA user_version = 0")
        c.execute("VACUUM")
    assert db_path.stat().st_size > 0
    with ConversationStore(db_path) as s:
        assert s.notice is None
        cid = s.create_conversation()
        s.add_message(cid, None, "user", "hi")
    with raw(db_path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == len(conv_mod.MIGRATIONS)


def test_newer_schema_is_refused_and_left_untouched(db_path: Path) -> None:
    with ConversationStore(db_path) as s:
        s.add_message(s.create_conversation(), None, "user", "from the future")
    future = len(conv_mod.MIGRATIONS) + 3
    with raw(db_path) as c:
        c.execute(f"PRAGMA user_version = {future}")
        c.commit()
    before = db_path.read_bytes()
    with pytest.raises(SchemaTooNewError, match=rf"newer version of Glassbox \(schema version {future}"):
        ConversationStore(db_path)
    assert db_path.read_bytes() == before
    assert not list(db_path.parent.glob("*.damaged-*"))


def test_migrations_run_in_order_from_version_1(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ConversationStore(db_path) as s:  # a version-1 history with data
        cid = s.create_conversation()
        s.add_message(cid, None, "user", "kept across the migration")

    def v2(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")

    released = len(conv_schema.MIGRATIONS)
    monkeypatch.setattr(conv_schema, "MIGRATIONS", [*conv_schema.MIGRATIONS, v2])
    with ConversationStore(db_path) as s:
        assert contents(s.active_path(cid)) == ["kept across the migration"]
    with raw(db_path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == released + 1
        cols = {r[1] for r in c.execute("PRAGMA table_info(conversations)")}
    assert "pinned" in cols


def test_failed_migration_changes_nothing(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ConversationStore(db_path) as s:
        s.create_conversation()

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE conversations ADD COLUMN half_done INTEGER")
        raise RuntimeError("step failed")

    released = len(conv_schema.MIGRATIONS)
    monkeypatch.setattr(conv_schema, "MIGRATIONS", [*conv_schema.MIGRATIONS, broken])
    with pytest.raises(RuntimeError, match="step failed"):
        ConversationStore(db_path)
    with raw(db_path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == released
        assert "half_done" not in {r[1] for r in c.execute("PRAGMA table_info(conversations)")}


# --------------------------------------------------------------------------- conversations


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What is the capital of France?", "What is the capital of France?"),
        ("  lots \n of\t space  ", "lots of space"),
        ("", DEFAULT_TITLE),
        ("   \n ", DEFAULT_TITLE),
    ],
)
def test_make_title_short(text: str, expected: str) -> None:
    assert make_title(text) == expected


def test_make_title_cuts_long_text_on_a_word_boundary() -> None:
    text = "Explain how photosynthesis works in plants, step by step, with the chemistry involved and examples"
    title = make_title(text)
    assert len(title) <= 60 and title.endswith("…")
    assert text.startswith(title[:-1])
    assert title == "Explain how photosynthesis works in plants, step by step…"  # whole words, no dangling comma
    one_word = "x" * 200
    assert make_title(one_word) == "x" * 59 + "…"


def test_title_comes_from_first_user_message_until_renamed(store: ConversationStore) -> None:
    cid = store.create_conversation()
    assert store.get_conversation(cid).title == DEFAULT_TITLE
    u = store.add_message(cid, None, "user", "How do   rainbows form?")
    store.add_message(cid, u, "assistant", "Light refracts in droplets.")
    store.add_message(cid, u, "user", "not a first message")
    assert store.get_conversation(cid).title == "How do rainbows form?"
    u_edit = store.edit_message(u, "How do double rainbows form?")
    assert store.get_conversation(cid).title == "How do double rainbows form?"
    assert store.rename(cid, "  Rainbows ") == "Rainbows"
    store.edit_message(u_edit, "Something else entirely")
    conv = store.get_conversation(cid)
    assert conv.title == "Rainbows" and conv.title_is_custom
    assert store.rename(cid, "") == "Something else entirely"  # blank = back to automatic
    assert not store.get_conversation(cid).title_is_custom


def test_list_is_newest_first(db_path: Path) -> None:
    clock = FakeClock()
    with ConversationStore(db_path, clock=clock) as s:
        ids = []
        for i in range(3):
            ids.append(s.create_conversation(title=f"c{i}"))
            clock.advance(10)
        assert [c.id for c in s.list_conversations()] == ids[::-1]
        s.add_message(ids[0], None, "user", "new activity in the oldest")
        assert [c.id for c in s.list_conversations()] == [ids[0], ids[2], ids[1]]
        assert s.get_conversation(ids[0]).updated_at > s.get_conversation(ids[2]).updated_at


def test_update_conversation_settings(store: ConversationStore) -> None:
    cid = store.create_conversation(system_prompt="old")
    store.update_conversation(cid, system_prompt="new", sampler=SamplerSettings(temperature=0.0))
    conv = store.get_conversation(cid)
    assert conv.system_prompt == "new" and conv.sampler.temperature == 0.0 and conv.model_path == ""
    with pytest.raises(KeyError):
        store.update_conversation(9999, system_prompt="x")


def test_delete_undo_and_purge(db_path: Path) -> None:
    clock = FakeClock()
    with ConversationStore(db_path, clock=clock) as s:
        keep = s.create_conversation()
        s.add_message(keep, None, "user", "keep me, zebra")
        gone = s.create_conversation()
        s.add_message(gone, None, "user", "delete me, zebra")
        s.delete_conversation(gone)
        assert [c.id for c in s.list_conversations()] == [keep]
        assert [h.conversation_id for h in s.search("zebra", titles=False)] == [keep]
        assert s.get_conversation(gone).deleted_at is not None
        assert [c.id for c in s.list_conversations(include_deleted=True)] == [gone, keep]
        s.undo_delete(gone)
        assert {c.id for c in s.list_conversations()} == {keep, gone}
        assert {h.conversation_id for h in s.search("zebra", titles=False)} == {keep, gone}
        s.delete_conversation(gone)
        clock.advance(60)
        assert s.purge_deleted(older_than=3600) == 0
        s.undo_delete(gone)  # still possible
        s.delete_conversation(gone)
        clock.advance(7200)
        assert s.purge_deleted(older_than=3600) == 1
        with pytest.raises(KeyError):
            s.get_conversation(gone)
        with pytest.raises(KeyError):
            s.undo_delete(gone)
        assert contents(s.active_path(keep)) == ["keep me, zebra"]
    with raw(db_path) as c:
        assert c.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (gone,)).fetchone()[0] == 0


# --------------------------------------------------------------------------- branches (C1)


def test_c1_editing_the_first_reply_keeps_later_messages_as_a_branch(store: ConversationStore) -> None:
    cid, (u1, a1, u2, a2) = two_exchanges(store)
    edited = store.edit_message(a1, "Paris, the capital of France.")
    assert edited not in (u1, a1, u2, a2)
    # what is on screen and what the model sees next use the edited text
    assert contents(store.active_path(cid)) == ["What is the capital of France?", "Paris, the capital of France."]
    assert store.chat_history(cid)[-1].content == "Paris, the capital of France."
    assert store.chat_history(cid)[0].role == "system"
    # nothing was deleted: the old reply and what followed are one arrow away
    sib = store.siblings(edited)
    assert sib.ids == (a1, edited) and sib.label == "2/2" and sib.previous_id == a1 and sib.next_id is None
    assert len(store.messages(cid)) == 5
    old = store.select_branch(sib.previous_id)
    assert contents(old) == ["What is the capital of France?", "Paris.", "And of Germany?", "Berlin."]
    assert [m.id for m in store.active_path(cid)] == [u1, a1, u2, a2]
    # the edited copy remembers how the reply it came from was made
    copy = store.get_message(edited)
    assert copy.meta.edited and copy.meta.stats == reply_meta().stats and not store.get_message(a1).meta.edited


def test_c1_editing_the_first_question_makes_a_new_root(store: ConversationStore) -> None:
    cid, (u1, a1, u2, a2) = two_exchanges(store)
    new_q = store.edit_message(u1, "What is the capital of Italy?")
    assert store.get_message(new_q).parent_id is None
    assert store.siblings(new_q).ids == (u1, new_q)
    assert contents(store.active_path(cid)) == ["What is the capital of Italy?"]
    reply = store.add_message(cid, new_q, "assistant", "Rome.")
    assert [m.id for m in store.active_path(cid)] == [new_q, reply]
    assert [m.id for m in store.select_branch(u1)] == [u1, a1, u2, a2]
    assert store.edit_message(u1, "What is the capital of France?") == u1  # unchanged text: no new branch


def test_select_branch_follows_the_most_recently_selected_descendants(store: ConversationStore) -> None:
    cid, (u1, a1, u2, a2) = two_exchanges(store)
    a2b = store.regenerate(a2)
    store.finish_message(a2b, "Berlin, of course.")
    a1b = store.edit_message(a1, "Paris!")
    assert [m.id for m in store.active_path(cid)] == [u1, a1b]
    # back to the first reply: its thread shows the reply created last under it
    assert [m.id for m in store.select_branch(a1)] == [u1, a1, u2, a2b]
    assert [m.id for m in store.select_branch(a2)] == [u1, a1, u2, a2]
    store.select_branch(a1b)
    # ...and after a detour it shows the reply that was selected last, not created last
    assert [m.id for m in store.select_branch(a1)] == [u1, a1, u2, a2]
    assert store.get_conversation(cid).current_leaf_id == a2
    store.close()
    with ConversationStore(store.path) as again:  # the selection is stored, not in memory
        assert [m.id for m in again.active_path(cid)] == [u1, a1, u2, a2]


def test_siblings_are_in_creation_order(store: ConversationStore) -> None:
    cid, (u1, _a1, u2, a2) = two_exchanges(store)
    r2 = store.regenerate(a2)
    r3 = store.regenerate(a2)
    assert store.get_message(r2).parent_id == u2 and not store.get_message(r2).complete
    for i, mid in enumerate((a2, r2, r3)):
        sib = store.siblings(mid)
        assert sib.ids == (a2, r2, r3)
        assert (sib.index, sib.position, sib.count, sib.label) == (i, i + 1, 3, f"{i + 1}/3")
    assert store.siblings(r2).previous_id == a2 and store.siblings(r2).next_id == r3
    assert store.siblings(u1).ids == (u1,)  # first messages are siblings of each other
    with pytest.raises(ValueError, match="only assistant replies"):
        store.regenerate(u2)
    assert store.active_path(cid)[-1].id == r3


def test_delete_message_removes_only_its_subtree(store: ConversationStore) -> None:
    cid, (u1, a1, u2, a2) = two_exchanges(store)
    a1b = store.edit_message(a1, "Paris!")
    u2b = store.add_message(cid, a1b, "user", "Thanks")
    store.select_branch(a1)
    assert store.delete_message(a1) == 3  # a1, u2, a2
    remaining = {m.id for m in store.messages(cid)}
    assert remaining == {u1, a1b, u2b}
    for mid in (a1, u2, a2):
        with pytest.raises(KeyError):
            store.get_message(mid)
    # the selection moved to the surviving sibling's thread
    assert [m.id for m in store.active_path(cid)] == [u1, a1b, u2b]
    assert store.delete_message(u2b) == 1
    assert [m.id for m in store.active_path(cid)] == [u1, a1b]
    assert store.delete_message(u1) == 2
    assert store.active_path(cid) == [] and store.get_conversation(cid).current_leaf_id is None


def test_a_deleted_message_comes_back_with_its_subtree_ids_search_and_selection(store: ConversationStore) -> None:
    cid, (u1, a1, u2, a2) = two_exchanges(store)
    a1b = store.edit_message(a1, "Paris, of course.")
    store.select_branch(a2)
    before = store.messages(cid)
    deleted = store.delete_message_undoable(a1)
    assert deleted.count == 3 and deleted.conversation_id == cid and deleted.leaf_id == a2
    assert [m.id for m in store.active_path(cid)] == [u1, a1b]
    assert not store.search("Germany", titles=False)
    store.restore_messages(deleted)
    assert store.messages(cid) == before  # same ids, text, meta, order
    assert [m.id for m in store.active_path(cid)] == [u1, a1, u2, a2]  # the selection too
    assert [h.message_id for h in store.search("Germany", titles=False)] == [u2]
    with pytest.raises(sqlite3.IntegrityError):
        store.restore_messages(deleted)  # already back
    # Its parent deleted meanwhile: nothing to hang it on.
    gone = store.delete_message_undoable(u2)
    store.delete_message(a1)
    with pytest.raises(KeyError):
        store.restore_messages(gone)
    meta = MessageMeta(earlier_tokens=12, edited=True)
    assert MessageMeta.from_dict(json.loads(json.dumps(meta.to_dict()))) == meta
    assert MessageMeta.from_dict({"earlier_tokens": -3}).earlier_tokens == 0


def test_add_message_checks_its_arguments(store: ConversationStore) -> None:
    _c1, (u1, *_rest) = two_exchanges(store)
    c2 = store.create_conversation()
    with pytest.raises(KeyError, match="not in conversation"):
        store.add_message(c2, u1, "assistant", "cross-conversation parent")
    with pytest.raises(KeyError):
        store.add_message(9999, None, "user", "no such conversation")
    with pytest.raises(KeyError):
        store.add_message(c2, 9999, "user", "no such parent")
    with pytest.raises(ValueError):
        store.add_message(c2, None, "narrator", "bad role")
    assert store.messages(c2) == []


def test_chat_history_stops_before_the_reply_being_generated(store: ConversationStore) -> None:
    cid, (_u1, _a1, _u2, a2) = two_exchanges(store)
    new = store.regenerate(a2)
    hist = store.chat_history(cid, before=new)
    assert [(m.role, m.content) for m in hist] == [
        ("system", "Be brief."),
        ("user", "What is the capital of France?"),
        ("assistant", "Paris."),
        ("user", "And of Germany?"),
    ]


# --------------------------------------------------------------------------- search


def _fts_param(use_fts: bool):
    return pytest.param(use_fts, id="fts5" if use_fts else "scan")


@pytest.fixture(params=[_fts_param(True), _fts_param(False)])
def search_store(request: pytest.FixtureRequest, db_path: Path):
    s = ConversationStore(db_path, use_fts=request.param)
    if request.param and not s.fts_enabled:
        s.close()
        pytest.skip("this SQLite build has no FTS5")
    assert s.fts_enabled is request.param
    yield s
    s.close()


def _search_corpus(s: ConversationStore) -> dict[str, int]:
    bio = s.create_conversation()
    q = s.add_message(bio, None, "user", "Explain photosynthesis simply.")
    a = s.add_message(
        bio,
        q,
        "assistant",
        "Plants capture sunlight. " * 10 + "Photosynthesis turns light, water and CO2 into sugar. " + "The end. " * 10,
    )
    branch = s.edit_message(a, "An older wording about chlorophyll.")
    cook = s.create_conversation()
    q2 = s.add_message(cook, None, "user", "A recipe with Crème brûlée please")
    s.add_message(cook, q2, "assistant", "Whisk the cream and the sugar, then bake.")
    return {"bio": bio, "q": q, "reply": a, "branch": branch, "cook": cook, "q2": q2}


def test_search_finds_messages_in_all_conversations_and_branches(search_store: ConversationStore) -> None:
    s = search_store
    ids = _search_corpus(s)
    hits = s.search("photosynthesis")
    title_hit, *hits = hits  # a chat whose title matches comes first
    assert (title_hit.conversation_id, title_hit.message_id, title_hit.role) == (ids["bio"], None, None)
    assert [title_hit.snippet[a:b] for a, b in title_hit.highlights] == ["photosynthesis"]
    assert {(h.conversation_id, h.message_id) for h in hits} == {(ids["bio"], ids["q"]), (ids["bio"], ids["reply"])}
    reply_hit = next(h for h in hits if h.message_id == ids["reply"])
    assert reply_hit.role is Role.ASSISTANT and reply_hit.conversation_title == "Explain photosynthesis simply."
    assert "Photosynthesis turns light" in reply_hit.snippet
    assert len(reply_hit.snippet) < 200  # a snippet, not the whole message
    assert [reply_hit.snippet[a:b] for a, b in reply_hit.highlights] == ["Photosynthesis"]
    # a message on a branch that is not shown is found too
    assert [h.message_id for h in s.search("chlorophyll", titles=False)] == [ids["branch"]]
    # every word must match, case does not matter
    assert {h.message_id for h in s.search("SUGAR cream", titles=False)} == {ids["q2"] + 1}
    assert {h.conversation_id for h in s.search("sugar")} == {ids["bio"], ids["cook"]}
    assert s.search("sugar nonexistentword", titles=False) == []
    assert s.search("   ") == [] and s.search("!!!") == []
    assert len(s.search("sugar", limit=1)) == 1


def test_search_finds_a_chat_by_its_title_alone(search_store: ConversationStore) -> None:
    s = search_store
    ids = _search_corpus(s)
    s.rename(ids["cook"], "Dessert ideas for Sunday")
    hits = s.search("sunday DESSERT")
    assert [(h.conversation_id, h.message_id, h.role) for h in hits] == [(ids["cook"], None, None)]
    assert hits[0].snippet == "Dessert ideas for Sunday"
    assert sorted(hits[0].snippet[a:b] for a, b in hits[0].highlights) == ["Dessert", "Sunday"]
    assert len(s.search("sugar", limit=1)) == 1
    s.delete_conversation(ids["cook"])
    assert s.search("sunday") == []


def test_search_sees_edited_and_deleted_text(search_store: ConversationStore) -> None:
    s = search_store
    ids = _search_corpus(s)
    s.set_message_content(ids["branch"], "Now about mitochondria.")
    assert s.search("chlorophyll", titles=False) == []
    assert [h.message_id for h in s.search("mitochondria", titles=False)] == [ids["branch"]]
    s.delete_message(ids["branch"])
    assert s.search("mitochondria", titles=False) == []
    s.delete_conversation(ids["cook"])
    assert s.search("brûlée", titles=False) == []


def test_search_matches_non_ascii_words(search_store: ConversationStore) -> None:
    s = search_store
    ids = _search_corpus(s)
    hits = [h for h in s.search("brûlée") if h.message_id is not None]  # (the title matches too)
    assert [h.message_id for h in hits] == [ids["q2"]]
    assert [hits[0].snippet[a:b] for a, b in hits[0].highlights] == ["brûlée"]


def test_fts_index_catches_up_after_running_without_it(db_path: Path) -> None:
    with ConversationStore(db_path) as s:
        if not s.fts_enabled:
            pytest.skip("this SQLite build has no FTS5")
        cid = s.create_conversation()
        s.add_message(cid, None, "user", "first words: aardvark")
    with ConversationStore(db_path, use_fts=False) as s:  # as on a build without FTS5
        assert not s.fts_enabled
        mid = s.add_message(cid, None, "user", "written without the index: platypus")
        s.set_message_content(1, "first words changed: wombat")
    with ConversationStore(db_path) as s:
        assert s.fts_enabled
        assert [h.message_id for h in s.search("platypus", titles=False)] == [mid]
        assert [h.message_id for h in s.search("wombat", titles=False)] == [1]
        assert s.search("aardvark", titles=False) == []


# --------------------------------------------------------------------------- streaming


def test_streaming_writes_at_most_once_a_second(db_path: Path) -> None:
    mono = FakeClock(100.0)
    with ConversationStore(db_path, monotonic=mono) as s:
        cid = s.create_conversation()
        u = s.add_message(cid, None, "user", "Count")
        r = s.add_message(cid, u, "assistant", "", complete=False)
        assert s.update_streaming(r, "1") is True  # nothing written yet: write now
        assert persisted_content(db_path, r) == "1"
        for i in range(2, 10):
            mono.advance(0.1)
            assert s.update_streaming(r, " ".join(map(str, range(1, i + 1)))) is False
        assert persisted_content(db_path, r) == "1"
        assert s.get_message(r).content == "1 2 3 4 5 6 7 8 9"  # reads see the latest text
        assert s.active_path(cid)[-1].content == "1 2 3 4 5 6 7 8 9"
        mono.advance(0.25)  # over 1 s since the last write
        assert s.update_streaming(r, "1 2 3 4 5 6 7 8 9 10") is True
        assert persisted_content(db_path, r) == "1 2 3 4 5 6 7 8 9 10"
        mono.advance(0.3)
        assert s.update_streaming(r, "pending text") is False
        assert s.flush() == 1
        assert persisted_content(db_path, r) == "pending text"
        assert s.flush() == 0
        mono.advance(0.1)
        s.update_streaming(r, "final words")
        msg = s.finish_message(r, stats=GenerationStats(generated_tokens=12, stop_reason="eos", seed=5))
        assert msg.content == persisted_content(db_path, r) == "final words"
        assert msg.complete and msg.meta.seed == 5 and msg.meta.stats.generated_tokens == 12


def test_streamed_updates_commit_without_fsync_and_every_other_write_with_it(db_path: Path) -> None:
    """synchronous=NORMAL (WAL: atomic, no fsync) only for a streaming reply's periodic write."""
    mono = FakeClock(100.0)
    with ConversationStore(db_path, monotonic=mono) as s:
        cid = s.create_conversation()
        u = s.add_message(cid, None, "user", "Count")
        r = s.add_message(cid, u, "assistant", "", complete=False)
        modes: list[int] = []

        def mode() -> int:  # 1 = NORMAL, 2 = FULL
            return s._conn.execute("PRAGMA synchronous").fetchone()[0]

        real_store = s._store_content

        def spy(conn, mid, content, now):  # inside the streaming write's transaction
            modes.append(mode())
            return real_store(conn, mid, content, now)

        s._store_content = spy  # type: ignore[method-assign]
        s.update_streaming(r, "1")
        mono.advance(0.2)
        s.update_streaming(r, "1 2")
        s.flush()
        assert modes == [1, 1]  # NORMAL for both streamed writes
        assert mode() == 2  # FULL again afterwards
        modes.clear()
        s.finish_message(r, stats=GenerationStats(generated_tokens=2, stop_reason="eos", seed=1))
        s.add_message(cid, r, "user", "Next")
        assert mode() == 2 and all(m == 2 for m in modes)
    assert persisted_content(db_path, r) == "1 2"


def test_many_updates_in_real_time_make_at_most_two_writes(db_path: Path) -> None:
    with ConversationStore(db_path) as s:
        cid = s.create_conversation()
        r = s.add_message(cid, None, "assistant", "", complete=False)
        seen_on_disk = []
        text = ""
        with raw(db_path) as reader:
            for i in range(300):
                text += f"tok{i} "
                s.update_streaming(r, text)
                seen_on_disk.append(reader.execute("SELECT content FROM messages WHERE id = ?", (r,)).fetchone()[0])
            writes = sum(1 for prev, cur in zip(["", *seen_on_disk], seen_on_disk, strict=False) if cur != prev)
            assert 1 <= writes <= 2
            s.flush()
            assert reader.execute("SELECT content FROM messages WHERE id = ?", (r,)).fetchone()[0] == text


def test_pending_text_is_written_by_close_and_other_writes(db_path: Path) -> None:
    mono = FakeClock(0.0)
    with ConversationStore(db_path, monotonic=mono) as s:
        cid = s.create_conversation()
        r = s.add_message(cid, None, "assistant", "", complete=False)
        s.update_streaming(r, "a")
        s.update_streaming(r, "ab")
        other = s.create_conversation()  # any write carries the pending text along
        assert persisted_content(db_path, r) == "ab"
        s.update_streaming(r, "abc")
        with pytest.raises(KeyError):
            s.set_message_content(9999, "no such message")  # rolled back: "abc" must stay pending
        assert persisted_content(db_path, r) == "ab"
        s.update_streaming(r, "abcd")
        s.delete_conversation(other)
        assert persisted_content(db_path, r) == "abcd"
        s.update_streaming(r, "abcde")
    assert persisted_content(db_path, r) == "abcde"  # close() flushed


def test_finish_message_marks_cut_off_replies_incomplete(store: ConversationStore) -> None:
    _cid, (_u1, _a1, _u2, a2) = two_exchanges(store)
    for reason, complete in [
        (StopReason.EOS, True),
        (StopReason.STOP_STRING, True),
        (StopReason.MAX_TOKENS, False),
        (StopReason.CANCELLED, False),
        (StopReason.CONTEXT_FULL, False),
        (StopReason.ERROR, False),
    ]:
        r = store.regenerate(a2, reply_meta())
        store.update_streaming(r, "Berl")
        assert not store.get_message(r).complete
        msg = store.finish_message(r, stats=GenerationStats(generated_tokens=2, stop_reason=reason.value, seed=77))
        assert msg.complete is complete, reason
        assert msg.content == "Berl"
        assert msg.meta.stats.stop_reason == reason.value and msg.meta.seed_used == 77
        assert msg.meta.model_name == "SmolLM2"  # meta given at regenerate() is kept
    assert store.finish_message(r, complete=True).complete


def test_continue_appends_and_set_content_replaces(store: ConversationStore, db_path: Path) -> None:
    _cid, (_u1, _a1, _u2, a2) = two_exchanges(store)
    r = store.regenerate(a2)
    store.finish_message(r, "Berlin is", stats=GenerationStats(stop_reason="max_tokens"))
    assert not store.get_message(r).complete
    assert store.append_to_message(r, " the capital.") == "Berlin is the capital."
    assert persisted_content(db_path, r) == "Berlin is the capital."
    store.finish_message(r, stats=GenerationStats(stop_reason="eos"))
    assert store.get_message(r).complete and store.get_message(r).content == "Berlin is the capital."
    store.set_message_content(r, "Replaced.")
    assert persisted_content(db_path, r) == "Replaced."
    assert len(store.siblings(r).ids) == 2  # in place: no new branch
    with pytest.raises(KeyError):
        store.append_to_message(12345, "x")
    with pytest.raises(KeyError):
        store.update_streaming(12345, "x")


# --------------------------------------------------------------------------- meta


def test_message_meta_reproduces_a_reply() -> None:
    meta = reply_meta()
    assert MessageMeta.from_dict(json.loads(json.dumps(meta.to_dict()))) == meta
    repro = meta.reproduction_sampler()
    assert repro == SamplerSettings(temperature=0.3, top_k=20, seed=1234)
    assert meta.stats_line() == "SmolLM2 · Q4_1 · 42 tokens · 98.3 tok/s · TTFT 0.12 s · seed 1234"
    bare = MessageMeta(
        model_path="/m/Qwen2.5-0.5B-Q8_0.gguf",
        stats=GenerationStats(generated_tokens=9, decode_s=1.0, stop_reason="max_tokens"),
    )
    assert bare.stats_line() == "Qwen2.5-0.5B-Q8_0 · 9 tokens · 8.0 tok/s · max_tokens reached · seed 0"
    assert MessageMeta().stats_line() == "" and MessageMeta().reproduction_sampler() is None


def test_message_meta_tolerates_bad_stored_values() -> None:
    meta = MessageMeta.from_dict(
        {
            "model_path": 3,
            "seed": "x",
            "sampler": [1],
            "edited": "yes",
            "stats": {"generated_tokens": "many", "ttft_s": 0.5, "stop_reason": 7, "bogus": 1},
        }
    )
    assert meta.model_path == "" and meta.seed is None and meta.sampler is None and meta.edited is False
    assert meta.stats == GenerationStats(ttft_s=0.5)
    assert MessageMeta.from_dict(None) == MessageMeta() == MessageMeta.from_dict("nope")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- export / import


def _rich_conversation(s: ConversationStore) -> int:
    cid, (_u1, a1, _u2, a2) = two_exchanges(s)
    s.update_conversation(cid, sampler=SamplerSettings(temperature=0.0, seed=3))
    a1b = s.edit_message(a1, "Paris!")
    s.add_message(cid, a1b, "user", "Why?")
    r = s.regenerate(a2, reply_meta())
    s.finish_message(
        r,
        "Berlin — cut",
        stats=GenerationStats(generated_tokens=5, decode_s=0.5, ttft_s=0.3, stop_reason="cancelled", seed=8),
    )
    s.select_branch(a1)
    return cid


def test_markdown_export_is_the_visible_thread_with_stats(store: ConversationStore, tmp_path: Path) -> None:
    cid = _rich_conversation(store)
    out = tmp_path / "export" / "chat.md"
    store.export_markdown(cid, out)
    md = out.read_text(encoding="utf-8")
    assert md.startswith("# What is the capital of France?\n")
    assert "> Be brief." in md
    assert "### You\n\nWhat is the capital of France?" in md
    assert "### Assistant\n\nParis.\n\n*SmolLM2 · Q4_1 · 42 tokens · 98.3 tok/s · TTFT 0.12 s · seed 1234*" in md
    assert "Berlin — cut" in md and "stopped · seed 8 · unfinished*" in md
    for hidden in ("Paris!", "Why?", "Berlin."):  # other branches are not in the Markdown
        assert hidden not in md
    assert [p.name for p in out.parent.iterdir()] == ["chat.md"]  # no temp files left


def test_json_export_import_round_trip_keeps_every_branch(store: ConversationStore, tmp_path: Path) -> None:
    cid = _rich_conversation(store)
    out = tmp_path / "chat.json"
    store.export_json(cid, out)
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["format"] == EXPORT_FORMAT and data["version"] == 1
    assert len(data["messages"]) == len(store.messages(cid)) == 7
    assert data["messages"][1]["meta"]["stats"]["decode_tok_s"] == pytest.approx(98.3)

    new = store.import_json(out)
    assert new != cid and store.list_conversations()[0].id == new
    old_conv, new_conv = store.get_conversation(cid), store.get_conversation(new)
    # Imported next to the original, the copy's title says so (the rest is kept as is).
    assert new_conv.title == old_conv.title + " (imported)" and new_conv.title_is_custom
    for field in ("system_prompt", "model_path", "sampler", "created_at"):
        assert getattr(new_conv, field) == getattr(old_conv, field), field

    def shape(conv_id: int):
        msgs = store.messages(conv_id)
        pos = {m.id: i for i, m in enumerate(msgs)}
        return [(pos.get(m.parent_id), m.role, m.content, m.complete, m.meta, m.created_at) for m in msgs]

    assert shape(new) == shape(cid)
    assert contents(store.active_path(new)) == contents(store.active_path(cid))
    # branch memory came along: switching in the copy behaves like the original
    old_path, new_path = store.active_path(cid), store.active_path(new)
    assert [store.siblings(m.id).label for m in new_path] == [store.siblings(m.id).label for m in old_path]
    assert contents(store.select_branch(store.siblings(new_path[1].id).next_id)) == [
        "What is the capital of France?",
        "Paris!",
        "Why?",
    ]


def _write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _valid_export(store: ConversationStore) -> dict:
    cid, _ = two_exchanges(store)
    return store.to_export_dict(cid)


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d.update(format="something.else"), "\"format\" is 'something.else'"),
        (lambda d: d.update(version=99), "newer Glassbox (format version 99"),
        (lambda d: d.update(messages="nope"), '"messages" is missing or not a list'),
        (lambda d: d.pop("conversation"), '"conversation" is missing'),
        (lambda d: d["messages"][3].update(parent_id=777), "messages[3] (id 4) has parent 777"),
        (lambda d: d["messages"][2].update(role="narrator"), "messages[2].role is 'narrator'"),
        (lambda d: d["messages"][1].update(content=None), "messages[1].content is not text"),
        (lambda d: d["messages"][1].update(id=1), "message id 1 appears twice"),
        (lambda d: d["messages"][0].update(created_at="yesterday"), "messages[0].created_at is not a number"),
        (lambda d: d["conversation"].update(current_leaf_id=55), "current_leaf_id 55 is not a message"),
        (lambda d: d["conversation"].update(title=5), "conversation.title is not text"),
    ],
)
def test_bad_import_is_rejected_whole(store: ConversationStore, tmp_path: Path, mutate, problem: str) -> None:
    data = _valid_export(store)
    mutate(data)
    bad = _write_json(tmp_path / "bad export.json", data)
    before = (len(store.list_conversations()), store._conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    with pytest.raises(ValueError) as err:
        store.import_json(bad)
    assert str(bad) in str(err.value) and problem in str(err.value)
    after = (len(store.list_conversations()), store._conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    assert after == before


@pytest.mark.parametrize(
    ("raw_bytes", "problem"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2, 3]", "top level is not a JSON object"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (b"", "not valid JSON"),
    ],
)
def test_unreadable_import_files_are_rejected(
    store: ConversationStore, tmp_path: Path, raw_bytes: bytes, problem: str
) -> None:
    bad = tmp_path / "broken.json"
    bad.write_bytes(raw_bytes)
    with pytest.raises(ValueError, match=r"broken\.json") as err:
        store.import_json(bad)
    assert problem in str(err.value)
    assert store.list_conversations() == []


def test_import_of_a_missing_file_is_an_oserror(store: ConversationStore, tmp_path: Path) -> None:
    with pytest.raises(OSError):
        store.import_json(tmp_path / "absent.json")
