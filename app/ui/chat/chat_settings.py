"""The one owner of what applies to the chat shown: its sampler settings, system prompt, stop
strings and output format (:class:`~app.core.chat.chat_settings.ChatSettings`), and the rule for new chats.

It follows the chat shown (:class:`~app.ui.chat.shown.ShownChat`): a stored chat's settings are
its own (``Conversation.chat_settings``); a new chat's are the defaults (``Settings.new_chat``),
with a system prompt edited before its first message kept aside until the chat is stored. The
Sampler panel and the system prompt bar show :attr:`ChatSettingsController.current` and send the
person's edits here (:meth:`ChatSettingsController.attach`); the chat controller reads it when it
creates a chat or asks for a reply.

The rule is :func:`app.core.chat.chat_settings.after_edit`: opening a chat changes no default; a
sampler or stop strings edit applies to the chat shown and carries what was changed to the
defaults; a system prompt edit applies to the chat shown only, unless the person asks
(:meth:`ChatSettingsController.use_system_prompt_for_new_chats`).
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from app.core.chat.chat_settings import ChatSettings, after_edit
from app.core.constraint.model import OutputConstraint
from app.core.conversations import ConversationStore
from app.core.sampling.params import SamplerSettings
from app.core.settings import Settings
from app.ui.chat.shown import Shown, ShownChat
from app.ui.chat.system_prompt import SystemPromptBar
from app.ui.panels.sampler import SamplerPanel
from app.ui.window.settings_controller import SettingsController


class ChatSettingsController(QObject):
    """Holds the settings of the chat shown and applies the person's edits (see the module docstring).

    Args:
        settings: the settings (their ``new_chat`` part: the defaults for new chats).
        store: the conversations (a stored chat's own settings).
        shown: the chat shown, followed.

    Signals:
        changed(object): the :class:`ChatSettings` now in effect (another chat shown, or an edit).
        system_prompt_edited(str): the person edited the system prompt (the window offers to make
            it the default of new chats).
    """

    changed = Signal(object)  # ChatSettings
    system_prompt_edited = Signal(str)

    def __init__(
        self, settings: SettingsController, store: ConversationStore, shown: ShownChat, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.store = store
        self._conv: int | None = None
        self._pending_system_prompt: str | None = None  # a new chat's, edited before its first message
        self._pending_constraint: OutputConstraint | None = None  # a new chat's output format, likewise
        self._current = settings.settings.new_chat
        self._applying = False  # the panels are being set: what they emit meanwhile is not an edit
        shown.changed.connect(self._shown_changed)
        settings.changed.connect(self._defaults_changed)

    @property
    def current(self) -> ChatSettings:
        """What applies to the chat shown (a new chat: what it will be created with)."""
        return self._current

    # ------------------------------------------------------------------ following
    def _shown_changed(self, state: Shown) -> None:
        if state.conversation_id == self._conv:
            return
        self._conv = state.conversation_id
        self._pending_system_prompt = None
        self._pending_constraint = None
        if self._conv is None:
            self._set(self.settings.settings.new_chat)
            return
        try:
            self._set(self.store.get_conversation(self._conv).chat_settings)
        except KeyError:  # gone meanwhile: a new chat's
            self._set(self.settings.settings.new_chat)

    def _defaults_changed(self, s: Settings) -> None:
        """The defaults changed: a new chat shown follows them (its edited system prompt stays)."""
        if self._conv is None:
            pending = self._pending_system_prompt
            new = s.new_chat
            new = new if pending is None else replace(new, system_prompt=pending)
            self._set(new if self._pending_constraint is None else replace(new, constraint=self._pending_constraint))

    def _set(self, cs: ChatSettings) -> None:
        if cs != self._current:
            self._current = cs
            self.changed.emit(cs)

    # ------------------------------------------------------------------ the person's edits
    def edit_sampler(self, sampler: SamplerSettings) -> None:
        """The person chose ``sampler`` (the Sampler panel)."""
        self._edit(replace(self._current, sampler=sampler))

    def edit_stop_strings(self, stops: tuple[str, ...]) -> None:
        """The person typed these extra stop strings."""
        self._edit(replace(self._current, stop_strings=tuple(stops)))

    def edit_system_prompt(self, text: str) -> None:
        """The person edited the system prompt: it applies to the chat shown (or the new chat about to start)."""
        if self._edit(replace(self._current, system_prompt=text)):
            self.system_prompt_edited.emit(text)

    def edit_constraint(self, constraint: OutputConstraint) -> None:
        """The person chose the output format of the chat shown (or of the new chat about to start); it is
        the chat's own (never a default for new chats)."""
        self._edit(replace(self._current, constraint=constraint))

    def use_system_prompt_for_new_chats(self) -> None:
        """Make the system prompt shown the default of every new chat."""
        self.settings.update(system_prompt=self._current.system_prompt)

    def _edit(self, after: ChatSettings) -> bool:
        """Apply an edit (the rule in the module docstring); False when it changed nothing."""
        before = self._current
        if self._applying or after == before:
            return False
        self._current = after
        conv = self._conv
        if conv is not None:
            self.store.update_conversation(
                conv,
                sampler=after.sampler if after.sampler != before.sampler else None,
                system_prompt=after.system_prompt if after.system_prompt != before.system_prompt else None,
                stop_strings=after.stop_strings if after.stop_strings != before.stop_strings else None,
                constraint=after.constraint if after.constraint != before.constraint else None,
            )
        else:
            if after.system_prompt != before.system_prompt:
                self._pending_system_prompt = after.system_prompt
            if after.constraint != before.constraint:
                self._pending_constraint = after.constraint
        defaults = self.settings.settings.new_chat
        carried = after_edit(defaults, before, after)
        if carried != defaults:
            self.settings.apply(lambda s: s.with_new_chat(carried))
        self.changed.emit(after)
        return True

    # ------------------------------------------------------------------ the panels
    def attach(self, sampler_panel: SamplerPanel, system_bar: SystemPromptBar) -> None:
        """The Sampler panel and the system prompt bar show :attr:`current` and send their edits here."""
        sampler_panel.settings_changed.connect(self.edit_sampler)
        sampler_panel.stop_strings_edited.connect(self.edit_stop_strings)
        system_bar.changed.connect(self.edit_system_prompt)

        def show(cs: ChatSettings) -> None:
            self._applying = True
            try:
                if cs.sampler != sampler_panel.settings():
                    sampler_panel.set_settings(cs.sampler)
                sampler_panel.set_stop_strings(cs.stop_strings)
                if cs.system_prompt != system_bar.text():
                    system_bar.set_text(cs.system_prompt)
            finally:
                self._applying = False

        self.changed.connect(show)
        show(self._current)
