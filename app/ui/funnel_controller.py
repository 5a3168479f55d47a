"""Keeps the Funnel panel in step with the reply, the selected token and the sliders.

One owner of "which funnel is due": the reply whose logits the engine kept (the latest
reply sent while the panel was on screen), the step shown (the newest, or the one the
person picked), and the sampler settings (the Sampler panel's, live while a slider
moves). At most one :class:`~app.core.protocol.ComputeFunnel` is in flight; a change
while one is out is sent when it returns, so a dragged slider never queues up requests.

A token clicked in the chat or the Tokens panel opens its step (:meth:`FunnelController.open_step`):
for the latest reply, whose logits the engine still keeps, the engine's own (the full vocabulary
for the latest steps, the top 64 before); for an older or stored reply, the top-N kept with it
(:class:`~app.core.alternatives.StoredStep`, sent with the request: exact on those N, and the
panel says so). The sliders then re-run that step.

Slider move → repaint latency: from the settings change to the end of the synchronous
repaint that shows its funnel, in :attr:`latencies_s` (seconds; tests and the bench read it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject

from app.core import protocol as P
from app.core.alternatives import StoredStep
from app.core.sampling import SamplerSettings, SamplerStage
from app.ui.engine_client import EngineClient
from app.ui.panels.funnel import FunnelPanel

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
    """

    stored: StoredStep
    reply_id: int | None = None
    engine_step: int = -1
    n_steps: int = 0


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
        engine.generation_started.connect(self._reply_started)
        engine.token_received.connect(self._token)
        engine.funnel_computed.connect(self._computed)
        engine.funnel_failed.connect(self._failed)
        engine.model_loaded.connect(self._forget)
        engine.engine_crashed.connect(lambda _text: self._forget())
        panel.step_chosen.connect(self.choose_step)
        panel.set_settings(settings)

    @property
    def keep_logits(self) -> bool:
        """Whether the next reply should keep its logits (the panel is on screen)."""
        return self.enabled

    def set_enabled(self, on: bool) -> None:
        """The panel was shown (True) or hidden; hidden, nothing is asked and nothing is kept."""
        self.enabled = on
        if on:
            self._due = True
            self._send()

    def set_settings(self, s: SamplerSettings) -> None:
        """The Sampler panel's settings changed (a slider moved): re-run the funnel on the stored logits."""
        if s == self.settings:
            return
        self.settings = s
        self.panel.set_settings(s)
        self._change_t = time.perf_counter()
        self._due = True
        self._send()

    def choose_step(self, step: int) -> None:
        """Show token ``step`` (0-based) of the reply; -1 follows the newest."""
        self.stored = None
        self.step = step
        self._due = True
        self._send()

    def open_step(self, target: StepTarget) -> None:
        """Show a token clicked in the chat or the Tokens panel (see the module docstring): the engine's
        logits when it keeps them for ``target.reply_id``, else the stored top-N."""
        if target.reply_id is not None and target.reply_id == self.reply_id and 0 <= target.engine_step < self.n_steps:
            self.choose_step(target.engine_step)
            return
        if target.reply_id is not None and self.reply_id is None and 0 <= target.engine_step < target.n_steps:
            # The latest reply, generated while the panel was hidden: the engine kept its logits
            # with its alternatives, so its own are used.
            self.reply_id, self.n_steps = target.reply_id, target.n_steps
            self.choose_step(target.engine_step)
            return
        self.stored = target.stored
        self.step = target.stored.step
        self._show_following(False)
        self._due = True
        self._send()

    def _show_following(self, on: bool) -> None:
        """Set the panel's "newest" box without it asking for a step."""
        self.panel.follow.blockSignals(True)
        self.panel.follow.setChecked(on)
        self.panel.follow.blockSignals(False)

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
        self.n_steps = 0
        self._last_shown = None
        if self.enabled and self.stored is not None:
            # A stored reply's token was shown: the new reply's newest token is, from now on.
            self.stored = None
            self.step = -1
            self._show_following(True)

    def _token(self, ev: P.TokenEvent) -> None:
        if ev.request_id == self.reply_id:
            self.n_steps = ev.index + 1

    def _forget(self, *_args: object) -> None:
        self.stored = None
        self.reply_id = None
        self.n_steps = 0
        self._in_flight = None
        self._last_shown = None
        self.panel.show_message("Send a message with this panel open: each token's candidates appear here.")

    def _send(self) -> None:
        if not (self.enabled and self._due) or self._in_flight is not None:
            return
        if self.stored is not None:
            self._due = False
            s = replace(self.settings, max_tokens=-1)
            self._in_flight = self.engine.compute_funnel(-1, -1, s, rows=ROWS, stored=self.stored)
            return
        if self.reply_id is None or not self.n_steps:
            return
        self._due = False
        step = self.step if 0 <= self.step < self.n_steps else -1
        # The reply's max_tokens and seed are its own; only the stages' values come from the sliders.
        rid = self.engine.compute_funnel(self.reply_id, step, replace(self.settings, max_tokens=-1), rows=ROWS)
        self._in_flight = rid

    def _computed(self, ev: P.FunnelComputed) -> None:
        if ev.request_id != self._in_flight:
            return
        self._in_flight = None
        f = ev.funnel
        st = self.stored
        if st is not None and (f.reply_id, f.step) == (st.reply_id, st.step):
            self.panel.set_steps(f.step + 1, f.step)
            self.panel.show_funnel(f)
            self.panel.view.repaint()
            if self._change_t is not None and f.settings == replace(self.settings, max_tokens=-1):
                self.latencies_s.append(time.perf_counter() - self._change_t)
                self._change_t = None
        elif st is None and f.reply_id == self.reply_id:
            self.panel.set_steps(self.n_steps, f.step)
            self.panel.show_funnel(f)
            self.panel.view.repaint()  # synchronous: the latency below ends when the pixels are drawn
            if self.step < 0:  # following: newer tokens may have arrived while it was computed
                self._last_shown = (f.reply_id, f.step + 1)
            if self._change_t is not None and f.settings == replace(self.settings, max_tokens=-1):
                self.latencies_s.append(time.perf_counter() - self._change_t)
                self._change_t = None
        self._send()

    def _failed(self, ev: P.Failed) -> None:
        if ev.request_id != self._in_flight:
            return
        self._in_flight = None
        self.panel.show_message(ev.message)
        self._send()


def order_changed(settings: SamplerSettings, order: tuple[SamplerStage, ...]) -> SamplerSettings:
    """``settings`` with the stage order the person chose (validated: a permutation of the stages).

    Raises:
        ValueError: the order is not a permutation of the stages.
    """
    return replace(settings, order=tuple(order)).validated()
