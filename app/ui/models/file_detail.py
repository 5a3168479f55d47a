"""The Hub tab's panel under the files: the chosen file's verdict, fit bar and memory breakdown."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from app.core.hardware.fit import FitReport
from app.core.models.hub import HubFile
from app.ui.common import palette
from app.ui.common.fmt import format_bytes
from app.ui.models.hub_models import VERDICT_SENTENCE, FitState
from app.ui.models.widgets import VERDICT_COLORS, FitBar

# What the verdict line says while a file has no report, by its Fit cell's text.
NO_REPORT_SENTENCE = {
    FitState.CHECKING.value: "Judging whether it fits: reading the model's header from the Hub (a few MiB)…",
    FitState.NEEDS_ACCESS.value: "Fit unknown: the header cannot be read without access (see above).",
    "projector": "A multimodal projector (image input), not a model to chat with.",
}


class FileDetail(QFrame):
    """One file's title, verdict sentence, :class:`FitBar` and breakdown (weights + KV cache + compute)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fileDetail")
        fd = QVBoxLayout(self)
        fd.setContentsMargins(12, 10, 12, 10)
        fd.setSpacing(5)
        self.detail_title = QLabel("")
        self.detail_title.setObjectName("detailTitle")
        fd.addWidget(self.detail_title)
        self.verdict_label = QLabel("")
        self.verdict_label.setObjectName("verdictLabel")
        self.verdict_label.setWordWrap(True)
        fd.addWidget(self.verdict_label)
        self.fit_bar = FitBar()
        fd.addWidget(self.fit_bar)
        self.breakdown_label = QLabel("")
        self.breakdown_label.setObjectName("breakdownLabel")
        self.breakdown_label.setWordWrap(True)
        self.breakdown_label.setTextFormat(Qt.TextFormat.RichText)
        fd.addWidget(self.breakdown_label)

    def show_file(self, f: HubFile, report: FitReport | None, recommended: bool, verdict_text: str) -> None:
        """Show ``f`` with its fit ``report`` (None: ``verdict_text`` says why there is none)."""
        parts = f" · {len(f.parts)} parts" if len(f.parts) > 1 else ""
        rec = " · ★ recommended" if recommended else ""
        self.detail_title.setText(f"{f.name} · {f.quant or 'unknown quant'} · {format_bytes(f.size)}{parts}{rec}")
        if report is None:
            sentence = NO_REPORT_SENTENCE.get(verdict_text, "Fit unknown.")
            if verdict_text == "incomplete":
                sentence = "The Hub listing lacks part(s): " + ", ".join(f.missing_parts)
            self.verdict_label.setText(sentence)
            self.verdict_label.setStyleSheet(f"color: {palette.TEXT_DIM};")
            self.fit_bar.set_report(None)
            self.breakdown_label.setText("")
        else:
            color = VERDICT_COLORS[report.verdict].name()
            self.verdict_label.setText(VERDICT_SENTENCE[report.verdict])
            self.verdict_label.setStyleSheet(f"color: {color}; font-weight: 600;")
            self.fit_bar.set_report(report)
            est = report.estimate
            against = f"{format_bytes(report.ram_available)} free RAM"
            if report.vram_available is not None:
                against += f" + {format_bytes(report.vram_available)} free VRAM"
            sw = "<span style='color:{c}'>■</span>"
            self.breakdown_label.setText(
                f"{sw.format(c=palette.ACCENT)} weights {format_bytes(est.weights)} &nbsp;+&nbsp; "
                f"{sw.format(c=palette.AMBER)} KV cache {format_bytes(est.kv_cache)} at n_ctx {report.n_ctx:,} "
                f"&nbsp;+&nbsp; {sw.format(c=palette.PURPLE)} compute {format_bytes(est.compute)} "
                f"&nbsp;=&nbsp; <b>{format_bytes(est.total)}</b> of {against}"
                f" &nbsp;<span style='color:{palette.FAINT}'>(dashed line: 80%)</span>"
            )
        self.show()
