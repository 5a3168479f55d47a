"""Turn-order repair: two messages in a row with the same role, which some chat templates refuse.

A chat template that requires user and assistant turns to alternate (Gemma's, Mistral's) makes the
engine refuse such a chat (Failed ``template``). The banner then shows the refusal with two repairs
of the first place the chat shown repeats a role (:func:`~app.core.conversations.turns.first_repeat`
on its active path): "Merge them" appends the later message to the earlier one, no text lost
(:attr:`~app.core.conversations.turns.TurnRepair.MERGE`); "Delete the earlier one" deletes the earlier
message and keeps what followed it (:attr:`~app.core.conversations.turns.TurnRepair.DELETE_EARLIER`).

:class:`TurnRepairs` makes the offers (``[(label, callback)]`` for the banner), edits the store and
says what it did; the chat controller shows the repaired chat and asks for the reply the chat waits
for (its last message is the person's). Nothing is repaired while a reply is in flight.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from app.core.chat.context import Role
from app.core.conversations import ConversationStore
from app.core.conversations.turns import TurnRepair, first_repeat
from app.ui.chat.shown import ShownChat
from app.ui.common.severity import Severity
from app.ui.window.notices import NoticeTopic

PREVIEW_CHARS = 60  # the deleted message's text quoted in the notice, at most


class TurnRepairs:
    """The banner's repairs of the chat shown's turn order, and doing one.

    Args:
        store: the conversations (the repair's edit).
        shown: the chat shown (whose turn order is offered for repair).
        notice: the chat's banner message (:class:`Severity`, text, :class:`NoticeTopic`).
        busy: whether a reply is in flight (then nothing is repaired).
        show: show conversation ``conv`` as the store holds it now (opened if another is shown).
        answer: ask for the reply to message ``parent_id`` (a user message, the chat's last).
    """

    def __init__(
        self,
        store: ConversationStore,
        shown: ShownChat,
        notice: Callable[[Severity, str, NoticeTopic], None],
        busy: Callable[[], bool],
        show: Callable[[int], None],
        answer: Callable[[int], None],
    ) -> None:
        self._store, self._shown, self._notice = store, shown, notice
        self._busy, self._show, self._answer = busy, show, answer

    def offers(self) -> list[tuple[str, object]]:
        """Banner actions that repair the first place where the chat shown's active path repeats a role
        (``[]`` when it does not)."""
        conv = self._shown.conversation_id
        found = first_repeat(self._store.active_path(conv)) if conv is not None else None
        if found is None:
            return []
        earlier, later = found
        return [
            ("Merge them", lambda: self.repair(later, TurnRepair.MERGE)),
            ("Delete the earlier one", lambda: self.repair(earlier, TurnRepair.DELETE_EARLIER)),
        ]

    def repair(self, message_id: int, how: TurnRepair) -> bool:
        """Repair two messages in a row with the same role, then ask for the reply the chat waits for.

        ``how``: MERGE appends ``message_id`` to its parent (no text lost); DELETE_EARLIER
        deletes ``message_id`` (the earlier one) and keeps what followed it. Returns False
        when nothing was changed (a reply in flight, or the message is gone), with a notice saying so.
        """
        if self._busy():
            self._notice(
                Severity.INFO, "Stop the reply in progress before repairing the conversation.", NoticeTopic.GENERAL
            )
            return False
        try:
            msg = self._store.get_message(message_id)
            if how is TurnRepair.MERGE:
                self._store.merge_with_parent(message_id)
            else:
                self._store.delete_keeping_replies(message_id)
        except (KeyError, ValueError) as exc:
            self._notice(
                Severity.WARNING, f"The conversation changed; nothing was repaired ({exc}).", NoticeTopic.GENERAL
            )
            return False
        self._show(msg.conversation_id)
        role = msg.role.value
        if how is TurnRepair.MERGE:
            self._notice(Severity.INFO, f"Merged the two {role} messages into one.", NoticeTopic.GENERAL)
        else:
            preview = " ".join(msg.content.split())
            preview = preview if len(preview) <= PREVIEW_CHARS else preview[: PREVIEW_CHARS - 1] + "…"
            self._notice(
                Severity.INFO, f"Deleted the earlier {role} message: “{html.escape(preview)}”.", NoticeTopic.GENERAL
            )
        path = self._store.active_path(msg.conversation_id)
        if path and path[-1].role is Role.USER:
            self._answer(path[-1].id)
        return True
