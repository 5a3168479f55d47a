"""The "Speed vs context" window: choose depths, run or cancel the sweep, see it plotted with the roofline.

A top-level window (it does not take a dock's place). From the top: the plan (depths, n_prompt,
n_gen, repetitions; Run / Cancel), the progress (depth i of n, time left), the loaded model's
settings and the roofline's source, then the plot (:mod:`app.ui.depth_sweep.plot`) beside the runs
kept (checkable to overlay, the loaded model's first; each in the colour it was given, "under load" where
it was measured while other work shared the CPUs), and the table of the run shown with its own
roofline's prediction and the share of it reached; Export writes the runs checked as CSV or JSON.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.depth_sweep.plan import DepthPoint, default_depths, parse_depths
from app.core.depth_sweep.roofline import DepthBound
from app.core.depth_sweep.store import ModelFile, SweepRecord, export_csv, export_json
from app.core.hardware.bandwidth import Bandwidth
from app.core.settings import atomic_write_text
from app.ui.depth_sweep.controller import Plan, SweepController
from app.ui.depth_sweep.plot import RUN_COLORS, Series, SweepPlot, depth_label
from app.ui.panels.speed_bound_view import BandwidthProbe

COLUMNS = (
    "depth",
    "prefill tok/s",
    "decode tok/s",
    "roofline decode tok/s",
    "of the roofline",
    "time to fill to the depth (s)",
)
CURRENT = "current"  # the label of the run being measured in the plot's legend


def _tok_s(mean: float, sd: float) -> str:
    """ "52.1 ± 0.8" (the sd of the repetitions; none with one), "—" when not timed."""
    if not mean:
        return "—"
    return f"{mean:.1f} ± {sd:.1f}" if sd else f"{mean:.1f}"


def _spin(low: int, high: int, value: int, tip: str) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    box.setToolTip(tip)
    return box


class DepthSweepWindow(QWidget):
    """The window (see the module docstring); it shows what ``controller`` runs and keeps.

    Args:
        controller: the run in flight, the runs kept and the bandwidth measurement.
        probe: the bandwidth probe ("Measure" runs it; its answer draws the next run's roofline).
    """

    def __init__(self, controller: SweepController, probe: BandwidthProbe, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setObjectName("depthSweepWindow")
        self.setWindowTitle("Speed vs context length")
        self.controller = c = controller
        self.probe = probe
        self._auto_depths = ""  # the depths text last filled in by default (replaced when the plan changes)
        self._checked: set[str] = set()

        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 10, 12, 10)
        lay.setSpacing(6)
        row = QHBoxLayout()
        row.addWidget(QLabel("Depths"))
        self.depths = QLineEdit()
        self.depths.setToolTip("Tokens already in the KV cache at each measurement, as llama-bench -d: 0, 512, 1k, 2k…")
        row.addWidget(self.depths, 1)
        self.n_prompt = _spin(0, 8192, 128, "Prompt tokens timed at each depth (llama-bench -p; 0: prefill not timed)")
        self.n_gen = _spin(0, 4096, 32, "Tokens decoded one at a time at each depth (llama-bench -n; 0: not timed)")
        self.reps = _spin(1, 20, 2, "Timed runs per depth (llama-bench -r): the figure is their mean ± sd")
        for label, box in (("n_prompt", self.n_prompt), ("n_gen", self.n_gen), ("repetitions", self.reps)):
            row.addWidget(QLabel(label))
            row.addWidget(box)
            box.valueChanged.connect(self._plan_changed)
        self.run_btn = QPushButton("Run")
        self.run_btn.setObjectName("sweepRun")
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setEnabled(False)
        row.addWidget(self.run_btn)
        row.addWidget(self.cancel_btn)
        lay.addLayout(row)

        prog = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(8)
        self.status = QLabel("")
        self.status.setObjectName("detailLabel")
        self.status.setWordWrap(True)
        prog.addWidget(self.progress, 1)
        prog.addWidget(self.status, 3)
        lay.addLayout(prog)
        self.model_line = QLabel("")
        self.model_line.setObjectName("detailLabel")
        self.model_line.setWordWrap(True)
        self.roof_line = QLabel("")
        self.roof_line.setObjectName("detailLabel")
        self.roof_line.setWordWrap(True)
        self.measure_btn = QPushButton("Measure bandwidth")
        roof = QHBoxLayout()
        roof.addWidget(self.roof_line, 1)
        roof.addWidget(self.measure_btn)
        lay.addWidget(self.model_line)
        lay.addLayout(roof)

        split = QSplitter(Qt.Orientation.Horizontal)
        self.plot = SweepPlot()
        split.addWidget(self.plot)
        side = QWidget()
        side_lay = QVBoxLayout(side)
        side_lay.setContentsMargins(0, 0, 0, 0)
        side_lay.addWidget(QLabel("Runs kept (check to overlay)"))
        self.runs = QListWidget()
        self.runs.setObjectName("sweepRuns")
        self.runs.setWordWrap(True)
        side_lay.addWidget(self.runs, 1)
        buttons = QHBoxLayout()
        self.remove_btn = QPushButton("Remove")
        self.csv_btn = QPushButton("Export CSV…")
        self.json_btn = QPushButton("Export JSON…")
        for b in (self.remove_btn, self.csv_btn, self.json_btn):
            buttons.addWidget(b)
        side_lay.addLayout(buttons)
        split.addWidget(side)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 3)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("sweepTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        lay.addWidget(self.table, 2)

        self.run_btn.clicked.connect(self.run)
        self.cancel_btn.clicked.connect(c.cancel)
        self.measure_btn.clicked.connect(self._measure)
        self.remove_btn.clicked.connect(self._remove)
        self.csv_btn.clicked.connect(lambda: self._export("csv"))
        self.json_btn.clicked.connect(lambda: self._export("json"))
        self.runs.itemChanged.connect(self._run_checked)
        c.started.connect(self._started)
        c.progressed.connect(self._progressed)
        c.ended.connect(self._ended)
        c.runs_changed.connect(self._fill_runs)
        probe.measured.connect(self._measured)
        c.engine.model_loaded.connect(lambda _ev: self.show_model())
        self.show_model()

    # ------------------------------------------------------------------ the plan
    def show_model(self) -> None:
        """The loaded model's settings, default depths up to its n_ctx, its runs listed."""
        model = self.controller.engine.model
        if model is None:
            self.model_line.setText("No model is loaded: load one, then run the sweep on it.")
        else:
            s = model.settings
            if model.n_threads == model.n_threads_batch:
                threads = f"{model.n_threads} thread{'' if model.n_threads == 1 else 's'}"
            else:
                threads = f"{model.n_threads}/{model.n_threads_batch} threads (decode/prefill)"
            self.model_line.setText(
                f"{Path(model.info.path).name} · n_ctx {model.n_ctx:,} · {threads} · n_batch {model.n_batch} · "
                f"flash attention {'on' if model.flash_attn_active else 'off'} · KV cache {s.type_k}/{s.type_v}"
            )
        self._plan_changed()
        self._fill_runs()

    def _plan_changed(self) -> None:
        model = self.controller.engine.model
        if model is not None and self.depths.text() in ("", self._auto_depths):
            text = ", ".join(str(d) for d in default_depths(model.n_ctx, self.n_prompt.value(), self.n_gen.value()))
            self._auto_depths = text
            self.depths.setText(text)
        self._redraw()

    def plan(self) -> Plan:
        """The plan as typed (Raises: ValueError naming a depth that is not a number)."""
        return Plan(parse_depths(self.depths.text()), self.n_prompt.value(), self.n_gen.value(), self.reps.value())

    def run(self) -> None:
        """Run the plan typed (the status line says why not, when it cannot run)."""
        try:
            why = self.controller.start(self.plan())
        except ValueError as exc:
            why = str(exc)
        if why:
            self.status.setText(why)

    # ------------------------------------------------------------------ the run
    def _started(self) -> None:
        plan = self.controller.plan
        assert plan is not None
        self.run_btn.setEnabled(False)
        self.cancel_btn.setEnabled(True)
        self.progress.setRange(0, len(plan.depths))
        self.progress.setValue(0)
        self.status.setText(
            f"Depth 1 of {len(plan.depths)}: filling the KV cache and timing… replies wait until it ends."
        )
        self._redraw()

    def _progressed(self) -> None:
        plan, n = self.controller.plan, len(self.controller.points)
        assert plan is not None
        self.progress.setValue(n)
        left = self.controller.time_left
        when = f" · about {left:.0f} s left" if left is not None else ""
        nxt = f"depth {n + 1} of {len(plan.depths)}" if n < len(plan.depths) else "finishing"
        self.status.setText(f"Measured {n} of {len(plan.depths)} depths; {nxt}{when}.")
        self._redraw()

    def _ended(self, text: str) -> None:
        self.run_btn.setEnabled(True)
        self.cancel_btn.setEnabled(False)
        self.status.setText(text)
        latest = self.controller.latest
        if latest is not None:
            self._checked.add(latest.run_id)
        self._fill_runs()

    # ------------------------------------------------------------------ runs, plot, table
    def _ordered_runs(self) -> list[SweepRecord]:
        """The runs kept, the loaded model's first, newest first within each group."""
        model = self.controller.engine.model
        this = ModelFile.of(model.info.path) if model is not None else None
        runs = list(reversed(self.controller.store.runs))
        return [r for r in runs if r.key.model == this] + [r for r in runs if r.key.model != this]

    def _fill_runs(self) -> None:
        self.runs.blockSignals(True)
        self.runs.clear()
        colors = self._colors()
        for r in self._ordered_runs():
            load = r.load_text()
            item = QListWidgetItem(r.label() + (" · under load" if load else ""))
            item.setData(Qt.ItemDataRole.UserRole, r.run_id)
            tip = f"{r.key.model.describe()}\n{r.key.llama_cpp_version} · {r.key.system_info}\n{r.roof_text()}"
            item.setToolTip(
                tip + (f"\n{load[0].upper()}{load[1:]}: its figures are lower and noisier." if load else "")
            )
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if r.run_id in self._checked else Qt.CheckState.Unchecked)
            if r.run_id in colors:  # its curves' colour: the list is the plot's key
                item.setData(Qt.ItemDataRole.DecorationRole, QColor(colors[r.run_id]))
            self.runs.addItem(item)
        self.runs.blockSignals(False)
        self._redraw()

    def _run_checked(self, item: QListWidgetItem) -> None:
        run_id = str(item.data(Qt.ItemDataRole.UserRole))
        if item.checkState() == Qt.CheckState.Checked:
            self._checked.add(run_id)
        else:
            self._checked.discard(run_id)
        QTimer.singleShot(0, self._fill_runs)  # the colours follow the runs checked (not inside the item's own signal)

    def _colors(self) -> dict[str, str]:
        """Run id -> the colour its curves are drawn in: the one it was given when it ran (never changes)."""
        return {r.run_id: RUN_COLORS[r.color_index(len(RUN_COLORS))] for r in self.checked_runs()}

    def checked_runs(self) -> tuple[SweepRecord, ...]:
        """The runs checked in the list, in its order."""
        return tuple(r for r in self._ordered_runs() if r.run_id in self._checked)

    def _roof_text(self, shown: SweepRecord | None) -> str:
        """The roofline's source: the run shown in the table's own, else what a run started now would use."""
        c = self.controller
        model, bw = c.engine.model, c.bandwidth
        if shown is not None:
            load = shown.load_text()
            return (
                "Dashed: each run's own roofline, in its colour (decode ≤ bandwidth ÷ (weights + the KV cache read at "
                "each depth); prefill ≤ llama.cpp's matrix multiply rates measured in the run, or the bandwidth). "
                f"The table's run: {shown.roof_text()}." + (f" It was {load}." if load else "")
            )
        if model is None or model.remote is not None:
            return ""
        if bw is None:
            return "Dashed: the roofline, once this machine's memory bandwidth is measured (about 1.5 s)."
        return (
            f"Dashed: the roofline for {Path(model.info.path).name} as loaded (KV cache {model.settings.type_k}): "
            f"decode ≤ {bw.gb_s:.1f} GB/s ÷ (weights + the KV cache read at each depth); prefill ≤ llama.cpp's matrix "
            "multiply rates on this model's weight types (measured at the start of each run) or the bandwidth."
        )

    def _redraw(self) -> None:
        c = self.controller
        series: list[Series] = []
        shown: tuple[DepthPoint, ...] = ()
        shown_bounds: tuple[DepthBound, ...] = ()
        shown_run: SweepRecord | None = None
        try:
            planned = parse_depths(self.depths.text())
        except ValueError:
            planned = ()
        if c.running and c.plan is not None:
            shown = tuple(c.points)
            depths = tuple(sorted({p.depth for p in shown} | set(c.plan.depths)))
            shown_bounds = c.bounds(depths, c.plan.n_prompt, c.plan.n_gen)
            color = RUN_COLORS[c.color % len(RUN_COLORS)]
            series.append(Series(CURRENT, "this run", color, shown, shown_bounds))
        colors = self._colors()
        for r in self.checked_runs():
            series.append(Series(r.run_id, r.short_label(), colors[r.run_id], r.points, r.roofline, r.under_load))
            if not shown:
                shown, shown_bounds, shown_run = r.points, r.roofline, r
        if not series:  # nothing measured yet: what a run started now would be held against
            shown_bounds = c.bounds(tuple(sorted(set(planned))), self.n_prompt.value(), self.n_gen.value())
            series.append(Series(CURRENT, "the next run's roofline", RUN_COLORS[c.next_color()], (), shown_bounds))
        self.roof_line.setText(self._roof_text(shown_run))
        self.plot.show_runs(series)
        self._fill_table(shown, {b.depth: b for b in shown_bounds})

    def _fill_table(self, points: tuple[DepthPoint, ...], bounds: dict[int, DepthBound]) -> None:
        self.table.setRowCount(len(points))
        for i, p in enumerate(points):
            b = bounds.get(p.depth)
            roof = b.decode_tok_s if b else 0.0
            cells = (
                depth_label(p.depth) if p.depth >= 1024 and p.depth % 512 == 0 else f"{p.depth:,}",
                _tok_s(p.prefill_tok_s, p.prefill_std),
                _tok_s(p.decode_tok_s, p.decode_std),
                f"{roof:.1f}" if roof else "—",
                f"{100 * p.decode_tok_s / roof:.0f}%" if roof and p.decode_tok_s else "—",
                f"{p.fill_s:.2f}",
            )
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)

    # ------------------------------------------------------------------ actions
    def _measure(self) -> None:
        if self.probe.start():
            self.roof_line.setText("Measuring this machine's memory bandwidth…")

    def _measured(self, _bw: Bandwidth) -> None:
        self._redraw()  # the controller has it (the next run's roofline); runs kept keep theirs

    def _remove(self) -> None:
        items = self.runs.selectedItems()
        if not items:
            self.status.setText("Select a run in the list to remove it.")
            return
        why = self.controller.remove(str(items[0].data(Qt.ItemDataRole.UserRole)))
        if why:
            self.status.setText(why)

    def _export(self, fmt: str) -> None:
        runs = self.checked_runs()
        if not runs:
            self.status.setText("Check the runs to export in the list.")
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export runs", f"depth-sweep.{fmt}", f"{fmt.upper()} (*.{fmt})")
        if path:
            self.export_to(Path(path), fmt)

    def export_to(self, path: Path, fmt: str) -> None:
        """Write the runs checked to ``path`` as ``csv`` or ``json`` (the status line says where, or why not)."""
        text = export_csv(self.checked_runs()) if fmt == "csv" else export_json(self.checked_runs())
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            self.status.setText(f"The runs could not be exported: {exc}.")
            return
        self.status.setText(f"Exported {len(self.checked_runs())} runs to {path}.")
