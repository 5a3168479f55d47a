"""The depth sweeps kept: one JSON file under the data folder, one record per run, written atomically.

Each run is keyed by what makes its figures what they are (:class:`SweepKey`): the model file
(path, size and modification time: a file replaced under the same name is another model), the
llama.cpp build (llama-cpp-python's version and ``llama_print_system_info``) and the load settings
that change speed (n_ctx, threads, n_batch, n_ubatch, flash attention, type_k / type_v,
n_gpu_layers). Two runs of one model with f16 and q8_0 KV caches, flash attention on and off, or
two thread counts are two records, overlaid in the window; so are two quants (two files).

A file that cannot be read as this format is moved aside (``depth_sweeps.json.damaged-<time>``) and
:attr:`SweepStore.notice` says so; the store starts empty, nothing crashes.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.core.depth_sweep.plan import DepthPoint
from app.core.depth_sweep.roofline import DepthBound
from app.core.gguf.gguf_facts import format_bytes
from app.core.hardware.machine_load import is_under_load, load_note
from app.core.settings import atomic_write_text

FILE_NAME = "depth_sweeps.json"
FORMAT_VERSION = 1
MAX_RUNS = 200  # the oldest are dropped beyond this
CSV_COLUMNS = (
    "model",
    "settings",
    "n_prompt",
    "n_gen",
    "repetitions",
    "depth",
    "prefill_tok_s",
    "prefill_std",
    "decode_tok_s",
    "decode_std",
    "fill_s",
    "roofline_decode_tok_s",
    "roofline_prefill_tok_s",
    "under_load",
)


@dataclass(frozen=True)
class ModelFile:
    """Which model file: its path, size in bytes and modification time (ns since the epoch)."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str) -> ModelFile:
        """The file as it is now on disk (size and mtime 0 when it cannot be read: a remote model id)."""
        try:
            st = os.stat(path)
        except OSError:
            return cls(path, 0, 0)
        return cls(path, st.st_size, st.st_mtime_ns)

    @property
    def name(self) -> str:
        return Path(self.path).name

    def describe(self) -> str:
        """E.g. "/models/x.gguf · 98.2 MiB · modified 2026-12-02 13:05" (which file, which version of it)."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.mtime_ns / 1e9)) if self.mtime_ns else "unknown"
        return f"{self.path} · {format_bytes(self.size)} · modified {when}"


@dataclass(frozen=True)
class SweepKey:
    """What a run's figures depend on besides the machine.

    Attributes:
        model: the model file.
        llama_cpp_version: llama-cpp-python's version.
        system_info: ``llama_print_system_info`` (the CPU features the build uses).
        n_ctx, n_threads, n_threads_batch, n_batch, n_ubatch, n_gpu_layers: the context's values.
        flash_attn: flash attention was on in the context.
        type_k, type_v: the K and V cache types (``f16``, ``q8_0``...).
    """

    model: ModelFile
    llama_cpp_version: str
    system_info: str
    n_ctx: int
    n_threads: int
    n_threads_batch: int
    n_batch: int
    n_ubatch: int
    flash_attn: bool
    type_k: str
    type_v: str
    n_gpu_layers: int

    def settings_text(self) -> str:
        """E.g. "n_ctx 4096 · 2 threads · n_batch 512 · FA off · KV f16/f16"."""
        threads = (
            f"{self.n_threads} thread{'' if self.n_threads == 1 else 's'}"
            if self.n_threads == self.n_threads_batch
            else f"{self.n_threads}/{self.n_threads_batch} threads"
        )
        kv = self.type_k if self.type_k == self.type_v else f"{self.type_k}/{self.type_v}"
        gpu = f" · ngl {self.n_gpu_layers}" if self.n_gpu_layers else ""
        return (
            f"n_ctx {self.n_ctx:,} · {threads} · n_batch {self.n_batch} · FA {'on' if self.flash_attn else 'off'} "
            f"· KV {kv}{gpu}"
        )


@dataclass(frozen=True)
class SweepRecord:
    """One run of a depth sweep as kept.

    Attributes:
        key: model, build and load settings.
        n_prompt, n_gen, repetitions: the plan's timed tokens and runs per depth.
        points: the depths measured.
        cancelled: Stop ended it before every depth was measured.
        started: when it ran, seconds since the epoch.
        run_id: unique within the file (the start time in ns).
        roofline: the roofline at each depth measured, computed when the run was kept from the model and
            load settings it ran with, ``bandwidth_bytes_s`` and ``matmul_flop_s`` (empty: none; a run kept
            before runs kept their roofline, or no bandwidth measured then).
        bandwidth_bytes_s: the machine's bandwidth measurement the roofline used, bytes/s (0: none).
        matmul_flop_s: ``((ggml type, FLOP/s), ...)``: llama.cpp's matrix multiply measured in the run
            (the prefill's compute roof).
        roofline_kept: False for a run from before runs kept their own roofline (it has none to show).
        color: the index of its colour among the plot's colours, given once when it is kept (-1: from
            before; one is derived from its id), so a run keeps its colour whatever else is shown.
        load_per_cpu: the highest load of other work per CPU seen during the run (the 1-minute load
            average less the sweep's own threads, per CPU; -1: not measured, a run from before or no
            load average on this system).
        others_running: Glassbox's other jobs that ran during it ("a quantization", "a comparison").
    """

    key: SweepKey
    n_prompt: int
    n_gen: int
    repetitions: int
    points: tuple[DepthPoint, ...]
    cancelled: bool
    started: float
    run_id: str = field(default_factory=lambda: str(time.time_ns()))
    roofline: tuple[DepthBound, ...] = ()
    bandwidth_bytes_s: float = 0.0
    matmul_flop_s: tuple[tuple[str, float], ...] = ()
    roofline_kept: bool = True
    color: int = -1
    load_per_cpu: float = -1.0
    others_running: tuple[str, ...] = ()

    @property
    def under_load(self) -> bool:
        """Measured while other work shared the CPUs (:func:`~app.core.hardware.machine_load.is_under_load`)."""
        return is_under_load(self.load_per_cpu, self.others_running)

    def load_text(self) -> str:
        """ "" for a quiet run, else why it was under load (:func:`~app.core.hardware.machine_load.load_note`)."""
        return load_note(self.load_per_cpu, self.others_running)

    def color_index(self, n_colors: int) -> int:
        """Its colour among ``n_colors``: the one given when kept, else one derived from its id (stable)."""
        if self.color >= 0:
            return self.color % n_colors
        digits = "".join(ch for ch in self.run_id if ch.isdigit())
        return int(digits[-9:] or 0) % n_colors

    def roof_text(self) -> str:
        """Where its roofline came from, e.g. "roofline: 9.1 GB/s; Q4_1 47 GFLOP/s, Q8_0 69 GFLOP/s"."""
        if not self.roofline_kept:
            return "no roofline kept (measured before runs kept their own)"
        if not self.roofline:
            return "no roofline (the machine's bandwidth was not measured then)"
        rates = ", ".join(f"{name} {f / 1e9:.0f} GFLOP/s" for name, f in self.matmul_flop_s)
        return f"roofline: {self.bandwidth_bytes_s / 1e9:.1f} GB/s" + (f"; {rates}" if rates else "")

    def label(self) -> str:
        """E.g. "SmolLM2-135M-Instruct-Q4_1.gguf · 2026-12-02 14:05 · pp128 tg32 ×2 · n_ctx 4096 · 2 threads ..."."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started))
        stop = " · stopped" if self.cancelled else ""
        return f"{self.key.model.name} · {when} · {self.plan_text()} · {self.key.settings_text()}{stop}"

    def plan_text(self) -> str:
        """llama-bench's names for what was timed: "pp128 tg32 ×2" (prompt and generated tokens, repetitions)."""
        parts = [f"pp{self.n_prompt}" if self.n_prompt else "", f"tg{self.n_gen}" if self.n_gen else ""]
        return " ".join(p for p in parts if p) + f" ×{self.repetitions}"

    def short_label(self) -> str:
        """The plot legend's: the model file's stem (less ``.gguf``), what was timed, the settings that differ most."""
        k = self.key
        kv = k.type_k if k.type_k == k.type_v else f"{k.type_k}/{k.type_v}"
        return (
            f"{Path(k.model.name).stem} · {self.plan_text()} · t{k.n_threads} · FA {'on' if k.flash_attn else 'off'}"
            f" · KV {kv} · {time.strftime('%H:%M', time.localtime(self.started))}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepRecord:
        """Raises: KeyError, TypeError or ValueError for a record not in this format."""
        k = dict(d["key"])
        k["model"] = ModelFile(**k["model"])
        return cls(
            key=SweepKey(**k),
            n_prompt=int(d["n_prompt"]),
            n_gen=int(d["n_gen"]),
            repetitions=int(d["repetitions"]),
            points=tuple(DepthPoint(**p) for p in d["points"]),
            cancelled=bool(d["cancelled"]),
            started=float(d["started"]),
            run_id=str(d["run_id"]),
            roofline=tuple(DepthBound(**b) for b in d.get("roofline", ())),
            bandwidth_bytes_s=float(d.get("bandwidth_bytes_s", 0.0)),
            matmul_flop_s=tuple((str(n), float(f)) for n, f in d.get("matmul_flop_s", ())),
            roofline_kept="roofline" in d,
            color=int(d.get("color", -1)),
            load_per_cpu=float(d.get("load_per_cpu", -1.0)),
            others_running=tuple(str(x) for x in d.get("others_running", ())),
        )


class SweepStore:
    """The runs in ``<data>/depth_sweeps.json``, read at construction; one owner of that file.

    Attributes:
        notice: set when the file was damaged and set aside, or could not be read (one sentence).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.notice: str | None = None
        self._runs: list[SweepRecord] = self._read()

    @property
    def runs(self) -> tuple[SweepRecord, ...]:
        """Every run kept, oldest first."""
        return tuple(self._runs)

    def runs_for(self, model: ModelFile) -> tuple[SweepRecord, ...]:
        """The runs of ``model`` (same path, size and mtime), oldest first."""
        return tuple(r for r in self._runs if r.key.model == model)

    def add(self, record: SweepRecord) -> None:
        """Keep ``record`` and write the file.

        Raises:
            OSError: the file could not be written (the message names it); the run stays in memory.
        """
        self._runs.append(record)
        del self._runs[:-MAX_RUNS]
        self._write()

    def remove(self, run_id: str) -> None:
        """Forget one run and write the file (Raises: OSError as :meth:`add`)."""
        self._runs = [r for r in self._runs if r.run_id != run_id]
        self._write()

    def _write(self) -> None:
        data = {"version": FORMAT_VERSION, "runs": [r.to_dict() for r in self._runs]}
        atomic_write_text(self.path, json.dumps(data, indent=1))

    def _read(self) -> list[SweepRecord]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.notice = f"Could not read the depth sweeps file {self.path} ({exc.strerror or exc}); none are shown."
            return []
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
                raise ValueError(f"not a version-{FORMAT_VERSION} depth sweeps file")
            return [SweepRecord.from_dict(r) for r in data["runs"]]
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            if isinstance(exc, UnicodeDecodeError):
                exc = ValueError("it is not text")
            aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            try:
                os.replace(self.path, aside)
                where = f"it was moved to {aside}"
            except OSError:
                where = "it could not be moved aside"
            self.notice = (
                f"The depth sweeps file {self.path} was damaged ({exc}); {where}. Earlier runs are not shown; "
                "new runs are kept in a new file."
            )
            return []


def export_csv(records: tuple[SweepRecord, ...]) -> str:
    """The runs as CSV: one row per run and depth (tok/s, their standard deviations, the settings, the run's own
    roofline at that depth, and why it was measured under load: empty for a quiet run)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in records:
        bounds = {b.depth: b for b in r.roofline}
        for p in r.points:
            b = bounds.get(p.depth)
            w.writerow(
                [
                    r.key.model.name,
                    r.key.settings_text(),
                    r.n_prompt,
                    r.n_gen,
                    r.repetitions,
                    p.depth,
                    *(f"{v:.3f}" for v in (p.prefill_tok_s, p.prefill_std, p.decode_tok_s, p.decode_std, p.fill_s)),
                    f"{b.decode_tok_s:.3f}" if b else "",
                    f"{b.prefill_tok_s:.3f}" if b else "",
                    r.load_text(),
                ]
            )
    return out.getvalue()


def export_json(records: tuple[SweepRecord, ...]) -> str:
    """The runs as JSON (the file's own record format)."""
    return json.dumps({"version": FORMAT_VERSION, "runs": [r.to_dict() for r in records]}, indent=1)
