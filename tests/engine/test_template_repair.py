"""A chat the model's template cannot render: the refusal names the place, and the repair works.

The model is SmolLM2 with a template that raises like Gemma 3's when user and
assistant messages do not take turns (tests/support/models.py). The chat lives
in a real ConversationStore, so the repair is the one the window's banner runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.conversations import ConversationStore
from tests.support.engine import start_engine
from tests.support.models import STRICT_CHATML_TEMPLATE, with_chat_template


@pytest.fixture(scope="module")
def strict_engine(smollm2, tmp_path_factory):
    model = with_chat_template(smollm2, tmp_path_factory.mktemp("strict") / "strict.gguf", STRICT_CHATML_TEMPLATE)
    eng = start_engine(model, n_ctx=2048)
    assert eng.loaded.chat_template == STRICT_CHATML_TEMPLATE
    yield eng
    eng.host.stop()


def chat_after_a_deleted_reply(store: ConversationStore) -> tuple[int, int, int]:
    """system, user, assistant, user, (reply deleted), user: returns (conversation, earlier, later)."""
    cid = store.create_conversation(system_prompt="You are a helpful assistant.")
    u1 = store.add_message(cid, None, Role.USER, "Hi!")
    a1 = store.add_message(cid, u1, Role.ASSISTANT, "Hello! How can I help?")
    u2 = store.add_message(cid, a1, Role.USER, "Name a colour.")
    reply = store.add_message(cid, u2, Role.ASSISTANT, "Blue.")
    store.delete_message(reply)
    u3 = store.add_message(cid, u2, Role.USER, "Name a fruit.")
    return cid, u2, u3


def reply_to(engine, store: ConversationStore, cid: int):
    return engine.generate(store.chat_history(cid), max_tokens=8, temperature=0.0, seed=1)


def test_refusal_names_the_two_messages_in_a_row(strict_engine, tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid, _earlier, _later = chat_after_a_deleted_reply(store)
        ev = reply_to(strict_engine, store, cid)
    assert isinstance(ev, P.Failed) and ev.kind is P.FailureKind.TEMPLATE
    assert ev.message.startswith(
        "The model's chat template rejected this conversation: Conversation roles must alternate "
        "user/assistant/user/assistant/... This model's template needs user and assistant messages to take turns"
    )
    # Counted as on screen: the system prompt is not a message of the chat.
    assert "two user messages in a row (messages 3 and 4)" in ev.message
    assert "Merge the two messages, or delete the earlier one" in ev.message


@pytest.mark.parametrize("repair", ["merge", "delete_earlier"])
def test_the_repair_makes_the_next_message_work(strict_engine, tmp_path: Path, repair: str) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid, earlier, later = chat_after_a_deleted_reply(store)
        assert isinstance(reply_to(strict_engine, store, cid), P.Failed)
        if repair == "merge":
            store.merge_with_parent(later)
            assert [m.content for m in store.active_path(cid)][-1] == "Name a colour.\n\nName a fruit."
        else:
            store.delete_keeping_replies(earlier)
            assert [m.content for m in store.active_path(cid)][-1] == "Name a fruit."
        assert [m.role for m in store.active_path(cid)] == [Role.USER, Role.ASSISTANT, Role.USER]
        ev = reply_to(strict_engine, store, cid)
        assert isinstance(ev, P.Finished), getattr(ev, "message", ev)
        assert ev.stats.generated_tokens > 0
        # And the conversation goes on: the reply stored, the next message answered too.
        path = store.active_path(cid)
        a2 = store.add_message(cid, path[-1].id, Role.ASSISTANT, ev.text)
        store.add_message(cid, a2, Role.USER, "Thanks.")
        assert isinstance(reply_to(strict_engine, store, cid), P.Finished)
