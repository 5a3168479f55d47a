"""Sampler panel: system prompt, sliders with exact fields, presets, seed, and the
next-token distribution the sliders shape."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase, QPainter
from PySide6.QtWidgets import (
    QButtonGroup,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.sampling import (
    DEFAULTS,
    PARAMS,
    PRESETS,
    SEED_MAX,
    ParamSpec,
    SamplerSettings,
    matching_preset,
    preview_distribution,
)
from app.ui.common import palette
from app.ui.common.palette import qcolor
from app.ui.common.wheel_guard import guard_wheel


def visible_token(text: str) -> str:
    """Show whitespace in a token: ␣ for spaces, ⏎ for newlines, → for tabs."""
    return text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "→") or "∅"


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


class CandidateBars(QWidget):
    """The last token's top candidates: raw probability (outline) and after the sampler (fill)."""

    ROWS = 10

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("candidateBars")
        self.rows: list = []
        self.chosen: int | None = None
        self.setMinimumHeight(self.ROWS * 17 + 6)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)

    def set_candidates(self, rows, chosen: int | None) -> None:
        self.rows = list(rows)[: self.ROWS]
        self.chosen = chosen
        self.update()

    def paintEvent(self, _e) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        w = self.width()
        if not self.rows:
            p.setPen(qcolor(palette.MUTED))
            p.drawText(
                self.rect(),
                Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                "Send a message to see the candidates for each next token.",
            )
            p.end()
            return
        name_w = 96
        pct_w = 92
        bar_w = max(20, w - name_w - pct_w - 8)
        row_h = 17
        font = QFont(self._mono)
        font.setPointSizeF(max(7.5, font.pointSizeF() - 1))
        p.setFont(font)
        for i, c in enumerate(self.rows):
            y = 3 + i * row_h
            kept = c.kept
            chosen = c.token_id == self.chosen
            p.setPen(qcolor(palette.TEXT if kept else palette.FAINT))
            label = ("▶ " if chosen else "  ") + visible_token(c.text)
            p.drawText(
                QRectF(0, y, name_w, row_h),
                Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                p.fontMetrics().elidedText(label, Qt.TextElideMode.ElideRight, name_w - 2),
            )
            x0 = name_w
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(qcolor(palette.TRACK))
            p.drawRoundedRect(QRectF(x0, y + 3, bar_w, row_h - 6), 2, 2)
            p.setBrush(qcolor(palette.BAR_MUTED))
            p.drawRoundedRect(QRectF(x0, y + 3, bar_w * min(1.0, c.p_model), row_h - 6), 2, 2)
            if c.p_sampled > 0:
                p.setBrush(qcolor(palette.GREEN if chosen else palette.ACCENT))
                p.drawRoundedRect(QRectF(x0, y + 6, bar_w * min(1.0, c.p_sampled), row_h - 12), 2, 2)
            p.setPen(qcolor(palette.TEXT_SOFT if kept else palette.FAINT))
            txt = f"{100 * c.p_model:5.1f}→{100 * c.p_sampled:5.1f}%"
            p.drawText(
                QRectF(x0 + bar_w + 4, y, pct_w, row_h), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, txt
            )
        p.end()


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
        self._candidates: tuple = ()
        self._lse: float | None = None
        self._chosen: int | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(8)

        presets = QHBoxLayout()
        presets.setSpacing(4)
        self.preset_buttons: dict[str, QPushButton] = {}
        for name in PRESETS:
            b = QPushButton(name)
            b.setObjectName("presetButton")
            b.setCheckable(True)
            b.clicked.connect(lambda _=False, n=name: self.apply_preset(n))
            presets.addWidget(b)
            self.preset_buttons[name] = b
        reset = QPushButton("Reset")
        reset.setObjectName("presetButton")
        reset.setToolTip("Back to the defaults")
        reset.clicked.connect(lambda: self.set_settings(replace(DEFAULTS, max_tokens=DEFAULTS.max_tokens), emit=True))
        presets.addWidget(reset)
        lay.addLayout(presets)

        grid = QGridLayout()
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(2)
        self.rows: dict[str, ParamRow] = {}
        for i, spec in enumerate(PARAMS):
            row = ParamRow(spec, self._changed)
            self.rows[spec.name] = row
            grid.addWidget(row.label, i, 0)
            grid.addWidget(row.slider, i, 1)
            grid.addWidget(row.off, i, 2)
            grid.addWidget(row.field, i, 3)
        grid.setColumnStretch(1, 1)
        lay.addLayout(grid)

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

        dist_title = QLabel("Next-token candidates (model → after sampler)")
        dist_title.setObjectName("sectionTitle")
        dist_title.setToolTip(
            "For the last generated token: grey = the model's probability (softmax of the logits), "
            "colour = the chance of being picked with the settings above. Move a slider to preview its effect."
        )
        lay.addWidget(dist_title)
        self.bars = CandidateBars()
        lay.addWidget(self.bars)
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
        finally:
            self._loading = False
        self._settings = s
        self._mark_preset()
        self._update_preview()
        if emit:
            self.settings_changed.emit(s)

    def apply_preset(self, name: str) -> None:
        p = PRESETS[name]
        self.set_settings(replace(p, seed=self._settings.seed, max_tokens=self._settings.max_tokens), emit=True)

    def show_seed_used(self, seed: int) -> None:
        self.seed_used.setText(f"seed used by the last reply: {seed}")

    def set_candidates(self, candidates, lse: float | None, chosen: int | None) -> None:
        self._candidates, self._lse, self._chosen = tuple(candidates), lse, chosen
        self._update_preview()

    def _changed(self) -> None:
        if self._loading:
            return
        values = {name: row.value() for name, row in self.rows.items()}
        seed = None if self.seed_random.isChecked() else int(self.seed_field.value())
        self.seed_field.setEnabled(seed is not None)
        s = SamplerSettings(**values, seed=seed)
        if s != self._settings:
            self._settings = s
            self._mark_preset()
            self._update_preview()
            self.settings_changed.emit(s)

    def _mark_preset(self) -> None:
        name = matching_preset(self._settings)
        for n, b in self.preset_buttons.items():
            b.setChecked(n == name)

    def _update_preview(self) -> None:
        if not self._candidates:
            self.bars.set_candidates([], None)
            return
        rows = preview_distribution(self._candidates, self._settings, self._lse)
        self.bars.set_candidates(rows, self._chosen)
