"""Timeline panel: one reply on a time axis, on the engine's clock.

Two rows share the time axis (seconds since the request reached the engine): the phases
(chat template, tokenization, the KV cache's reused prefix, each prefill slice, decode,
the stop) and every decode step as a bar as wide as the step took and as tall as its
latency (ms). Steps slower than twice the median are red; the median is a dashed line.
Hovering a step names its token. The list on the right gives the numbers.

It follows the reply in flight, or the reply picked in its list (the shown chat's replies,
the last one first picked: it follows :class:`~app.ui.chat.shown.ShownChat`); a stored reply's
timeline comes from its provenance (``MessageMeta.timeline``), so it shows after a restart too.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QElapsedTimer, QPointF, Qt
from PySide6.QtWidgets import QComboBox, QFrame, QHBoxLayout, QLabel, QSizePolicy, QTextBrowser, QVBoxLayout, QWidget

from app.core.chat.context import Role
from app.core.conversations import Message
from app.core.inspection.timeline import SLOW_STEP_FACTOR, TurnTimeline
from app.ui.chat.shown import Shown, ShownChat
from app.ui.chat.turn import LiveTurn, TurnPhase
from app.ui.common import palette
from app.ui.common.pieces import visible_piece
from app.ui.common.stats_format import tok_s, tokens
from app.ui.common.wheel_guard import pass_wheel_through

LIVE_ITEM = -1  # the picker's item for the reply in flight
LIVE_REDRAW_MS = 500  # while a reply streams, its timeline is drawn again at most this often
HOVER_HINT = (
    "Bars: decode steps (width: how long, height: ms); red: slower than "
    f"{SLOW_STEP_FACTOR:g}× the median (dashed). Hover one for its token."
)

# Phase colours (palette names): template and tokenize, cache reuse, prefill slices, decode, rebuild.
TEMPLATE_COLOR = palette.PURPLE
REUSE_COLOR = palette.ACCENT
PREFILL_COLORS = (palette.AMBER, palette.YELLOW)
DECODE_COLOR = palette.GREEN
SLOW_COLOR = palette.RED
REBUILD_COLOR = palette.LINK


def ms(seconds: float) -> str:
    """A short engine time: ``0.42 ms``, ``12.3 ms``, ``1.25 s``."""
    if seconds < 0.01:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1.0:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:,.2f} s"


def piece_text(piece: str) -> str:
    """A token's text for one line: spaces as ·, line breaks as ⏎."""
    return visible_piece(piece)


def phase_lines(t: TurnTimeline) -> list[str]:
    """The timeline as lines for people (plain text; times on the engine's clock)."""
    lines = ["0 — request received by the engine"]
    lines.append(f"template {ms(t.template_s)} · tokenize {ms(t.tokenize_s)}")
    lines.append(
        f"KV cache: {tokens(t.cached_tokens)} of {tokens(t.prompt_tokens)} prompt tokens reused "
        f"(prefix check {ms(t.reuse_s)}); prefill starts at {ms(t.prepared_s)}"
    )
    prompt_slices = [s for s in t.slices if not s.rebuild]
    if prompt_slices:
        n = sum(s.tokens for s in prompt_slices)
        secs = prompt_slices[-1].end_s - prompt_slices[0].start_s
        rate = f", {tok_s(n / secs)}" if secs > 0 else ""
        lines.append(f"prefill: {len(prompt_slices)} slice(s), {tokens(n)} tokens in {ms(secs)}{rate}")
        for i, s in enumerate(prompt_slices, 1):
            lines.append(f"  slice {i}: {tokens(s.tokens)} tokens, {ms(s.seconds)}, {tok_s(s.tok_s)}")
    rebuilds = [s for s in t.slices if s.rebuild]
    if rebuilds:
        lines.append(f"context rebuilds: {len(rebuilds)} slice(s), {tokens(sum(s.tokens for s in rebuilds))} tokens")
    if t.ttft_s is not None:
        lines.append(f"first token (TTFT): {ms(t.ttft_s)}")
    lat = t.step_latencies_ms()
    if lat:
        med = t.median_step_ms() or 0.0
        worst = max(range(len(lat)), key=lat.__getitem__)
        slow = t.slow_steps()
        lines.append(
            f"decode: {tokens(len(lat))} steps, median {med:.1f} ms, slowest {lat[worst]:.1f} ms "
            f"(token {t.first_token + worst + 2} ‘{piece_text(t.token_pieces[worst + 1])}’), "
            f"{len(slow)} slow (> {SLOW_STEP_FACTOR:g}× median)"
        )
    if t.stop_reason is not None:
        at = f" at {ms(t.end_s)}" if t.end_s else ""
        lines.append(f"stop: {t.stop_reason.label}{at}")
    return lines


class TimelinePanel(QWidget):
    """The time axis of one reply (refreshed by the window's repaint clock while visible).

    Args:
        shown: the chat shown: its replies, and its turn (the ``timeline`` recorder of the reply in flight).
    """

    def __init__(self, shown: ShownChat, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timelinePanel")
        self._chat_shown = shown
        self._stored: dict[int, TurnTimeline | None] = {}
        self._shown: TurnTimeline | None = None
        self._seen_version = -1
        self._step_starts: list[float] = []  # each step's start (the previous token's time), for hover
        self._since_draw = QElapsedTimer()
        self.lines: list[str] = []  # the numbers shown on the right, as plain text
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 6)
        lay.setSpacing(8)
        # The plot takes the whole height (the bottom dock is ~110 px tall at 1366x768); the picker,
        # the hovered step and the numbers share the column on the right.
        side = QVBoxLayout()
        side.setSpacing(2)
        self.picker = QComboBox()
        self.picker.setObjectName("timelinePicker")
        self.picker.setToolTip("Which reply's timeline to show: the shown chat's replies, or the one in progress")
        self.picker.currentIndexChanged.connect(self._picked)
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(12)
        side.addWidget(self.picker)
        self.hover_label = QLabel(HOVER_HINT)
        self.hover_label.setObjectName("detailLabel")
        self.hover_label.setTextFormat(Qt.TextFormat.RichText)
        self.hover_label.setWordWrap(True)
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        side.addWidget(self.hover_label)
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setObjectName("timelinePlot")
        self.plots.setBackground(palette.PLOT_BG)
        self.plots.setMinimumHeight(70)
        pass_wheel_through(self.plots)  # in a scroll area the wheel scrolls it (Ctrl+wheel: zoom the time axis)
        self.phases = self.plots.addPlot(row=0, col=0)
        self.steps = self.plots.addPlot(row=1, col=0)
        self.phases.setMaximumHeight(22)  # one lane of phases; the steps get the rest
        self.plots.ci.layout.setContentsMargins(2, 2, 2, 2)
        self.plots.ci.layout.setSpacing(0)
        for p in (self.phases, self.steps):
            p.setMouseEnabled(x=True, y=False)
            p.setMenuEnabled(False)
            p.hideButtons()
        self.phases.hideAxis("left")
        self.phases.hideAxis("bottom")
        self.phases.setYRange(0, 1, padding=0)
        self.steps.setXLink(self.phases)
        self.steps.getAxis("left").setWidth(34)
        self.phases.getAxis("left").setWidth(34)
        self.phases.showAxis("left")
        self.phases.getAxis("left").setTicks([[]])  # lines up with the steps' axis, no numbers
        self.steps.getAxis("bottom").setHeight(18)
        self.steps.showGrid(x=True, y=True, alpha=0.15)
        # Drawn by updating these items, never by making new ones: a 5,000-token reply redrawn
        # as one bar item per step took 24 ms (bench/stream_render.py); as two filled step
        # curves (numpy paths) it costs what the array copy costs.
        self.phase_bars = pg.BarGraphItem(x0=[], y0=[], width=[], height=[], pen=None)
        self.phases.addItem(self.phase_bars)
        self.stop_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(palette.TEXT, width=2), movable=False)
        self.phases.addItem(self.stop_line)
        self.stop_line.hide()
        self.step_curve = pg.PlotDataItem(stepMode="center", fillLevel=0, brush=pg.mkBrush(DECODE_COLOR), pen=None)
        self.slow_curve = pg.PlotDataItem(stepMode="center", fillLevel=0, brush=pg.mkBrush(SLOW_COLOR), pen=None)
        self.steps.addItem(self.step_curve)
        self.steps.addItem(self.slow_curve)
        self.median_line = pg.InfiniteLine(
            angle=0, pen=pg.mkPen(palette.MUTED, width=1, style=Qt.PenStyle.DashLine), movable=False
        )
        self.steps.addItem(self.median_line)
        self.ttft_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(palette.AMBER, width=1), movable=False)
        self.steps.addItem(self.ttft_line)
        self.marker = pg.ScatterPlotItem(size=9, brush=pg.mkBrush(palette.WHITE), pen=None)
        self.steps.addItem(self.marker)
        self.plots.scene().sigMouseMoved.connect(self._mouse_moved)
        lay.addWidget(self.plots, 1)
        self.details = QTextBrowser()  # scrolls: the dock is short at 1366x768
        self.details.setObjectName("timelineDetails")
        self.details.setFrameShape(QFrame.Shape.NoFrame)
        self.details.setPlainText("The timeline of a reply appears here (engine seconds since the request).")
        side.addWidget(self.details, 1)
        column = QWidget()
        column.setLayout(side)
        side.setContentsMargins(0, 0, 0, 0)
        column.setMinimumWidth(280)
        column.setMaximumWidth(440)
        lay.addWidget(column)
        shown.changed.connect(self._shown_changed)

    @property
    def turn(self) -> LiveTurn:
        """The turn shown (the reply in flight's, when it is on the chat shown)."""
        return self._chat_shown.turn

    def _shown_changed(self, state: Shown) -> None:
        self.set_replies(reply_items(state.path, state.writing), state.writing)

    # ------------------------------------------------------------------ what is shown
    def set_replies(self, replies: Sequence[tuple[int, str, TurnTimeline | None]], live: bool) -> None:
        """The replies to pick from, ``(message id, label, stored timeline)`` oldest first, and
        whether a reply is in flight (then it is an item of its own, picked); otherwise the last
        reply is picked."""
        self._stored = {mid: tl for mid, _label, tl in replies}
        self.picker.blockSignals(True)
        self.picker.clear()
        for mid, label, tl in replies:
            self.picker.addItem(label if tl is not None else f"{label} (no timeline kept)", mid)
        if live:
            self.picker.addItem("Reply in progress", LIVE_ITEM)
        self.picker.setCurrentIndex(self.picker.count() - 1)
        self.picker.blockSignals(False)
        self._picked()

    @property
    def following_live(self) -> bool:
        """The reply in flight is shown."""
        return bool(self.picker.currentData() == LIVE_ITEM)

    def _picked(self, _index: int = -1) -> None:
        self._seen_version = -1
        self._since_draw.invalidate()
        data = self.picker.currentData()
        if self.following_live:
            self.refresh()
        elif data is None:
            self._draw(None, "The timeline of a reply appears here.")
        else:
            self._draw(self._stored.get(int(data)))

    def refresh(self) -> None:
        """Repaint the live turn's timeline if it changed (the window's panel tick, while visible):
        at most every ``LIVE_REDRAW_MS`` while the reply streams (a long reply has thousands of
        steps to draw), at once when it is over."""
        if not self.following_live or self.turn.version == self._seen_version:
            return
        streaming = self.turn.phase in (TurnPhase.PREFILL, TurnPhase.DECODE)
        if streaming and self._since_draw.isValid() and self._since_draw.elapsed() < LIVE_REDRAW_MS:
            return
        self._since_draw.start()
        self._seen_version = self.turn.version
        snap = self.turn.timeline.snapshot()
        self._draw(None if snap.is_empty else snap, "Waiting for the engine…")

    @property
    def shown(self) -> TurnTimeline | None:
        """The timeline on screen (None: nothing to show)."""
        return self._shown

    # ------------------------------------------------------------------ drawing
    def _draw(
        self, t: TurnTimeline | None, why_none: str = "No timeline for this reply (made before timelines were kept)."
    ) -> None:
        self._shown = t
        self.marker.setData([], [])
        if t is None:
            self.lines = []
            self._step_starts = []
            self.phase_bars.setOpts(x0=[], y0=[], width=[], height=[], brushes=[])
            self.stop_line.hide()
            self.step_curve.setData([], [])
            self.slow_curve.setData([], [])
            self.median_line.hide()
            self.ttft_line.hide()
            self.details.setPlainText(why_none)
            return
        self._draw_phases(t)
        self._draw_steps(t)
        end = max(t.end_s, t.token_times_s[-1] if t.token_times_s else 0.0, t.prefill_end_s, 1e-3)
        self.phases.setXRange(0, end * 1.02, padding=0)
        self.lines = phase_lines(t)
        self.details.setHtml("<br>".join(html.escape(line).replace("  ", "&nbsp;&nbsp;") for line in self.lines))

    def _draw_phases(self, t: TurnTimeline) -> None:
        """The phase lane: one bar item for all the phases (x0, width in seconds; y in the lane's 0..1)."""
        bars: list[tuple[float, float, str, float, float]] = [  # x0, width, colour, y0, height
            (0.0, t.template_s + t.tokenize_s, TEMPLATE_COLOR, 0.15, 0.7),
            (t.prepared_s - t.reuse_s, t.reuse_s, REUSE_COLOR, 0.15, 0.7),
        ]
        n = 0
        for sl in t.slices:
            if sl.rebuild:
                bars.append((sl.start_s, sl.seconds, REBUILD_COLOR, 0.15, 0.7))
                continue
            bars.append((sl.start_s, sl.seconds, PREFILL_COLORS[n % 2], 0.15, 0.7))
            n += 1
        if t.token_times_s:
            first, last = t.token_times_s[0], t.token_times_s[-1]
            bars.append((first, last - first, DECODE_COLOR, 0.35, 0.3))
        self.phase_bars.setOpts(
            x0=[b[0] for b in bars],
            width=[max(b[1], 0.0) for b in bars],
            brushes=[pg.mkBrush(b[2]) for b in bars],
            y0=[b[3] for b in bars],
            height=[b[4] for b in bars],
        )
        if t.end_s:
            self.stop_line.setPos(t.end_s)
            self.stop_line.show()
        else:
            self.stop_line.hide()

    def _draw_steps(self, t: TurnTimeline) -> None:
        """The step lane: each step from its start (the previous token's time) to its end, as
        tall as its latency (ms); the slow ones drawn again, red, on top."""
        times = np.asarray(t.token_times_s, dtype=np.float64)
        self._step_starts = list(t.token_times_s[:-1])
        if t.ttft_s is not None:
            self.ttft_line.setPos(t.ttft_s)
            self.ttft_line.show()
        else:
            self.ttft_line.hide()
        if len(times) < 2:
            self.step_curve.setData([], [])
            self.slow_curve.setData([], [])
            self.median_line.hide()
            return
        lat = np.diff(times) * 1000.0  # step i+1's latency, ms (TurnTimeline.step_latencies_ms)
        med = float(np.median(lat))
        slow = lat > SLOW_STEP_FACTOR * med if len(lat) >= 2 and med > 0 else np.zeros(len(lat), dtype=bool)
        self.step_curve.setData(times, np.where(slow, 0.0, lat))
        self.slow_curve.setData(times, np.where(slow, lat, 0.0))
        self.slow_curve.setVisible(bool(slow.any()))
        self.median_line.setPos(med)
        self.median_line.show()
        self.steps.setYRange(0, max(float(lat.max()), 2.5 * med) * 1.05, padding=0)

    # ------------------------------------------------------------------ hover
    def _mouse_moved(self, pos: QPointF) -> None:
        if not self.steps.sceneBoundingRect().contains(pos):
            return
        x = self.steps.vb.mapSceneToView(pos).x()
        self.hover_at(x)

    def hover_at(self, t_s: float) -> int | None:
        """Name the decode step under engine time ``t_s`` (seconds) in the hover line and mark it.

        Returns:
            The token index of that step (1 = the second token), or None when no step is there.
        """
        t = self._shown
        starts = self._step_starts
        if t is None or not starts:
            return None
        i = bisect.bisect_right(starts, t_s) - 1
        if i < 0 or t_s > t.token_times_s[i + 1]:
            return None
        lat = (t.token_times_s[i + 1] - t.token_times_s[i]) * 1000.0
        med = t.median_step_ms() or 0.0
        k = i + 1
        slow = " — slow" if k in t.slow_steps() else ""
        ratio = f", {lat / med:.1f}× median" if med > 0 else ""
        self.hover_label.setText(
            f"token {t.first_token + k + 1} <b>‘{html.escape(piece_text(t.token_pieces[k]))}’</b>: "
            f"{lat:.1f} ms step{ratio}{slow} · at {t.token_times_s[k]:.3f} s · id {t.token_ids[k]}"
        )
        self.marker.setData([t.token_times_s[k] - lat / 2000.0], [lat])
        return k


def reply_items(path: Sequence[Message], in_flight: bool) -> list[tuple[int, str, TurnTimeline | None]]:
    """The picker's items for a chat's active path: its replies, oldest first, as
    ``(message id, "Reply n · first words", stored timeline)``. With ``in_flight`` the last
    reply is the one being written (it has no timeline yet) and is left out: the live item stands for it."""
    replies = [m for m in path if m.role is Role.ASSISTANT]
    if in_flight and replies and replies[-1].meta.timeline is None:
        replies = replies[:-1]
    items = []
    for n, m in enumerate(replies, 1):
        words = " ".join(m.content.split())
        words = words if len(words) <= 40 else words[:39] + "…"
        items.append((m.id, f"Reply {n} · {words}" if words else f"Reply {n}", m.meta.timeline))
    return items
