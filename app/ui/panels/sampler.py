"""Sampler panel: sliders with exact fields for every llama.cpp sampler Glassbox runs, presets,
logit bias, seed and stop strings. What the settings do to a token is the Funnel panel's job
(:mod:`app.ui.funnel.panel`), computed by llama.cpp's own samplers in the engine."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.core.chat.chat_settings import typed_stop_string
from app.core.sampling.bias_vocabulary import vocabulary_fingerprint
from app.core.sampling.params import (
    DEFAULTS,
    GROUPS,
    KNEE_AT,
    PARAMS,
    PRESETS,
    SEED_MAX,
    ParamSpec,
    SamplerSettings,
    SamplerStage,
    format_logit_bias,
    matching_preset,
    parse_logit_bias,
    with_preset,
)
from app.ui.common import palette
from app.ui.common.fine_slider import FineSlider
from app.ui.common.wheel_guard import guard_wheel
from app.ui.funnel.panel import visible_token
from app.ui.window.model_change import ModelChange, ModelPhase

__all__ = ["ParamRow", "SamplerPanel", "visible_token"]

# The fields take any number typed (a value out of range is refused with a message, not clamped or
# dropped silently); the arrows and the wheel stay within the parameter's range.
_TYPED_MIN, _TYPED_MAX = -1e12, 1e12
_TYPED_INT = 2**31 - 1
# The stages llama.cpp's common_sampler_init leaves out with mirostat on (its chain is logit bias,
# temperature, mirostat): every reorderable stage and dynamic temperature.
MIROSTAT_REPLACES = (
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "top_n_sigma",
    "xtc_probability",
    "xtc_threshold",
    "dynatemp_range",
    "dynatemp_exponent",
)
MIROSTAT_NOTE = (
    "Mirostat is on: llama.cpp's chain is logit bias → temperature → mirostat, so this stage does not run "
    "(set mirostat to 0 to use it)."
)


def slider_keys(spec: ParamSpec) -> str:
    """The slider tooltip's line on fine control (:class:`~app.ui.common.fine_slider.FineSlider`)."""
    step = _number(10.0**-spec.decimals, spec.decimals)
    page = _number(FineSlider.PAGE * 10.0**-spec.decimals, spec.decimals)
    return f"Arrow keys: ±{step}; PageUp/PageDown: ±{page}; drag with Shift held: {FineSlider.FINE}x finer."


def _number(v: float, decimals: int) -> str:
    """A value as the person reads it: 30, 0.5, 1e+13."""
    if abs(v) >= 1e9:
        return f"{v:g}"
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if decimals > 0 else text


class _IntField(QSpinBox):
    """A whole-number field whose arrows and wheel stay within [lo, hi] (typing may go beyond: it is refused)."""

    lo = 0.0
    hi = 0.0

    def stepBy(self, steps: int) -> None:
        self.setValue(int(min(self.hi, max(self.lo, self.value() + steps * self.singleStep()))))


class _FloatField(QDoubleSpinBox):
    """A number field whose arrows and wheel stay within [lo, hi] (typing may go beyond: it is refused)."""

    lo = 0.0
    hi = 0.0

    def stepBy(self, steps: int) -> None:
        self.setValue(min(self.hi, max(self.lo, self.value() + steps * self.singleStep())))


class ParamRow:
    """A slider and an exact numeric field kept in step, for one :class:`ParamSpec`.

    A value typed outside the parameter's range changes nothing: ``on_refused`` gets the message
    (naming the value and the range) and the field shows the value before.
    """

    def __init__(
        self,
        spec: ParamSpec,
        on_change: Callable[[], None],
        on_refused: Callable[[ParamRow, str], None] | None = None,
    ) -> None:
        self.spec = spec
        self._scale: int = 10**spec.decimals  # slider steps per unit of a linear parameter
        self.label = QLabel(spec.label)
        self.label.setObjectName("paramName")
        self.label.setToolTip(spec.help)
        self.slider = FineSlider(self.step_by)
        if spec.knee is not None:  # positions 0..TRACK: KNEE_AT of them up to the knee, the rest beyond
            self.slider.setRange(0, self.TRACK)
            self.slider.setSingleStep(max(1, self.position(spec.minimum + spec.step) - self.position(spec.minimum)))
        else:
            self.slider.setRange(int(spec.minimum * self._scale), int(spec.maximum * self._scale))
            self.slider.setSingleStep(max(1, round(spec.step * self._scale)))
        self.slider_help = f"{spec.help}\n{slider_keys(spec)}"
        self.slider.setToolTip(self.slider_help)
        self.slider.setMinimumWidth(50)
        self.slider.setAccessibleName(f"{spec.label} slider")
        field: _IntField | _FloatField
        if spec.kind is int:
            field = _IntField()
            field.setRange(-_TYPED_INT, _TYPED_INT)
        else:
            field = _FloatField()
            field.setDecimals(spec.decimals)
            field.setRange(_TYPED_MIN, _TYPED_MAX)
            field.setSingleStep(spec.step)
        field.lo, field.hi = spec.minimum, spec.maximum
        self.field: QSpinBox | QDoubleSpinBox = field
        self.field.setObjectName(f"field_{spec.name}")
        self.field.setAccessibleName(spec.label)
        self.field.setToolTip(spec.help)
        self.field.setKeyboardTracking(False)
        self.field.setFixedWidth(66)
        self.off = QLabel("off")
        self.off.setObjectName("offBadge")
        self.off.setToolTip(f"{spec.name} = {spec.off_value} turns this sampler off")
        self._on_change = on_change
        self._on_refused = on_refused
        self._good = spec.minimum  # the last value in range (what a refused one goes back to)
        self._sync = False
        self.slider.valueChanged.connect(self._from_slider)
        self.field.valueChanged.connect(self._from_field)

    TRACK = 1000  # slider positions of a kneed parameter

    def value(self) -> float:
        """The field's value as the parameter's kind (an ``int`` for a whole-number parameter)."""
        value: float = self.spec.kind(self.field.value())
        return value

    def position(self, v: float) -> int:
        """The slider position that shows value ``v``."""
        spec = self.spec
        if spec.knee is None:
            return round(float(v) * self._scale)
        lo, knee, hi = spec.minimum, spec.knee, spec.maximum
        if v <= knee:
            share = KNEE_AT * (v - lo) / (knee - lo)
        else:
            share = KNEE_AT + (1 - KNEE_AT) * (v - knee) / (hi - knee)
        return round(min(1.0, max(0.0, share)) * self.TRACK)

    def value_at(self, pos: int) -> float:
        """The value slider position ``pos`` stands for (rounded to the field's decimals)."""
        spec = self.spec
        if spec.knee is None:
            return pos / self._scale
        lo, knee, hi = spec.minimum, spec.knee, spec.maximum
        share = pos / self.TRACK
        if share <= KNEE_AT:
            v = lo + (knee - lo) * share / KNEE_AT
        else:
            v = knee + (hi - knee) * (share - KNEE_AT) / (1 - KNEE_AT)
        return round(v, spec.decimals)

    def fine_step(self) -> float:
        """What an arrow key on the slider moves the value by: one unit of the field's last decimal
        (0.01 for temperature, top_p and min_p; 1 for a whole number)."""
        return 10.0**-self.spec.decimals

    def step_by(self, steps: int) -> None:
        """Move the value by ``steps`` fine steps (:meth:`fine_step`; an arrow key on the slider, or ten for
        PageUp/PageDown), kept within the parameter's range; applied as a typed value is."""
        spec = self.spec
        v = round(float(self.field.value()) + steps * self.fine_step(), spec.decimals)
        self._show(min(spec.maximum, max(spec.minimum, v)))

    def set_value(self, v: float) -> None:
        self._sync = True
        self._good = v
        try:
            self._show(v)
            self.slider.setValue(self.position(v))
        finally:
            self._sync = False
        self._update_off()

    def _update_off(self) -> None:
        off = self.spec.off_value
        is_off = off is not None and abs(float(self.field.value()) - off) < 1e-9
        if self.spec.name == "temperature":
            is_off = False
        self.off.setVisible(is_off)

    def _from_slider(self, iv: int) -> None:
        if self._sync:
            return
        self._sync = True
        try:
            self.field.setValue(self.spec.kind(self.value_at(iv)))
            self._good = self.field.value()
        finally:
            self._sync = False
        self._update_off()
        self._on_change()

    def set_replaced(self, why: str | None) -> None:
        """Grey the row out with ``why`` as its tooltip (a stage mirostat replaces), or bring it back (None)."""
        for w in (self.label, self.field):
            w.setEnabled(why is None)
            w.setToolTip(why or self.spec.help)
        self.slider.setEnabled(why is None)
        self.slider.setToolTip(why or self.slider_help)
        self.off.setEnabled(why is None)

    def _show(self, v: float) -> None:
        """Put ``v`` in the field (a whole-number field takes ``int(v)``, as Qt would truncate it)."""
        if isinstance(self.field, QSpinBox):
            self.field.setValue(int(v))
        else:
            self.field.setValue(v)

    def _from_field(self, v: float) -> None:
        if self._sync:
            return
        spec = self.spec
        if not spec.minimum <= v <= spec.maximum:
            self._sync = True
            try:
                self._show(self._good)
            finally:
                self._sync = False
            if self._on_refused is not None:
                lo, hi = _number(spec.minimum, spec.decimals), _number(spec.maximum, spec.decimals)
                self._on_refused(
                    self,
                    f"{spec.label} {_number(float(v), spec.decimals)} is out of range: it must be between {lo} "
                    f"and {hi}. Nothing was changed.",
                )
            return
        self._good = v
        self._sync = True
        try:
            self.slider.setValue(self.position(v))
        finally:
            self._sync = False
        self._update_off()
        self._on_change()


class SamplerPanel(QWidget):
    """Sampler settings; a change applies to the next reply.

    The settings controller owns the sampler settings: this panel shows them
    (:meth:`set_settings`) and reports the person's edits.

    Signals:
        settings_changed(SamplerSettings): the person chose new settings.
        stop_strings_edited(tuple): the extra stop strings field changed (the new ``tuple[str, ...]``).
    """

    settings_changed = Signal(SamplerSettings)
    stop_strings_edited = Signal(tuple)

    def __init__(self, settings: SamplerSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("samplerPanel")
        self._settings = settings
        self._loading = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(8)

        presets = QGridLayout()  # two rows of three: six buttons do not fit the dock's width in one
        presets.setSpacing(4)
        self.preset_buttons: dict[str, QPushButton] = {}
        for i, name in enumerate(PRESETS):
            b = QPushButton(name)
            b.setObjectName("presetButton")
            b.setCheckable(True)
            b.clicked.connect(lambda _=False, n=name: self.apply_preset(n))
            presets.addWidget(b, i // 3, i % 3)
            self.preset_buttons[name] = b
        reset = QPushButton("Reset")
        reset.setObjectName("presetButton")
        reset.setToolTip("Back to the defaults")
        reset.clicked.connect(lambda: self.set_settings(DEFAULTS, emit=True))
        presets.addWidget(reset, len(PRESETS) // 3, len(PRESETS) % 3)
        lay.addLayout(presets)

        grid = QGridLayout()
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(2)
        self.rows: dict[str, ParamRow] = {}
        line = 0
        for group, title in GROUPS.items():
            header = QLabel(title)
            header.setObjectName("sectionTitle")
            grid.addWidget(header, line, 0, 1, 4)
            line += 1
            for spec in (p for p in PARAMS if p.group == group):
                row = ParamRow(spec, self._changed, self._refused)
                self.rows[spec.name] = row
                grid.addWidget(row.label, line, 0)
                grid.addWidget(row.slider, line, 1)
                grid.addWidget(row.off, line, 2)
                grid.addWidget(row.field, line, 3)
                line += 1
        grid.setColumnStretch(1, 1)
        lay.addLayout(grid)
        self.value_error = QLabel("")
        self.value_error.setObjectName("valueError")
        self.value_error.setWordWrap(True)
        self.value_error.setStyleSheet(f"color: {palette.RED};")
        self.value_error.setVisible(False)
        lay.addWidget(self.value_error)
        self.n_vocab = 0  # the loaded model's vocabulary, tokens (0: none loaded): bounds the bias's ids
        self.vocab_fingerprint = ""  # the loaded model's vocabulary, stored with a bias set now ("" unknown)

        bias_box = QHBoxLayout()
        bias_label = QLabel("logit bias")
        bias_label.setObjectName("paramName")
        bias_label.setToolTip(
            "Add to a token's logit before every other stage: token_id:bias, comma-separated; "
            "token_id:ban bans the token (the Tokens panel shows ids). Empty = off."
        )
        self.bias_field = QLineEdit()
        self.bias_field.setObjectName("biasField")
        self.bias_field.setAccessibleName("logit bias")
        self.bias_field.setPlaceholderText("e.g. 13:ban, 42:+2 (token id:bias)")
        self.bias_field.editingFinished.connect(self._bias_edited)
        bias_box.addWidget(bias_label)
        bias_box.addWidget(self.bias_field, 1)
        lay.addLayout(bias_box)
        self.bias_error = QLabel("")
        self.bias_error.setObjectName("biasError")
        self.bias_error.setWordWrap(True)
        self.bias_error.setStyleSheet(f"color: {palette.RED};")
        self.bias_error.setVisible(False)
        lay.addWidget(self.bias_error)

        seed_box = QHBoxLayout()
        seed_label = QLabel("seed")
        seed_label.setObjectName("paramName")
        self.seed_random = QRadioButton("random")
        self.seed_fixed = QRadioButton("fixed")
        seed_group = QButtonGroup(self)
        seed_group.addButton(self.seed_random)
        seed_group.addButton(self.seed_fixed)
        self.seed_field = QSpinBox()
        self.seed_field.setObjectName("field_seed")
        self.seed_field.setAccessibleName("fixed seed")
        self.seed_field.setRange(0, min(SEED_MAX, 2**31 - 1))
        self.seed_field.setKeyboardTracking(False)
        self.seed_random.toggled.connect(self._changed)
        self.seed_field.valueChanged.connect(self._changed)
        seed_box.addWidget(seed_label)
        seed_box.addWidget(self.seed_random)
        seed_box.addWidget(self.seed_fixed)
        seed_box.addWidget(self.seed_field, 1)
        lay.addLayout(seed_box)
        self.seed_used = QLabel("seed used by the last reply: —")
        self.seed_used.setObjectName("detailLabel")
        self.seed_used.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.seed_used)

        stop_box = QHBoxLayout()
        stop_label = QLabel("stop")
        stop_label.setObjectName("paramName")
        stop_label.setToolTip("Extra stop strings, separated by commas (\\n for a newline)")
        self.stop_field = QLineEdit()
        self.stop_field.setObjectName("stopField")
        self.stop_field.setAccessibleName("Extra stop strings")
        self.stop_field.setPlaceholderText("extra stop strings, comma-separated")
        stop_box.addWidget(stop_label)
        stop_box.addWidget(self.stop_field, 1)
        self.stop_field.textChanged.connect(lambda _t: self.stop_strings_edited.emit(self.stop_strings()))
        lay.addLayout(stop_box)

        lay.addStretch(1)
        self.set_settings(settings)
        guard_wheel(self)

    # ----------------------------------------------------------------------------------------
    def settings(self) -> SamplerSettings:
        return self._settings

    def stop_strings(self) -> tuple[str, ...]:
        """The stop strings typed in the field (``\\n`` stands for a newline)."""
        raw = self.stop_field.text()
        return tuple(s.replace("\\n", "\n") for s in (x.strip() for x in raw.split(",")) if s)

    def set_stop_strings(self, stops: tuple[str, ...]) -> None:
        """Show ``stops`` in the field (a newline as ``\\n``), without emitting :attr:`stop_strings_edited`;
        nothing changes when the field already says them (the person may be typing)."""
        if self.stop_strings() == tuple(stops):
            return
        self.stop_field.blockSignals(True)
        self.stop_field.setText(", ".join(typed_stop_string(x) for x in stops))
        self.stop_field.blockSignals(False)

    def set_vocab_size(self, n_vocab: int) -> None:
        """The loaded model has ``n_vocab`` tokens: a logit bias for an id beyond them is refused."""
        self.n_vocab = n_vocab

    def show_model(self, change: ModelChange) -> None:
        """A model loaded (:attr:`~app.ui.window.model_loader.ModelLoader.model_changed`): its vocabulary
        (the size bounds a bias's ids; the fingerprint goes with a bias set from now on)."""
        if change.phase is ModelPhase.LOADED and change.loaded is not None:
            self.set_vocab_size(change.loaded.info.n_vocab)
            self.vocab_fingerprint = vocabulary_fingerprint(change.loaded.info)

    def _refused(self, row: ParamRow, message: str) -> None:
        """A value typed out of range: say so under the sliders and at the field."""
        self.value_error.setText(message)
        self.value_error.setVisible(True)
        QToolTip.showText(row.field.mapToGlobal(row.field.rect().bottomLeft()), message, row.field)

    def _show_replaced(self, s: SamplerSettings) -> None:
        """Grey out the stages mirostat replaces while it is on."""
        why = MIROSTAT_NOTE if s.mirostat else None
        for name in MIROSTAT_REPLACES:
            self.rows[name].set_replaced(why)

    def set_settings(self, s: SamplerSettings, emit: bool = False) -> None:
        self._loading = True
        try:
            for name, row in self.rows.items():
                row.set_value(getattr(s, name))
            self.seed_random.setChecked(s.seed is None)
            self.seed_fixed.setChecked(s.seed is not None)
            if s.seed is not None:
                self.seed_field.setValue(min(s.seed, self.seed_field.maximum()))
            self.seed_field.setEnabled(s.seed is not None)
            self.bias_field.setText(format_logit_bias(s.logit_bias))
            self.bias_error.setVisible(False)
            self.value_error.setVisible(False)
        finally:
            self._loading = False
        self._settings = s
        self._show_replaced(s)
        self._mark_preset()
        if emit:
            self.settings_changed.emit(s)

    def apply_preset(self, name: str) -> None:
        """Preset ``name``'s values; seed, max_tokens, logit bias and order stay the person's."""
        self.set_settings(with_preset(self._settings, name), emit=True)

    def set_order(self, order: Sequence[SamplerStage]) -> None:
        """A new stage order (from the Funnel panel's Order… dialog), applied like a slider move."""
        self.set_settings(replace(self._settings, order=tuple(order)).validated(), emit=True)

    def show_seed_used(self, seed: int) -> None:
        self.seed_used.setText(f"seed used by the last reply: {seed}")

    def _changed(self) -> None:
        if self._loading:
            return
        values: dict[str, Any] = {name: row.value() for name, row in self.rows.items()}
        seed = None if self.seed_random.isChecked() else int(self.seed_field.value())
        self.seed_field.setEnabled(seed is not None)
        s = replace(self._settings, **values, seed=seed)
        try:
            s.validated()
        except ValueError as exc:  # a value the fields allowed but llama.cpp would refuse: change nothing
            self.bias_error.setText(str(exc))
            self.bias_error.setVisible(True)
            return
        self.value_error.setVisible(False)
        if s != self._settings:
            self._settings = s
            self._show_replaced(s)
            self._mark_preset()
            self.settings_changed.emit(s)

    def _bias_edited(self) -> None:
        """Apply the logit bias field; a bad entry shows what is wrong and changes nothing."""
        if self._loading:
            return
        try:
            bias = parse_logit_bias(self.bias_field.text(), self.n_vocab)
        except ValueError as exc:
            self.bias_error.setText(f"{exc}. Nothing was changed.")
            self.bias_error.setVisible(True)
            return
        self.bias_error.setVisible(False)
        if bias == self._settings.logit_bias:
            return  # the same ids: still tied to the vocabulary they were set for
        s = replace(self._settings, logit_bias=bias, logit_bias_vocab=self.vocab_fingerprint if bias else "")
        if s != self._settings:
            self._settings = s
            self._mark_preset()
            self.settings_changed.emit(s)

    def _mark_preset(self) -> None:
        name = matching_preset(self._settings)
        for n, b in self.preset_buttons.items():
            b.setChecked(n == name)
