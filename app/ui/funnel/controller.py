"""Keeps the Funnel panel in step with the reply, the selected token and the sliders.

One owner of "which funnel is due": the reply whose logits the engine kept (the latest
reply sent while the panel was on screen), the step shown (the newest, or the one the
person picked), and the sampler settings (the Sampler panel's, live while a slider
moves). At most one :class:`~app.core.protocol.ComputeFunnel` is in flight; a change
while one is out is sent when it returns, so a dragged slider never queues up requests.

A token clicked in the chat or the Tokens panel opens its step (:meth:`FunnelController.open_step`):
for the latest reply, whose logits the engine still keeps, the engine's own (the full vocabulary
for the latest steps, the top 64 before); for an older or stored reply, the top-N kept with it
(:class:`~app.core.sampling.alternatives.StoredStep`, sent with the request: exact on those N, and the
panel says so). The sliders then re-run that step.

It follows the chat shown (:meth:`FunnelController.follow`, :class:`~app.ui.chat.shown.ShownChat`): a
token of a message no longer shown gives way to the newest token of the path shown, and with no reply
whose logits the engine keeps (another model loaded, a restart) that newest token comes from the
candidates stored with the chat.

Slider move → repaint latency: from the settings change to the end of the synchronous
repaint that shows its funnel, in :attr:`latencies_s` (seconds; tests and the bench read it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from PySide6.QtCore import QObject

from app.core import protocol as P
from app.core.sampling.alternatives import StoredStep
from app.core.sampling.funnel import same_chain
from app.core.sampling.params import SamplerSettings
from app.ui.chat.shown import Shown, ShownChat
from app.ui.chat.turn import LiveTurn, TurnPhase
from app.ui.engine.client import EngineClient
from app.ui.funnel.panel import FunnelPanel

NO_REPLY = "No reply kept its candidates yet: send a message, then click any token of a reply to see its funnel."
NEEDS_MODEL = (
    "This reply's candidates are kept with the chat; its funnel runs llama.cpp's samplers, "
    "so it appears once a model is loaded."
)
ROWS = 8  # the raw model's most likely tokens asked for (the drawn token and the draw's favourites join them)


@dataclass(frozen=True)
class StepTarget:
    """A token to show in the funnel.

    Attributes:
        stored: its stored step (always there: the fallback, and all an older reply has).
        reply_id: the engine request id of the reply when it is the latest one (its logits may
            still be in the engine); None otherwise.
        engine_step: the token's index among the steps that request generated (a branch's or a
            continued reply's steps start after its prefix).
        n_steps: steps that request generated.
        reply_steps: tokens in the whole stored reply (its alternatives' steps; 0: unknown, then
            the step shown is taken as the last).
    """

    stored: StoredStep
    reply_id: int | None = None
    engine_step: int = -1
    n_steps: int = 0
    reply_steps: int = 0


StepLookup = Callable[[int, int], "StepTarget | None"]
"""(stored message id, 0-based step) -> that token's :class:`StepTarget` (None: no such step)."""
NewestLookup = Callable[[], "StepTarget | None"]
"""The newest token of the reply shown last in the chat (None: none kept alternatives, or it is streaming)."""
UncertainLookup = Callable[[int], "StepTarget | None"]
"""(stored message id) -> that reply's most uncertain token, the step with the highest entropy (None: it
kept no alternatives, or none yet: it is streaming)."""
PositionLookup = Callable[[int | None, int | None, int], "int | None"]
"""(engine request id, stored message id, 0-based step of that reply) -> the token's context position
(None: that reply is not the turn shown, whose prompt gives the positions)."""


def _live_position(live: LiveTurn, request_id: int | None, message_id: int | None, step: int) -> int | None:
    """Token ``step``'s context position when the reply (by its engine request or its stored message)
    is ``live``'s: :meth:`LiveTurn.context_position`."""
    ours = (request_id is not None and request_id == live.request_id) or (
        message_id is not None and message_id == live.message_id
    )
    return live.context_position(step) if ours else None


NOT_YET = "The most uncertain token is known once the reply has ended (its entropies are kept with it)."


class FunnelController(QObject):
    """Requests funnels for the Funnel panel (see the module docstring).

    Args:
        engine: the engine client.
        panel: the Funnel panel it fills.
        settings: the sampler settings to start with.
    """

    def __init__(
        self, engine: EngineClient, panel: FunnelPanel, settings: SamplerSettings, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.panel = panel
        self.settings = settings
        self.enabled = False  # the panel is on screen: replies keep their logits, funnels are asked for
        self.reply_id: int | None = None  # the reply whose logits the engine keeps
        self.n_steps = 0
        self.step = -1  # -1: the newest
        self.latencies_s: list[float] = []
        self._in_flight: int | None = None
        self._due = False
        self._change_t: float | None = None  # when the settings last changed (perf_counter), until shown
        self._last_shown: tuple[int, int] | None = None  # (reply, n_steps) of the newest funnel shown
        self.stored: StoredStep | None = None  # a stored reply's step shown (None: the engine's kept reply)
        self.reply_steps = 0  # tokens in the stored reply shown (with ``stored``)
        self.message_id: int | None = None  # the stored message shown, when known (None: the reply streaming)
        # The settings the engine's kept reply was drawn with (the Sampler panel's when it started).
        self.reply_settings: SamplerSettings | None = None
        self.use_reply_settings = False  # "Use the reply's settings": run the reply's own, not the sliders'
        self.step_lookup: StepLookup | None = None  # another token of a stored reply (follow)
        self.newest_lookup: NewestLookup | None = None  # the newest reply's last token (follow)
        self.uncertain_lookup: UncertainLookup | None = None  # a stored reply's most uncertain token
        # The reply's tokens before the engine's step 0 (a branch's prefix, the part a reply continues):
        # the panel counts the reply's tokens from 1, as the Tokens panel and the Timeline do.
        self.offset = 0
        self.offset_lookup: Callable[[], int] | None = None  # the new reply's offset (follow)
        self.turn_message: Callable[[], int | None] | None = None  # the latest reply's message id (follow)
        self.position_lookup: PositionLookup | None = None  # a token's context position (follow)
        engine.generation_started.connect(self._reply_started)
        engine.token_received.connect(self._token)
        engine.funnel_computed.connect(self._computed)
        engine.funnel_failed.connect(self._failed)
        engine.model_loaded.connect(self._forget)
        engine.engine_crashed.connect(lambda _text: self._forget(newest=False))
        panel.step_chosen.connect(self.choose_step)
        panel.reply_settings_requested.connect(self.use_reply_own)
        panel.uncertain_requested.connect(self.open_most_uncertain)
        panel.set_settings(settings)

    def follow(
        self,
        shown: ShownChat,
        step_lookup: StepLookup,
        newest_lookup: NewestLookup,
        uncertain_lookup: UncertainLookup,
    ) -> None:
        """Follow the chat and turn shown; ``step_lookup``, ``newest_lookup`` and ``uncertain_lookup`` name
        a stored reply's token, the newest one of the path shown and a stored reply's most uncertain one."""
        self.step_lookup = step_lookup
        self.newest_lookup = newest_lookup
        self.uncertain_lookup = uncertain_lookup
        self.offset_lookup = lambda: shown.live.alternatives_offset
        self.position_lookup = partial(_live_position, shown.live)
        self.turn_message = lambda: shown.live.message_id

        def shown_changed(state: Shown) -> None:
            live = shown.live
            # The kept reply is shown, or still being written (its message may not be on the path yet).
            writing = live.request_id == self.reply_id and live.phase in (TurnPhase.PREFILL, TurnPhase.DECODE)
            self.follow_path(state.message_ids, shown.live_reply, kept_on_path=state.live or writing)

        shown.changed.connect(shown_changed)

    @property
    def keep_logits(self) -> bool:
        """Whether the next reply should keep its logits (the panel is on screen)."""
        return self.enabled

    def set_enabled(self, on: bool) -> None:
        """The panel was shown (True) or hidden; hidden, nothing is asked and nothing is kept."""
        self.enabled = on
        if on:
            if self.stored is None and self.reply_id is None:
                target = self._opening_target()  # a reply made while the panel was hidden, or before a restart
                if target is not None:
                    self.open_step(target)
                    return
            self._due = True
            self._send()

    def set_settings(self, s: SamplerSettings) -> None:
        """The Sampler panel's settings changed (a slider moved): re-run the funnel on the stored logits."""
        if s == self.settings:
            return
        self.settings = s
        self.use_reply_settings = False
        self.panel.set_settings(s)
        self._change_t = time.perf_counter()
        self._due = True
        self._send()

    def use_reply_own(self) -> None:
        """Run the funnel with the shown reply's own settings (not the Sampler panel's; a slider move
        goes back to the sliders')."""
        self.use_reply_settings = True
        self._change_t = time.perf_counter()
        self._due = True
        self._send()

    def _own_settings(self) -> SamplerSettings | None:
        """The settings the shown reply was drawn with (None: not known)."""
        return self.stored.settings if self.stored is not None else self.reply_settings

    def _run_settings(self) -> SamplerSettings:
        """The settings the next funnel runs with: the sliders', or the reply's own when asked for."""
        own = self._own_settings() if self.use_reply_settings else None
        return replace(own if own is not None else self.settings, max_tokens=-1)

    def choose_step(self, step: int) -> None:
        """Show token ``step`` (0-based, counted over the whole reply) of the reply shown; -1 follows the newest.

        A stored reply's other token is looked up (:attr:`step_lookup`), as is a token before the
        engine's step 0 (a branch's prefix), and "the newest" with no reply kept by the engine is
        the newest reply's last token (:attr:`newest_lookup`)."""
        if self.stored is not None and step >= 0 and self.step_lookup is not None:
            target = self.step_lookup(self.stored.reply_id, step)
            if target is not None:
                self.open_step(target)
                return
        if self.stored is None and step >= 0:
            if step >= self.offset:
                self._choose(step - self.offset)
                return
            mid = self.message_id
            if mid is None and self.turn_message is not None:
                mid = self.turn_message()
            target = self.step_lookup(mid, step) if mid is not None and self.step_lookup is not None else None
            if target is not None:
                self.open_step(target)
            return
        if step < 0 and self.reply_id is None and self.newest_lookup is not None:
            target = self.newest_lookup()
            if target is not None:
                self.open_step(target, following=True)
                return
        self._choose(step)

    def _choose(self, step: int) -> None:
        """Show token ``step`` of the reply the engine keeps (-1: follow its newest)."""
        self.stored = None
        self.step = step
        self._show_following(step < 0)
        self._due = True
        self._send()

    def shown_message(self) -> int | None:
        """The stored message id of the reply shown (None: none, or the reply streaming is not stored yet)."""
        if self.stored is not None:
            return self.stored.reply_id
        if self.message_id is not None:
            return self.message_id
        if self.reply_id is not None and self.turn_message is not None:
            return self.turn_message()
        return None

    def open_most_uncertain(self) -> None:
        """Show the shown reply's most uncertain token (:attr:`uncertain_lookup`); the "newest" box goes
        off. A reply still streaming has no entropies yet: the panel says so and nothing changes."""
        mid = self.shown_message()
        target = self.uncertain_lookup(mid) if mid is not None and self.uncertain_lookup is not None else None
        if target is None:
            self.panel.show_status(NOT_YET)
            return
        self.open_step(target)

    def open_step(self, target: StepTarget, following: bool = False) -> None:
        """Show a token clicked in the chat or the Tokens panel (see the module docstring): the engine's
        logits when it keeps them for ``target.reply_id``, else the stored top-N. ``following``: it is
        the newest token, asked for with the panel's "newest" box."""
        self.message_id = target.stored.reply_id
        self.reply_settings = target.stored.settings  # its provenance: the settings stored with the reply
        if target.reply_id is not None and target.reply_id == self.reply_id and 0 <= target.engine_step < self.n_steps:
            self.offset = target.stored.step - target.engine_step
            self._choose(-1 if following and target.engine_step == self.n_steps - 1 else target.engine_step)
            return
        if target.reply_id is not None and self.reply_id is None and 0 <= target.engine_step < target.n_steps:
            # The latest reply, generated while the panel was hidden: the engine kept its logits
            # with its alternatives, so its own are used.
            self.reply_id, self.n_steps = target.reply_id, target.n_steps
            self.offset = target.stored.step - target.engine_step
            self._choose(-1 if following and target.engine_step == target.n_steps - 1 else target.engine_step)
            return
        self.stored = target.stored
        self.reply_steps = target.reply_steps or target.stored.step + 1
        self.step = target.stored.step
        self._show_following(following)
        self._due = True
        self._send()

    def follow_path(
        self, message_ids: tuple[int, ...], turn_reply: tuple[int, int] | None = None, kept_on_path: bool = True
    ) -> None:
        """The chat now shows these messages (a branch switched, a conversation opened, a new chat, a reply
        deleted): a token of a message no longer shown gives way to the newest reply's last token of the
        path shown, or to "no reply" when the path has none.

        ``turn_reply``: (stored message id, engine request id) of the chat's latest reply, which names
        the message of the reply the engine keeps. ``kept_on_path``: the live turn's reply is on the
        path shown (False after New chat, another chat opened, or that reply deleted)."""
        shown = self.message_id
        if shown is None and self.stored is None and turn_reply is not None and turn_reply[1] == self.reply_id:
            shown = turn_reply[0]
        if shown is None and self.stored is None and self.reply_id is not None and not kept_on_path:
            shown = -1  # the engine's kept reply, which the path shown does not hold
        if shown is None:
            if self.enabled and self.stored is None and self.reply_id is None:
                # Nothing shown yet (a chat opened at start, or after a reload): its most uncertain token.
                target = self._opening_target()
                if target is not None:
                    self.open_step(target)
                else:
                    self._say_no_reply()
            return
        if shown in message_ids:
            return
        target = self.newest_lookup() if self.newest_lookup is not None else None
        if target is not None:
            self.open_step(target, following=True)
            return
        self.stored = None
        self.message_id = None
        if self.reply_id is not None and kept_on_path:
            self._choose(-1)
            return
        if not kept_on_path:  # not asked for again on the clock; the chat's newest token adopts it back
            self.reply_id = None
            self.n_steps = 0
            self.step = -1  # the next reply is followed from its first token
            self._show_following(True)
        self._say_no_reply()

    def _say_no_reply(self) -> None:
        """Nothing to show: the panel says how to get a funnel and counts no tokens."""
        self.panel.clear_steps()
        self.panel.show_message(NO_REPLY)

    def _show_following(self, on: bool) -> None:
        """Set the panel's "newest" box without it asking for a step."""
        self.panel.set_following(on)

    def _opening_target(self) -> StepTarget | None:
        """What the panel opens on: the newest reply's most uncertain token (the step with the highest
        entropy teaches the most; its last token is most often end-of-turn at 97 %), else its newest
        token; None: no reply kept its candidates."""
        newest = self.newest_lookup() if self.newest_lookup is not None else None
        if newest is None or self.uncertain_lookup is None:
            return newest
        return self.uncertain_lookup(newest.stored.reply_id) or newest

    def _show_opening(self) -> None:
        """Show what the panel opens on in the chat shown (:meth:`_opening_target`: its newest reply's most
        uncertain token, as when a chat is opened), or say there is none."""
        target = self._opening_target()
        if target is not None:
            self.open_step(target)  # as set_enabled opens it
        else:
            self._say_no_reply()

    def tick(self) -> None:
        """The repaint clock's panel tick: while following a streaming reply, ask for the newest token's funnel."""
        following = self.enabled and self.step < 0 and self.reply_id is not None and self.stored is None
        if following and self._last_shown != (self.reply_id, self.n_steps):
            self._due = True
        self._send()

    # ------------------------------------------------------------------------------ engine
    def _reply_started(self, rid: int) -> None:
        # The engine keeps one reply's logits: a new reply with alternatives or the funnel on replaces them.
        self.reply_id = rid if self.enabled else None
        self.reply_settings = self.settings  # what the chat sends it with (the Sampler panel's)
        self.offset = self.offset_lookup() if self.offset_lookup is not None and self.enabled else 0
        self.message_id = None
        self.n_steps = 0
        self._last_shown = None
        if self.stored is not None:
            # A stored reply's token was shown: the new reply's newest token is, from now on (a hidden
            # panel opens on the new reply, not on the older one it showed last: issue 20 review, M2).
            self.stored = None
            self.step = -1
            self._show_following(True)

    def _token(self, ev: P.TokenEvent) -> None:
        if ev.request_id == self.reply_id:
            self.n_steps = ev.index + 1
            if self.enabled and self.step >= 0 and self.stored is None:
                self.panel.set_count(self.offset + self.n_steps)  # a token picked while it streams: the count goes on

    def _forget(self, *_args: object, newest: bool = True) -> None:
        """The engine kept no logits any more (a model loaded, the engine stopped). After a load (``newest``)
        the panel, when on screen, opens as on a chat opened: the chat shown's newest reply's most uncertain
        token, from its stored candidates (after a restart it opened on the last token, end of turn at 97 %,
        or on the most uncertain, depending on whether the panel was shown when the model loaded)."""
        self.stored = None
        self.reply_id = None
        self.message_id = None
        self.n_steps = 0
        self._in_flight = None
        self._last_shown = None
        if newest and self.enabled:
            self._show_opening()
        else:
            self._say_no_reply()

    def _send(self) -> None:
        if not (self.enabled and self._due) or self._in_flight is not None:
            return
        if self.stored is not None:
            if self.engine.model is None:  # no vocabulary to run the samplers on: kept due until a load
                self.panel.set_steps(self.reply_steps, self.stored.step)
                self.panel.show_message(NEEDS_MODEL)
                return
            self._due = False
            s = self._run_settings()
            self._in_flight = self.engine.compute_funnel(-1, -1, s, rows=ROWS, stored=self.stored)
            return
        if self.reply_id is None or not self.n_steps:
            return
        self._due = False
        step = self.step if 0 <= self.step < self.n_steps else -1
        # The reply's max_tokens and seed are its own; only the stages' values come from the sliders.
        rid = self.engine.compute_funnel(self.reply_id, step, self._run_settings(), rows=ROWS)
        self._in_flight = rid

    def _computed(self, ev: P.FunnelComputed) -> None:
        if ev.request_id != self._in_flight:
            return
        self._in_flight = None
        f = ev.funnel
        st = self.stored
        own = self._own_settings()
        as_drawn = own is not None and same_chain(f.settings, own)
        if st is not None and (f.reply_id, f.step) == (st.reply_id, st.step):
            self.panel.set_steps(max(self.reply_steps, f.step + 1), f.step, self._position(None, st.reply_id, f.step))
            self.panel.show_funnel(f, as_drawn, made_by=st.model_path if not f.recomputed else "")
            self.panel.view.repaint()
            if self._change_t is not None and f.settings == self._run_settings():
                self.latencies_s.append(time.perf_counter() - self._change_t)
                self._change_t = None
        elif st is None and f.reply_id == self.reply_id:
            step = self.offset + f.step
            self.panel.set_steps(self.offset + self.n_steps, step, self._position(f.reply_id, self.message_id, step))
            self.panel.show_funnel(f, as_drawn)
            self.panel.view.repaint()  # synchronous: the latency below ends when the pixels are drawn
            if self.step < 0:  # following: newer tokens may have arrived while it was computed
                self._last_shown = (f.reply_id, f.step + 1)
            if self._change_t is not None and f.settings == self._run_settings():
                self.latencies_s.append(time.perf_counter() - self._change_t)
                self._change_t = None
        self._send()

    def _position(self, request_id: int | None, message_id: int | None, step: int) -> int | None:
        """The context position of token ``step`` of the reply shown (None: not known)."""
        return self.position_lookup(request_id, message_id, step) if self.position_lookup is not None else None

    def _failed(self, ev: P.Failed) -> None:
        if ev.request_id != self._in_flight:
            return
        self._in_flight = None
        self.panel.show_message(ev.message)
        self._send()
