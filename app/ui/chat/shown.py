"""The one owner of "the chat and turn shown": the chat on screen, its active path, and the turn
the panels show. Every panel follows it (Tokens, Stats and Timeline read :attr:`ShownChat.turn`;
the Timeline, the Funnel and the Inspect window follow :attr:`ShownChat.changed`), so none shows
another chat's data or a deleted reply's.

The rule for the turn, in one place (:meth:`ShownChat.show`): the live turn (this session's last
turn, fed by the engine's events) while its reply is on the path shown; otherwise the figures of
the path's last stored reply (:meth:`~app.ui.chat.turn.LiveTurn.show_stored`: its stored tokens and
alternatives too, for the Tokens panel), or nothing. So
opening another chat, switching a branch, deleting a reply and Undo each show the right reply's
figures, and a reply still being written in another chat goes on recording into the live turn
and shows again when its chat is shown.

A model (re)loaded, or "New chat" emptying the KV cache, ends the live turn
(:meth:`ShownChat.end_live_turn`): its tokens no longer describe the KV cache.

The chat controller tells it what is shown (:meth:`ShownChat.show`, after it built the view);
nothing else writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from app.core.chat.context import Role
from app.core.conversations import ConversationStore, Message
from app.ui.chat.turn import LiveTurn, TurnPhase

_WRITING = (TurnPhase.PREFILL, TurnPhase.DECODE)


@dataclass(frozen=True)
class Shown:
    """What the chat shows now.

    Attributes:
        conversation_id: the chat on screen (None: a new chat, not stored yet).
        path: its active path as stored when it was shown, root first.
        live: the panels show the live turn (its reply is on the path).
        writing: a reply is being written on the path (the live turn streams).
    """

    conversation_id: int | None = None
    path: tuple[Message, ...] = ()
    live: bool = False
    writing: bool = False

    @property
    def message_ids(self) -> tuple[int, ...]:
        """The ids of the path's messages, oldest first."""
        return tuple(m.id for m in self.path)


class ShownChat(QObject):
    """Holds :class:`Shown` and the turn the panels show (see the module docstring).

    Args:
        live: the live turn (the chat controller feeds it the engine's events).
        store: the conversations (the path is read from it when not given).

    Signals:
        changed(object): the new :class:`Shown`, after the chat, its path or its turn changed.
    """

    changed = Signal(object)  # Shown

    def __init__(self, live: LiveTurn, store: ConversationStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.live = live
        self.store = store
        self._stored = LiveTurn()  # the figures of the path's last stored reply, when the live turn is not shown
        self._stored_of: tuple[int, object] | None = None  # (reply id, its stats) that _stored shows
        self._state = Shown()

    @property
    def state(self) -> Shown:
        return self._state

    @property
    def conversation_id(self) -> int | None:
        """The chat on screen (None: a new chat, not stored yet)."""
        return self._state.conversation_id

    @property
    def turn(self) -> LiveTurn:
        """The turn the panels show: the live turn while its reply is on the path shown, else the
        path's last stored reply's figures (or nothing)."""
        return self.live if self._state.live else self._stored

    @property
    def live_reply(self) -> tuple[int, int] | None:
        """``(stored message id, engine request id)`` of the live turn's reply (None: there is none)."""
        t = self.live
        return (t.message_id, t.request_id) if t.message_id is not None and t.request_id is not None else None

    @property
    def turn_reply(self) -> int | None:
        """The stored id of the reply whose tokens :attr:`turn` holds (the live turn's, or the path's last
        stored reply's; None: none)."""
        if self._state.live:
            return self.live.message_id
        return self._stored_of[0] if self._stored_of is not None and self._stored.tokens else None

    def show(self, conversation_id: int | None, path: Sequence[Message] | None = None) -> None:
        """The chat on screen is ``conversation_id``, showing ``path`` (its active path; read from the
        store when None). Emits :attr:`changed`."""
        if path is None:
            path = self.store.active_path(conversation_id) if conversation_id is not None else ()
        path = tuple(path)
        mid = self.live.message_id
        live = mid is not None and any(m.id == mid for m in path)
        if not live:
            self._show_stored(path)
        self._state = Shown(conversation_id, path, live, live and self.live.phase in _WRITING)
        self.changed.emit(self._state)

    def refresh(self) -> None:
        """The chat shown changed in the store (a reply started or ended): read its path again."""
        self.show(self._state.conversation_id)

    def end_live_turn(self) -> None:
        """The live turn no longer describes the KV cache (a model loaded, the KV cache emptied): the
        panels show the stored figures."""
        self.live.reset()
        self.refresh()

    def _show_stored(self, path: tuple[Message, ...]) -> None:
        """The stored turn shows the last reply of ``path`` with figures (nothing when it has none)."""
        last = next((m for m in reversed(path) if m.role is Role.ASSISTANT and m.meta.stats is not None), None)
        key = (last.id, last.meta.stats) if last is not None and last.meta.stats is not None else None
        if key == self._stored_of:
            return
        self._stored_of = key
        if last is not None and last.meta.stats is not None:
            self._stored.show_stored(last.meta.stats, last.meta.model_path, self.store.alternatives(last.id))
        else:
            self._stored.reset()
