"""Turn order: where user and assistant messages do not take turns.

Some chat templates (Gemma 3's, Mistral's) refuse a conversation whose user and
assistant messages do not alternate (``raise_exception('Conversation roles must
alternate user/assistant/user/assistant/...')``). A chat gets there when a reply
is deleted, or a reply failed and the person wrote again. :func:`repeated_roles`
finds each such place, so the engine's refusal can name it and the window can
offer to repair it (:meth:`~app.core.conversations.ConversationStore.merge_with_parent`,
:meth:`~app.core.conversations.ConversationStore.delete_keeping_replies`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.chat.context import Role
from app.core.conversations.model import Message


@dataclass(frozen=True)
class RepeatedRole:
    """Two messages in a row with the same role.

    Attributes:
        role: their role (user or assistant).
        first: index of the earlier one in the sequence given to :func:`repeated_roles`.
        second: index of the later one (``first + 1``: system messages are not counted).
    """

    role: Role
    first: int
    second: int

    def describe(self) -> str:
        """E.g. ``two user messages in a row (messages 3 and 4)``; numbers count from 1, as on screen."""
        return f"two {self.role.value} messages in a row (messages {self.first + 1} and {self.second + 1})"


def repeated_roles(roles: Sequence[Role | str]) -> list[RepeatedRole]:
    """Each place where a message has the same role as the one before it.

    Args:
        roles: the roles of a conversation's messages in order, without the system prompt
            (a system role in it is an error).

    Returns:
        One :class:`RepeatedRole` per repeated pair, in order (three user messages in a
        row give two pairs).

    Raises:
        ValueError: a role is not user or assistant.
    """
    parsed = [Role.parse(r) if isinstance(r, str) else r for r in roles]
    for r in parsed:
        if r not in (Role.USER, Role.ASSISTANT):
            raise ValueError(f"a {r.value} message is not a turn of the conversation")
    return [RepeatedRole(parsed[i], i - 1, i) for i in range(1, len(parsed)) if parsed[i] == parsed[i - 1]]


class TurnRepair(str, enum.Enum):
    """How two messages in a row with the same role are repaired (the window's banner offers both)."""

    MERGE = "merge"  # append the later message to the earlier one
    DELETE_EARLIER = "delete_earlier"  # delete the earlier message, keep what followed it


def first_repeat(path: Sequence[Message]) -> tuple[int, int] | None:
    """``(earlier id, later id)`` of the first two messages in a row with the same role on ``path`` (a
    conversation's active path, without its system prompt); None when the turns alternate, or when a
    system message inside the path makes it no turn-order problem a repair can fix."""
    try:
        repeated = repeated_roles([m.role for m in path])
    except ValueError:
        return None
    if not repeated:
        return None
    return path[repeated[0].first].id, path[repeated[0].second].id
