"""A model without a chat template (a base model, such as Gemma 3 270M's GGUF): said once per chat.

Without ``tokenizer.chat_template`` (and no override of the person's for the model), the engine
writes a plain transcript (:class:`~app.engine.prompt.PlainTranscript`): the system prompt, then
``User: …`` and ``Assistant: …`` lines, the reply stopping at the model's next ``User:`` line. A base
model continues text rather than answering, so the person is told, once for each chat shown while
such a model is loaded, with what Glassbox does instead and the Template… dialog offered (its
presets write the family's format, :mod:`app.core.chat.template_presets`).

"Once per chat": a stored chat is told the first time it is shown (or the model loads while it is
shown); the new, empty chat is told when it is shown, and keeps that when its first message stores
it. The record lives as long as the window. A notice about something else on screen is not
replaced: the chat is told at its next turn to be shown instead.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from app.core import protocol as P
from app.ui.chat.controller import ChatController
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.settings_controller import SettingsController

NO_TEMPLATE_TEXT = (
    "This model has no chat template (a base model?): Glassbox writes a plain transcript, "
    "“User: …” and “Assistant: …” lines, and the reply stops at the model's next “User:” line. "
    "A base model continues text rather than answering; Template… sets its family's chat format."
)


def lacks_template(model: P.ModelLoaded | None, override: str | None) -> bool:
    """Whether replies from ``model`` use the plain transcript: a local model with no chat template
    and no ``override`` (a remote server applies its own template)."""
    return model is not None and model.remote is None and not model.chat_template and override is None


class BaseModelNotice(QObject):
    """Tells each chat once that the loaded model has no chat template (see the module docstring).

    Args:
        chat: the chat controller (the chat shown).
        engine: the engine client (the loaded model).
        settings: the settings (the person's override of a model's template).
        notices: where it is said.
        open_template: opens the Template… dialog (the notice's button).
        parent: the owner (the window).

    Attributes:
        told: the stored chats told so far (ids).
    """

    def __init__(
        self,
        chat: ChatController,
        engine: EngineClient,
        settings: SettingsController,
        notices: Notices,
        open_template: Callable[[], object],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._chat = chat
        self._engine = engine
        self._settings = settings
        self._notices = notices
        self._open_template = open_template
        self.told: set[int] = set()
        self._new_told = False  # the new, empty chat shown was told
        self._shown: int | None = chat.conversation_id
        chat.conversation_changed.connect(self._conversation_changed)
        settings.changed.connect(lambda _s: self._tell())  # a template set with Template…: the notice goes

    def show_model(self, change: ModelChange) -> None:
        """A model loaded (:attr:`~app.ui.window.model_loader.ModelLoader.model_changed`): tell the chat
        shown, once the window's other parts have handled the load (their notices of the model
        before, a first start's, go then)."""
        if change.phase is ModelPhase.LOADED:
            QTimer.singleShot(0, self, self._tell)

    def _conversation_changed(self, conv: int | None) -> None:
        created = self._shown is None and conv is not None and not self._chat.store.active_path(conv)
        if conv is None or not created:
            self._new_told = False
        elif self._new_told:  # the new chat told, now stored by its first message
            self.told.add(conv)
        self._shown = conv
        self._tell()

    def _tell(self) -> None:
        model = self._engine.model
        override = self._settings.settings.chat_template_for(model.info.path) if model is not None else None
        if not lacks_template(model, override):
            if self._notices.showing(NoticeTopic.BASE_MODEL):
                self._notices.hide()
            return
        conv = self._chat.conversation_id
        if (conv is None and self._new_told) or (conv is not None and conv in self.told):
            return
        if self._notices.banner.isVisible() and not self._notices.showing(NoticeTopic.BASE_MODEL):
            return  # something else is being said: this chat is told next time
        self._notices.show(
            NoticeTopic.BASE_MODEL, Severity.INFO, NO_TEMPLATE_TEXT, [("Template…", self._open_template)]
        )
        if conv is None:
            self._new_told = True
        else:
            self.told.add(conv)
