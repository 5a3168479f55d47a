"""The window's side of what applies to the chat shown. The owner is
:class:`~app.ui.chat.chat_settings.ChatSettingsController` (sampler, system prompt, stop strings, and
the rule for new chats); this module wires what the window adds around it:

- a system prompt edit that differs from the default: the notice offers "Use for new chats too";
- the Funnel previews the sampler settings in effect; the Sampler panel shows the seed the last
  reply used;
- a new context policy applies to the next reply, without a reload: its notice goes, and the
  replies' Continue is decided again.
"""

from __future__ import annotations

from app.core.chat.context import ContextPolicy
from app.core.settings import Settings
from app.ui.chat.chat_settings import ChatSettingsController
from app.ui.chat.controller import ChatController
from app.ui.common.severity import Severity
from app.ui.funnel.controller import FunnelController
from app.ui.panels.sampler import SamplerPanel
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.settings_controller import SettingsController


class PerChatSettings:
    """Connects the chat's settings to the notices, the Funnel and the Sampler panel (see the module docstring).

    Args:
        chat: the chat controller (its replies' seeds; Continue decided again).
        chat_settings: what applies to the chat shown (the owner).
        settings: the settings (the default system prompt, the context policy).
        sampler_panel: the Sampler panel (the seed the last reply used).
        funnel: the Funnel's controller (it previews the sampler in effect).
        notices: where "Use for new chats too" is offered.
    """

    def __init__(
        self,
        chat: ChatController,
        chat_settings: ChatSettingsController,
        settings: SettingsController,
        sampler_panel: SamplerPanel,
        funnel: FunnelController,
        notices: Notices,
    ) -> None:
        self._chat = chat
        self._chat_settings = chat_settings
        self._settings = settings
        self._notices = notices
        self._policy: ContextPolicy = chat.context_policy
        chat_settings.changed.connect(lambda cs: funnel.set_settings(cs.sampler))
        chat_settings.system_prompt_edited.connect(self._system_prompt_edited)
        chat.reply_finished.connect(lambda stats: sampler_panel.show_seed_used(stats.seed))
        settings.changed.connect(self._settings_changed)

    def use_system_prompt_for_new_chats(self) -> None:
        """Make the system prompt shown the default of every new chat."""
        self._chat_settings.use_system_prompt_for_new_chats()
        self._notices.clear(NoticeTopic.SYSTEM_PROMPT)

    def _settings_changed(self, _s: Settings) -> None:
        """A new context policy applies to the next reply (its notice goes, Continue is decided again)."""
        if self._chat.context_policy != self._policy:
            self._policy = self._chat.context_policy
            self._notices.clear(NoticeTopic.CONTEXT)  # its advice was about the policy
            self._chat.refresh_continue()

    def _system_prompt_edited(self, text: str) -> None:
        """The person edited the system prompt: it applies to the chat shown (or the new chat about
        to start), never silently to every new chat; the notice offers "Use for new chats too"."""
        if text == self._settings.settings.system_prompt:
            self._notices.clear(NoticeTopic.SYSTEM_PROMPT)
        elif not self._notices.showing(NoticeTopic.SYSTEM_PROMPT):
            self._notices.show(
                NoticeTopic.SYSTEM_PROMPT,
                Severity.INFO,
                "This system prompt applies to this chat only; new chats start with the default one.",
                [("Use for new chats too", self.use_system_prompt_for_new_chats)],
            )
