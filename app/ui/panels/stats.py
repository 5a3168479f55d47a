"""Stats panel: TTFT, prefill and decode speed, tokens, context fill, KV cache, tok/s plot,
and what bounded the turn's speed (:mod:`app.ui.panels.speed_bound_view`)."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.chat.context import GenerationStats, StopReason
from app.core.gguf.gguf_info import GGUFInfo, format_bytes
from app.core.hardware.memory import KVCacheLayout
from app.core.remote import NOT_REPORTED
from app.ui.chat.shown import ShownChat
from app.ui.chat.turn import LiveTurn, TurnPhase
from app.ui.common import palette
from app.ui.common import stats_format as fmt
from app.ui.common.stacked_bar import BarSegment, StackedBar
from app.ui.common.wheel_guard import pass_wheel_through
from app.ui.panels.speed_bound_view import SpeedBoundView
from app.ui.window.model_change import ModelChange, ModelPhase

# The context bar's parts, left to right (the legend under the bar uses the same colours).
REUSED_COLOR = palette.ACCENT  # reused from the KV cache
PREFILL_COLOR = palette.AMBER  # evaluated this turn (prefill)
GENERATED_COLOR = palette.GREEN  # generated this turn


class ContextBar(StackedBar):
    """n_ctx as a bar: reused prefix | prefill this turn | generated | free (tokens)."""

    def __init__(self, height_px: int = 18, parent: QWidget | None = None) -> None:
        super().__init__(height_px, parent=parent)
        self.parts = (0, 0, 0)
        self.n_ctx = 0

    def set_parts(self, cached: int, evaluated: int, generated: int, n_ctx: int) -> None:
        """Show the three parts (tokens) of a context of ``n_ctx`` tokens."""
        self.parts = (cached, evaluated, generated)
        self.n_ctx = n_ctx
        self.set_segments(
            [
                BarSegment(cached, REUSED_COLOR, f"{fmt.tokens(cached)} tokens reused from the KV cache"),
                BarSegment(evaluated, PREFILL_COLOR, f"{fmt.tokens(evaluated)} tokens evaluated this turn (prefill)"),
                BarSegment(generated, GENERATED_COLOR, f"{fmt.tokens(generated)} tokens generated"),
            ],
            n_ctx,
        )


def _tile(title: str) -> tuple[QFrame, QLabel, QLabel]:
    f = QFrame()
    f.setObjectName("metricTile")
    lay = QVBoxLayout(f)
    lay.setContentsMargins(10, 6, 10, 6)
    lay.setSpacing(0)
    t = QLabel(title)
    t.setObjectName("metricTitle")
    v = QLabel("—")
    v.setObjectName("metricValue")
    s = QLabel("")
    s.setObjectName("metricSub")
    lay.addWidget(t)
    lay.addWidget(v)
    lay.addWidget(s)
    return f, v, s


class StatsPanel(QWidget):
    """Figures of the turn shown: the turn in flight, or the chat shown's last stored reply
    (:attr:`ShownChat.turn <app.ui.chat.shown.ShownChat.turn>`; refreshed by the window's repaint clock).

    Signals:
        sweep_requested(): "Speed vs context…" was clicked (the depth sweep's window, app/ui/depth_sweep).
    """

    sweep_requested = Signal()

    def __init__(self, shown: ShownChat, speed: SpeedBoundView | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statsPanel")
        self._chat_shown = shown
        self.layout_kv: KVCacheLayout | None = None
        self.remote = False  # the engine is a remote server (set_model without a layout)
        self.n_ctx = 0
        self._seen = -1
        self._plot_stale = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(8)

        self.phase = QLabel("No reply yet")
        self.phase.setObjectName("phaseLabel")
        self.phase.setWordWrap(True)
        lay.addWidget(self.phase)

        grid = QGridLayout()
        grid.setSpacing(6)
        tiles = {}
        for i, (key, title) in enumerate(
            [
                ("ttft", "Time to first token"),
                ("prefill", "Prefill"),
                ("decode", "Decode"),
                ("tokens", "Tokens"),
            ]
        ):
            frame, value, sub = _tile(title)
            tiles[key] = (value, sub)
            grid.addWidget(frame, i // 2, i % 2)
        self.tiles = tiles
        lay.addLayout(grid)

        ctx_title = QLabel("Context (n_ctx)")
        ctx_title.setObjectName("sectionTitle")
        lay.addWidget(ctx_title)
        self.ctx_bar = ContextBar()
        lay.addWidget(self.ctx_bar)
        self.ctx_label = QLabel("—")
        self.ctx_label.setObjectName("detailLabel")
        self.ctx_label.setWordWrap(True)
        lay.addWidget(self.ctx_label)
        legend = QLabel(
            f"<span style='color:{REUSED_COLOR}'>■</span> reused from KV cache &nbsp; "
            f"<span style='color:{PREFILL_COLOR}'>■</span> prefill this turn &nbsp; "
            f"<span style='color:{GENERATED_COLOR}'>■</span> generated"
        )
        legend.setObjectName("legendLabel")
        legend.setWordWrap(True)
        lay.addWidget(legend)

        kv_title = QLabel("KV cache")
        kv_title.setObjectName("sectionTitle")
        lay.addWidget(kv_title)
        self.kv_bar = StackedBar(10)
        lay.addWidget(self.kv_bar)
        self.kv_label = QLabel("—")
        self.kv_label.setObjectName("detailLabel")
        self.kv_label.setWordWrap(True)
        lay.addWidget(self.kv_label)

        plot_title = QLabel("Decode speed across the turn (tokens/s)")
        plot_title.setObjectName("sectionTitle")
        lay.addWidget(plot_title)
        self.plot = pg.PlotWidget()
        self.plot.setObjectName("ratePlot")
        self.plot.setBackground(palette.PLOT_BG)
        self.plot.setMinimumHeight(110)
        self.plot.setMaximumHeight(150)
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.setLabel("bottom", "s since request")
        self.plot.setMouseEnabled(x=False, y=False)
        pass_wheel_through(self.plot)  # the wheel scrolls the panel, not the (fixed) plot
        self.plot.hideButtons()
        self.plot.getPlotItem().setMenuEnabled(False)
        self.plot.setAntialiasing(False)
        self.plot.enableAutoRange(False)
        self.plot.setXRange(0, 5, padding=0)
        self.plot.setYRange(0, 50, padding=0)
        self._x_max, self._y_max = 5.0, 50.0
        self.curve = self.plot.plot([], [], pen=pg.mkPen(GENERATED_COLOR, width=2), skipFiniteCheck=True)
        self.ttft_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(PREFILL_COLOR, width=1, style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.ttft_line)
        self.ttft_line.hide()
        lay.addWidget(self.plot)

        self.details = QLabel("")
        self.details.setObjectName("detailLabel")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.details)
        self.speed = speed if speed is not None else SpeedBoundView()
        lay.addWidget(self.speed)
        self.sweep_btn = QPushButton("Speed vs context…")
        self.sweep_btn.setObjectName("sweepButton")
        self.sweep_btn.setToolTip(
            "Prefill and decode tok/s with 0, 512, 1k… tokens already in the KV cache (llama-bench -d)"
        )
        self.sweep_btn.clicked.connect(self.sweep_requested)
        lay.addWidget(self.sweep_btn, 0, Qt.AlignmentFlag.AlignLeft)
        lay.addStretch(1)

    @property
    def turn(self) -> LiveTurn:
        """The turn the panel shows (the chat shown's)."""
        return self._chat_shown.turn

    def _update_plot(self, t: LiveTurn) -> None:
        xs, ys = t.rate_series()
        self.curve.setData(xs, ys)
        # Grow the axes in steps instead of auto-ranging on every update (cheaper to repaint).
        x_end = max(xs[-1] if xs else 0.0, t.ttft_s or 0.0)
        y_top = max(ys) if ys else 0.0
        if x_end > self._x_max or (not xs and self._x_max != 5.0):
            self._x_max = 5.0 if not xs else max(5.0, x_end * 1.5)
            self.plot.setXRange(0, self._x_max, padding=0)
        if y_top > self._y_max * 0.95 or (not ys and self._y_max != 50.0):
            self._y_max = 50.0 if not ys else max(50.0, y_top * 1.3)
            self.plot.setYRange(0, self._y_max, padding=0)

    def show_model(self, change: ModelChange) -> None:
        """A model loaded (:attr:`~app.ui.window.model_loader.ModelLoader.model_changed`): its n_ctx,
        KV cache layout (none for a server), GGUF facts and n_batch."""
        ev = change.loaded
        if change.phase is ModelPhase.LOADED and ev is not None:
            self.set_model(ev.n_ctx, ev.kv_layout if ev.remote is None else None, ev.info, ev.n_batch)

    def set_model(
        self, n_ctx: int, layout: KVCacheLayout | None, info: GGUFInfo | None = None, n_batch: int = 512
    ) -> None:
        """The loaded model's n_ctx (tokens; 0: not reported, a remote server), KV cache layout
        (None: a remote engine, whose cache is the server's: the KV figures say "not reported"),
        GGUF facts and n_batch (for "what bounds the speed": a local model only)."""
        self.n_ctx = n_ctx
        self.layout_kv = layout
        self.remote = layout is None
        self.speed.set_model(info if layout is not None else None, layout, n_batch)
        if layout is None:
            self.kv_bar.set_segments([], 0)
            self.kv_label.setText(f"KV cache bytes: {NOT_REPORTED}")
        self._seen = -1
        self.refresh()

    def _show_stored_kv(self, final: GenerationStats) -> None:
        """The KV cache line of a stored reply: the bytes it used of those allocated when it was written."""
        used_b, alloc = final.kv_used_bytes, final.kv_allocated_bytes
        if alloc <= 0:
            self.kv_bar.set_segments([], 0)
            self.kv_label.setText("KV cache bytes: not stored with this reply")
            return
        self.kv_bar.set_segments(
            [BarSegment(used_b, REUSED_COLOR, f"{format_bytes(used_b)} of the KV cache held its tokens")], alloc
        )
        self.kv_label.setText(
            f"{format_bytes(used_b)} used of {format_bytes(alloc)} allocated when this reply was written"
        )

    def refresh(self, plot: bool = True) -> None:
        """Repaint from :attr:`turn` if it changed since the last call.

        Args:
            plot: also redraw the tok/s plot (the window does it at a lower rate: it is the
                costliest widget to repaint).
        """
        t = self.turn
        if t.version == self._seen and not (plot and self._plot_stale):
            return
        self._plot_stale = not plot
        self._seen = t.version
        final = t.final
        # Phase line
        if t.phase is TurnPhase.IDLE:
            self.phase.setText("No reply yet")
        elif t.phase is TurnPhase.PREFILL:
            pct = 100 * t.prefill_done / t.prefill_total if t.prefill_total else 0
            self.phase.setText(
                f"● Prefill — evaluating the prompt: {fmt.tokens(t.prefill_done)} / {fmt.tokens(t.prefill_total)} "
                f"tokens ({pct:.0f}%)"
            )
        elif t.phase is TurnPhase.DECODE and t.rebuilding:
            self.phase.setText(
                f"● Rebuilding the context: {fmt.tokens(t.rebuild_done)} / {fmt.tokens(t.rebuild_total)} tokens"
            )
        elif t.phase is TurnPhase.DECODE:
            self.phase.setText(f"● Decoding — one token per step ({fmt.tokens(t.generated)} so far)")
        elif t.phase is TurnPhase.FAILED or final is None:
            self.phase.setText("✕ Not finished — the reason is in the message above the chat")
        elif t.stored:
            by = f" · written by {Path(t.made_by).name}" if t.made_by else ""
            self.phase.setText(f"✓ Last reply in this chat (stored) — {StopReason(final.stop_reason).label}{by}")
        else:
            self.phase.setText(f"✓ Done — {StopReason(final.stop_reason).label}")
        self.phase.setProperty("phase", t.phase.value)
        self.phase.style().unpolish(self.phase)
        self.phase.style().polish(self.phase)

        ttft = t.ttft_s
        v, s = self.tiles["ttft"]
        v.setText(fmt.ttft(ttft) if ttft is not None else "—")
        s.setText("prefill + first sample")
        v, s = self.tiles["prefill"]
        pr = t.prefill_tok_s
        v.setText(fmt.tok_s(pr) if pr else "—")
        ev = final.evaluated_tokens if final else t.prefill_done
        secs = final.prefill_s if final else t.prefill_elapsed_s
        if final is not None and not final.reported("prefill_s"):
            s.setText(NOT_REPORTED)
        else:
            s.setText(f"{fmt.tokens(ev)} tokens in {fmt.seconds(secs)}")  # the prompt's; rebuilds are under Context
        v, s = self.tiles["decode"]
        dr = t.decode_tok_s
        v.setText(fmt.tok_s(dr) if dr else "—")
        s.setText("(n − 1) / (t_last − t_first)")
        v, s = self.tiles["tokens"]
        prompt_n = t.prompt.prompt_tokens if t.prompt else (final.prompt_tokens if final else 0)
        if final is not None:  # the server's count when it reports one (a remote engine's prompt is known at the end)
            prompt_n = final.prompt_tokens or prompt_n
        v.setText(f"{fmt.tokens(prompt_n)} → {fmt.tokens(t.generated)}")
        s.setText("prompt → generated")
        if final is not None and final.unreported:
            missing = [name for name in ("prompt_tokens", "generated_tokens") if not final.reported(name)]
            if missing:
                s.setText(f"{' and '.join(m.split('_')[0] for m in missing)}: {NOT_REPORTED}")

        cached, evaluated, generated_in_ctx = t.context_parts()
        used = t.n_past
        # A stored reply is shown against the n_ctx it ran with (the loaded model's may differ).
        n_ctx = final.n_ctx if t.stored and final is not None and final.n_ctx > 0 else self.n_ctx
        self.ctx_bar.set_parts(cached, evaluated, generated_in_ctx, n_ctx)
        pct = 100 * used / n_ctx if n_ctx else 0
        extra = ""
        dropped = t.dropped_messages
        if dropped:
            extra = f" · {dropped} oldest message(s) left out to fit"
            before = t.prompt.dropped_messages if t.prompt else 0
            if t.shifts and before:
                extra += f" ({before} before the reply, {dropped - before} during it)"
        if t.shifts:
            extra += (
                f" · context rebuilt {t.shifts}×: {fmt.tokens(t.rebuilt_tokens)} tokens evaluated in "
                f"{fmt.seconds(t.rebuilt_s)}"
            )
        self.ctx_label.setText(
            f"{fmt.tokens(used)} / {fmt.tokens(n_ctx)} tokens ({pct:.0f}%) · {fmt.tokens(cached)} reused "
            f"from the cache, {fmt.tokens(evaluated)} evaluated{extra}"
        )
        if self.remote and not self.n_ctx:
            self.ctx_label.setText(f"{fmt.tokens(used)} tokens · n_ctx {NOT_REPORTED}")
        lay = self.layout_kv
        if t.stored and final is not None and lay is not None:
            # Its own KV figures, as its context bar shows its own n_ctx: the loaded model's layout may be
            # another model's (after a load, the KV cache holds none of it).
            self._show_stored_kv(final)
        elif lay is not None:
            used_b = lay.used_bytes(used)
            alloc = lay.allocated_bytes
            self.kv_bar.set_segments(
                [BarSegment(used_b, REUSED_COLOR, f"{format_bytes(used_b)} of the KV cache hold tokens")], alloc
            )
            types = f"{lay.type_k}" if lay.type_k == lay.type_v else f"K {lay.type_k}, V {lay.type_v}"
            swa = ""
            if lay.n_swa_layers:
                swa = f" · {lay.n_swa_layers} sliding-window layers (window {lay.n_swa})"
            self.kv_label.setText(
                f"{format_bytes(used_b)} used of {format_bytes(alloc)} allocated · "
                f"{format_bytes(lay.bytes_per_token)} per token ({types}){swa}"
            )
        if plot:
            self._update_plot(t)
        if ttft is not None:
            self.ttft_line.setPos(ttft)
            self.ttft_line.show()
        else:
            self.ttft_line.hide()

        lines = []
        if final is not None:
            seed = f"seed {final.seed}" if final.reported("seed") else f"seed {NOT_REPORTED}"
            lines.append(f"Stop reason: <b>{StopReason(final.stop_reason).label}</b> · {seed}")
            if final.reported("llama_prefill_ms"):
                lines.append(
                    f"llama.cpp's own timers: prefill {final.llama_prefill_ms:,.0f} ms for "
                    f"{fmt.tokens(final.llama_n_prefill)} tokens, decode {final.llama_decode_ms:,.0f} ms for "
                    f"{fmt.tokens(final.llama_n_decode)} tokens"
                )
            else:
                lines.append(f"Prefill time, cached tokens and the server's own timers: {NOT_REPORTED}")
            if not final.reported("n_ctx"):
                lines.append(f"n_ctx: {NOT_REPORTED}")
        self.details.setText("<br>".join(lines))
        # A stored reply may come from another model or machine: only this session's turns are judged.
        self.speed.show_turn(final if t.phase is TurnPhase.DONE and not t.stored else None)
