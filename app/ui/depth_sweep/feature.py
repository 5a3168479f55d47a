"""The depth sweep's parts built together, for the composition root: its store, run, window and chat guard.

The window is made the first time it is opened (:meth:`DepthSweep.open`: the Stats panel's button and
View → Speed vs context); the run and the chat guard exist from the start, so a sweep's end is kept
even with the window closed.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from app.core.depth_sweep.store import FILE_NAME, SweepStore
from app.core.hardware.bandwidth import cached_bandwidth
from app.ui.chat.composer import Composer
from app.ui.common.severity import Severity
from app.ui.depth_sweep.chat_guard import SweepChatGuard
from app.ui.depth_sweep.controller import SweepController
from app.ui.depth_sweep.window import DepthSweepWindow
from app.ui.engine.client import EngineClient
from app.ui.jobs.runner import running_jobs
from app.ui.panels.speed_bound_view import BandwidthProbe
from app.ui.window.notices import Notices, NoticeTopic

WINDOW_SIZE = (1120, 700)  # fits a 1366x768 screen with its task bar


class DepthSweep(QObject):
    """Speed against context length in the window.

    Args:
        engine: the engine client (the loaded model, the sweep request).
        composer: the chat's composer (Send is held during a sweep).
        notices: the window's notices (the sweep's line; a damaged runs file).
        data_dir: where the runs are kept (``depth_sweeps.json``).
        cache_dir: where the bandwidth measurement is (the roofline).
        parent: the main window (the sweep window's parent).
    """

    def __init__(
        self,
        engine: EngineClient,
        composer: Composer,
        notices: Notices,
        data_dir: Path,
        cache_dir: Path,
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._parent = parent
        self.store = SweepStore(data_dir / FILE_NAME)
        self.controller = SweepController(
            engine, self.store, self, bandwidth=cached_bandwidth(cache_dir), others=lambda: running_jobs(parent)
        )
        self.probe = BandwidthProbe(cache_dir, self)
        self.probe.measured.connect(self.controller.set_bandwidth)
        self.guard = SweepChatGuard(engine, composer, notices, self.controller.cancel, self.open, self)
        self.window: DepthSweepWindow | None = None
        if self.store.notice:
            notices.show(NoticeTopic.GENERAL, Severity.WARNING, self.store.notice)

    def open(self) -> DepthSweepWindow:
        """Show the Speed vs context window (made on first use) and bring it forward."""
        if self.window is None:
            self.window = DepthSweepWindow(self.controller, self.probe, self._parent)
            self.window.resize(*WINDOW_SIZE)
        self.window.show()
        self.window.raise_()
        self.window.activateWindow()
        return self.window
