"""The repaint clock: the window repaints on a clock, never per engine event (docs/architecture.md, principle 6).

One 30 Hz timer drives four rates: the reply's text at 30 Hz, the panels at 10 Hz, the
tok/s plot at 5 Hz (the costliest widget), and the streaming reply's flush to disk at 1 Hz.
Once the turn is over the panels repaint on every tick (cheap: they repaint only when the
turn changed) so the final figures and plot show without delay.

The work is spread so that no tick carries more than one costly job: the flush to disk
(a SQLite commit, ``synchronous=FULL``: an fsync, tens of ms on a busy disk) falls on a
tick with no panel repaint.

Garbage collection: when a reply starts, every object alive is moved to the permanent
generation (``gc.freeze()``). Python's full (generation 2) collection walks every tracked
object; in a window with a few long replies that took 60-180 ms on the UI thread and
found almost nothing to free (0-10 objects, bench/stream_render.py), a stall in the middle
of a stream. Frozen, the window's long-lived objects (widgets, caches, earlier messages)
are not walked again, so a collection during a reply costs what the reply made. What a
frozen cycle would have freed later stays until exit: a few objects per reply.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer, Signal

from app.ui.chat.turn import LiveTurn, TurnPhase

TEXT_HZ = 30
PANELS_HZ = 10
PLOT_HZ = 5
FLUSH_HZ = 1
FLUSH_TICK = 1  # the flush's tick within each second: never a panel tick (those are multiples of TEXT_HZ // PANELS_HZ)

_STREAMING = (TurnPhase.PREFILL, TurnPhase.DECODE)


class RepaintClock(QObject):
    """Emits what is due on each tick of a ``TEXT_HZ`` timer.

    Args:
        turn: the live turn; when it is done, the panels and the plot are due on every tick.

    Signals:
        text_due(): repaint the reply's text (30 Hz).
        panels_due(bool): repaint the panels; the flag says whether the plot is due too (10 Hz / 5 Hz).
        flush_due(): write the streaming reply to disk (1 Hz, on a tick without panels).
    """

    text_due = Signal()
    panels_due = Signal(bool)
    flush_due = Signal()

    def __init__(self, turn: LiveTurn, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._turn = turn
        self._ticks = 0
        self._streaming = False
        self._timer = QTimer(self)
        self._timer.setInterval(1000 // TEXT_HZ)
        self._timer.timeout.connect(self.tick)

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def tick(self) -> None:
        """One tick of the clock (the timer calls it; tests may too)."""
        phase = self._turn.phase
        streaming = phase in _STREAMING
        if streaming and not self._streaming:
            gc.freeze()  # a reply starts: see the module docstring
        self._streaming = streaming
        self._ticks += 1
        self.text_due.emit()
        if self._ticks % (TEXT_HZ // FLUSH_HZ) == FLUSH_TICK:
            self.flush_due.emit()
        done = phase is TurnPhase.DONE
        if self._ticks % (TEXT_HZ // PANELS_HZ) and not done:
            return
        self.panels_due.emit(self._ticks % (TEXT_HZ // PLOT_HZ) == 0 or done)
