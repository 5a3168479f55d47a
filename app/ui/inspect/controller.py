"""Inspect a token: the Tokens panel's click → the engine's InspectToken → the inspect window.

One owner for the inspection in flight: a newer click replaces an unanswered one (its answer is
dropped when it comes). When another model loads (a switch, or the same file loaded again with
other settings) the window's inspection belonged to the previous model: it is cleared, with a
one-line note, and an inspection still in flight is dropped. So it is when the reply whose turn
was inspected is no longer on the chat shown (another chat opened, a new chat, the reply deleted,
another branch): it follows the chat shown (:class:`~app.ui.chat.shown.ShownChat`).
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from app.core import protocol as P
from app.ui.chat.shown import Shown, ShownChat
from app.ui.engine.client import EngineClient
from app.ui.inspect.panel import HINT, InspectWindow
from app.ui.panels.tokens import TokensPanel


class InspectController(QObject):
    """Wires :attr:`TokensPanel.inspect_requested` to :meth:`EngineClient.inspect_token` and the window.

    Args:
        engine: the engine client.
        tokens: the Tokens panel whose chips ask for inspections.
        shown: the chat and turn shown (the Tokens panel's chips are the live turn's).
        parent: the main window (the inspect window's parent).
    """

    def __init__(self, engine: EngineClient, tokens: TokensPanel, shown: ShownChat, parent: QWidget) -> None:
        super().__init__(parent)
        self.engine = engine
        self.shown = shown
        self.window = InspectWindow(parent)
        self._pending: int | None = None
        self._of_reply: int | None = None  # the stored reply whose turn the inspection is of
        tokens.inspect_requested.connect(self.inspect)
        # Hovering a token is the first sign of an inspection: the engine builds its tables then
        # (0.74 s on Gemma 3's 262k vocabulary) instead of after the click.
        tokens.token_hovered.connect(engine.prepare_inspect)
        engine.token_inspected.connect(self._inspected)
        engine.inspection_failed.connect(self._failed)
        engine.model_loaded.connect(self._model_loaded)
        shown.changed.connect(self._shown_changed)

    def inspect(self, position: int, token_id: int, turn_start: int = -1) -> None:
        """Ask the engine to inspect ``position`` (holding ``token_id``) and show the window."""
        rid = self.engine.inspect_token(position, token_id, turn_start)
        self.window.show()
        self.window.activateWindow()
        if rid is None:
            self.window.show_failure("No model is loaded.")
            return
        self._pending = rid
        self._of_reply = self.shown.live.message_id
        self.window.show_pending(position, token_id, self.shown.turn.reply_step(position))

    def _shown_changed(self, state: Shown) -> None:
        """The reply whose turn was inspected is no longer on the chat shown: what the window shows
        (or will show) is another chat's, or a deleted reply's."""
        mid = self._of_reply
        if mid is None or mid in state.message_ids:
            return
        self._of_reply = None
        self._pending = None
        self.window.clear(
            "The inspection was of another chat, or of a reply no longer shown: it was cleared. "
            "Click a token to inspect it."
        )

    def _model_loaded(self, ev: P.ModelLoaded) -> None:
        """Another model (or the same one again) is loaded: what the window shows was the previous one's."""
        shown = self.window.inspection is not None or self._pending is not None
        self._pending = None
        self.window.clear(
            f"{ev.info.name} was loaded: the previous model's inspection was cleared. Click a token to inspect it."
            if shown
            else HINT
        )

    def _inspected(self, ev: P.TokenInspected) -> None:
        if ev.request_id != self._pending:
            return
        self._pending = None
        self.window.show_inspection(ev.inspection)

    def _failed(self, ev: P.Failed) -> None:
        if ev.request_id != self._pending:
            return
        self._pending = None
        self.window.show_failure(ev.message)
