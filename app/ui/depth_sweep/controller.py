"""The depth sweep's run: asks the engine, follows its progress, keeps the finished run in the store.

One owner of "the sweep in flight" on the window's side is the engine client (``EngineClient.sweeping``);
this controller owns the figures of the run shown (:attr:`SweepController.points`), the store of
runs (:class:`~app.core.depth_sweep.store.SweepStore`) and the bandwidth measurement the next run's
roofline uses (:attr:`SweepController.bandwidth`). Each run keeps the roofline of what it was measured
with: the model and load settings loaded when it started, the bandwidth then, and llama.cpp's matrix
multiply rates measured in the run (``DepthSwept.matmul_flop_s``); a later load or measurement leaves
it alone. It also keeps whether it ran under load (:class:`~app.core.hardware.machine_load.LoadWatch`:
the load average and Glassbox's other jobs, sampled at each depth) and its colour, given once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.depth_sweep.plan import DepthPoint, check_plan, time_left_s
from app.core.depth_sweep.roofline import DepthBound, depth_bounds
from app.core.depth_sweep.store import ModelFile, SweepKey, SweepRecord, SweepStore
from app.core.gguf.architecture import describe_architecture
from app.core.hardware.bandwidth import Bandwidth
from app.core.hardware.machine_load import LoadWatch
from app.ui.engine.client import EngineClient, EngineState

N_COLORS = 7  # len(app.ui.depth_sweep.plot.RUN_COLORS): a run's colour index is given modulo this


@dataclass(frozen=True)
class Plan:
    """What the person asked: the depths and the tokens timed at each."""

    depths: tuple[int, ...]
    n_prompt: int
    n_gen: int
    repetitions: int


class SweepController(QObject):
    """Runs one sweep at a time on ``engine`` and keeps each run in ``store``.

    Signals:
        started(): a sweep was sent.
        progressed(): a depth was measured (:attr:`points`, :attr:`time_left`).
        ended(str): the sweep is over; the text says how (finished, stopped, failed and why; the KV cache).
        runs_changed(): the store's runs changed (a run kept, or removed).
    """

    started = Signal()
    progressed = Signal()
    ended = Signal(str)
    runs_changed = Signal()

    def __init__(
        self,
        engine: EngineClient,
        store: SweepStore,
        parent: QObject | None = None,
        *,
        bandwidth: Bandwidth | None = None,
        others: Callable[[], tuple[str, ...]] = tuple,
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.store = store
        self.bandwidth = bandwidth  # this machine's last measurement (None: not measured): the next run's roofline
        self._others = others  # Glassbox's other jobs running now
        self.plan: Plan | None = None
        self.points: list[DepthPoint] = []
        self.roof: tuple[tuple[str, float], ...] = ()  # the run's matmul rates, from its events
        self.color = 0  # the colour index of the run in flight (kept with it)
        self.latest: SweepRecord | None = None  # the run kept last
        self._rid: int | None = None
        self._key: SweepKey | None = None
        self._model: P.ModelLoaded | None = None  # the model as loaded when the run started
        self._bandwidth: Bandwidth | None = None  # the bandwidth when the run started
        self._watch: LoadWatch | None = None
        self._started = 0.0
        engine.sweep_progressed.connect(self._progressed)
        engine.sweep_ended.connect(self._ended)

    def set_bandwidth(self, bw: Bandwidth) -> None:
        """A new bandwidth measurement: the next run's roofline uses it (runs kept keep theirs)."""
        self.bandwidth = bw

    def next_color(self) -> int:
        """The colour index a new run gets: the one after the last run kept's."""
        runs = self.store.runs
        return (runs[-1].color_index(N_COLORS) + 1) % N_COLORS if runs else 0

    def bounds(self, depths: tuple[int, ...], n_prompt: int, n_gen: int) -> tuple[DepthBound, ...]:
        """The roofline at ``depths`` of the run in flight (the model, settings and bandwidth it started with,
        its matmul rates once measured), or, with none in flight, of a run started now; () without a model
        on this machine or a bandwidth measurement."""
        if self.running:
            return _bounds(self._model, self._bandwidth, self.roof, depths, n_prompt, n_gen)
        return _bounds(self.engine.model, self.bandwidth, (), depths, n_prompt, n_gen)

    @property
    def running(self) -> bool:
        return self._rid is not None

    @property
    def time_left(self) -> float | None:
        """Seconds the depths left will take, roughly (:func:`~app.core.depth_sweep.plan.time_left_s`)."""
        p = self.plan
        if p is None:
            return None
        return time_left_s(self.points, p.depths, p.n_prompt, p.n_gen, p.repetitions)

    def why_not(self, plan: Plan) -> str:
        """Why ``plan`` cannot run now ("" when it can)."""
        model = self.engine.model
        if model is None:
            return "Load a model first: the sweep measures the loaded model with its load settings."
        if model.remote is not None:
            return "The engine is a remote server: the sweep measures a model loaded on this machine."
        if self.running:
            return "A sweep is running."
        if self.engine.generating or self.engine.state is not EngineState.READY:
            return "The engine is busy (a reply or a load): run the sweep when it is done."
        return check_plan(plan.depths, plan.n_prompt, plan.n_gen, plan.repetitions, model.n_ctx)

    def start(self, plan: Plan) -> str:
        """Send ``plan`` to the engine; returns why it could not ("" when sent)."""
        why = self.why_not(plan)
        if why:
            return why
        model, ready = self.engine.model, self.engine.ready_info
        assert model is not None
        rid = self.engine.sweep_depth(plan.depths, plan.n_prompt, plan.n_gen, plan.repetitions)
        if rid is None:
            return "The engine is not ready."
        s = model.settings
        self._key = SweepKey(
            model=ModelFile.of(model.info.path),
            llama_cpp_version=ready.llama_cpp_version if ready else "",
            system_info=ready.system_info if ready else "",
            n_ctx=model.n_ctx,
            n_threads=model.n_threads,
            n_threads_batch=model.n_threads_batch,
            n_batch=model.n_batch,
            n_ubatch=0,  # set from the answer (the context's own)
            flash_attn=model.flash_attn_active,
            type_k=str(s.type_k),
            type_v=str(s.type_v),
            n_gpu_layers=s.n_gpu_layers if model.gpu_offload else 0,
        )
        self._rid, self.plan, self.points, self._started = rid, plan, [], time.time()
        self._model, self._bandwidth, self.roof, self.color = model, self.bandwidth, (), self.next_color()
        self._watch = LoadWatch(max(model.n_threads, model.n_threads_batch))
        self._watch.sample(self._others())
        self.started.emit()
        return ""

    def cancel(self) -> None:
        """Stop the sweep (the engine keeps the depths measured; they are stored as a stopped run)."""
        if self.running:
            self.engine.cancel()

    def remove(self, run_id: str) -> str:
        """Forget a kept run; returns why it could not be written ("" when done)."""
        try:
            self.store.remove(run_id)
        except OSError as exc:
            return str(exc)
        finally:
            self.runs_changed.emit()
        return ""

    def _progressed(self, ev: P.DepthMeasured) -> None:
        if ev.request_id != self._rid:
            return
        self.points.append(ev.point)
        self.roof = ev.matmul_flop_s or self.roof
        if self._watch is not None:
            self._watch.sample(self._others())
        self.progressed.emit()

    def _ended(self, ev: P.DepthSwept | P.Failed | None) -> None:
        if self._rid is None or (ev is not None and ev.request_id != self._rid):
            return
        self._rid = None
        if ev is None:
            self.ended.emit("The engine stopped during the sweep; the depths measured are shown but not kept.")
            return
        if isinstance(ev, P.Failed):
            self.ended.emit(f"The sweep failed: {ev.message}")
            return
        self.points = list(ev.points)
        text = self._keep(ev)
        self.ended.emit(text)

    def _keep(self, ev: P.DepthSwept) -> str:
        """Store the finished (or stopped) run; the sentence the window shows."""
        plan, key = self.plan, self._key
        assert plan is not None and key is not None
        n = len(ev.points)
        how = f"Stopped after {n} of {len(plan.depths)} depths" if ev.cancelled else f"Measured {n} depths"
        text = f"{how} in {ev.elapsed_s:.1f} s."
        if ev.kv_reset:
            text += " The chat's KV cache was too large to keep aside: the next reply evaluates the conversation again."
        elif ev.kv_restored_tokens:
            text += f" The chat's KV cache ({ev.kv_restored_tokens:,} tokens) was put back."
        if not ev.points:
            return text
        key = replace(
            key, n_threads=ev.n_threads, n_threads_batch=ev.n_threads_batch, n_batch=ev.n_batch, n_ubatch=ev.n_ubatch
        )
        watch = self._watch or LoadWatch(ev.n_threads)
        watch.sample(self._others())
        self.roof = ev.matmul_flop_s or self.roof
        depths = tuple(p.depth for p in ev.points)
        roofline = _bounds(self._model, self._bandwidth, self.roof, depths, plan.n_prompt, plan.n_gen)
        record = SweepRecord(
            key,
            plan.n_prompt,
            plan.n_gen,
            plan.repetitions,
            ev.points,
            ev.cancelled,
            self._started,
            roofline=roofline,
            bandwidth_bytes_s=self._bandwidth.bytes_s if self._bandwidth else 0.0,
            matmul_flop_s=self.roof,
            color=self.color,
            load_per_cpu=watch.per_cpu,
            others_running=tuple(watch.others),
        )
        if record.under_load:
            text += f" Its figures were {record.load_text()}: compare them with runs measured likewise."
        self.latest = record
        try:
            self.store.add(record)
        except OSError as exc:
            text += f" It could not be kept: {exc}."
        self.runs_changed.emit()
        return text


def _bounds(
    model: P.ModelLoaded | None,
    bw: Bandwidth | None,
    rates: tuple[tuple[str, float], ...],
    depths: tuple[int, ...],
    n_prompt: int,
    n_gen: int,
) -> tuple[DepthBound, ...]:
    """:func:`~app.core.depth_sweep.roofline.depth_bounds` for ``model`` as loaded; () without a model on this
    machine, a bandwidth measurement or depths."""
    if model is None or model.remote is not None or bw is None or not depths:
        return ()
    info = model.info
    arch = describe_architecture(info)
    return depth_bounds(info, arch, model.kv_layout, depths, n_prompt, n_gen, model.n_batch, bw.bytes_s, dict(rates))
