"""Every token's alternatives: the stored form, the store's side table (schema 2), export and import."""

from __future__ import annotations

import base64
import json
import math
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from app.core.chat.context import Role
from app.core.conversations import ConversationStore
from app.core.conversations import schema as conv_schema
from app.core.sampling.alternatives import ReplyAlternatives, stored_bytes_per_token
from app.core.sampling.params import SamplerSettings
from app.paths import default_paths


def make_alts(n_steps: int = 5, k: int = 3) -> ReplyAlternatives:
    """Steps whose drawn token is the best candidate except at step 1 (the second best)."""
    tokens, lse, ent, ids, logits = [], [], [], [], []
    texts: dict[int, str] = {}
    for s in range(n_steps):
        row = [100 * s + j for j in range(k)]
        lg = [5.0 - j for j in range(k)]
        ids += row
        logits += lg
        lse.append(math.log(sum(math.exp(x) for x in lg)) + 0.25)  # some mass outside the kept ones
        ent.append(0.5 * s)
        tokens.append(row[1] if s == 1 else row[0])
        texts.update({t: f"w{t}" for t in row})
    return ReplyAlternatives(k, tuple(tokens), tuple(lse), tuple(ent), tuple(ids), tuple(logits), (7, 8, 9), texts)


def test_bytes_round_trip_exactly_and_damage_is_refused() -> None:
    a = make_alts()
    b = ReplyAlternatives.from_bytes(a.to_bytes())
    assert b.tokens == a.tokens and b.ids == a.ids and b.history == a.history and b.texts == a.texts
    assert b.logits == pytest.approx(a.logits, abs=1e-6) and b.logsumexp == pytest.approx(a.logsumexp, abs=1e-5)
    assert b.entropy_bits == pytest.approx(a.entropy_bits, abs=1e-6)
    with pytest.raises(ValueError, match="damaged"):
        ReplyAlternatives.from_bytes(b"not zlib at all")
    with pytest.raises(ValueError, match="cut short"):
        import zlib

        ReplyAlternatives.from_bytes(zlib.compress(zlib.decompress(a.to_bytes())[:-40]))


def test_view_gives_true_probabilities_and_the_mass_outside() -> None:
    a = make_alts()
    v = a.view(1)
    z = sum(math.exp(5.0 - j) for j in range(3))
    total = z * math.exp(0.25)
    assert [c.token_id for c in v.candidates] == [100, 101, 102]
    assert v.candidates[0].p == pytest.approx(math.exp(5.0) / total)
    assert v.token_id == 101 and v.p == pytest.approx(math.exp(4.0) / total)
    assert v.outside == pytest.approx(1 - math.exp(-0.25))
    assert v.text == "w101" and v.entropy_bits == 0.5
    with pytest.raises(IndexError):
        a.view(5)


def test_branch_keeps_the_head_changes_one_token_and_joins_the_rest() -> None:
    a = make_alts(5, 3)
    later = make_alts(2, 4)
    b = a.head(2).with_token(1, 102, "w102").joined(later)
    assert b.per_token == 3 and b.n_steps == 4
    assert b.tokens == (0, 102, 0, 101)
    assert b.ids[:6] == a.ids[:6] and b.ids[6:9] == later.ids[:3] and b.ids[9:] == later.ids[4:7]
    assert b.p(1) == pytest.approx(math.exp(3.0 - a.logsumexp[1]))


def test_the_most_uncertain_step_has_the_highest_entropy_the_first_of_equals() -> None:
    def alts(entropy: tuple[float, ...]) -> ReplyAlternatives:
        n = len(entropy)
        return ReplyAlternatives(1, tuple(range(n)), (0.0,) * n, entropy, tuple(range(n)), (0.0,) * n)

    assert alts((0.2, 0.4, 3.5, 0.3, 0.05)).most_uncertain_step() == 2
    assert alts((1.0, 2.0, 2.0, 0.5)).most_uncertain_step() == 1
    assert alts((0.0,)).most_uncertain_step() == 0
    with pytest.raises(ValueError, match="no steps"):
        alts(()).most_uncertain_step()


def test_stored_step_carries_what_the_funnel_needs() -> None:
    a = make_alts()
    s = SamplerSettings(temperature=0.7)
    st = a.stored_step(2, reply_id=42, settings=s, seed=5)
    assert st.ids == (200, 201, 202) and st.drawn == 200 and st.logsumexp == a.logsumexp[2]
    assert st.history == (7, 8, 9, a.tokens[0], a.tokens[1])  # prompt tail, then the reply before the step
    assert st.settings == s and st.seed == 5 and st.texts[201] == "w201"


# --------------------------------------------------------------------------- the store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return default_paths({"GLASSBOX_HOME": str(tmp_path)}).conversations_db


def a_reply(store: ConversationStore) -> tuple[int, int, int]:
    cid = store.create_conversation()
    u = store.add_message(cid, None, Role.USER, "Hi")
    a = store.add_message(cid, u, Role.ASSISTANT, "Hello there")
    return cid, u, a


def test_alternatives_survive_reopening_and_go_with_their_message(db_path: Path) -> None:
    alts = make_alts(40, 10)
    with ConversationStore(db_path) as s:
        _cid, u, a = a_reply(s)
        n = s.set_alternatives(a, alts)
        assert n == len(alts.to_bytes()) and stored_bytes_per_token(alts) == n / 40
        assert s.alternatives(u) is None
    with ConversationStore(db_path) as s:
        back = s.alternatives(a)
        assert back is not None and back.tokens == alts.tokens and back.ids == alts.ids
        deleted = s.delete_message_undoable(a)
        assert s.alternatives_data(a) is None  # the trigger took the row with the message
        s.restore_messages(deleted)
        restored = s.alternatives(a)
        assert restored is not None and restored.tokens == alts.tokens
        s.delete_message(u)  # the subtree: the reply's row goes too
    with closing(sqlite3.connect(str(db_path))) as c:
        assert c.execute("SELECT count(*) FROM message_alternatives").fetchone()[0] == 0


def test_a_version_1_history_opens_and_gets_the_side_table(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with closing(conv_schema.connect(db_path)) as c:  # a history as the previous Glassbox wrote it
        conv_schema.MIGRATIONS[0](c)
        c.execute("PRAGMA user_version = 1")
        c.execute("INSERT INTO conversations (created_at, updated_at, title) VALUES (1, 1, 'old')")
        c.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, created_at, content) "
            "VALUES (1, NULL, 'user', 1, 'from version 1')"
        )
    with ConversationStore(db_path) as s:
        assert s.notice is None
        assert [m.content for m in s.messages(1)] == ["from version 1"]
        a = s.add_message(1, 1, Role.ASSISTANT, "a reply")
        s.set_alternatives(a, make_alts())
        assert s.alternatives(a) is not None
    with closing(sqlite3.connect(str(db_path))) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == len(conv_schema.MIGRATIONS) >= 2


def test_export_and_import_carry_the_alternatives(db_path: Path, tmp_path: Path) -> None:
    alts = make_alts(12, 10)
    out = tmp_path / "chat.json"
    with ConversationStore(db_path) as s:
        cid, _u, a = a_reply(s)
        s.set_alternatives(a, alts)
        s.export_json(cid, out)
        data = json.loads(out.read_text(encoding="utf-8"))
        reply = next(m for m in data["messages"] if m["role"] == "assistant")
        assert base64.b64decode(reply["alternatives"]) == s.alternatives_data(a)
        assert "alternatives" not in next(m for m in data["messages"] if m["role"] == "user")
        new = s.import_json(out)
        new_reply = next(m for m in s.messages(new) if m.role is Role.ASSISTANT)
        back = s.alternatives(new_reply.id)
        assert back is not None and back.tokens == alts.tokens and back.texts == alts.texts
        # A damaged alternatives field refuses the whole import, naming the message.
        reply["alternatives"] = base64.b64encode(b"garbage").decode()
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data), encoding="utf-8")
        before = len(s.list_conversations())
        with pytest.raises(ValueError, match=r"messages\[1\]\.alternatives"):
            s.import_json(bad)
        assert len(s.list_conversations()) == before


@pytest.mark.parametrize("spread", [0.5, 3.0, 12.0])  # flat, typical, very sure
def test_reduce_step_gives_the_top_m_the_logsumexp_and_the_entropy(spread: float) -> None:
    import numpy as np

    from app.engine.funnel_store import TOP_M, reduce_step

    rng = np.random.default_rng(7)
    logits = (rng.standard_normal(262_144) * spread).astype(np.float32)
    ids, top, lse, bits = reduce_step(logits, np.empty_like(logits))
    x = logits.astype(np.float64)
    exact_lse = float(np.log(np.exp(x - x.max()).sum()) + x.max())
    p = np.exp(x - exact_lse)
    exact_bits = float(-(p * np.log2(np.where(p > 0, p, 1.0))).sum())
    assert lse == pytest.approx(exact_lse, abs=1e-5)
    assert bits == pytest.approx(exact_bits, rel=1e-4, abs=1e-4)
    best = np.argsort(-x, kind="stable")[:TOP_M]
    assert set(ids.tolist()) == set(best.tolist()) and np.array_equal(top, logits[ids])
    assert list(top) == sorted(top, reverse=True)


def test_packed_bytes_are_used_as_they_are() -> None:
    a = make_alts()
    p = a.with_packed()
    assert p.packed == a.to_bytes() and p == a  # packed is not part of the value
    back = ReplyAlternatives.from_bytes(p.to_bytes())
    assert back.packed == p.packed and back.to_bytes() is back.packed
    assert back.head(2).packed is None  # a changed value packs itself anew
