"""Sampler panel: sliders with exact fields for every llama.cpp sampler Glassbox runs, presets,
logit bias, seed and stop strings. What the settings do to a token is the Funnel panel's job
(:mod:`app.ui.panels.funnel`), computed by llama.cpp's own samplers in the engine."""

from __future__ import annotations

from dataclasses import replace

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
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.sampling import (
    DEFAULTS,
    GROUPS,
    PARAMS,
    PRESETS,
    SEED_MAX,
    ParamSpec,
    SamplerSettings,
    format_logit_bias,
    matching_preset,
    parse_logit_bias,
    with_preset,
)
from app.ui.common import palette
from app.ui.common.wheel_guard import guard_wheel
from app.ui.panels.funnel import visible_token

__all__ = ["ParamRow", "SamplerPanel", "visible_token"]


class ParamRow:
    """A slider and an exact numeric field kept in step, for one :class:`ParamSpec`."""

    def __init__(self, spec: ParamSpec, on_change) -> None:
        self.spec = spec
        self._scale = 10**spec.decimals
        self.label = QLabel(spec.label)
        self.label.setObjectName("paramName")
        self.label.setToolTip(spec.help)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(int(spec.minimum * self._scale), int(spec.maximum * self._scale))
        self.slider.setSingleStep(max(1, round(spec.step * self._scale)))
        self.slider.setToolTip(spec.help)
        self.slider.setMinimumWidth(50)
        self.slider.setAccessibleName(f"{spec.label} slider")
        if spec.kind is int:
            self.field: QSpinBox | QDoubleSpinBox = QSpinBox()
            self.field.setRange(int(spec.minimum), int(spec.maximum))
        else:
            self.field = QDoubleSpinBox()
            self.field.setDecimals(spec.decimals)
            self.field.setRange(spec.minimum, spec.maximum)
            self.field.setSingleStep(spec.step)
        self.field.setObjectName(f"field_{spec.name}")
        self.field.setAccessibleName(spec.label)
        self.field.setToolTip(spec.help)
        self.field.setKeyboardTracking(False)
        self.field.setFixedWidth(66)
        self.off = QLabel("off")
        self.off.setObjectName("offBadge")
        self.off.setToolTip(f"{spec.name} = {spec.off_value} turns this sampler off")
        self._on_change = on_change
        self._sync = False
        self.slider.valueChanged.connect(self._from_slider)
        self.field.valueChanged.connect(self._from_field)

    def value(self):
        return self.spec.kind(self.field.value())

    def set_value(self, v) -> None:
        self._sync = True
        try:
            self.field.setValue(v)
            self.slider.setValue(round(float(v) * self._scale))
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
            self.field.setValue(self.spec.kind(iv / self._scale) if self.spec.kind is int else iv / self._scale)
        finally:
            self._sync = False
        self._update_off()
        self._on_change()

    def _from_field(self, v) -> None:
        if self._sync:
            return
        self._sync = True
        try:
            self.slider.setValue(round(float(v) * self._scale))
        finally:
            self._sync = False
        self._update_off()
        self._on_change()


class SamplerPanel(QWidget):
    """Sampler settings; a change applies to the next reply.

    The settings controller owns the sampler settings: this panel shows them
    (:meth:`set_settings`) and reports the person's edits.

    Signals:
        settings_changed(object): the person chose new :class:`SamplerSettings`.
        stop_strings_edited(object): the extra stop strings field changed (the new tuple of strings).
    """

    settings_changed = Signal(object)
    stop_strings_edited = Signal(object)

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
                row = ParamRow(spec, self._changed)
                self.rows[spec.name] = row
                grid.addWidget(row.label, line, 0)
                grid.addWidget(row.slider, line, 1)
                grid.addWidget(row.off, line, 2)
                grid.addWidget(row.field, line, 3)
                line += 1
        grid.setColumnStretch(1, 1)
        lay.addLayout(grid)

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
        group = QButtonGroup(self)
        group.addButton(self.seed_random)
        group.addButton(self.seed_fixed)
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
        finally:
            self._loading = False
        self._settings = s
        self._mark_preset()
        if emit:
            self.settings_changed.emit(s)

    def apply_preset(self, name: str) -> None:
        """Preset ``name``'s values; seed, max_tokens, logit bias and order stay the person's."""
        self.set_settings(with_preset(self._settings, name), emit=True)

    def set_order(self, order) -> None:
        """A new stage order (from the Funnel panel's Order… dialog), applied like a slider move."""
        self.set_settings(replace(self._settings, order=tuple(order)).validated(), emit=True)

    def show_seed_used(self, seed: int) -> None:
        self.seed_used.setText(f"seed used by the last reply: {seed}")

    def _changed(self) -> None:
        if self._loading:
            return
        values = {name: row.value() for name, row in self.rows.items()}
        seed = None if self.seed_random.isChecked() else int(self.seed_field.value())
        self.seed_field.setEnabled(seed is not None)
        s = replace(self._settings, **values, seed=seed)
        try:
            s.validated()
        except ValueError as exc:  # a value the fields allowed but llama.cpp would refuse: change nothing
            self.bias_error.setText(str(exc))
            self.bias_error.setVisible(True)
            return
        if s != self._settings:
            self._settings = s
            self._mark_preset()
            self.settings_changed.emit(s)

    def _bias_edited(self) -> None:
        """Apply the logit bias field; a bad entry shows what is wrong and changes nothing."""
        if self._loading:
            return
        try:
            bias = parse_logit_bias(self.bias_field.text())
        except ValueError as exc:
            self.bias_error.setText(f"{exc}. Nothing was changed.")
            self.bias_error.setVisible(True)
            return
        self.bias_error.setVisible(False)
        s = replace(self._settings, logit_bias=bias)
        if s != self._settings:
            self._settings = s
            self._mark_preset()
            self.settings_changed.emit(s)

    def _mark_preset(self) -> None:
        name = matching_preset(self._settings)
        for n, b in self.preset_buttons.items():
            b.setChecked(n == name)
