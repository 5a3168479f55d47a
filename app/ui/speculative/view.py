"""The Speculation view (a dock): how the reply shown was speculated.

It follows the reply shown (:class:`~app.ui.chat.shown.ShownChat`, read on the repaint clock: the
turn's final :class:`~app.core.chat.context.GenerationStats` and its ``speculation``):

- the reply's figures: drafter, drafted, accepted, acceptance rate, mean accepted per round, decode tok/s;
- acceptance by draft position (:class:`~app.ui.speculative.position_plot.PositionPlot`);
- why rounds stopped (:class:`~app.core.speculative.stats.RoundEnd` counts, a bar each);
- the engine's time split: drafting, verifying, sampling (a stacked bar);
- the roofline: weight bytes read per token, speculated against the plain loop
  (:class:`~app.ui.speculative.figures.WeightReads`);
- "Measure speed-up" (:mod:`app.ui.speculative.measure`) and its result.

A reply that was not speculated shows what to do instead (:func:`~app.ui.speculative.figures.not_speculated_advice`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.context import GenerationStats
from app.core.speculative.settings import SpeculationSettings
from app.core.speculative.stats import RoundEnd, SpeculationStats
from app.ui.chat.shown import ShownChat
from app.ui.common import palette
from app.ui.common.stacked_bar import BarSegment, StackedBar
from app.ui.speculative import figures as F
from app.ui.speculative.position_plot import PositionPlot

TIME_COLOURS = {"draft": palette.PURPLE, "verify": palette.ACCENT, "sample": palette.AMBER}
END_COLOURS = {
    RoundEnd.MISMATCH: palette.RED,
    RoundEnd.P_MIN: palette.AMBER,
    RoundEnd.DRAFT_MAX: palette.GREEN,
    RoundEnd.NO_DRAFT: palette.MUTED,
    RoundEnd.STOPPED: palette.LINK,
    RoundEnd.SKIPPED: palette.FAINT,
}


def _title(text: str) -> QLabel:
    t = QLabel(text)
    t.setObjectName("sectionTitle")
    return t


class SpeculationView(QWidget):
    """The Speculation dock's panel (see the module docstring).

    Args:
        shown: the chat and turn shown (the view reads its turn on the repaint clock).

    Signals:
        measure_requested(): the person pressed "Measure speed-up".
        settings_requested(): the person asked for the speculation settings (the Model panel).
    """

    measure_requested = Signal()
    settings_requested = Signal()

    def __init__(self, shown: ShownChat, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speculationView")
        self.shown = shown
        self.settings: SpeculationSettings | None = None  # the loaded model's (None: no model)
        self.plain_weight_bytes = 0  # the loaded model's weight bytes per plain decode step
        self.bandwidth_b_s = 0.0  # the machine's measured memory bandwidth, bytes/s (0: not measured)
        self.spec: SpeculationStats | None = None  # the reply shown's
        self._seen = -1
        self._busy = False  # a measurement runs
        self._measured_of: int | None = None  # the serial of the turn the measurement shown is of
        self._measure_words = ""  # the last measurement's words (shown with the reply it measured)
        self._before = 0  # the reply's tokens before the request its figures are of (Continue, a branch)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        lay.setSpacing(6)
        # A short, wide dock (a tab beside Tokens): the figures and the measurement in a row on top, the
        # charts in columns below.
        top = QHBoxLayout()
        top.setSpacing(12)
        self.headline = QLabel("")
        self.headline.setObjectName("speculationHeadline")
        self.headline.setWordWrap(True)
        self.headline.setTextFormat(Qt.TextFormat.RichText)
        top.addWidget(self.headline, 1)
        self.measure_btn = QPushButton("Measure speed-up")
        self.measure_btn.setObjectName("measureSpeedupButton")
        self.measure_btn.setToolTip(
            "Regenerate this reply's prompt greedily (temperature 0) twice, without and with speculation, and "
            "compare the decode speeds. A measurement: your reply and your chat stay as they are."
        )
        self.measure_btn.clicked.connect(self.measure_requested)
        top.addWidget(self.measure_btn, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(top)
        self.measure_text = QLabel("")
        self.measure_text.setObjectName("speedupResult")
        self.measure_text.setWordWrap(True)
        self.measure_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.measure_text.hide()
        lay.addWidget(self.measure_text)
        self.advice = QLabel("")
        self.advice.setObjectName("speculationAdvice")
        self.advice.setWordWrap(True)
        self.advice.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.advice)
        self.settings_btn = QPushButton("Speculation settings…")
        self.settings_btn.setObjectName("speculationSettingsButton")
        self.settings_btn.setToolTip("The Model panel's Speculative decoding settings")
        self.settings_btn.clicked.connect(self.settings_requested)
        lay.addWidget(self.settings_btn, 0, Qt.AlignmentFlag.AlignLeft)
        self.filler = QWidget()  # takes the height while the charts are hidden, so the words stay on top
        self.filler.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        lay.addWidget(self.filler, 1)

        self.details = QFrame()
        mid = QHBoxLayout(self.details)
        mid.setContentsMargins(0, 0, 0, 0)
        mid.setSpacing(14)
        self.positions = PositionPlot()
        self.positions.setMinimumWidth(200)
        mid.addWidget(self.positions, 3, Qt.AlignmentFlag.AlignTop)  # its axis in view, not below the dock's edge

        ends = QVBoxLayout()
        ends.setSpacing(3)
        ends.addWidget(_title("Why rounds stopped"))
        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(2)
        self.end_bars: dict[RoundEnd, QProgressBar] = {}
        self.end_counts: dict[RoundEnd, QLabel] = {}
        for row, end in enumerate(RoundEnd):
            name = QLabel(F.ROUND_END_WORDS[end])
            name.setObjectName("detailLabel")
            name.setToolTip(F.ROUND_END_MEANING[end])
            bar = QProgressBar()
            bar.setObjectName("roundEndBar")
            bar.setRange(0, 1000)
            bar.setTextVisible(False)
            bar.setFixedHeight(8)
            bar.setMinimumWidth(40)
            bar.setStyleSheet(
                f"QProgressBar {{ background: {palette.TRACK}; border: none; border-radius: 3px; }}"
                f"QProgressBar::chunk {{ background: {END_COLOURS[end]}; border-radius: 3px; }}"
            )
            count = QLabel("0")
            count.setObjectName("detailLabel")
            count.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            grid.addWidget(name, row, 0)
            grid.addWidget(bar, row, 1)
            grid.addWidget(count, row, 2)
            self.end_bars[end] = bar
            self.end_counts[end] = count
        grid.setColumnStretch(1, 1)
        ends.addLayout(grid)
        ends.addStretch(1)
        mid.addLayout(ends, 2)
        right = QVBoxLayout()
        right.setSpacing(3)
        right.addWidget(_title("Engine time"))
        self.time_bar = StackedBar(14)
        right.addWidget(self.time_bar)
        self.time_text = QLabel("")
        self.time_text.setObjectName("detailLabel")
        self.time_text.setWordWrap(True)
        self.time_text.setTextFormat(Qt.TextFormat.RichText)
        right.addWidget(self.time_text)
        right.addWidget(_title("What a round costs"))
        self.cost = QLabel("")
        self.cost.setObjectName("detailLabel")
        self.cost.setWordWrap(True)
        self.cost.setToolTip(F.COST_EXPLAINED)
        right.addWidget(self.cost)
        right.addWidget(_title("Weights read per token"))
        self.roofline = QLabel("")
        self.roofline.setObjectName("detailLabel")
        self.roofline.setWordWrap(True)
        right.addWidget(self.roofline)
        right.addStretch(1)
        mid.addLayout(right, 2)
        lay.addWidget(self.details, 1)
        self._show(None, None)

    # ------------------------------------------------------------------ inputs
    def set_model(self, settings: SpeculationSettings | None, plain_weight_bytes: int) -> None:
        """The loaded model's speculation as applied (None: no model) and its weight bytes per decode step."""
        self.settings = settings
        self.plain_weight_bytes = plain_weight_bytes
        self._seen = -1

    def set_bandwidth(self, bytes_s: float) -> None:
        """The machine's measured memory bandwidth, bytes/s (0: not measured)."""
        self.bandwidth_b_s = bytes_s
        self._seen = -1

    def show_measurement(self, text: str, busy: bool) -> None:
        """The speed-up measurement's state in words; ``busy``: it is running (the button waits)."""
        if (busy and not self._busy) or self._measured_of is None:
            # the reply measured, fixed when the measurement starts: its result goes with it, whatever
            # reply is shown when the result comes (the review of issue 22 saw it on a reply sent meanwhile)
            self._measured_of = self.shown.turn.serial
        self._busy = busy
        self._measure_words = text
        self._show_measure()
        self.measure_btn.setEnabled(not busy)

    def _show_measure(self) -> None:
        """The measurement's words, only while the reply measured is the one shown."""
        text = self._measure_words if self._measured_of == self.shown.turn.serial else ""
        self.measure_text.setText(text)
        self.measure_text.setVisible(bool(text))
        self.measure_text.setToolTip(F.Speedup.PARTED if "part at character" in text else "")

    # ------------------------------------------------------------------ the clock
    def refresh(self) -> None:
        """Show the reply shown's figures; nothing to do when its turn has not changed."""
        turn = self.shown.turn
        if turn.version == self._seen:
            return
        self._seen = turn.version
        self._show_measure()
        stats = turn.final
        # The reply's steps before the request the figures are of (a continued reply's earlier part, a branch's
        # kept tokens): the engine counts one request; earlier parts' counts are not kept with the reply.
        alts = turn.alternatives
        self._before = max(0, alts.n_steps - stats.generated_tokens) if alts is not None and stats is not None else 0
        self._show(stats, stats.speculation if stats is not None else None)

    def _show(self, stats: GenerationStats | None, spec: SpeculationStats | None) -> None:
        self.spec = spec
        self.details.setVisible(spec is not None)
        for w in (self.advice, self.settings_btn, self.filler):
            w.setVisible(spec is None)
        if spec is None or stats is None:
            self.headline.setText("<b>Speculative decoding</b>")
            writing = self.shown.state.writing
            if stats is None and writing and self.settings is not None and self.settings.enabled:
                self.advice.setText(F.WRITING_SPECULATED)  # the review of issue 22 read "not speculated" here
            else:
                self.advice.setText(
                    F.not_speculated_advice(self.settings)
                    if stats is not None or self.settings is None
                    else "No reply yet. " + F.not_speculated_advice(self.settings)
                )
            self.settings_btn.setVisible(not (stats is None and writing))
            ok = stats is not None and self.settings is not None and self.settings.enabled
            self.measure_btn.setEnabled(ok and not self._busy)
            return
        self.measure_btn.setEnabled(not self._busy)
        self.headline.setText(
            f"<b>{spec.drafter.label.capitalize()}</b>, draft_max {spec.draft_max}: "
            f"drafted <b>{spec.drafted:,}</b> · accepted <b>{spec.accepted:,}</b> "
            f"(<b>{F.pct(spec.acceptance_rate)}</b>) · {spec.rounds:,} rounds, "
            f"<b>{spec.mean_accepted_per_round:.2f}</b> accepted per round · "
            f"decode <b>{stats.decode_tok_s:,.1f} tok/s</b> over {stats.generated_tokens:,} tokens"
            + (F.last_request_words(self._before) if self._before else "")
        )
        self.positions.show_bars(F.position_bars(spec))
        for end, words, n, share in F.round_end_rows(spec):
            self.end_bars[end].setValue(round(1000 * share))
            self.end_counts[end].setText(f"{n:,}")
            self.end_bars[end].setToolTip(f"{words}: {n:,} rounds ({F.pct(share)}): {F.ROUND_END_MEANING[end]}")
        parts = F.time_split(spec)
        total = sum(s for _n, s in parts)
        self.time_bar.set_segments(
            [BarSegment(s, TIME_COLOURS[n], f"{n}: {s * 1000:,.1f} ms") for n, s in parts], total or 1.0
        )
        self.time_text.setText(
            "<br>".join(
                f"<span style='color:{TIME_COLOURS[n]}'>■</span> {n} {s * 1000:,.0f} ms"
                f" ({F.pct(s / total) if total else '–'})"
                for n, s in parts
            )
        )
        self.cost.setText(F.cost_sentence(spec) or "Not measured for this reply.")
        reads = F.WeightReads(
            float(self.plain_weight_bytes),
            spec.weight_bytes_per_token,
            self.bandwidth_b_s,
            spec.draft_weight_bytes_per_token,
        )
        self.roofline.setText(reads.sentence())
        self.roofline.setToolTip(F.WeightReads.EXPLAINED)
