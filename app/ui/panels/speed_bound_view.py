"""The Stats panel's "What bounds the speed" section, and the bandwidth probe behind it.

After a turn, :class:`SpeedBoundView` says what decode read per token and the GB/s that
made at its speed, against this machine's measured memory bandwidth, and the FLOP/s prefill
reached, memory- or compute-bound by its FLOPs per byte against the machine's ridge point
(:mod:`app.core.hardware.speed_bound`). The bandwidth and FLOP/s are measured once per machine
(:mod:`app.core.hardware.bandwidth`: about 1.5 s, on a background thread, the first time a turn has
decoded) and read from the cache folder afterwards; "Measure again" re-runs it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal, SignalInstance
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.core.chat.context import GenerationStats
from app.core.gguf.architecture import Architecture, describe_architecture
from app.core.gguf.gguf_facts import GGUFInfo, format_bytes
from app.core.hardware.bandwidth import Bandwidth, ProbeCancelled, cached_bandwidth, measure_bandwidth, save_bandwidth
from app.core.hardware.memory import KVCacheLayout
from app.core.hardware.speed_bound import speed_bound
from app.paths import default_paths

# The latest measurement in this process: a second window (or a cache folder that cannot be
# written) does not measure again.
_latest: Bandwidth | None = None


class BandwidthProbe(QObject):
    """Runs :func:`~app.core.hardware.bandwidth.measure_bandwidth` on a thread and saves it to the cache.

    Signals:
        measured(Bandwidth): the new :class:`~app.core.hardware.bandwidth.Bandwidth` (on the UI thread).
        failed(str): why it could not measure (no memory for the buffers, a cache write error).
    """

    measured = Signal(Bandwidth)
    failed = Signal(str)

    def __init__(self, cache_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cache_dir = cache_dir
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        """The probe's thread is alive (its answer may still be on its way to the UI thread)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Measure now (False when a measurement is already running)."""
        if self.running:
            return False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="glassbox-bandwidth-probe", daemon=True)
        self._thread.start()
        return True

    def cancel(self) -> None:
        """Stop a running measurement after its current pass (no answer is emitted)."""
        self._stop.set()

    def wait(self, timeout_s: float = 10.0) -> None:
        """Wait for a running measurement (tests, and the window when it closes)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            bw = measure_bandwidth(stop=self._stop)
            global _latest
            _latest = bw
            # A cache that cannot be written: the figure is still good for this session.
            with contextlib.suppress(OSError):
                save_bandwidth(self.cache_dir, bw)
        except ProbeCancelled:
            return
        except (MemoryError, ValueError) as exc:
            self._emit(self.failed, f"The bandwidth probe failed: {exc}")
            return
        self._emit(self.measured, bw)

    @staticmethod
    def _emit(signal: SignalInstance, value: object) -> None:
        with contextlib.suppress(RuntimeError):  # the window closed while the probe ran
            signal.emit(value)


AUTO_PROBE_IDLE_MS = 5000  # idle time after a turn before the automatic bandwidth probe runs


class SpeedBoundView(QWidget):
    """One turn's speed against the machine: decode's GB/s and prefill's FLOP/s, in sentences.

    Args:
        cache_dir: where the bandwidth measurement is kept (default: the app's cache folder).
        auto_probe: measure the bandwidth by itself the first time a decoded turn is shown
            and no measurement is cached.
    """

    def __init__(self, cache_dir: Path | None = None, auto_probe: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speedBoundView")
        self.cache_dir = cache_dir if cache_dir is not None else default_paths().cache_dir
        self.auto_probe = auto_probe
        self.bandwidth: Bandwidth | None = cached_bandwidth(self.cache_dir) or _latest
        self.info: GGUFInfo | None = None
        self.arch: Architecture | None = None
        self.layout_kv: KVCacheLayout | None = None
        self.n_batch = 512
        self.stats: GenerationStats | None = None
        self.probe = BandwidthProbe(self.cache_dir, self)
        self.probe.measured.connect(self._on_measured)
        self.probe.failed.connect(self._on_failed)
        self._probe_error = ""
        self._measuring = False  # from measure() until the probe's answer arrives on this thread
        self._watched: QWidget | None = None
        # The automatic probe waits for the engine to be idle this long after a turn: it reads and
        # writes memory as fast as it can for about 1 s, in this process, and a reply streaming
        # meanwhile (bandwidth-bound decode, the window's own repaints) would pay for it.
        self._idle = QTimer(self)
        self._idle.setSingleShot(True)
        self._idle.setInterval(AUTO_PROBE_IDLE_MS)
        self._idle.timeout.connect(self._auto_measure)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        title = QLabel("What bounds the speed")
        title.setObjectName("sectionTitle")
        lay.addWidget(title)
        self.sentence = QLabel("—")
        self.sentence.setObjectName("boundSentence")
        self.sentence.setWordWrap(True)
        self.sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.sentence.setToolTip(
            "Bytes per decoded token: every weight the step multiplies (the GGUF's tensor sizes; one row of the "
            "embedding table, all of it again when the output head is tied to it; an MoE layer's used experts "
            "only) plus the KV cache view each layer attends over (padded to 256 cells, as llama.cpp does).\n"
            "× tok/s = the memory traffic decode achieved, against this machine's measured copy bandwidth.\n"
            "Prefill FLOPs: 2 per block parameter per token + attention (Q·Kᵀ and weights·V over the positions "
            "each token sees) + the LM head per llama_decode call (Kaplan et al. 2020, Table 1).\n"
            "Prefill bytes: the weights once per llama_decode call + each call's KV cache view. FLOPs per byte "
            "under the machine's ridge point (its FLOP/s ÷ its bytes/s) = memory-bound, above = compute-bound "
            "(the roofline model, Williams et al. 2009)."
        )
        lay.addWidget(self.sentence)
        row = QHBoxLayout()
        self.machine = QLabel("")
        self.machine.setObjectName("detailLabel")
        self.machine.setWordWrap(True)
        row.addWidget(self.machine, 1)
        self.measure_btn = QPushButton("Measure again")
        self.measure_btn.setObjectName("linkButton")
        self.measure_btn.setToolTip(
            "Copy a 256 MiB buffer on every CPU for about a second, then multiply 1024×1024 float32 matrices "
            "for about 0.3 s; keep the best pass of each."
        )
        self.measure_btn.clicked.connect(self.measure)
        row.addWidget(self.measure_btn, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(row)
        self._show()

    def showEvent(self, e: QShowEvent) -> None:
        win = self.window()
        if win is not self and win is not self._watched:
            win.installEventFilter(self)  # a closing window stops a probe in flight
            self._watched = win
        super().showEvent(e)

    def eventFilter(self, obj: QObject, e: QEvent) -> bool:
        if obj is self._watched and e.type() == QEvent.Type.Close:
            self._idle.stop()  # no automatic probe after the window closed
            self.probe.cancel()
            self._measuring = False
        return False

    @property
    def measuring(self) -> bool:
        """A bandwidth measurement was started and its answer has not arrived yet."""
        return self._measuring

    # --------------------------------------------------------------------------- inputs
    def set_model(self, info: GGUFInfo | None, layout: KVCacheLayout | None, n_batch: int = 512) -> None:
        """The loaded model (None: none) and its KV cache layout."""
        self.info = info
        self.layout_kv = layout
        self.n_batch = n_batch
        try:
            self.arch = describe_architecture(info) if info is not None else None
        except ValueError:
            self.arch = None
        self.stats = None
        self._show()

    def show_turn(self, stats: GenerationStats | None) -> None:
        """Show ``stats`` (a finished turn; None: nothing yet). Starts the first probe when needed."""
        if stats is self.stats:
            return
        self.stats = stats
        if stats is None:  # a turn is running (or none yet): no automatic probe now
            self._idle.stop()
        elif self.auto_probe and self.bandwidth is None and stats.generated_tokens > 1 and not self._probe_error:
            self._idle.start()  # measured once the engine has been idle for AUTO_PROBE_IDLE_MS
        self._show()

    def _auto_measure(self) -> None:
        if self.stats is not None and self.bandwidth is None and not self._measuring and self.isVisible():
            self.measure()

    def measure(self) -> None:
        """Measure the bandwidth now (on a background thread)."""
        self._probe_error = ""
        self._measuring = self.probe.start() or self._measuring
        self._show()

    # --------------------------------------------------------------------------- view
    def _on_measured(self, bw: Bandwidth) -> None:
        self._measuring = False
        self.bandwidth = bw
        self._show()

    def _on_failed(self, message: str) -> None:
        self._measuring = False
        self._probe_error = message
        self._show()

    def _show(self) -> None:
        bw = self.bandwidth
        if self._measuring:
            self.machine.setText("Measuring this machine's memory bandwidth and FLOP/s (about 1.5 s)…")
        elif self._probe_error:
            self.machine.setText(self._probe_error)
        elif bw is not None:
            when = time.strftime("%Y-%m-%d", time.localtime(bw.measured_at))
            self.machine.setText(
                f"This machine: {bw.gb_s:.1f} GB/s (copy of {format_bytes(bw.buffer_bytes)} on {bw.threads} "
                f"thread{'s' if bw.threads != 1 else ''}, best of {bw.passes}, read + written) and "
                f"{bw.flop_s / 1e9:.0f} GFLOP/s (float32 matrix product): ridge point "
                f"{bw.ridge_flop_per_byte:.1f} FLOPs per byte; {when}."
            )
        else:
            self.machine.setText("This machine's memory bandwidth and FLOP/s are measured after the first reply.")
        self.measure_btn.setText("Measure again" if bw is not None else "Measure now")
        self.measure_btn.setEnabled(not self._measuring)
        s = self.stats
        if s is None or self.info is None or self.arch is None or self.layout_kv is None:
            self.sentence.setText("—")
            return
        sb = speed_bound(
            self.info, self.arch, self.layout_kv, s, bw.bytes_s if bw else 0.0, self.n_batch, bw.flop_s if bw else 0.0
        )
        lines = [x for x in (sb.decode_sentence(), sb.prefill_sentence()) if x]
        self.sentence.setText("\n".join(lines) if lines else "Too few tokens this turn to say.")
