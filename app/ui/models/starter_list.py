"""The first-run page's list of small starter models, each with a Download button."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.hardware.fit import SMALL_MODEL_RUNTIME_BYTES, SystemMemory, size_verdict, system_memory
from app.core.models.downloads import DownloadStatus
from app.core.models.hub import STARTER_MODELS, StarterModel
from app.ui.common.fmt import format_bytes
from app.ui.models.download_actions import starter_button
from app.ui.models.widgets import VERDICT_COLORS


class StarterList(QFrame):
    """Small instruct models to start with (first run), each with its size, a rough fit verdict
    for this machine (:func:`~app.core.hardware.fit.size_verdict`: no network is used before the person
    acts) and a Download button.

    Args:
        memory: this machine's memory (default: :func:`~app.core.hardware.fit.system_memory`).

    Signals:
        download_requested(StarterModel): the starter model to download.
    """

    download_requested = Signal(StarterModel)

    def __init__(self, parent: QWidget | None = None, memory: SystemMemory | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("starterList")
        mem = memory or system_memory()
        self.verdicts: dict[str, QLabel] = {}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        self.buttons: dict[str, QPushButton] = {}
        for i, s in enumerate(STARTER_MODELS):
            row = QFrame()
            row.setObjectName("starterRow")
            row.setProperty("first", i == 0)
            h = QHBoxLayout(row)
            h.setContentsMargins(14, 8, 10, 8)
            text = QVBoxLayout()
            text.setSpacing(1)
            title, _, blurb = s.label.partition(": ")
            name = QLabel(title)
            name.setObjectName("starterName")
            sub = QLabel(f"{blurb} · {s.repo_id}" if blurb else s.repo_id)
            sub.setObjectName("starterSub")
            text.addWidget(name)
            text.addWidget(sub)
            h.addLayout(text, 1)
            size = QLabel(format_bytes(s.approx_size))
            size.setObjectName("starterSize")
            size.setToolTip(f"{s.filename}, about {s.approx_size / 1e6:,.0f} MB (the Hub lists the exact size)")
            h.addWidget(size)
            verdict, need = size_verdict(s.approx_size, mem)
            fit = QLabel(verdict.value)
            fit.setObjectName("starterFit")
            fit.setStyleSheet(f"color: {VERDICT_COLORS[verdict].name()};")
            fit.setToolTip(
                f"Needs about {format_bytes(need)}: the file plus {format_bytes(SMALL_MODEL_RUNTIME_BYTES)} for the "
                f"KV cache and compute buffer at n_ctx 4096, against {format_bytes(mem.ram_available)} of free RAM. "
                "The Hub tab reads the file's header for the exact figure."
            )
            fit.setAccessibleName(f"{title}: {verdict.value} on this computer")
            h.addWidget(fit)
            self.verdicts[s.filename] = fit
            b = QPushButton("Download")
            b.setObjectName("starterDownload")
            b.setMinimumWidth(110)
            b.clicked.connect(lambda _=False, st=s: self.download_requested.emit(st))
            h.addWidget(b)
            self.buttons[s.filename] = b
            lay.addWidget(row)

    def set_state(self, starter: StarterModel, text: str, enabled: bool) -> None:
        b = self.buttons.get(starter.filename)
        if b is not None:
            b.setText(text)
            b.setEnabled(enabled)

    def show_status(self, starter: StarterModel, status: DownloadStatus) -> None:
        """Show what ``starter``'s download is doing on its button (queued, its percent, downloaded...)."""
        text, enabled = starter_button(status)
        self.set_state(starter, text, enabled)
