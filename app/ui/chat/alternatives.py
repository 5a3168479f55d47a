"""The chat's part in every token's alternatives: keep a finished reply's, show a reply as its tokens,
and name a token's funnel step for the Funnel panel.

A reply's alternatives (:class:`~app.core.sampling.alternatives.ReplyAlternatives`) come with the engine's
``Finished``; a continued reply's earlier steps, or a branch's prefix, are joined in front of them,
and they are stored next to the reply. A branch from an alternative (the chat controller's
``branch_from_alternative``) is a new sibling of the reply, asked of the engine with ``reply_prefix``:
the reply's first tokens and the chosen one, so the KV cache keeps what came before it
(:func:`branch_start`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from app.core import protocol as P
from app.core.chat.context import Role
from app.core.conversations import ConversationStore
from app.core.sampling.alternatives import ReplyAlternatives, TokenColour
from app.core.sampling.params import SamplerSettings
from app.ui.chat.reply import ReplyInFlight
from app.ui.chat.shown import ShownChat
from app.ui.chat.view import ChatView
from app.ui.funnel.controller import StepTarget
from app.ui.speculative.figures import DraftMarks
from app.ui.window.settings_controller import SettingsController

log = logging.getLogger(__name__)


class ChatAlternatives:
    """Every token's alternatives, for the chat (see the module docstring).

    Args:
        store: the conversations (where alternatives are kept).
        view: the chat on screen.
        settings: the settings (the token colour).
        shown: the chat and turn shown (the live turn's reply and its steps' offset).
        sampler: the sampler settings in effect (for a reply stored without its own).
        streaming: the stored id of the reply in flight (None: none).
    """

    def __init__(
        self,
        store: ConversationStore,
        view: ChatView,
        settings: SettingsController,
        shown: ShownChat,
        sampler: Callable[[], SamplerSettings],
        streaming: Callable[[], int | None],
    ) -> None:
        self.store = store
        self.view = view
        self.settings = settings
        self.shown = shown
        self._sampler = sampler
        self._streaming = streaming

    def keep(self, reply: ReplyInFlight, ev: P.Finished) -> None:
        """Store the finished reply's alternatives (after its earlier steps, if any) and give them to the live turn."""
        head = reply.alts_head
        alts = ev.alternatives
        if alts is not None and reply.prefix and head is None:
            alts = None  # a continued reply whose earlier part kept none: its tokens would not spell its text
        elif alts is not None and head is not None:
            alts = head.joined(alts)
        self.shown.live.on_alternatives(alts, reply.alts_offset)
        if alts is None:
            return
        try:
            self.store.set_alternatives(reply.message_id, alts, durable=False)  # finish_message makes it durable
        except Exception:  # the reply itself is saved when it ends; its alternatives are a bonus
            log.exception("could not save the alternatives of reply %s", reply.message_id)
            return
        reply.alternatives_kept()

    def show_tokens(self, message_id: int, on: bool) -> None:
        """Show reply ``message_id`` as its tokens with their alternatives (``on``), or as its text."""
        w = self.view.widget_for(message_id)
        if w is None:
            return
        alts = self.store.alternatives(message_id) if on else None
        w.show_tokens(alts, self.settings.settings.token_colour, self.draft_marks(message_id, alts) if on else None)

    def draft_marks(self, message_id: int, alts: ReplyAlternatives | None = None) -> DraftMarks | None:
        """Stored reply ``message_id``'s drafted tokens (None: it was not speculated). The engine counts
        its last request's tokens, the last ``generated_tokens`` steps of the token view ``alts``; the steps
        before them (a continued reply's earlier part, a branch's kept tokens) were written by an earlier
        request and carry no marks (without ``alts``: ``earlier_tokens`` steps before)."""
        meta = self.store.get_message(message_id).meta
        stats = meta.stats
        spec = stats.speculation if stats is not None else None
        if spec is None or stats is None:
            return None
        before = alts.n_steps - stats.generated_tokens if alts is not None else -1
        return DraftMarks.of(spec, before if before >= 0 else meta.earlier_tokens)

    def set_token_colour(self, colour: TokenColour) -> None:
        """Colour every reply shown as its tokens by ``colour`` (with the Tokens panel, at once)."""
        self.view.set_token_colour(colour)

    def step_target(self, message_id: int, step: int) -> StepTarget | None:
        """Token ``step`` of stored reply ``message_id`` for the Funnel panel (None: it kept no alternatives)."""
        alts = self.store.alternatives(message_id)
        if alts is None or not 0 <= step < alts.n_steps:
            return None
        meta = self.store.get_message(message_id).meta
        settings = meta.sampler if meta.sampler is not None else self._sampler()
        # Recomputable when the tokens before the step are what the model saw: not after a context shift (the
        # positions moved), nor in a continued reply's later part (its earlier text may have been tokenized again).
        shifted = meta.stats is not None and meta.stats.context_shifts > 0
        continued = 0 < meta.earlier_tokens <= step
        path = "" if shifted or continued or not meta.model_path else meta.model_path
        stored = alts.stored_step(step, message_id, settings, meta.seed_used or 0, meta.constraint, path)
        live = self.shown.live_reply
        if live is not None and live[0] == message_id and message_id != self._streaming():
            offset = self.shown.live.alternatives_offset
            return StepTarget(stored, live[1], step - offset, alts.n_steps - offset, alts.n_steps)
        return StepTarget(stored, reply_steps=alts.n_steps)

    def uncertain_step_target(self, message_id: int) -> StepTarget | None:
        """Stored reply ``message_id``'s most uncertain token (the highest entropy) for the Funnel panel
        (None: it kept no alternatives, or none yet: a reply streaming)."""
        alts = self.store.alternatives(message_id)
        if alts is None or not alts.n_steps:
            return None
        return self.step_target(message_id, alts.most_uncertain_step())

    def branch_from(self, message_id: int, step: int, model_path: str | None) -> tuple[ReplyAlternatives | None, str]:
        """Reply ``message_id``'s alternatives to branch from at token ``step`` with the model at
        ``model_path`` loaded; ``(None, why not)`` when there are none for that step, or the reply
        was written by another model (token ids differ from model to model)."""
        alts = self.store.alternatives(message_id)
        if alts is None or not 0 <= step < alts.n_steps:
            return None, "This reply kept no alternatives to continue from."
        made_by = self.store.get_message(message_id).meta.model_path
        if model_path is not None and made_by and Path(made_by).name != Path(model_path).name:
            return None, (
                f"This reply was written by {Path(made_by).name}; load it to continue from one of its tokens "
                "(token ids differ from model to model)."
            )
        return alts, ""

    def newest_step_target(self) -> StepTarget | None:
        """The last token of the newest reply shown that kept alternatives (None: there is none, or the
        last message shown is the reply streaming: the funnel follows that one)."""
        path = self.shown.state.path
        streaming = self._streaming()
        if path and streaming is not None and path[-1].id == streaming:
            return None
        for m in reversed(path):
            alts = self.store.alternatives(m.id) if m.role is Role.ASSISTANT else None
            if alts is not None and alts.n_steps:
                return self.step_target(m.id, alts.n_steps - 1)
        return None


def branch_start(alts: ReplyAlternatives, step: int, token: int) -> tuple[tuple[int, ...], ReplyAlternatives]:
    """A branch from token ``step`` with ``token`` instead: the engine's ``reply_prefix`` (the reply's
    first ``step`` tokens and ``token``) and the alternatives of those steps (the chosen token's text
    taken from the step's candidates)."""
    text = next((c.text for c in alts.view(step).candidates if c.token_id == token), "")
    head = alts.head(step + 1).with_token(step, token, text)
    return (*alts.tokens[:step], token), head
