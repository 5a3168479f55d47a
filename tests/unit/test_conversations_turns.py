"""Turn order: finding two messages in a row with the same role, and the two repairs."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.chat.context import Role
from app.core.conversations import ConversationStore
from app.core.conversations.turns import RepeatedRole, repeated_roles

U, A = Role.USER, Role.ASSISTANT


@pytest.fixture
def store(tmp_path: Path):
    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()


def test_repeated_roles_names_every_place_counted_from_1() -> None:
    assert repeated_roles([U, A, U, A]) == []
    assert repeated_roles([]) == []
    found = repeated_roles([U, A, U, U, U, A, A])
    assert found == [RepeatedRole(U, 2, 3), RepeatedRole(U, 3, 4), RepeatedRole(A, 5, 6)]
    assert found[0].describe() == "two user messages in a row (messages 3 and 4)"
    assert repeated_roles(["user", "user"]) == [RepeatedRole(U, 0, 1)]
    with pytest.raises(ValueError, match="system"):
        repeated_roles([U, Role.SYSTEM])


def chain(store: ConversationStore, *turns: tuple[Role, str]) -> tuple[int, list[int]]:
    cid = store.create_conversation()
    ids: list[int] = []
    for role, text in turns:
        ids.append(store.add_message(cid, ids[-1] if ids else None, role, text))
    return cid, ids


def test_merge_with_parent_keeps_both_texts_and_what_followed(store: ConversationStore) -> None:
    cid, (u1, a1, u2, u3, a3) = chain(
        store, (U, "Hi"), (A, "Hello"), (U, "Colour? "), (U, " Fruit?"), (A, "Red, apple")
    )
    # A second branch under the earlier message stays where it was.
    other = store.add_message(cid, u2, A, "Blue")
    store.select_branch(a3)
    assert store.merge_with_parent(u3) == u2
    path = store.active_path(cid)
    assert [(m.id, m.content) for m in path] == [
        (u1, "Hi"),
        (a1, "Hello"),
        (u2, "Colour?\n\nFruit?"),
        (a3, "Red, apple"),
    ]
    assert sorted(m.id for m in store.messages(cid) if m.parent_id == u2) == sorted([a3, other])
    with pytest.raises(KeyError):
        store.get_message(u3)
    assert [h.message_id for h in store.search("Fruit")] == [u2]  # the index follows the merged text


def test_merge_at_the_leaf_selects_the_merged_message(store: ConversationStore) -> None:
    cid, (u1, u2) = chain(store, (U, "first"), (U, "second"))
    store.merge_with_parent(u2)
    assert [(m.id, m.content) for m in store.active_path(cid)] == [(u1, "first\n\nsecond")]
    assert store.get_conversation(cid).title == "first second"  # an automatic title follows the merged text


def test_merge_refuses_a_first_message_or_another_role(store: ConversationStore) -> None:
    _cid, (u1, a1) = chain(store, (U, "q"), (A, "a"))
    with pytest.raises(ValueError, match="first of its conversation"):
        store.merge_with_parent(u1)
    with pytest.raises(ValueError, match="follows a user one"):
        store.merge_with_parent(a1)
    with pytest.raises(KeyError):
        store.merge_with_parent(10_000)


def test_delete_keeping_replies_moves_what_followed_up(store: ConversationStore) -> None:
    cid, (u1, a1, u2, u3, a3) = chain(store, (U, "Hi"), (A, "Hello"), (U, "Colour?"), (U, "Fruit?"), (A, "Apple"))
    store.delete_keeping_replies(u2)
    assert [m.id for m in store.active_path(cid)] == [u1, a1, u3, a3]
    assert store.get_message(u3).parent_id == a1
    with pytest.raises(KeyError):
        store.get_message(u2)


def test_delete_keeping_replies_of_the_leaf_or_the_first_message(store: ConversationStore) -> None:
    cid, (u1, u2) = chain(store, (U, "old question"), (U, "new question"))
    store.delete_keeping_replies(u1)
    path = store.active_path(cid)
    assert [(m.id, m.parent_id) for m in path] == [(u2, None)]
    assert store.get_conversation(cid).title == "new question"
    store.delete_keeping_replies(u2)
    assert store.active_path(cid) == []
    with pytest.raises(KeyError):
        store.delete_keeping_replies(u2)
