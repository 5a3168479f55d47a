"""Funnel panel: one token's candidates through each stage of llama.cpp's sampler chain.

Rows are tokens (the raw model's most likely first, the one the reply drew marked ▶), columns
are the chain's stages in order (the raw model first, the draw last); a cell is the
token's probability after that stage, renormalised over the survivors, or × where the
stage cut it. Below: how many tokens survived each stage, the entropy (bits), and the
mass outside the rows shown. The numbers come from the engine (:mod:`app.engine.funnel`):
this panel only draws them.

The header says which funnel it is: "as drawn" when it ran with the reply's own settings and
order (what llama.cpp did for this token), "what-if" when the sliders differ (what the current
settings would do on this step's logits). The draw column's green bar is what a new draw with
those settings picks (a fresh random number from the reply's seed): it can differ from ▶, what the
reply drew, even as drawn.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.sampling.funnel import Funnel, FunnelStageKind
from app.core.sampling.params import DEFAULT_ORDER, ORDER_NOTE, SamplerSettings, SamplerStage, order_text
from app.ui.common import palette
from app.ui.funnel.legend import (
    AS_DRAWN,
    AS_DRAWN_HELP,
    LEGEND,
    SHORT,
    TOKEN_HELP,
    UNCERTAIN_HELP,
    UNKNOWN,
    WHAT_IF,
    WHAT_IF_HELP,
    approximation,
    approximation_help,
    kept_from,
)
from app.ui.funnel.table import FunnelView, visible_token

_TRUNCATING = (
    SamplerStage.TOP_N_SIGMA,
    SamplerStage.TOP_K,
    SamplerStage.TYPICAL_P,
    SamplerStage.TOP_P,
    SamplerStage.MIN_P,
    SamplerStage.XTC,
)


def order_surprise(s: SamplerSettings) -> str | None:
    """The one line to show when temperature runs after a truncation stage that is on (None otherwise);
    :data:`ORDER_NOTE` says it at length (the line's tooltip)."""
    if s.mirostat or s.is_greedy:
        return None
    t = s.order.index(SamplerStage.TEMPERATURE)
    cut_before = [st.value for st in s.order[:t] if st in _TRUNCATING and s.stage_on(st)]
    if not cut_before:
        return None
    return f"{', '.join(cut_before)} cut before temperature: it only reshapes the survivors."


_CUTTING_KINDS = frozenset(
    {
        FunnelStageKind.TOP_N_SIGMA,
        FunnelStageKind.TOP_K,
        FunnelStageKind.TYPICAL_P,
        FunnelStageKind.TOP_P,
        FunnelStageKind.MIN_P,
        FunnelStageKind.XTC,
    }
)


def funnel_note(f: Funnel) -> str | None:
    """The one line on this funnel: what the output format removed (when its grammar column cut
    candidates: "the output format allowed 2 of 64"), then what temperature could do: nothing when one
    token is left before it (naming the stage that left one), only reshape the survivors when a stage
    before it cut (naming the stages that did cut here); None when neither has anything to say."""
    phrases = [p for p in (_grammar_phrase(f), _temperature_note(f)) if p]
    return "; ".join(phrases) if phrases else None


def _grammar_phrase(f: Funnel) -> str | None:
    """The phrase "the output format allowed n of m" when the grammar column cut candidates (m: those it was given)."""
    for before, st in zip(f.stages, f.stages[1:], strict=False):
        if st.kind is FunnelStageKind.GRAMMAR and st.known and st.survivors < before.survivors:
            return f"the output format allowed {st.survivors} of {before.survivors}"
    return None


def _temperature_note(f: Funnel) -> str | None:
    """What temperature could do in ``f`` (see :func:`funnel_note`)."""
    kinds = [st.kind for st in f.stages]
    if FunnelStageKind.TEMPERATURE not in kinds:
        return None
    t = kinds.index(FunnelStageKind.TEMPERATURE)
    cut: list[str] = []
    for before, st in zip(f.stages[: t - 1], f.stages[1:t], strict=True):
        if not (st.known and before.known):  # the kept candidates cannot tell what it cut
            continue
        if st.kind in _CUTTING_KINDS and st.survivors < before.survivors:
            cut.append(st.kind.value)
            if st.survivors == 1:
                return f"only 1 token survived {st.kind.value}: temperature has nothing to reshape."
    if not cut:
        return None
    return f"{', '.join(cut)} cut before temperature: it only reshapes the survivors."


ZWSP = "\u200b"  # a zero-width space: where a long chain line may wrap


def wrappable(chain: str) -> str:
    """``chain`` (stages joined by →) able to wrap after each arrow in a narrow panel."""
    return chain.replace("→", "→" + ZWSP)


__all__ = [
    "AS_DRAWN",
    "LEGEND",
    "SHORT",
    "WHAT_IF",
    "FunnelPanel",
    "FunnelView",
    "OrderDialog",
    "funnel_note",
    "order_surprise",
    "order_text",
    "visible_token",
    "wrappable",
]


class OrderDialog(QDialog):
    """Reorder llama.cpp's sampler stages (drag, or the buttons); Reset gives llama.cpp's default order."""

    def __init__(self, order: tuple[SamplerStage, ...], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Sampler order")
        lay = QVBoxLayout(self)
        hint = QLabel("The order llama.cpp runs the stages in (logit bias always first, the draw always last).")
        hint.setWordWrap(True)
        lay.addWidget(hint)
        self.list = QListWidget()
        self.list.setObjectName("orderList")
        self.list.setDragDropMode(QListWidget.DragDropMode.InternalMove)
        self._fill(order)
        lay.addWidget(self.list)
        row = QHBoxLayout()
        up, down, reset = QPushButton("Up"), QPushButton("Down"), QPushButton("llama.cpp default")
        up.clicked.connect(lambda: self.move_selected(-1))
        down.clicked.connect(lambda: self.move_selected(1))
        reset.clicked.connect(lambda: self._fill(DEFAULT_ORDER))
        for b in (up, down, reset):
            row.addWidget(b)
        lay.addLayout(row)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)

    def _fill(self, order: tuple[SamplerStage, ...]) -> None:
        self.list.clear()
        for st in order:
            item = QListWidgetItem(st.value)
            item.setData(Qt.ItemDataRole.UserRole, st.value)
            self.list.addItem(item)
        self.list.setCurrentRow(0)

    def move_selected(self, delta: int) -> None:
        """Move the selected stage up (-1) or down (+1)."""
        row = self.list.currentRow()
        to = row + delta
        if row < 0 or not 0 <= to < self.list.count():
            return
        item = self.list.takeItem(row)
        self.list.insertItem(to, item)
        self.list.setCurrentRow(to)

    def order(self) -> tuple[SamplerStage, ...]:
        return tuple(SamplerStage(self.list.item(i).data(Qt.ItemDataRole.UserRole)) for i in range(self.list.count()))


class FunnelPanel(QWidget):
    """The funnel of the selected token, its place in the reply, and the chain's order.

    Signals:
        step_chosen(int): the person picked a token of the reply (0-based), or -1 to follow the newest.
        order_chosen(object): the person chose a new stage order (a tuple of :class:`SamplerStage`).
        reply_settings_requested(): the person asked to see the funnel with the reply's own settings.
        uncertain_requested(): the person asked for the reply's most uncertain token (the step with the
            highest entropy).
    """

    step_chosen = Signal(int)
    order_chosen = Signal(object)  # tuple[SamplerStage, ...]
    reply_settings_requested = Signal()
    uncertain_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("funnelPanel")
        self._settings = SamplerSettings()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        lay.setSpacing(4)
        nav = QHBoxLayout()
        nav.setSpacing(4)
        token_label = QLabel("token")
        token_label.setToolTip(TOKEN_HELP)
        nav.addWidget(token_label)
        self.step_field = QSpinBox()
        self.step_field.setObjectName("funnelStep")
        self.step_field.setAccessibleName("token of the reply")
        self.step_field.setRange(1, 1)
        self.step_field.setKeyboardTracking(False)
        self.step_field.valueChanged.connect(self._step_edited)
        nav.addWidget(self.step_field)
        self.of_label = QLabel("")
        nav.addWidget(self.of_label)
        self.follow = QCheckBox("newest")
        self.follow.setObjectName("funnelFollow")
        self.follow.setToolTip("Follow the newest token while a reply streams (and show the last token when it ends)")
        self.follow.setChecked(True)
        self.follow.toggled.connect(self._follow_toggled)
        nav.addWidget(self.follow)
        self.uncertain = QPushButton("most uncertain")
        self.uncertain.setObjectName("funnelUncertain")
        self.uncertain.setToolTip(UNCERTAIN_HELP)
        self.uncertain.clicked.connect(self.uncertain_requested)
        nav.addWidget(self.uncertain)
        nav.addStretch(1)
        self.order_button = QPushButton("Order…")
        self.order_button.setObjectName("orderButton")
        self.order_button.setToolTip("Change the order of llama.cpp's sampler stages")
        self.order_button.clicked.connect(self._edit_order)
        nav.addWidget(self.order_button)
        lay.addLayout(nav)
        mode = QHBoxLayout()
        mode.setSpacing(4)
        self.mode_label = QLabel()
        self.mode_label.setObjectName("funnelMode")
        self.mode_label.setWordWrap(True)
        mode.addWidget(self.mode_label, 1)
        self.own_button = QPushButton("Use the reply's settings")
        self.own_button.setObjectName("funnelOwnSettings")
        self.own_button.setToolTip(
            "Show this token's funnel with the settings the reply was drawn with (the Sampler panel keeps its own)"
        )
        self.own_button.clicked.connect(self.reply_settings_requested)
        self.own_button.hide()
        mode.addWidget(self.own_button)
        lay.addLayout(mode)
        self.order_label = QLabel()
        self.order_label.setObjectName("funnelOrder")
        self.order_label.setWordWrap(True)
        lay.addWidget(self.order_label)
        self.note = QLabel()
        self.note.setObjectName("funnelNote")
        self.note.setWordWrap(True)
        self.note.setStyleSheet(f"color: {palette.AMBER};")
        self.note.setToolTip(ORDER_NOTE)
        lay.addWidget(self.note)
        self.view = FunnelView()
        lay.addWidget(self.view, 1)  # the room left goes to the table, which grows into it (FunnelView.scale)
        self.status = QLabel("")
        self.status.setObjectName("detailLabel")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self._syncing = False
        self.set_settings(self._settings)
        self.clear_steps()

    # ------------------------------------------------------------------------------ input
    def set_settings(self, s: SamplerSettings) -> None:
        """Show the chain these settings make (the order line and its one-line note)."""
        self._settings = s
        self.order_label.setText(wrappable(order_text(s)))
        self.order_label.setToolTip("llama.cpp's sampler chain as it runs with these settings (Order… changes it)")
        note = order_surprise(s)
        self.note.setText(note or "")
        self.note.setVisible(note is not None)

    def set_steps(self, n_steps: int, step: int, position: int | None = None) -> None:
        """The reply has ``n_steps`` tokens; ``step`` (0-based) is shown. ``position``: that token's
        context position (as Inspect counts; None: not known, a stored reply's), said in the token
        field's tooltip."""
        self._syncing = True
        try:
            self.step_field.setRange(1, max(1, n_steps))
            self.step_field.setValue(step + 1)
        finally:
            self._syncing = False
        self.of_label.setText(f"of {n_steps}")
        where = f"Token {step + 1} of the reply"
        if position is not None:
            where += (
                f" · context position {position} (the prompt's tokens come first). It was drawn from the logits "
                f"at position {position - 1}: Inspect shows this funnel's distribution in its column {position - 1} "
                f"(a column there is what the model predicts after that position's token)"
            )
        self.step_field.setToolTip(f"{where}.\n{TOKEN_HELP}")
        self.step_field.setEnabled(True)
        self.follow.setEnabled(True)
        self.uncertain.setEnabled(True)

    def set_count(self, n_steps: int) -> None:
        """The reply now has ``n_steps`` tokens (it streams on while a token picked earlier is shown)."""
        self._syncing = True
        try:
            self.step_field.setMaximum(max(1, n_steps))
        finally:
            self._syncing = False
        self.of_label.setText(f"of {n_steps}")

    def clear_steps(self) -> None:
        """No reply is shown: the token field and the "newest" box are off and count nothing."""
        self._syncing = True
        try:
            self.step_field.setRange(1, 1)
        finally:
            self._syncing = False
        self.of_label.setText("")
        self.step_field.setEnabled(False)
        self.follow.setEnabled(False)
        self.uncertain.setEnabled(False)

    def show_funnel(self, funnel: Funnel, as_drawn: bool, made_by: str = "") -> None:
        """Draw ``funnel``; ``as_drawn``: it ran with the reply's own settings (else it is a what-if);
        ``made_by``: the model file that wrote a stored reply not recomputed (most often: another model loaded)."""
        self.view.show_funnel(funnel)
        if not funnel.all_known:  # never "as drawn": some columns are not the chain's (a stored reply's top-N)
            mode = approximation(funnel) + ("" if as_drawn else " (what-if settings)")
            self.mode_label.setText(mode)
            self.mode_label.setStyleSheet(f"color: {palette.AMBER};")
            self.mode_label.setToolTip(approximation_help(funnel))
        else:
            self.mode_label.setText(AS_DRAWN if as_drawn else WHAT_IF)
            self.mode_label.setStyleSheet(f"color: {palette.GREEN if as_drawn else palette.AMBER};")
            self.mode_label.setToolTip(AS_DRAWN_HELP if as_drawn else WHAT_IF_HELP)
        self.own_button.setVisible(not as_drawn)
        grammar = any(st.kind == FunnelStageKind.GRAMMAR for st in funnel.stages)  # an output format: first
        self.order_label.setText(wrappable(("grammar→" if grammar else "") + order_text(funnel.settings)))
        note = funnel_note(funnel)
        self.note.setText(note or "")
        self.note.setVisible(note is not None)
        if funnel.recomputed:
            src = f"Recomputed: the model that wrote this reply evaluated it again for all {funnel.n_logits} logits"
        elif funnel.exact:
            src = f"From all {funnel.n_logits} logits"
        elif funnel.all_known:
            src = f"From {kept_from(funnel)}: a cut left only them, so every column is the chain's"
        else:
            src = f"From {kept_from(funnel)}: the model column is exact, {UNKNOWN} marks what they cannot tell"
        if made_by:
            src += f" (written by {Path(made_by).name}: recomputed whole only with that file loaded)"
        if funnel.drawn in funnel.unkept:
            src += f"; the drawn token is not among the {funnel.n_logits} {'stored' if funnel.stored else 'kept'}"
        self.status.setText(f"{src}; {funnel.compute_s * 1000:.1f} ms in the engine.")
        self.status.setToolTip(
            "The newest tokens of the latest reply keep all their logits: the funnel is exact. Older tokens keep "
            "their top 64 logits, a stored reply its top 10 (Settings), with the log-sum-exp: the model column "
            f"is exact; a stage's column shows {UNKNOWN} until a cut provably left only those tokens."
        )

    def set_following(self, on: bool) -> None:
        """Tick (or untick) the "newest" box without asking for a step."""
        self.follow.blockSignals(True)
        self.follow.setChecked(on)
        self.follow.blockSignals(False)

    def show_status(self, text: str) -> None:
        """Say ``text`` on the line under the table (the funnel shown stays)."""
        self.status.setText(text)

    def show_message(self, text: str) -> None:
        self.view.show_funnel(None, text)
        self.status.setText("")
        self.mode_label.setText("")
        self.own_button.hide()

    # ------------------------------------------------------------------------------ output
    def _step_edited(self, value: int) -> None:
        if self._syncing:
            return
        self.follow.setChecked(False)
        self.step_chosen.emit(value - 1)

    def _follow_toggled(self, on: bool) -> None:
        if self._syncing:
            return
        self.step_chosen.emit(-1 if on else self.step_field.value() - 1)

    def _edit_order(self) -> None:
        dlg = OrderDialog(self._settings.order, self)
        if dlg.exec() == QDialog.DialogCode.Accepted:
            self.order_chosen.emit(dlg.order())
