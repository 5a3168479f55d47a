"""What applies to the chat shown: its system prompt and sampler, the stop strings and the
context policy of the next reply; the Sampler panel and the Funnel show the sampler settings in effect (and the Sampler
panel the seed the last reply used).

- The system prompt bar shows the chat's system prompt (a new chat: the default); an edit applies
  to that chat only (or the new chat about to start), and the notice offers "Use for new chats too".
- The chat's sampler is the one in effect while it is shown: opening a chat writes it into the
  settings (issue 19 §2 gives per-chat settings an owner of their own).
- A sampler edit goes to the settings and to the chat shown.
"""

from __future__ import annotations

from app.core.conversations import ConversationStore
from app.core.sampling.params import SamplerSettings
from app.core.settings import Settings
from app.ui.chat.controller import ChatController
from app.ui.chat.system_prompt import SystemPromptBar
from app.ui.common.severity import Severity
from app.ui.funnel.controller import FunnelController
from app.ui.panels.sampler import SamplerPanel
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.settings_controller import SettingsController


class PerChatSettings:
    """Keeps the chat shown, the settings and the panels that show them in step.

    Args:
        chat: the chat controller (the chat shown; the next reply's stop strings).
        conversations: the stored chats (their system prompt and sampler).
        settings: the settings (the defaults of new chats, the sampler in effect).
        system_bar: the system prompt bar.
        sampler_panel: the Sampler panel.
        funnel: the Funnel's controller (it previews the sampler in effect).
        notices: where "Use for new chats too" is offered.
    """

    def __init__(
        self,
        chat: ChatController,
        conversations: ConversationStore,
        settings: SettingsController,
        system_bar: SystemPromptBar,
        sampler_panel: SamplerPanel,
        funnel: FunnelController,
        notices: Notices,
    ) -> None:
        self._chat = chat
        self._conversations = conversations
        self._settings = settings
        self._system_bar = system_bar
        self._sampler_panel = sampler_panel
        self._funnel = funnel
        self._notices = notices
        self._applying = False  # the chat shown is being applied: its values are not edits
        self._policy = settings.settings.load.context_policy
        chat.conversation_changed.connect(self._conversation_changed)
        settings.changed.connect(self._settings_changed)
        sampler_panel.settings_changed.connect(self._sampler_edited)
        sampler_panel.settings_changed.connect(funnel.set_settings)
        sampler_panel.stop_strings_edited.connect(self._stop_strings_edited)
        chat.reply_finished.connect(lambda stats: sampler_panel.show_seed_used(stats.seed))
        system_bar.changed.connect(self._system_prompt_edited)

    def use_system_prompt_for_new_chats(self) -> None:
        """Make the system prompt shown the default of every new chat."""
        self._settings.update(system_prompt=self._system_bar.text())
        self._notices.clear(NoticeTopic.SYSTEM_PROMPT)

    def _conversation_changed(self, conv_id: int | None) -> None:
        self._chat.pending_system_prompt = None
        self._applying = True
        try:
            if conv_id is None:
                self._system_bar.set_text(self._settings.settings.system_prompt)
                return
            conv = self._conversations.get_conversation(conv_id)
            self._system_bar.set_text(conv.system_prompt)
            # The chat's sampler is the one in effect while it is shown (the panel follows).
            self._settings.update(sampler=conv.sampler)
        finally:
            self._applying = False

    def _settings_changed(self, s: Settings) -> None:
        """The panels show what the settings controller holds; a new context policy applies to the
        next reply, without a reload (its notice goes, the replies' Continue is decided again)."""
        if s.sampler != self._sampler_panel.settings():
            self._sampler_panel.set_settings(s.sampler)
        self._funnel.set_settings(s.sampler)
        if s.load.context_policy != self._policy:
            self._policy = s.load.context_policy
            self._notices.clear(NoticeTopic.CONTEXT)  # its advice was about the policy
            self._chat.refresh_continue()

    def _sampler_edited(self, s: SamplerSettings) -> None:
        self._settings.update(sampler=s)
        if self._chat.conversation_id is not None and not self._applying:
            self._conversations.update_conversation(self._chat.conversation_id, sampler=s)

    def _stop_strings_edited(self, stops: tuple[str, ...]) -> None:
        self._chat.stop_strings = stops

    def _system_prompt_edited(self, text: str) -> None:
        """The person edited the system prompt: it applies to the chat shown (or the new chat about
        to start), never silently to every new chat; the notice offers "Use for new chats too"."""
        if self._applying:
            return
        chat = self._chat
        if chat.conversation_id is not None:
            self._conversations.update_conversation(chat.conversation_id, system_prompt=text)
        else:
            chat.pending_system_prompt = text
        if text == self._settings.settings.system_prompt:
            self._notices.clear(NoticeTopic.SYSTEM_PROMPT)
        elif not self._notices.showing(NoticeTopic.SYSTEM_PROMPT):
            self._notices.show(
                NoticeTopic.SYSTEM_PROMPT,
                Severity.INFO,
                "This system prompt applies to this chat only; new chats start with the default one.",
                [("Use for new chats too", self.use_system_prompt_for_new_chats)],
            )
